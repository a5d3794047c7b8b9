"""TF's fused contractions on the host: ``_FusedMatMul`` and ``_FusedConv2D``, the nodes the
remapper (``dflab.runtime.remapper``) puts in place of a MatMul or Conv2D, the bias added to
its result and an optional activation of the sum; and ``_FusedMatMulSum``, an AddN of MatMuls
(see its kernel).

On oneDNN (float32, the shapes its contraction takes) the bias and the activation are applied
as the product or convolution writes its result (the primitive's bias and an eltwise post-op),
and the kernel labels itself ``_MklFusedMatMul`` / ``_MklFusedConv2D`` as TF's do. Otherwise
(no oneDNN, a product too small for it, an operand it cannot describe) the kernel runs the
members' own kernels one after another: exactly what the unfused ops compute, errors included
(they name the member that failed).

Numerics: the bias is added to the float32 result and the activation applied to the rounded
sum, as unfused. Relu and Relu6 then run on the sum in place with NumPy's kernels: oneDNN's
take a maximum that turns a NaN into 0, where TF's and NumPy's keep it. LeakyRelu is exact;
with these three the fused results were the unfused oneDNN ones to the bit on the CPUs
measured. Elu, Tanh and Sigmoid are oneDNN's approximations, within float32 tolerance of
NumPy's. NaN and infinities come out as NumPy's (tests/kernels/test_contraction_fusion.py).
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.framework.graph_io import NodeDef
from dflab.kernels import onednn
from dflab.kernels.conv_kernels import _nonempty, _window
from dflab.kernels.math_kernels import ONEDNN_MIN_PRODUCT
from dflab.kernels.nn_kernels import _relu, _relu6
from dflab.kernels.registry import get_kernel_def, kernel


def _activation(node) -> tuple:
    """(oneDNN's eltwise post-op ``(alg, alpha, beta)`` or None, NumPy's in-place activation
    or None) for the fused activation. oneDNN's Relu and Relu6 take a maximum that turns a NaN
    into 0, where TF's (and NumPy's) keep it: those two run on the fused sum in place."""
    from dflab.kernels.onednn import capi

    types = node.attr["fused_types"]
    act = types[2] if len(types) > 2 else None
    if act == "Relu":
        return None, lambda y: _relu(np, y, out=y)
    if act == "Relu6":
        return None, lambda y: _relu6(np, y, out=y)
    post = {
        None: None,
        "LeakyRelu": (capi.ELTWISE_RELU, float(node.attr.get("leakyrelu_alpha", 0.2)), 0.0),
        "Elu": (capi.ELTWISE_ELU, 1.0, 0.0),
        "Tanh": (capi.ELTWISE_TANH, 0.0, 0.0),
        "Sigmoid": (capi.ELTWISE_LOGISTIC, 0.0, 0.0),
    }[act]
    return post, None


def _member_defs(node) -> list[NodeDef]:
    """Typed node defs of the members (contraction, bias add, activation if any), for their
    own kernels: the contraction keeps the fused node's attributes (its own, as the remapper
    copied them)."""
    names, types = node.attr["fused_ops"], node.attr["fused_types"]
    sites = node.attr.get("_fused_sites") or [""] * len(names)
    t = node.output_types[0]
    fmt = node.attr.get("data_format", "NHWC") if types[0] == "Conv2D" else "NHWC"
    defs = [NodeDef(names[0], types[0], attr=node.attr, site=sites[0],
                    input_types=node.input_types[:2], output_types=node.output_types),
            NodeDef(names[1], types[1], attr={"T": t, "data_format": fmt}, site=sites[1],
                    input_types=(t, t), output_types=(t,))]
    if len(types) > 2:
        defs.append(NodeDef(names[2], types[2],
                            attr={"T": t, "alpha": node.attr.get("leakyrelu_alpha", 0.2)},
                            site=sites[2], input_types=(t,), output_types=(t,)))
    return defs


def _as_member(fn, member: NodeDef):
    """``fn`` raising what it raises as an error of ``member`` (which the runtime turns into
    the user's op), as the executor does for an unfused kernel."""
    def run(*args):
        try:
            return fn(*args)
        except (ValueError, TypeError, IndexError, ZeroDivisionError, FloatingPointError) as e:
            raise errors.InvalidArgumentError(None, member, f"{type(e).__name__}: {e}") from None

    return run


def _bound(nd: NodeDef, ctx):
    """Member ``nd``'s own kernel, bound on ``ctx``, its errors the member's."""
    return _as_member(get_kernel_def(nd, "CPU").factory(nd, ctx), nd)


def _unfused(node, ctx):
    """``fn(a, b, bias)``: the members' own kernels one after another."""
    fns = [_bound(nd, ctx) for nd in _member_defs(node)]
    contraction, add = fns[0], fns[1]
    act = fns[2] if len(fns) > 2 else None

    def unfused(a, b, bias):
        y = add(contraction(a, b), bias)
        return act(y) if act is not None else y

    return unfused


def _backend(node, ctx, products: bool):
    """oneDNN for this kernel, or None (``products``: a MatMul, which the session's
    ``onednn_products`` may keep on BLAS)."""
    if products and not ctx.intra_op.onednn_products:
        return None
    return onednn.for_kernel(ctx, node.output_types[0].as_numpy_dtype)


def _fused_kernel(node, ctx, on_library, op_type: str):
    """The kernel function: ``on_library(dnn, act, a, b, bias)`` (the fused result, or None
    where oneDNN does not take the call) when oneDNN is there, else the members' kernels.
    ``kernel_label`` names oneDNN's kernel when the last call ran on it."""
    dnn = _backend(node, ctx, products=op_type == "MatMul")
    post, in_place = _activation(node)
    unfused = _unfused(node, ctx)
    label = onednn.label("Fused" + op_type)

    def fused(a, b, bias):
        y = on_library(dnn, post, a, b, bias) if dnn is not None else None
        fused.kernel_label = label if y is not None else None
        if y is None:
            return unfused(a, b, bias)
        return y if in_place is None else in_place(y)

    fused.kernel_label = None
    return fused


@kernel("_FusedMatMul")
def _fused_matmul(node, ctx):
    ta, tb = node.attr.get("transpose_a", False), node.attr.get("transpose_b", False)

    def on_library(dnn, act, a, b, bias):
        if a.ndim != 2 or b.ndim != 2:
            return None
        a, b = (a.T if ta else a), (b.T if tb else b)  # views oneDNN reads by strides
        if a.shape[0] * a.shape[1] * b.shape[1] < ONEDNN_MIN_PRODUCT:
            return None
        return dnn.matmul(a, b, bias, act)

    return _fused_kernel(node, ctx, on_library, "MatMul")


@kernel("_FusedConv2D")
def _fused_conv2d(node, ctx):
    fmt = node.attr.get("data_format", "NHWC")

    def on_library(dnn, act, x, f, bias):
        if x.ndim != 4 or f.ndim != 4 or not _nonempty(x, f):
            return None
        n, h, w, c = x.shape if fmt == "NHWC" else (x.shape[0], *x.shape[2:], x.shape[1])
        kh, kw, ci, _ = f.shape
        if c != ci:
            return None  # the members' kernels say what is wrong
        try:
            win = _window(node, ctx, h, w, kh, kw)
        except errors.InvalidArgumentError:
            return None  # the Conv2D's own kernel reports it, under its name
        return None if win.empty_output else dnn.conv2d(x, f, fmt, win, bias, act)

    return _fused_kernel(node, ctx, on_library, "Conv2D")


# --- sums of products ---------------------------------------------------------------------------
def _sum_member_defs(node) -> tuple[list[NodeDef], NodeDef]:
    """Typed node defs of a ``_FusedMatMulSum``'s MatMuls and of its AddN."""
    names, n = node.attr["fused_ops"], node.attr["N"]
    sites = node.attr.get("_fused_sites") or [""] * len(names)
    t = node.output_types[0]
    products = [NodeDef(names[k], "MatMul", site=sites[k], input_types=(t, t), output_types=(t,),
                        attr={"T": t, "transpose_a": node.attr["transpose_a"][k],
                              "transpose_b": node.attr["transpose_b"][k]})
                for k in range(n)]
    add_n = NodeDef(names[n], "AddN", attr={"T": t, "N": n}, site=sites[n],
                    input_types=(t,) * n, output_types=(t,))
    return products, add_n


@kernel("_FusedMatMulSum")
def _fused_matmul_sum(node, ctx):
    """``AddN(MatMul(a0, b0), MatMul(a1, b1), ...)``: the first product computed by its own
    kernel, each next one added into it in the AddN's order, on oneDNN as it is written (a sum
    post-op: the term is never stored), else computed by its kernel and added in place. Operands
    whose products are not all 2-d of one shape get the members' kernels and the AddN's."""
    product_defs, add_def = _sum_member_defs(node)
    products = [_bound(nd, ctx) for nd in product_defs]
    add_n = _bound(add_def, ctx)
    tas, tbs = node.attr["transpose_a"], node.attr["transpose_b"]
    dnn = _backend(node, ctx, products=True)
    label = onednn.label("FusedMatMulSum")

    def operands(a, b, k):  # views oneDNN reads by strides
        return (a.T if tas[k] else a), (b.T if tbs[k] else b)

    def one_shape(pairs) -> bool:
        shapes = set()
        for k, (a, b) in enumerate(pairs):
            if a.ndim != 2 or b.ndim != 2:
                return False
            a, b = operands(a, b, k)
            if a.shape[1] != b.shape[0]:
                return False
            shapes.add((a.shape[0], b.shape[1]))
        return len(shapes) == 1

    def added_on_library(k, a, b, out) -> bool:
        a, b = operands(a, b, k)
        if a.shape[0] * a.shape[1] * b.shape[1] < ONEDNN_MIN_PRODUCT:
            return False
        return dnn.matmul(a, b, into=out) is not None

    def fused_matmul_sum(*arrays):
        pairs = list(zip(arrays[0::2], arrays[1::2]))
        fused_matmul_sum.kernel_label = None
        if not one_shape(pairs):
            return add_n(*[p(a, b) for p, (a, b) in zip(products, pairs)])
        out = products[0](*pairs[0])
        if not (out.flags.writeable and out.flags.c_contiguous and out.dtype == np.float32):
            return add_n(out, *[p(a, b) for p, (a, b) in zip(products[1:], pairs[1:])])
        every = dnn is not None
        for k in range(1, len(pairs)):
            a, b = pairs[k]
            if dnn is None or not added_on_library(k, a, b, out):
                every = False
                np.add(out, products[k](a, b), out=out)  # as the AddN adds it
        fused_matmul_sum.kernel_label = label if every else None
        return out

    fused_matmul_sum.kernel_label = None
    return fused_matmul_sum
