"""GPU kernels: the same kernel code as the CPU's, bound to the GPU's array namespace (CuPy).

Kernels are written once against ``ctx.xp``; a GPU device's context carries ``xp = cupy``, so
registering a CPU kernel's factory under "GPU" gives the GPU kernel. ``register_gpu_kernels``
does that for every op TF runs on GPUs, once every kernel module has registered (the package's
``__init__`` calls it last). Ops that need a different body on the GPU register their own
``device_types=("GPU",)`` kernel first and are left alone here (the fused elementwise kernel,
a CuPy ``ElementwiseKernel``; ``Const``, whose int32 values stay in host memory).

Host memory, as TF's ``HostMemory`` annotations: ``HOST_MEMORY_OUTPUTS`` are ops whose GPU
kernels leave their (small, metadata) outputs in host memory, ``HOST_MEMORY_INPUTS`` the inputs
GPU kernels read on the host. The GPU device's ``launch`` copies a host value to the device
only when it reaches an input that is not host memory.

``HOST_ONLY_OPS`` are the ops TF registers only for CPUs (queues, save/restore, printing,
``py_func``, a few random ops drawn on the host): they get no GPU kernel, and the placer keeps
them on the host and lets the partitioner insert the transfers. String tensors never reach a
GPU either (the placer checks dtypes, as TF does).

Invariant: after ``register_gpu_kernels``, an op has a GPU kernel exactly when it has a CPU
kernel and is in neither ``HOST_ONLY_OPS`` nor ``GPU_PENDING_OPS``
(``tests/gpu/test_gpu_kernel_coverage.py`` lists the ops without one).
"""

from __future__ import annotations

import numpy as np

from dflab.kernels.registry import _KERNELS, ANY_DEVICE, KernelDef, register_kernel

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
    "RandomShuffle", "RandomGamma", "RandomPoissonV2", "CountUpTo", "ResourceCountUpTo",
    # Conditional accumulators: their state is host NumPy, as TF's (CPU kernels only).
    "ConditionalAccumulator", "SparseConditionalAccumulator", "AccumulatorApplyGradient",
    "SparseAccumulatorApplyGradient", "AccumulatorTakeGradient",
    "SparseAccumulatorTakeGradient", "AccumulatorNumAccumulated", "AccumulatorSetGlobalStep",
    # Summaries: protobuf encoding of host values into a string.
    "ScalarSummary", "HistogramSummary", "ImageSummary", "TensorSummaryV2", "MergeSummary",
    # tf.data: datasets are host objects, iterators host state (TF: CPU kernels only).
    "TensorDataset", "TensorSliceDataset", "RangeDataset", "GeneratorDataset", "MapDataset",
    "FilterDataset", "BatchDatasetV2", "PaddedBatchDatasetV2", "ShuffleDataset",
    "RepeatDataset", "PrefetchDataset", "TakeDataset", "SkipDataset", "ZipDataset",
    "ConcatenateDataset", "TextLineDataset", "IteratorV2", "OneShotIterator", "MakeIterator",
    "IteratorGetNext",
    # File readers and parsers read host files and strings.
    "TextLineReaderV2", "WholeFileReaderV2", "ReaderReadV2", "ReaderNumRecordsProducedV2",
    "ReaderResetV2", "ReadFile", "DecodeCSV",
})

# Ops TF runs on GPUs whose kernels here are not yet written against ``xp``: no GPU kernel,
# so the placer keeps them on the host. Empty now; the coverage test fails on any op without a
# GPU kernel that is in neither set, and each op added here must say why.
GPU_PENDING_OPS: frozenset[str] = frozenset()

GPU = "GPU"

# TF's ``HostMemory`` arguments: inputs a GPU kernel reads on the host (shapes, axes, sizes,
# indices, bounds), by input position (-1: the last input, ConcatV2's axis). A host value
# (a ``Shape``'s output, an int32 constant) reaching one of these stays on the host; reaching
# any other input of a GPU kernel it is copied to the device first (``GPUDevice.launch``). A
# device value reaching one of these is read back with ``kernels.context.host``, so a missing
# entry costs a copy, never a wrong result.
_REDUCTIONS = ("Sum", "Mean", "Max", "Min", "Prod", "All", "Any", "EuclideanNorm")
HOST_MEMORY_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "ExpandDims": (1,), "Fill": (0,), "Transpose": (1,),
    "ConjugateTranspose": (1,), "ConcatV2": (-1,), "Split": (0,), "SplitV": (1, 2),
    "Slice": (1, 2), "StridedSlice": (1, 2, 3), "StridedSliceGrad": (0, 1, 2, 3),
    "GatherV2": (2,), "ScatterNd": (2,), "Tile": (1,), "BroadcastTo": (1,), "ReverseV2": (1,),
    "Pad": (1,), "PadV2": (1,), "MirrorPad": (1,), "MirrorPadGrad": (1,), "OneHot": (1,),
    "SequenceMask": (1,), "BroadcastGradientArgs": (0, 1), "ReducedShape": (0, 1),
    "Range": (0, 1, 2), "LinSpace": (0, 1, 2), "Conv2DBackpropInput": (0,),
    "Conv2DBackpropFilter": (1,), "RandomStandardNormal": (0,), "RandomUniform": (0,),
    "TruncatedNormal": (0,), "RandomUniformInt": (0, 1, 2), "ArgMax": (1,), "ArgMin": (1,),
    "Cumsum": (1,), "Cumprod": (1,), "UnsortedSegmentSum": (2,), "UnsortedSegmentMax": (2,),
    "UnsortedSegmentMin": (2,), "UnsortedSegmentProd": (2,),
    "TensorArrayV3": (0,), "TensorArrayWriteV3": (1,), "TensorArrayReadV3": (1,),
    "TensorArrayGatherV3": (1,), "TensorArrayScatterV3": (1,), "TensorArraySplitV3": (2,),
    **{op: (1,) for op in _REDUCTIONS},
}

# Ops whose GPU kernel leaves its outputs in host memory (TF's ``HostMemory`` outputs): what
# they compute is metadata the next kernel reads on the host. ``Const`` does so for int32
# values only (TF's rule: an int32 tensor on a GPU is almost always a shape or an axis).
HOST_MEMORY_OUTPUTS = frozenset({"Shape", "ShapeN", "Size", "Rank", "TensorArraySizeV3",
                                 "TensorArrayConcatV3"})


def host_memory_inputs(op_type: str, n_inputs: int, attrs=None) -> frozenset[int]:
    """The positions of ``op_type``'s inputs (of ``n_inputs``) that its GPU kernel reads on
    the host (``attrs``: the node's, for a fused group ending in a reduction, whose last input
    is the reduction's axes)."""
    if op_type == "_FusedElementwise" and attrs is not None:
        from dflab.kernels.fused_kernels import FusedExpression

        expr = FusedExpression.from_attr(attrs["_fused_expression"])
        return frozenset({expr.n_inputs}) if expr.reduction is not None else frozenset()
    return frozenset(i % n_inputs for i in HOST_MEMORY_INPUTS.get(op_type, ()) if n_inputs)


def _gpu_const(node, ctx):
    value = node.attr["value"]
    if np.asarray(value).dtype == np.int32:
        value = np.array(value)  # host memory, as TF's int32 constants on a GPU
        value.flags.writeable = False  # constant: a device copy of it can be kept
        return lambda: value
    value = ctx.xp.asarray(value)  # into the device's memory, once per plan
    return lambda: value


register_kernel("Const", GPU, factory=_gpu_const)

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
