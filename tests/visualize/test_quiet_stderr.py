"""The first drawing of a process shows no Fontconfig start-up warnings, and hides nothing
else written at the same time."""

import subprocess
import sys
import textwrap


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)


def test_the_first_drawing_prints_no_fontconfig_warning():
    run = _run("""
        import dflab as tf
        from dflab.visualize import mimebundle
        tf.add(tf.constant(1.0), 2.0)
        bundle = mimebundle(tf.get_default_graph(), None, None)
        print("<svg" in bundle["image/svg+xml"])
        """)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True"
    assert "Fontconfig" not in run.stderr, run.stderr


def test_only_fontconfig_lines_of_the_first_call_are_dropped():
    run = _run("""
        import os
        from dflab.visualize.quiet_stderr import first_call_without_fontconfig_warnings as q
        out = q(lambda: os.write(2, b"Fontconfig warning: x\\nkeep me\\n") and 7)
        q(lambda: os.write(2, b"Fontconfig later\\n"))
        print(out)
        """)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "7"
    assert run.stderr == "keep me\nFontconfig later\n"
