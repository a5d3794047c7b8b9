"""The whole op suite (``tests/ops``) with a GPU on the strict CuPy stand-in: every op with a
GPU kernel is placed there and runs on device arrays that refuse implicit conversion to NumPy,
against the suite's NumPy references. A kernel that reads a device array with NumPy fails here
as it would on a real GPU."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Tests that inspect the executor's raw per-device values with NumPy themselves (test code,
# not a kernel): on a GPU those values are device arrays.
READS_DEVICE_VALUES = [
    "tests/ops/test_control_flow.py::test_iteration_state_is_freed_after_the_step",
]
# Where TF's GPU kernels behave otherwise by design, checking no index or label on the host (a
# captured step cannot): a sparse cross-entropy's label out of range is NaN, a gather's index
# out of range gives zeros, a scatter's (and a segment sum's) is skipped
# (test_gpu_nn_kernels.py and test_gpu_gather.py check the GPU's behaviour).
GPU_BEHAVES_OTHERWISE = [
    "tests/ops/test_nn_ops.py::test_sparse_softmax_xent_out_of_range_label",
    "tests/ops/test_array_ops.py::test_run_time_errors[gather_index]",
    "tests/ops/test_array_ops.py::test_run_time_errors[gather_negative]",
    "tests/ops/test_array_ops.py::test_gather_error_names_the_op",
    "tests/ops/test_state_ops.py::test_scatter_out_of_range_is_invalid_argument",
    "tests/ops/test_math_ops.py::test_unsorted_segment_sum_id_out_of_range_is_invalid_argument",
]


# The suite in two processes at once (about half its tests each), so that the second core
# of a CI machine shares the work.
SHARES = [["tests/ops/test_tf_api.py"], ["tests/ops", "--ignore=tests/ops/test_tf_api.py"]]


@pytest.mark.slow
@pytest.mark.timeout(1500)  # the whole op suite, run a second time
def test_the_op_suite_passes_with_every_op_on_the_strict_gpu():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "tests" / "gpu"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "strict_gpu_plugin",
           "-p", "no:cacheprovider"]
    for t in READS_DEVICE_VALUES + GPU_BEHAVES_OTHERWISE:
        cmd += ["--deselect", t]
    runs = [subprocess.Popen(cmd + share, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True) for share in SHARES]
    try:
        outputs = [run.communicate(timeout=1400)[0] for run in runs]
    finally:
        for run in runs:
            run.kill()
    for share, run, out in zip(SHARES, runs, outputs):
        assert run.returncode == 0, f"{share}:\n{out[-8000:]}"
    # Both shares together ran the whole suite.
    assert sum(_passed(out) for out in outputs) > 2000, outputs[0][-500:]


def _passed(output: str) -> int:
    found = re.search(r"(\d+) passed", output)
    return int(found.group(1)) if found else 0
