"""The README's "In a notebook" snippet runs as written, cell by cell, on a real kernel."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from test_notebooks import CELL_TIMEOUT_S, _own_python3_kernel, nbclient, nbformat

REPO = Path(__file__).resolve().parents[2]


def _snippet_cells() -> list[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## In a notebook", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_snippet_has_the_cells_a_reader_copies():
    cells = _snippet_cells()
    assert cells[0].startswith("%load_ext dflab") and cells[1].startswith("%%dflab")
    assert any("Stepper(" in c for c in cells) and any("Timeline(" in c for c in cells)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_readme_notebook_snippet_runs_as_written(monkeypatch, tmp_path):
    pythonpath = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(REPO), pythonpath) if p))
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in _snippet_cells()]
    client = nbclient.NotebookClient(nb, km=_own_python3_kernel(), timeout=CELL_TIMEOUT_S,
                                     allow_errors=False,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError naming the failing cell
    # A widget is shown as a cell's result, then (once its state settles) as the display that
    # replaces it with its saved rendering.
    shown = [o for c in nb.cells for o in c.outputs
             if o.get("output_type") in ("execute_result", "display_data")]
    kinds = [o["data"].get("text/plain", "") for o in shown]
    assert any("GraphView" in k for k in kinds) and any("Stepper" in k for k in kinds)
    assert any("Timeline" in k for k in kinds)
    errors = [o for c in nb.cells for o in c.outputs if o.get("name") == "stderr"]
    assert not errors, errors
