"""``tf.app`` and ``tf.flags``: absl's flags with TF 1.x's adjustments (old keyword names,
``FLAGS`` parsing ``sys.argv`` on first read, ``tf.app.run`` tolerating unknown flags); each
script here gave the same output and exit status under TF 2.21's ``compat.v1``."""

import subprocess
import sys
import textwrap

import pytest

import dflab as tf


def _run(code, *argv):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *argv],
                          capture_output=True, text=True, timeout=120)
    return proc


def test_flags_is_absl_with_tf_names():
    from absl import flags as absl_flags

    assert tf.flags.DEFINE_string is not absl_flags.DEFINE_string  # wrapped for old names
    assert tf.app.flags is tf.flags
    for name in ("DEFINE_integer", "DEFINE_bool", "FlagValues", "mark_flag_as_required",
                 "UnrecognizedFlagError", "register_validator"):
        assert hasattr(tf.flags, name), name
    assert not hasattr(tf.flags, "tf_decorator")  # TF's own helper, not a flags API
    import dflab.app  # noqa: F401
    import dflab.flags  # noqa: F401 - a real module


def test_app_run_parses_known_flags_and_hands_the_rest_to_main():
    proc = _run("""
        import sys
        import dflab as tf
        tf.app.flags.DEFINE_integer("steps", 3, "how many")
        tf.flags.DEFINE_string(flag_name="mode", default_value="a", docstring="old names")
        FLAGS = tf.flags.FLAGS

        def main(argv):
            print(FLAGS.steps, FLAGS.mode, argv[1:])
            return 7

        tf.app.run(main)
    """, "--steps=5", "--unknown=1", "extra")
    assert proc.returncode == 7, proc.stderr
    assert proc.stdout.strip() == "5 a ['--unknown=1', 'extra']"


def test_flags_read_before_any_parse_parse_sys_argv():
    proc = _run("""
        import dflab as tf
        tf.flags.DEFINE_float("rate", 0.5, "a rate")
        print(tf.flags.FLAGS.rate)
    """, "--rate=0.25")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0.25"


def test_implicit_parse_refuses_unknown_flags_as_tf():
    proc = _run("""
        import dflab as tf
        tf.flags.DEFINE_float("rate", 0.5, "a rate")
        print(tf.flags.FLAGS.rate)
    """, "--rate=0.25", "--other")
    assert proc.returncode == 1
    assert "UnrecognizedFlagError: Unknown command line flag 'other'" in proc.stderr


def test_app_run_uses_main_of_the_main_module():
    proc = _run("""
        import dflab as tf

        def main(_):
            print("ran")

        tf.app.run()
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ran"


def test_a_bad_flag_value_is_absl_error():
    proc = _run("""
        import dflab as tf
        tf.flags.DEFINE_integer("n", 1, "n")
        tf.app.run(lambda argv: None)
    """, "--n=abc")
    assert proc.returncode == 1
    assert "flag --n=abc" in proc.stderr


def test_duplicate_flag_raises_absl_error():
    tf.flags.DEFINE_string("dflab_test_dup_flag", "x", "first")
    with pytest.raises(tf.flags.DuplicateFlagError):
        tf.flags.DEFINE_string("dflab_test_dup_flag", "y", "second")
