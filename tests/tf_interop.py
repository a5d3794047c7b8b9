"""What the tests that meet real TensorFlow share: the fixtures TF wrote (tests/fixtures/tf),
the recipe of their values, and running a script under a TensorFlow interpreter.

CI has no TensorFlow: there the committed fixtures carry the TF side. Where an interpreter
with TensorFlow is found (``DFLAB_TF_PYTHON``, by default ``/work/tfvenv/bin/python``), the
tests marked ``requires_tf`` also hand dflab-written files to TF; elsewhere they are skipped.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tf"
TF_PYTHON = os.environ.get("DFLAB_TF_PYTHON", "/work/tfvenv/bin/python")
HAVE_TF = os.path.isfile(TF_PYTHON) and os.access(TF_PYTHON, os.X_OK)

requires_tf = pytest.mark.skipif(not HAVE_TF, reason=f"no TensorFlow interpreter at "
                                 f"{TF_PYTHON} (set DFLAB_TF_PYTHON)")

_PREAMBLE = f"""
import os, sys, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np
import tensorflow.compat.v1 as tf
{{graph_mode}}
sys.path.insert(0, {str(FIXTURES)!r})
import recipe
"""


def recipe():
    """The fixtures' ``recipe`` module (NumPy only)."""
    spec = importlib.util.spec_from_file_location("tf_fixture_recipe", FIXTURES / "recipe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_tf(code: str, timeout: float = 300, eager: bool = False) -> str:
    """Run ``code`` (after imports of os, sys, json, numpy as np, ``tensorflow.compat.v1 as
    tf`` in graph mode, or eagerly with ``eager=True``, and the fixtures' ``recipe``) under
    TensorFlow; its stdout."""
    preamble = _PREAMBLE.format(graph_mode="" if eager else "tf.disable_eager_execution()")
    proc = subprocess.run([TF_PYTHON, "-c", preamble + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": ""})
    if proc.returncode != 0:
        raise AssertionError(f"TensorFlow script failed ({proc.returncode}):\n"
                             f"{proc.stderr[-4000:]}")
    return proc.stdout
