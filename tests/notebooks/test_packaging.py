"""Installing dflab (what scripts/lab and Binder do) prints no page of setuptools warnings, and the
wheel still carries the widgets' front-end and the prebuilt JupyterLab extension."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_building_dflab_warns_about_nothing_and_ships_its_front_end(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(tmp_path),
         str(REPO)], capture_output=True, text=True, timeout=800)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    log = built.stdout + built.stderr
    assert "is absent from the `packages` configuration" not in log, [
        line for line in log.splitlines() if "absent" in line][:5]
    (wheel,) = tmp_path.glob("dflab-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for asset in ("graph_view.js", "stepper.js", "timeline.js", "monitor.js", "widgets.css"):
        assert f"dflab/notebook/static/{asset}" in names, asset
    lab = [n for n in names if "/share/jupyter/labextensions/dflab-graph-renderer/" in n]
    assert any(n.endswith("/package.json") for n in lab)
    assert any("/static/remoteEntry." in n for n in lab)
    assert not any(n.startswith("dflab/labextension/") for n in names)
