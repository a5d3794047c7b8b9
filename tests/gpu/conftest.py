"""Fixtures of the GPU tests: GPU devices built on the strict CuPy stand-in (``strict_cupy``).

``strict_gpu`` swaps the registered "GPU" backend for one that makes ``GPUDevice``s on a fresh
stand-in module, with stand-ins of the cuBLAS bindings and the cuDNN frontend
(``strict_libraries``), so a session's ``/gpu:N`` are the real GPU device class running its own
code; ``strict_gpu_without_libraries`` gives GPUs without them (CuPy's paths).
"""

import functools

import pytest
import strict_cupy
import strict_libraries

from dflab.runtime import devices as devmod
from dflab.runtime import gpu as gpumod


def _install(monkeypatch, device_count, libraries=True):
    cupy = strict_cupy.make_module(device_count=device_count)
    libs = strict_libraries.make_libraries() if libraries else None
    cupy.libraries = libs
    make = functools.partial(gpumod.make_cupy_gpu, cupy=cupy, libraries=libs)
    # TF32 as the session's config says (on by default, as TF): tests comparing float32
    # products with NumPy say gpu_allow_tf32=False or give TF32's tolerance.
    monkeypatch.setitem(devmod._BACKENDS, "GPU",
                        devmod.Backend(lambda: device_count, make, takes_config=True))
    return cupy


@pytest.fixture
def strict_gpu(monkeypatch):
    """One stand-in GPU; returns the stand-in ``cupy`` module."""
    return _install(monkeypatch, 1)


@pytest.fixture
def two_strict_gpus(monkeypatch):
    return _install(monkeypatch, 2)


@pytest.fixture
def strict_gpu_without_libraries(monkeypatch):
    """One stand-in GPU with neither cuBLAS bindings nor cuDNN."""
    return _install(monkeypatch, 1, libraries=False)


@pytest.fixture
def counts():
    """The stand-in's launch and byte counts, zeroed."""
    strict_cupy.counts.reset()
    return strict_cupy.counts
