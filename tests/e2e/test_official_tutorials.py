"""The official TF1 tutorials (adapted for local data, tests/e2e/tutorials/) run on dflab and
land on TensorFlow's numbers: each run of ``runs.py`` executes its scripts with ``import
dflab as tf`` in a subprocess, must show that it learned (its ``learns`` checks), and every
number it reports is compared with what the same scripts gave under TensorFlow 2.21
(``tf_results.json``, written by ``record_tf.py``)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

TUTORIALS = pathlib.Path(__file__).resolve().parent / "tutorials"
ROOT = TUTORIALS.parents[2]
sys.path.insert(0, str(TUTORIALS))
from runs import RUNS  # noqa: E402

TF_RESULTS = json.loads((TUTORIALS / "tf_results.json").read_text())


def _run_on_dflab(name, tmp_path) -> dict:
    results = tmp_path / "results.json"
    env = {**os.environ, "TUTORIAL_RESULTS": str(results),
           "PYTHONPATH": os.pathsep.join([str(TUTORIALS), str(ROOT),
                                          os.environ.get("PYTHONPATH", "")])}
    for script, *args in RUNS[name].scripts:
        argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
        proc = subprocess.run([sys.executable, str(TUTORIALS / script), *argv], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-3000:]}\n" \
                                     f"{proc.stderr[-5000:]}"
    return json.loads(results.read_text())


# Runs of a few seconds stay in the quick suite; the rest train for tens of seconds.
QUICK = {"mnist_softmax", "mnist_softmax_xla"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in QUICK else pytest.mark.slow)
                                  for n in sorted(RUNS)])
def test_tutorial_matches_tensorflow(name, tmp_path):
    run = RUNS[name]
    got = _run_on_dflab(name, tmp_path)
    for what, holds in run.learns.items():
        assert holds(got), f"{name} on dflab: expected {what}; got {got}"
    want = TF_RESULTS[name]
    for key, (atol, rtol) in run.compare.items():
        assert key in got, f"{name} did not report {key}"
        assert abs(got[key] - want[key]) <= atol + rtol * abs(want[key]), (
            f"{name}: {key} = {got[key]} on dflab, {want[key]} on TensorFlow")
