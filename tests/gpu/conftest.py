"""Fixtures of the GPU tests: GPU devices built on the strict CuPy stand-in (``strict_cupy``).

``strict_gpu`` swaps the registered "GPU" backend for one that makes ``GPUDevice``s on a fresh
stand-in module, so a session's ``/gpu:N`` are the real GPU device class running its own code.
"""

import functools

import pytest
import strict_cupy

from dflab.runtime import devices as devmod
from dflab.runtime import gpu as gpumod


def _install(monkeypatch, device_count):
    cupy = strict_cupy.make_module(device_count=device_count)
    make = functools.partial(gpumod.make_cupy_gpu, cupy=cupy)
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
