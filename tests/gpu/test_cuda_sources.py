"""Every CUDA source dflab generates compiles with NVRTC for sm_90 (Hopper), without a GPU:
the fused elementwise kernels, for every fusible op, every reduction and both compute types,
and every program of ``dflab.kernels.cuda`` (nn ops, pooling, optimizer updates).
The NVRTC wheel (``nvidia-cuda-nvrtc-cu12``, in the ``dev`` extra) ships the compiler."""

import pytest
from nvrtc import CompileError, compile_cuda, elementwise_unit, load_nvrtc, reduction_unit

from dflab.kernels.cuda import program
from dflab.kernels.fused_kernels import ELEMENTWISE, REDUCTIONS, FusedExpression, cuda_kernel_args

NVRTC = load_nvrtc()
# The dev extra installs the NVRTC wheel (Linux, Windows), so CI always compiles.
pytestmark = pytest.mark.skipif(
    NVRTC is None, reason="no NVRTC: pip install nvidia-cuda-nvrtc-cu12 (in the dev extra)")


@pytest.fixture(scope="module")
def nvrtc():
    return NVRTC


def _compile(nvrtc, expr):
    args = cuda_kernel_args(expr)
    unit = elementwise_unit(args) if expr.reduction is None else reduction_unit(args)
    return compile_cuda(nvrtc, unit)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op_type", sorted(ELEMENTWISE))
def test_each_fusible_op_compiles(nvrtc, op_type, dtype):
    arity = ELEMENTWISE[op_type].arity
    expr = FusedExpression(2, ((op_type, tuple(range(arity))), ("Mul", (2, 0))), dtype)
    assert _compile(nvrtc, expr)[:4] == b"\x7fELF"  # a cubin


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
def test_each_reduction_compiles(nvrtc, reduction, dtype):
    expr = FusedExpression(1, (("Exp", (0,)), ("Square", (1,))), dtype, (reduction, False))
    assert _compile(nvrtc, expr)[:4] == b"\x7fELF"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_reduction_declares_the_types_cupys_cub_template_names(nvrtc, dtype):
    """CuPy reduces one contiguous input through CUB with a template that reads the input's and
    output's element types as ``type_in0_raw``/``type_out0_raw`` (an H200 run failed with
    'identifier "type_in0_raw" is undefined' before the preamble declared them)."""
    args = cuda_kernel_args(FusedExpression(1, (("Square", (0,)),), dtype, ("Sum", False)))
    unit = (args["preamble"] + "typedef type_in0_raw type_mid_in;\n"
            "typedef type_out0_raw type_mid_out;\n"
            'extern "C" __global__ void k(const type_mid_in* x, type_mid_out* y) '
            "{ y[0] = fused((float)x[0]); }\n")
    assert compile_cuda(nvrtc, unit)[:4] == b"\x7fELF"


def test_a_long_chain_of_every_op_compiles(nvrtc):
    steps, n = [], 2
    for op_type in sorted(ELEMENTWISE):
        arity = ELEMENTWISE[op_type].arity
        steps.append((op_type, (n - 1,) if arity == 1 else (n - 1, 0)))
        n += 1
    _compile(nvrtc, FusedExpression(2, tuple(steps), "float32"))


def test_a_broken_source_is_reported_with_nvrtcs_log(nvrtc):
    with pytest.raises(CompileError, match="undefined"):
        compile_cuda(nvrtc, 'extern "C" __global__ void k(float* x) { x[0] = nope; }')


# The package's own programs, made at import (generated ones are compiled where they are made).
PROGRAMS = {p.name: p for p in program.catalogue()}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_each_gpu_program_compiles(nvrtc, name):
    assert compile_cuda(nvrtc, PROGRAMS[name].source)[:4] == b"\x7fELF"


def test_the_programs_cover_the_one_launch_kernels():
    names = {n.rsplit("_float", 1)[0] for n in PROGRAMS}
    assert {"dflab_relu_grad", "dflab_softmax", "dflab_softmax_xent", "dflab_sparse_xent_int32",
            "dflab_sparse_xent_int64", "dflab_bias_add_grad", "dflab_max_pool",
            "dflab_max_pool_grad", "dflab_avg_pool", "dflab_avg_pool_grad", "dflab_apply_sgd",
            "dflab_apply_momentum", "dflab_apply_adagrad", "dflab_apply_rms_prop",
            "dflab_apply_adam"} <= names


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op_type", sorted(ELEMENTWISE))
def test_each_fused_program_compiles(nvrtc, op_type, dtype):
    from dflab.kernels.cuda.fused import FULL, ROW, SCALAR, fused_program

    arity = ELEMENTWISE[op_type].arity
    expr = FusedExpression(3, ((op_type, tuple(range(arity))), ("Mul", (3, 2))), dtype)
    if dtype == "float32":  # float math: no double function or literal
        assert "double" not in cuda_kernel_args(expr)["preamble"]
    layouts = [((FULL, ROW, SCALAR), 1), ((FULL, FULL, SCALAR), 1)]
    if dtype == "float32":
        layouts.append(((FULL, SCALAR, FULL), 4))  # float4 loads
    for kinds, vec in layouts:
        source = fused_program(expr, kinds, vec).source
        assert compile_cuda(nvrtc, source)[:4] == b"\x7fELF"


@pytest.mark.parametrize("apply_type", ["ResourceApplyAdagrad", "ResourceApplyAdam",
                                        "ResourceApplyGradientDescent", "ResourceApplyMomentum",
                                        "ResourceApplyRMSProp"])
def test_each_multi_tensor_update_compiles(nvrtc, apply_type):
    from dflab.kernels.cuda.multi_apply import GROUPS, layout, multi_program

    family, _ = GROUPS[apply_type]
    n_refs, _ = layout(apply_type)
    for single in family.values():
        source = multi_program(single, n_refs, 3).source
        assert "blockIdx.y" in source
        assert compile_cuda(nvrtc, source)[:4] == b"\x7fELF"
