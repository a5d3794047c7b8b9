"""Host memory between steps (``runtime/host_allocator.py``): a session keeps what its steps'
freed arrays held, so the next step's arrays are not faulted in again.

The setting is process-wide, so each case runs a session in a fresh interpreter and counts
the page faults of its later steps (``ru_minflt``): a step that makes 16 MB temporaries
faults every page of each one when glibc hands them back to the system in between."""

import json
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import json, resource, sys
import numpy as np
import dflab as tf
from dflab.runtime import host_allocator

x = tf.placeholder(tf.float32, [1000, 4000])  # 16 MB, and so is each temporary
y = tf.reduce_sum(tf.tanh(x) * 2.0 + 1.0)
# One intra-op thread: the step whose temporaries the test was sized for (with the default's
# kernels split on every core, glibc's dynamic thresholds happened to keep them even untold).
config = tf.ConfigProto(intra_op_parallelism_threads=1,
                        dflab={"retain_host_memory": sys.argv[1] == "1"})
sess = tf.Session(config=config)
xv = np.ones((1000, 4000), np.float32)
for _ in range(3):
    sess.run(y, {x: xv})
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    got = sess.run(y, {x: xv})
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5
print(json.dumps({"faults": faults, "retaining": host_allocator.retaining(),
                  "value": float(got)}))
"""


def _step_faults(retain: bool) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, "1" if retain else "0"],
                          capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the setting is glibc's")
def test_a_session_keeps_freed_host_memory_for_the_next_steps_arrays():
    kept, given_back = _step_faults(True), _step_faults(False)
    assert kept["retaining"] and not given_back["retaining"]
    assert kept["value"] == given_back["value"] == pytest.approx(4e6 * (2 * np.tanh(1) + 1),
                                                                 rel=1e-5)
    # A step spans thousands of pages of temporaries (a few dozen with 2 MB huge pages);
    # with the memory kept it faults (almost) none of them.
    assert kept["faults"] < 10, kept
    assert given_back["faults"] > 2 * kept["faults"] + 20, (kept, given_back)


def test_the_option_takes_a_bool_only():
    import dflab as tf

    with pytest.raises(TypeError, match="retain_host_memory"):
        tf.ConfigProto(dflab={"retain_host_memory": "yes"})
