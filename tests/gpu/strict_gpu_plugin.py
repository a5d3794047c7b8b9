"""A pytest plugin that gives every test one GPU built on the strict CuPy stand-in.

With a GPU present, TF's placement puts every op that has a GPU kernel on it, so running an
op suite under this plugin runs each op's GPU kernel (the CPU's kernel code bound to the
stand-in's ``xp``) on device arrays that refuse implicit conversion to NumPy, against the
suite's NumPy references::

    PYTHONPATH=tests/gpu python -m pytest -p strict_gpu_plugin tests/ops

The GPU has the stand-ins of its cuBLAS bindings and cuDNN frontend (``strict_libraries``), with
TF32 off so that float32 results are checked as such. The fusion pass is off by default here
(the stand-in cannot run the CUDA C of a fused kernel;
``test_cuda_sources.py`` compiles that source with NVRTC instead).
"""

import dataclasses
import functools

import pytest
import strict_cupy
import strict_libraries

from dflab.runtime import devices as devmod
from dflab.runtime import gpu as gpumod


@pytest.fixture(autouse=True)
def _strict_gpu_everywhere(monkeypatch):
    cupy = strict_cupy.make_module(device_count=1)
    # TF32 off: the op suite checks float32 results (TF32 has tests of its own).
    make = functools.partial(gpumod.make_cupy_gpu, cupy=cupy, allow_tf32=False,
                             libraries=strict_libraries.make_libraries())
    monkeypatch.setitem(devmod._BACKENDS, "GPU",
                        devmod.Backend(lambda: 1, make, takes_config=True))
    monkeypatch.setitem(devmod._DEVICE_TYPES, "GPU",
                        dataclasses.replace(devmod.GPU, fuses_by_default=False))
    yield cupy
