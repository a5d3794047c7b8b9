"""The GPU kernel of a fused elementwise group (``_FusedElementwise``): an NVRTC program of its
own where the inputs are laid out simply, CuPy's ``ElementwiseKernel`` / ``ReductionKernel``
otherwise.

A group's program is specialised, once per (expression, input layouts, vector width), to what
each input is: the output's shape, C-contiguous (``full``: read at the output's index), one
element (``scalar``: read once, before the loop), or the output's trailing dimensions
(``row``: a bias, read at the index modulo its size). Indices are 32-bit, the loop strides over
a grid sized to the work, float32 math stays in float (``expf``...), and where every array
operand is ``full`` or ``scalar``, float32, 16-byte aligned and the size a multiple of four, each
thread moves ``float4`` vectors: one load per input and one store per four elements, which is
what a kernel at the memory limit does. Other layouts (general broadcasting, non-contiguous
inputs), float16, sizes beyond 32 bits and groups ending in a reduction use CuPy's kernels.

The program's NumPy reference is the group's NumPy evaluator (``fused_kernels.numpy_evaluator``),
the CPU's kernel.
"""

from __future__ import annotations

import threading

import numpy as np

from dflab.kernels.context import host
from dflab.kernels.cuda import program as P
from dflab.kernels.fused_kernels import (
    FusedExpression,
    cuda_function,
    cupy_kernel,
    numpy_evaluator,
    reduction_axes_input,
)
from dflab.kernels.registry import kernel

FULL, SCALAR, ROW = "full", "scalar", "row"
_PROGRAMS: dict[tuple, P.CudaProgram] = {}
_LOCK = threading.Lock()


def layouts(inputs, out_shape) -> tuple | None:
    """Each input's layout against the output's shape, or None where one is none of them."""
    out = []
    size = int(np.prod(out_shape)) if out_shape else 1
    for a in inputs:
        if a.size == 1:
            out.append(SCALAR)
        elif tuple(a.shape) == tuple(out_shape) and a.flags.c_contiguous:
            out.append(FULL)
        elif a.flags.c_contiguous and a.ndim <= len(out_shape) and \
                tuple(a.shape) == tuple(out_shape[len(out_shape) - a.ndim:]) and \
                size % a.size == 0:
            out.append(ROW)
        else:
            return None
    return tuple(out)


def fused_program(expr: FusedExpression, kinds: tuple, vec: int) -> P.CudaProgram:
    """The program of ``expr`` over inputs laid out as ``kinds`` (``vec``: 4 for float4)."""
    key = (expr.kernel_cache_key, kinds, vec)
    prog = _PROGRAMS.get(key)
    if prog is None:
        with _LOCK:
            prog = _PROGRAMS.get(key)
            if prog is None:
                prog = _PROGRAMS[key] = _make(expr, kinds, vec)
    return prog


def _make(expr, kinds, vec) -> P.CudaProgram:
    ct = {"float32": "float", "float64": "double"}[expr.dtype]
    n = expr.n_inputs
    params = [f"const {ct}* in{k}" for k in range(n)] + [f"{ct}* out", "int n"]
    params += [f"int inner{k}" for k in range(n) if kinds[k] == ROW]
    hoist = "".join(f"  const {ct} s{k} = in{k}[0];\n" for k in range(n) if kinds[k] == SCALAR)
    if vec == 4:
        loads = "".join(f"    const float4 v{k} = reinterpret_cast<const float4*>(in{k})[i];\n"
                        for k in range(n) if kinds[k] == FULL)

        def lane(c):
            args = ", ".join(f"v{k}.{c}" if kinds[k] == FULL else f"s{k}" for k in range(n))
            return f"fused({args})"

        body = (hoist + "  const int m = n >> 2;\n"
                "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < m; "
                "i += blockDim.x * gridDim.x) {\n" + loads +
                "    reinterpret_cast<float4*>(out)[i] = make_float4("
                + ", ".join(lane(c) for c in "xyzw") + ");\n  }\n")
    else:
        def arg(k):
            return {FULL: f"in{k}[i]", SCALAR: f"s{k}", ROW: f"in{k}[i % inner{k}]"}[kinds[k]]

        body = (hoist + "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; "
                "i += blockDim.x * gridDim.x)\n"
                f"    out[i] = fused({', '.join(arg(k) for k in range(n))});\n")
    evaluate = numpy_evaluator(expr)

    def reference(*args):
        ins, out = args[:n], args[n]
        out[...] = evaluate(*ins)

    name = f"dflab_fused_{P.source_digest(cuda_function(expr) + str(kinds) + str(vec))}"
    parsed = tuple(P.parse_param(p) for p in params)
    return P.CudaProgram(name, parsed, body, reference, preamble=cuda_function(expr))


def _aligned(a) -> bool:
    return a.data.ptr % 16 == 0


@kernel("_FusedElementwise", device_types=("GPU",), host_memory_inputs=reduction_axes_input)
def _fused_gpu(node, ctx):
    expr = FusedExpression.from_attr(node.attr["_fused_expression"])
    xp = ctx.xp
    n = expr.n_inputs
    if expr.reduction is not None:
        k = cupy_kernel(expr, xp)
        keep = bool(expr.reduction[1])

        def fused_reduce(*inputs):
            # The axes are a small host-side value (TF keeps reduction indices in host memory).
            axes = tuple(int(a) for a in np.ravel(host(inputs[n])))
            return k(*inputs[:n], axis=axes, keepdims=keep)

        return fused_reduce
    if expr.dtype not in ("float32", "float64"):
        k = cupy_kernel(expr, xp)
        return lambda *inputs: k(*inputs)
    dtype = np.dtype(expr.dtype)

    def fused(*inputs):
        shape = np.broadcast_shapes(*(tuple(a.shape) for a in inputs))
        kinds = layouts(inputs, shape) if all(a.dtype == dtype for a in inputs) else None
        size = int(np.prod(shape)) if shape else 1
        if kinds is None or not P.fits_int32(size + P.MAX_BLOCKS * P.BLOCK):
            return cupy_kernel(expr, xp)(*inputs)
        out = xp.empty(shape, dtype)
        if size == 0:
            return out
        vec = 4 if (dtype == np.float32 and size % 4 == 0 and ROW not in kinds
                    and _aligned(out) and all(_aligned(a) for a, kd in zip(inputs, kinds)
                                              if kd == FULL)) else 1
        prog = fused_program(expr, kinds, vec)
        inners = [np.int32(a.size) for a, kd in zip(inputs, kinds) if kd == ROW]
        P.launch(xp, prog, P.grid_for(size // vec), P.BLOCK,
                 (*inputs, out, np.int32(size), *inners))
        return out

    return fused
