"""GPU kernels: the same kernel code as the CPU's, bound to the GPU's array namespace (CuPy).

Kernels are written once against ``ctx.xp``; a GPU device's context carries ``xp = cupy``, so
registering a CPU kernel's factory under "GPU" gives the GPU kernel. ``register_gpu_kernels``
does that for every op TF runs on GPUs, once every kernel module has registered (the package's
``__init__`` calls it last). Ops that need a different body on the GPU register their own
``device_types=("GPU",)`` kernel first and are left alone here (the fused elementwise kernel,
a CuPy ``ElementwiseKernel``).

``HOST_ONLY_OPS`` are the ops TF registers only for CPUs (queues, save/restore, printing,
``py_func``, a few random ops drawn on the host): they get no GPU kernel, and the placer keeps
them on the host and lets the partitioner insert the transfers. String tensors never reach a
GPU either (the placer checks dtypes, as TF does).

Invariant: after ``register_gpu_kernels``, an op has a GPU kernel exactly when it has a CPU
kernel and is in neither ``HOST_ONLY_OPS`` nor ``GPU_PENDING_OPS``
(``tests/gpu/test_gpu_kernel_coverage.py`` lists the ops without one).
"""

from __future__ import annotations

from dflab.kernels.registry import _KERNELS, ANY_DEVICE, KernelDef

# Ops TF registers only for CPU, so never placed on a GPU (even a simulated one).
HOST_ONLY_OPS = frozenset({
    "SaveV2", "RestoreV2", "Save", "Restore", "SaveSlices", "RestoreSlice",
    "MergeV2Checkpoints", "ShardedFilename", "ShardedFilespec",
    "FIFOQueueV2", "RandomShuffleQueueV2", "PaddingFIFOQueueV2", "PriorityQueueV2",
    "QueueEnqueueV2", "QueueEnqueueManyV2", "QueueDequeueV2", "QueueDequeueManyV2",
    "QueueDequeueUpToV2", "QueueCloseV2", "QueueSizeV2", "QueueIsClosedV2",
    "FIFOQueue", "RandomShuffleQueue", "PaddingFIFOQueue", "QueueEnqueue",
    "QueueEnqueueMany", "QueueDequeue", "QueueDequeueMany", "QueueDequeueUpTo",
    "QueueClose", "QueueSize",
    "Print", "PrintV2", "Assert", "PyFunc", "PyFuncStateless",
    "RandomShuffle", "RandomGamma", "RandomPoissonV2", "CountUpTo",
    # Conditional accumulators: their state is host NumPy, as TF's (CPU kernels only).
    "ConditionalAccumulator", "SparseConditionalAccumulator", "AccumulatorApplyGradient",
    "SparseAccumulatorApplyGradient", "AccumulatorTakeGradient",
    "SparseAccumulatorTakeGradient", "AccumulatorNumAccumulated", "AccumulatorSetGlobalStep",
})

# Ops TF runs on GPUs whose kernels here are not yet written against ``xp``: no GPU kernel,
# so the placer keeps them on the host. Empty now; the coverage test fails on any op without a
# GPU kernel that is in neither set, and each op added here must say why.
GPU_PENDING_OPS: frozenset[str] = frozenset()

GPU = "GPU"

# The op types with a CPU kernel when ``register_gpu_kernels`` last ran (dflab's own kernels):
# what the coverage test checks, whatever other code registers later.
CPU_OPS_MIRRORED: set[str] = set()


def register_gpu_kernels() -> list[str]:
    """Register the CPU kernel of every op outside ``HOST_ONLY_OPS`` for GPUs too, unless the
    op already has a GPU kernel of its own; returns the op types registered."""
    added = []
    CPU_OPS_MIRRORED.update(op for op, dt in _KERNELS if dt in ("CPU", ANY_DEVICE))
    for (op_type, device_type), kd in sorted(_KERNELS.items()):
        if device_type != "CPU" or op_type in HOST_ONLY_OPS or op_type in GPU_PENDING_OPS:
            continue
        if (op_type, GPU) in _KERNELS or (op_type, ANY_DEVICE) in _KERNELS:
            continue
        _KERNELS[(op_type, GPU)] = KernelDef(op_type, GPU, kd.factory, kd.takes_step,
                                             kd.site, kd.is_async)
        added.append(op_type)
    return added
