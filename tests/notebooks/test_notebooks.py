"""Execute every tutorial in notebooks/ on a real IPython kernel, top to bottom.

The tutorials carry ``assert`` cells, so a behaviour change in dflab fails here rather than
silently changing what a reader sees. The kernel is the ``python3`` kernel of *this*
interpreter (the one running pytest, i.e. the project's virtualenv), never a kernelspec that
happens to be installed elsewhere on the machine, and it imports dflab from this checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

if os.environ.get("CI"):
    # In CI the dev extra is always installed: a missing package must fail, not skip.
    import ipykernel  # noqa: F401
    import nbclient
    import nbformat
else:
    nbformat = pytest.importorskip("nbformat", reason="notebook tests need the dev extra")
    nbclient = pytest.importorskip("nbclient", reason="notebook tests need the dev extra")
    pytest.importorskip("ipykernel", reason="notebook tests need the dev extra")

from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 120
MAX_KERNEL_BYTES = 2 * 2**30  # every tutorial runs within 2 GB, as on a small Binder instance


def _own_python3_kernel() -> KernelManager:
    # With no kernel directories, "python3" resolves to ipykernel's built-in spec, which
    # launches sys.executable: the interpreter (and virtualenv) running these tests.
    ksm = KernelSpecManager(kernel_dirs=[], ensure_native_kernel=True)
    return KernelManager(kernel_name="python3", kernel_spec_manager=ksm)


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no tutorials"


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_clean(path, monkeypatch):
    # The kernel inherits this environment: make it import dflab from this checkout and keep
    # its BLAS from oversubscribing a small CI machine.
    pythonpath = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(REPO), pythonpath) if p))
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.get("outputs"), f"{path.name}: store notebooks without outputs"
            assert cell.get("execution_count") is None, f"{path.name}: clear execution counts"

    # A last cell, added here only, reports the kernel's own peak resident memory in KiB: Linux's
    # VmHWM, which starts afresh when the kernel's program is loaded, where ru_maxrss would keep
    # the high-water mark of this (large, long-running) test process that forked it.
    nb.cells.append(nbformat.v4.new_code_cell(
        "import re, resource\n"
        "try:\n"
        "    with open('/proc/self/status') as f:\n"
        "        peak = int(re.search(r'VmHWM:\\s+(\\d+)', f.read()).group(1))\n"
        "except OSError:\n"
        "    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print('peak-rss-kib', peak)"))
    client = nbclient.NotebookClient(
        nb,
        km=_own_python3_kernel(),
        timeout=CELL_TIMEOUT_S,
        allow_errors=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()  # raises CellExecutionError naming the failing cell

    ran = [c for c in nb.cells if c.cell_type == "code"]
    assert ran and all(c.execution_count for c in ran), "some code cells did not run"
    report = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    peak_bytes = int(report.split("peak-rss-kib")[1].split()[0]) * 1024
    assert 0 < peak_bytes < MAX_KERNEL_BYTES, (
        f"{path.name}: the kernel used {peak_bytes / 2**30:.2f} GiB (budget 2 GiB)")
