"""Run an adapted tutorial under TensorFlow instead of dflab: ``dflab`` (and
``dflab.python.client``) resolve to ``tensorflow.compat.v1`` (graph mode) and TensorFlow's
modules, then the script runs as ``__main__``.

    /work/tfvenv/bin/python tests/e2e/tutorials/run_under_tf.py SCRIPT [ARGS...]
"""

import os
import runpy
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow.compat.v1 as tf  # noqa: E402
import tensorflow.python.client as tf_client  # noqa: E402
from tensorflow.python.client import device_lib, timeline  # noqa: E402, F401

tf.disable_v2_behavior()  # the tutorials are TF 1.x programs
sys.modules["dflab"] = tf
sys.modules["dflab.python"] = sys.modules["tensorflow.python"]
sys.modules["dflab.python.client"] = tf_client
sys.modules["dflab.client"] = tf_client

script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
runpy.run_path(script, run_name="__main__")
