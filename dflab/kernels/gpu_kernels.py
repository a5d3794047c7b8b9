"""GPU kernels: the same kernel code as the CPU's, bound to the GPU's array namespace (CuPy).

Kernels are written once against ``ctx.xp``; a GPU device's context carries ``xp = cupy``, so
registering a CPU kernel's factory under "GPU" gives the GPU kernel. ``register_gpu_kernels``
does that (``registry.mirror_kernels``) for every CPU kernel, once every kernel module has
registered (the package's ``__init__`` calls it last), except those registered
``host_only=True``: the ops TF registers only for CPUs (queues, save/restore, printing,
``py_func``, a few random ops drawn on the host), which the placer keeps on the host, letting
the partitioner insert the transfers. Ops that need a different body on the GPU register their
own ``device_types=("GPU",)`` kernel first and are left alone (the fused elementwise kernel, a
CuPy ``ElementwiseKernel``; ``Const`` below, whose int32 values stay in host memory). String
tensors never reach a GPU either (the placer checks dtypes, as TF does).

Host memory (TF's ``HostMemory``) is declared by each kernel where it is registered
(``host_memory_inputs``/``host_memory_outputs``); the GPU device reads it when it binds the
kernel (``GPUDevice.bind_kernel``).

Invariant: after ``register_gpu_kernels``, an op has a GPU kernel exactly when it has a CPU
kernel that is not ``host_only``, or a GPU kernel of its own
(``tests/gpu/test_gpu_kernel_coverage.py`` checks dflab's own kernels).
"""

from __future__ import annotations

import numpy as np

from dflab.framework.constant_op import make_ndarray
from dflab.kernels.registry import mirror_kernels, register_kernel

GPU = "GPU"


def _int32_value(node_def) -> tuple[int, ...]:
    """``Const``'s output is in host memory when it is int32 (TF's rule: an int32 tensor on a
    GPU is almost always a shape or an axis)."""
    return (0,) if np.asarray(node_def.attr["value"]).dtype == np.int32 else ()


def _gpu_const(node, ctx):
    value = node.attr["value"]
    if np.asarray(value).dtype == np.int32:
        # Host memory, as TF's int32 constants on a GPU; a constant's value (frozen, and known
        # as one: ``is_constant_value``), so that a device copy of it can be kept.
        value = make_ndarray(np.asarray(value), np.int32)
        return lambda: value
    value = ctx.xp.asarray(value)  # into the device's memory, once per plan
    return lambda: value


register_kernel("Const", GPU, factory=_gpu_const, host_memory_outputs=_int32_value)


def register_gpu_kernels() -> list[str]:
    """Register the CPU kernel of every op for GPUs too, unless it is ``host_only`` or the op
    already has a GPU kernel of its own; returns the op types registered."""
    return mirror_kernels("CPU", GPU)
