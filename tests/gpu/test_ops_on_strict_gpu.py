"""The whole op suite (``tests/ops``) with a GPU on the strict CuPy stand-in: every op with a
GPU kernel is placed there and runs on device arrays that refuse implicit conversion to NumPy,
against the suite's NumPy references. A kernel that reads a device array with NumPy fails here
as it would on a real GPU."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Tests that inspect the executor's raw per-device values with NumPy themselves (test code,
# not a kernel): on a GPU those values are device arrays.
READS_DEVICE_VALUES = [
    "tests/ops/test_control_flow.py::test_iteration_state_is_freed_after_the_step",
]


@pytest.mark.slow
def test_the_op_suite_passes_with_every_op_on_the_strict_gpu():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "tests" / "gpu"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "strict_gpu_plugin",
           "-p", "no:cacheprovider", "tests/ops"]
    for t in READS_DEVICE_VALUES:
        cmd += ["--deselect", t]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
