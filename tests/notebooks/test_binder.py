"""The Binder environment, built from ``binder/`` alone, runs every tutorial.

mybinder.org builds the image with repo2docker: it installs ``binder/requirements.txt`` into a
fresh Python of the version in ``binder/runtime.txt``, then runs ``binder/postBuild`` from the
repository root. This test does the same in a throwaway virtualenv, from a *copy* of the
repository (so the editable install points at the copy, never at this checkout), checks that
JupyterLab has the widget front-ends, and executes every notebook on a kernel of that
virtualenv. The project's own dev virtualenv is not used for anything but running pytest.

Slow (a few minutes: it installs JupyterLab); pip's cache is allowed, the network is needed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="notebook tests need the dev extra")
nbclient = pytest.importorskip("nbclient", reason="notebook tests need the dev extra")

from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BINDER = REPO / "binder"
CELL_TIMEOUT_S = 120
# What a repository copy leaves out: VCS data, local environments, build and cache output.
IGNORED = shutil.ignore_patterns(".git", ".venv", "venv", "node_modules", "__pycache__",
                                 "*.egg-info", ".pytest_cache", ".ruff_cache", ".hypothesis",
                                 "build", "dist", ".ipynb_checkpoints")
# The front-end extensions the tutorials' widgets need in JupyterLab.
LAB_EXTENSIONS = ("@jupyter-widgets/jupyterlab-manager", "anywidget")


def _runtime_python() -> str:
    """The interpreter binder/runtime.txt asks for (``python-3.11``), else this one."""
    version = (BINDER / "runtime.txt").read_text().strip().removeprefix("python-")
    return shutil.which(f"python{version}") or sys.executable


def _clean_env(venv: Path) -> dict:
    """The environment repo2docker gives postBuild: the new Python first on PATH, nothing
    pointing back at this checkout or at the dev virtualenv."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(venv)
    env["OMP_NUM_THREADS"] = env.get("OMP_NUM_THREADS", "1")
    return env


def _run(cmd, cwd, env, timeout=1200):
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n"
                                  f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


@pytest.fixture(scope="module")
def binder_env(tmp_path_factory):
    """(repository copy, virtualenv) built from binder/ the way repo2docker builds an image."""
    root = tmp_path_factory.mktemp("binder")
    repo = root / "repo"
    shutil.copytree(REPO, repo, ignore=IGNORED)
    venv = root / "env"
    subprocess.run([_runtime_python(), "-m", "venv", str(venv)], check=True)
    env = _clean_env(venv)
    _run([venv / "bin" / "python", "-m", "pip", "install", "--upgrade", "pip"], repo, env)
    _run([venv / "bin" / "python", "-m", "pip", "install", "-r", "binder/requirements.txt"],
         repo, env)
    post_build = repo / "binder" / "postBuild"
    _run(["bash", str(post_build)], repo, env)  # repo2docker runs it from the repo root
    return repo, venv, env


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_binder_env_has_lab_widgets_and_this_dflab(binder_env):
    repo, venv, env = binder_env
    where = _run([venv / "bin" / "python", "-c", "import dflab; print(dflab.__file__)"],
                 repo.parent, env).strip()
    assert Path(where).resolve().is_relative_to(repo.resolve()), where
    _run([venv / "bin" / "python", "-c",
          "import anywidget, ipywidgets, pygraphviz, ipykernel, jupyterlab"], repo.parent, env)
    listed = subprocess.run([venv / "bin" / "jupyter", "labextension", "list"], cwd=repo,
                            env=env, capture_output=True, text=True, timeout=300)
    text = listed.stdout + listed.stderr
    for name in LAB_EXTENSIONS:
        assert name in text, f"JupyterLab lacks the {name} extension:\n{text}"


def _pins() -> dict:
    pins = {}
    for line in (BINDER / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#") and "==" in line:
            name, version = line.split("==", 1)
            pins[name.lower().replace("_", "-")] = version.strip()
    return pins


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_binder_env_is_the_tested_one_with_quiet_lab_settings(binder_env):
    repo, venv, env = binder_env
    frozen = _run([venv / "bin" / "python", "-m", "pip", "freeze", "--exclude-editable"],
                  repo.parent, env)
    installed = {}
    for line in frozen.splitlines():
        if "==" in line:
            name, version = line.split("==", 1)
            installed[name.lower().replace("_", "-")] = version.strip()
    pins = _pins()
    for name in ("jupyterlab", "ipywidgets", "anywidget", "pygraphviz", "numpy", "ipykernel"):
        assert installed.get(name) == pins[name], (name, installed.get(name), pins[name])
    off_pins = {n: (v, pins[n]) for n, v in installed.items() if n in pins and pins[n] != v}
    assert not off_pins, off_pins
    prefix = _run([venv / "bin" / "python", "-c", "import sys; print(sys.prefix)"],
                  repo.parent, env).strip()
    settings = json.loads((Path(prefix) / "share" / "jupyter" / "lab" / "settings" /
                           "overrides.json").read_text())
    notify = settings["@jupyterlab/apputils-extension:notification"]
    assert notify == {"checkForUpdates": False, "fetchNews": "false"}


def _kernel_of(venv: Path, kernels: Path) -> KernelManager:
    """A KernelManager whose only kernelspec launches the Binder virtualenv's Python."""
    spec_dir = kernels / "binder"
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {"argv": [str(venv / "bin" / "python"), "-m", "ipykernel_launcher",
                     "-f", "{connection_file}"],
            "display_name": "Binder env", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    ksm = KernelSpecManager(kernel_dirs=[str(kernels)], ensure_native_kernel=False)
    return KernelManager(kernel_name="binder", kernel_spec_manager=ksm)


NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", [p.name for p in NOTEBOOKS])
def test_notebook_runs_in_binder_env(binder_env, name, tmp_path, monkeypatch):
    repo, venv, env = binder_env
    # The kernel inherits os.environ: give it the Binder environment, not the dev one.
    for key in list(os.environ):
        if key not in env:
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    path = repo / "notebooks" / name
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, km=_kernel_of(venv, tmp_path / "kernels"), timeout=CELL_TIMEOUT_S,
        allow_errors=False, resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError naming the failing cell
    executable = [c for c in nb.cells if c.cell_type == "code"]
    assert executable and all(c.execution_count for c in executable)
    assert nb.metadata.get("language_info", {}).get("name") == "python"


def test_the_tests_run_with_the_pinned_versions_of_the_tutorials_stack():
    """scripts/test installs under binder/constraints.txt: the tutorials CI runs use the
    versions Binder installs."""
    from importlib.metadata import version

    pins = _pins()
    for name in ("jupyterlab", "ipywidgets", "anywidget", "pygraphviz", "numpy", "ipykernel",
                 "nbclient"):
        assert version(name) == pins[name], name
