"""Record TensorFlow's numbers for every run of ``runs.py`` into ``tf_results.json``:

    /work/tfvenv/bin/python tests/e2e/tutorials/record_tf.py [run ...]

Each script runs under ``run_under_tf.py`` (TensorFlow 2.21's ``compat.v1`` with v2
behaviour off, Keras 2 for the RNN cells) in a fresh temporary directory.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from runs import RUNS  # noqa: E402


def run_under_tf(name: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        results = os.path.join(tmp, "results.json")
        env = {**os.environ, "TUTORIAL_RESULTS": results}
        for script, *args in RUNS[name].scripts:
            argv = [a.replace("{tmp}", tmp) for a in args]
            subprocess.run([sys.executable, str(HERE / "run_under_tf.py"), str(HERE / script),
                            *argv], check=True, env=env, cwd=tmp, capture_output=True)
        with open(results) as f:
            return json.load(f)


if __name__ == "__main__":
    import tensorflow as tf

    path = HERE / "tf_results.json"
    recorded = json.loads(path.read_text()) if path.exists() else {}
    recorded["_tensorflow"] = tf.__version__
    for name in sys.argv[1:] or list(RUNS):
        print("recording", name, flush=True)
        recorded[name] = run_under_tf(name)
    path.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
