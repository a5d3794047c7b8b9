"""Which ops have no GPU kernel, and whether TF runs them on GPUs.

Every op with a CPU kernel gets a GPU kernel (the same code on ``cupy``) unless TF keeps it on
the host (``HOST_ONLY_OPS``) or its kernel is not yet written against ``xp``
(``GPU_PENDING_OPS``). An op TF runs on GPUs that lacks a GPU kernel fails here.
"""

import pytest

import dflab  # noqa: F401 - registers every kernel
from dflab.kernels.gpu_kernels import CPU_OPS_MIRRORED, GPU_PENDING_OPS, HOST_ONLY_OPS
from dflab.kernels.registry import has_kernel


def ops_without_gpu_kernel() -> list[str]:
    """dflab's own ops (not those other tests register) with a CPU kernel and no GPU one."""
    return sorted(op for op in CPU_OPS_MIRRORED if not has_kernel(op, "GPU"))


def test_every_op_without_a_gpu_kernel_is_host_only_or_tracked():
    missing = ops_without_gpu_kernel()
    untracked = [op for op in missing if op not in HOST_ONLY_OPS | GPU_PENDING_OPS]
    assert untracked == [], f"ops with no GPU kernel and no reason: {untracked}"
    print("ops without a GPU kernel:", missing)


def test_host_only_ops_have_no_gpu_kernel():
    assert not [op for op in HOST_ONLY_OPS if has_kernel(op, "GPU")]


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


def test_no_op_is_pending_a_gpu_kernel():
    assert GPU_PENDING_OPS == frozenset()
