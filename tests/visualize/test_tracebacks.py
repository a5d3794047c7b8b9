"""In IPython an op error shows the user's frames and TensorFlow's message, with or without
``%load_ext dflab``; ``%xmode Verbose`` shows everything; sites name cells as IPython does."""

from __future__ import annotations

import re

import pytest
from IPython.core.interactiveshell import InteractiveShell

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def shell():
    sh = InteractiveShell.instance()
    sh.reset()
    sh.run_cell("%xmode Context")
    sh.run_cell("import dflab as tf", store_history=True)
    yield sh
    sh.run_cell("%xmode Context")


def _traceback(sh, capsys, code: str) -> list[str]:
    capsys.readouterr()
    result = sh.run_cell(code, store_history=True)
    assert not result.success
    return ANSI.sub("", capsys.readouterr().out).rstrip("\n").splitlines()


def test_a_missing_feed_shows_the_cell_and_the_message_in_ten_lines(shell, capsys):
    made = shell.run_cell("x = tf.placeholder(tf.float32, name='x')\ny = x * 2.0",
                          store_history=True)
    lines = _traceback(shell, capsys, "sess = tf.Session()\nsess.run(y)")
    text = "\n".join(lines)
    assert len(lines) <= 10, text
    run = made.execution_count + 1
    assert f"Cell In[{run}], line 2" in text
    assert "InvalidArgumentError: You must feed a value for placeholder tensor 'x'" in text
    assert f"(defined at Cell In[{made.execution_count}], line 1)" in text
    for internal in ("session.py", "executor.py", "worker.py", "straight-line", "ipykernel"):
        assert internal not in text, internal
    assert "%xmode Verbose" in lines[-1]


def test_verbose_mode_shows_dflabs_frames(shell, capsys):
    shell.run_cell("x = tf.placeholder(tf.float32, name='x')", store_history=True)
    shell.run_cell("%xmode Verbose")
    text = "\n".join(_traceback(shell, capsys, "tf.Session().run(x * 2.0)"))
    assert "session.py" in text and "You must feed" in text


def test_the_users_own_functions_stay_in_the_traceback(shell, capsys, tmp_path):
    helper = tmp_path / "my_helpers.py"
    helper.write_text("def evaluate(sess, t):\n    return sess.run(t)\n")
    shell.run_cell(f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
                   "from my_helpers import evaluate", store_history=True)
    shell.run_cell("x = tf.placeholder(tf.float32, name='x')", store_history=True)
    text = "\n".join(_traceback(shell, capsys, "evaluate(tf.Session(), x + 1.0)"))
    assert "my_helpers.py" in text and "return sess.run(t)" in text
    assert "session.py" not in text


def test_a_shape_error_names_the_cell_not_a_temporary_file(shell, capsys):
    made = shell.run_cell("a = tf.placeholder(tf.float32, [None, 3])", store_history=True)
    shell.run_cell("try:\n    tf.matmul(a, tf.ones([4, 2]), name='bad')\n"
                   "except ValueError as e:\n    print(e)", store_history=True)
    out = capsys.readouterr().out
    assert f"Created at Cell In[{made.execution_count + 1}], line 2" in out
    assert "ipykernel" not in out and ".py:" not in out
