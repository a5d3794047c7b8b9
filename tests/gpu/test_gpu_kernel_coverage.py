"""Which ops have no GPU kernel, and whether TF runs them on GPUs.

Every op with a CPU kernel gets a GPU kernel (the same code on ``cupy``) unless its kernel is
registered ``host_only=True`` (TF registers it only for CPUs). The host-only ops are checked
against the list below, reviewed against TF's kernel registrations: a kernel that declares
itself host-only, or stops doing so, fails here until the list is updated on purpose. An op
TF runs on GPUs that lacks a GPU kernel fails here too.
"""

import os

import pytest

import dflab
from dflab.framework.graph_io import NodeDef
from dflab.kernels.registry import get_kernel_def, has_kernel, is_host_only, kernel_defs

# The ops dflab has kernels for that TF registers only for CPUs.
TF_HOST_ONLY = frozenset({
    # Checkpoints.
    "SaveV2", "RestoreV2", "MergeV2Checkpoints", "ShardedFilename",
    # Queues (host state).
    "FIFOQueueV2", "RandomShuffleQueueV2", "PaddingFIFOQueueV2", "QueueEnqueueV2",
    "QueueEnqueueManyV2", "QueueDequeueV2", "QueueDequeueManyV2", "QueueDequeueUpToV2",
    "QueueCloseV2", "QueueSizeV2", "QueueIsClosedV2",
    # Printing, assertions, Python, a few random ops drawn on the host, counters.
    "Print", "PrintV2", "Assert", "PyFunc", "PyFuncStateless", "RandomShuffle", "RandomGamma",
    "RandomPoissonV2", "CountUpTo", "ResourceCountUpTo",
    # Conditional accumulators: their state is host NumPy, as TF's.
    "ConditionalAccumulator", "SparseConditionalAccumulator", "AccumulatorApplyGradient",
    "SparseAccumulatorApplyGradient", "AccumulatorTakeGradient",
    "SparseAccumulatorTakeGradient", "AccumulatorNumAccumulated", "AccumulatorSetGlobalStep",
    # Summaries: protobuf encoding of host values into a string.
    "ScalarSummary", "HistogramSummary", "ImageSummary", "TensorSummaryV2", "MergeSummary",
    "AudioSummaryV2",
    # tf.data: datasets are host objects, iterators host state.
    "TensorDataset", "TensorSliceDataset", "RangeDataset", "GeneratorDataset", "MapDataset",
    "FilterDataset", "BatchDatasetV2", "PaddedBatchDatasetV2", "ShuffleDataset",
    "RepeatDataset", "PrefetchDataset", "TakeDataset", "SkipDataset", "ZipDataset",
    "ConcatenateDataset", "TextLineDataset", "TFRecordDataset", "FixedLengthRecordDatasetV2",
    "FlatMapDataset", "InterleaveDataset", "UnbatchDataset", "ShardDataset", "CacheDataset",
    "WindowDataset", "ReduceDataset", "DatasetCardinality",
    "IteratorV2", "OneShotIterator", "AnonymousIterator", "MakeIterator", "IteratorGetNext",
    "IteratorGetNextAsOptional", "OptionalHasValue", "OptionalGetValue", "SerializeIterator",
    "DeserializeIterator",
    # File readers and parsers read host files and strings.
    "TextLineReaderV2", "WholeFileReaderV2", "ReaderReadV2", "ReaderNumRecordsProducedV2",
    "ReaderResetV2", "ReadFile", "DecodeCSV", "TFRecordReaderV2",
    # Parsing tf.train.Example protos and raw bytes: host strings in, as TF's CPU kernels.
    "ParseExampleV2", "ParseSingleSequenceExample", "DecodeRaw",
    # Candidate samplers draw on the host (TF registers them for CPUs only).
    "UniformCandidateSampler", "LogUniformCandidateSampler", "LearnedUnigramCandidateSampler",
    "FixedUnigramCandidateSampler", "AllCandidateSampler", "ComputeAccidentalHits",
    "FixedLengthRecordReaderV2", "LMDBReader", "ReaderReadUpToV2",
    # Image codecs (Pillow on the host; TF registers them for CPUs only).
    "DecodePng", "DecodeJpeg", "DecodeBmp", "DecodeWebP", "DecodeGif", "DecodeImage",
    "DecodeAndCropJpeg", "EncodePng", "EncodeJpeg", "EncodeJpegVariableQuality",
    "ExtractJpegShape",
    # String ops (strings stay on the host).
    "StringLength", "StringLower", "StringUpper", "StringStrip", "RegexFullMatch",
    "RegexReplace", "EncodeBase64", "DecodeBase64", "DecodeCompressed", "UnicodeTranscode",
    "StringToNumber", "AsString", "Substr", "ReduceJoin", "UnsortedSegmentJoin",
    "StringFormat", "StringNGrams", "UnicodeEncode",
    # String hashing and fingerprints (TF registers them for CPUs only).
    "StringToHashBucketFast", "StringToHashBucket", "StringToHashBucketStrong", "Fingerprint",
    # Linear algebra TF has CPU kernels only for.
    "MatrixSolveLs", "MatrixSquareRoot",
    # Box ops and the priority queue TF has CPU kernels only for.
    "NonMaxSuppressionV5", "NonMaxSuppressionWithOverlaps", "CombinedNonMaxSuppression",
    "DrawBoundingBoxesV2", "PriorityQueueV2", "IdentityReaderV2",
    "SampleDistortedBoundingBoxV2", "StatelessRandomPoisson", "StatelessRandomBinomial",
    "ExtractGlimpse",
    # Tensors to and from bytes and files, and the host's clock.
    "SerializeTensor", "ParseTensor", "WriteFile", "MatchingFiles", "Timestamp",
    "MatrixLogarithm",
    "StatelessParameterizedTruncatedNormal",
    # tf.py_function and lookup tables (host state), as TF's.
    "EagerPyFunc", "HashTableV2", "LookupTableImportV2", "InitializeTableV2",
    "InitializeTableFromTextFileV2", "LookupTableFindV2", "LookupTableSizeV2",
    "LookupTableExportV2",
    # Sparse ops TF registers for CPUs only (its GPU ones, SparseReorder, SparseReshape,
    # SparseConcat, SparseSlice, SparseSplit, SparseFillEmptyRows, SparseTensorDenseMatMul,
    # SparseSegment*, run on GPUs here too).
    "SparseAdd", "SparseAddGrad", "SparseTensorDenseAdd", "SparseDenseCwiseAdd",
    "SparseDenseCwiseDiv", "SparseDenseCwiseMul", "SparseReduceMax", "SparseReduceMaxSparse",
    "SparseReduceSum", "SparseReduceSumSparse", "SparseSoftmax", "SparseSparseMaximum",
    "SparseSparseMinimum", "SparseCrossV2", "DenseCountSparseOutput",
    "SparseCountSparseOutput", "SerializeSparse", "SerializeManySparse",
    "DeserializeManySparse", "EditDistance", "StringSplit", "StringSplitV2",
    # Set operations (tf.sets).
    "SetSize", "DenseToDenseSetOperation", "DenseToSparseSetOperation",
    "SparseToSparseSetOperation",
})

_PACKAGE = os.path.dirname(dflab.__file__) + os.sep


def own_kernels(device_type: str):
    """dflab's own kernels for ``device_type`` (not those other tests register)."""
    return [kd for kd in kernel_defs()
            if kd.device_type == device_type and kd.site.startswith(_PACKAGE)]


def test_every_cpu_kernel_has_a_gpu_kernel_unless_it_is_host_only():
    missing = sorted(kd.op_type for kd in own_kernels("CPU")
                     if not kd.host_only and not has_kernel(kd.op_type, "GPU"))
    assert missing == [], f"ops with no GPU kernel and no reason: {missing}"


def test_host_only_kernels_are_those_tf_registers_only_for_cpus():
    declared = {kd.op_type for kd in own_kernels("CPU") if kd.host_only}
    assert declared == TF_HOST_ONLY, (
        f"declared host-only but not on the list: {sorted(declared - TF_HOST_ONLY)}; "
        f"on the list but not declared: {sorted(TF_HOST_ONLY - declared)}")
    assert all(is_host_only(op) for op in TF_HOST_ONLY)


def test_host_only_ops_have_no_gpu_kernel():
    assert not [op for op in TF_HOST_ONLY if has_kernel(op, "GPU")]


def test_a_host_only_kernel_cannot_be_registered_for_a_gpu():
    from dflab.kernels.registry import register_kernel

    with pytest.raises(TypeError, match="host_only"):
        register_kernel("TestHostOnlyOnGpu", ("CPU", "GPU"), fn=lambda: None, host_only=True)
    assert not has_kernel("TestHostOnlyOnGpu", "CPU")


@pytest.mark.parametrize("op", ["MatMul", "BatchMatMulV2", "Conv2D", "Conv2DBackpropInput",
                                "Conv2DBackpropFilter", "MaxPool", "MaxPoolGrad", "AvgPool",
                                "Relu", "ReluGrad", "Softmax", "BiasAdd", "BiasAddGrad",
                                "SoftmaxCrossEntropyWithLogits", "Sum", "Mean", "AddV2",
                                "Mul", "Sub", "RealDiv", "Exp", "Log", "Tanh", "Sigmoid",
                                "Reshape", "Transpose", "ConcatV2", "GatherV2", "ScatterAdd",
                                "VariableV2", "Assign", "AssignAdd", "ApplyGradientDescent",
                                "ApplyAdam", "ApplyMomentum", "Switch", "Merge", "Enter",
                                "Exit", "NextIteration", "LoopCond", "_Send", "_Recv",
                                "RandomStandardNormal", "RandomUniform", "Shape", "Fill",
                                "Cast", "ArgMax", "OneHot", "Tile", "Pad", "Slice",
                                "StridedSlice", "UnsortedSegmentSum", "Select"])
def test_ops_tf_runs_on_gpus_have_a_gpu_kernel(op):
    if not has_kernel(op, "CPU"):
        pytest.skip(f"dflab has no {op} kernel at all")
    assert has_kernel(op, "GPU"), f"{op} runs on GPUs in TensorFlow but has no GPU kernel"


TENSOR_ARRAY_OPS = ["TensorArrayV3", "TensorArrayGradV3", "TensorArrayWriteV3",
                    "TensorArrayReadV3", "TensorArrayGatherV3", "TensorArrayScatterV3",
                    "TensorArraySizeV3", "TensorArrayConcatV3", "TensorArraySplitV3",
                    "TensorArrayCloseV3"]


@pytest.mark.parametrize("op", TENSOR_ARRAY_OPS)
def test_tensor_array_ops_have_gpu_kernels(op):
    # TF runs TensorArray ops on GPUs (elements in device memory, handle and flow on the host).
    assert has_kernel(op, "CPU")
    assert has_kernel(op, "GPU"), f"{op} runs on GPUs in TensorFlow but has no GPU kernel"


@pytest.mark.parametrize("op,n_inputs,host", [
    ("Reshape", 2, {1}), ("ConcatV2", 4, {3}), ("ConcatV2", 3, {2}), ("Sum", 2, {1}),
    ("StridedSlice", 4, {1, 2, 3}), ("GatherV2", 3, {2}), ("Conv2DBackpropInput", 3, {0}),
    ("RandomUniform", 1, {0}), ("TensorArrayReadV3", 3, {1}), ("MatMul", 2, set()),
    ("AddV2", 2, set())])
def test_gpu_kernels_declare_tfs_host_memory_inputs(op, n_inputs, host):
    node_def = NodeDef("n", op, [f"x{i}" for i in range(n_inputs)] + ["^control"])
    assert get_kernel_def(node_def, "GPU").host_inputs(node_def) == host
