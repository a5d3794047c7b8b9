"""In a real kernel: running an op a re-run cell made stale shows one message naming the cell
that built it (label and line), and no runtime frames."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from test_notebooks import CELL_TIMEOUT_S, _own_python3_kernel, nbclient, nbformat

REPO = Path(__file__).resolve().parents[2]
CELLS = [
    "%load_ext dflab\nimport dflab as tf",
    "%%dflab --no-show --name w\nw = tf.Variable([1.0, 2.0], name='w')",
    "%%dflab --no-show\n\ny = w * 3.0",
    "sess = tf.Session()\nsess.run(tf.global_variables_initializer())",
    "%%dflab --no-show --name w\nw = tf.Variable([4.0, 5.0], name='w')",  # w's cell, re-run
    "sess.run(y)",
]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_stale_run_names_the_cell_and_shows_no_engine_frames(monkeypatch, tmp_path):
    pythonpath = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(REPO), pythonpath) if p))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    nbclient.NotebookClient(nb, km=_own_python3_kernel(), timeout=CELL_TIMEOUT_S,
                            allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert not [o for c in nb.cells[:-1] for o in c.outputs if o.output_type == "error"]
    error = [o for o in nb.cells[-1].outputs if o.output_type == "error"]
    assert len(error) == 1 and error[0].ename == "FailedPreconditionError"
    shown = "\n".join(error[0].traceback)
    y_cell = f"Cell In[{nb.cells[2].execution_count}], line 3"
    # w is a resource variable (the default): the stale op is the read of w that y's cell built.
    assert f"'ReadVariableOp' (built in {y_cell})" in shown and f"defined at {y_cell})]]" in shown
    assert "dflab/" not in shown and "File " not in shown  # no runtime frames
    assert "ipykernel_" not in shown  # no temporary file names
