"""The kernels' computations on oneDNN: matrix products (batched too), convolution and its two
gradients, max and average pooling and their gradients, batch normalization and its gradient,
the Adam update, float32, on NumPy arrays.

Each function takes its operands as the kernel received them (NHWC or NCHW, strided views
included: oneDNN reads them through their strides, with no copy), allocates its result as a
C-contiguous NumPy array in the layout TF gives it, runs the plan cached for these shapes
(``plans.cached``) and returns the result. The geometry of a window (``Geometry``) is the
one the NumPy kernels compute (``conv_kernels._Window``), so both paths agree on output
sizes and on TF's SAME padding. ``plans.UnsupportedError`` means: compute this with NumPy.

Filters are kept in TF's HWIO layout; a convolution reorders them into the blocked layout its
fast implementation chose, once per call (a few tens of microseconds), as TF's own oneDNN
kernels do for a filter that changes every step.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dflab.kernels.onednn import capi, plans
from dflab.kernels.onednn.plans import Plan, array_dims, contiguous_strides

# Array axis -> oneDNN's logical axis, per layout: oneDNN numbers a convolution's data
# N, C, H, W and its filters O, I, H, W, whatever the layout in memory.
_DATA_AXES = {"NHWC": (0, 3, 1, 2), "NCHW": (0, 1, 2, 3)}  # logical axis -> array axis
_DATA_ORDER = {"NHWC": (0, 2, 3, 1), "NCHW": (0, 1, 2, 3)}  # array axis -> logical axis
_FILTER_AXES = (3, 2, 0, 1)  # OIHW from HWIO
_FILTER_ORDER = (2, 3, 1, 0)


class Geometry(NamedTuple):
    """A window's size, strides, dilations and padding (top, bottom, left, right)."""

    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pb: int
    pl: int
    pr: int

    def conv_args(self):
        """oneDNN's (strides, dilations, padding_l, padding_r): dilation 0 is none."""
        return (plans.dims((self.sh, self.sw)), plans.dims((self.dh - 1, self.dw - 1)),
                plans.dims((self.pt, self.pl)), plans.dims((self.pb, self.pr)))


def _data_desc(plan: Plan, a: np.ndarray, fmt: str):
    return plan.desc(*array_dims(a, _DATA_AXES[fmt]))


def _new_data_desc(plan: Plan, logical_shape, fmt: str):
    """The desc of a C-contiguous array of ``logical_shape`` (N, C, H, W) in ``fmt``."""
    return plan.desc(logical_shape, contiguous_strides(logical_shape, _DATA_ORDER[fmt]))


def _logical(shape, fmt: str) -> tuple:
    """The logical (N, C, H, W) shape of data of array shape ``shape`` in ``fmt``."""
    return tuple(shape[i] for i in _DATA_AXES[fmt])


def _to_layout(logical_shape, fmt: str) -> tuple:
    """The array shape in ``fmt`` of data of ``logical_shape`` (N, C, H, W)."""
    return tuple(logical_shape[i] for i in _DATA_ORDER[fmt])


def _filter_desc(plan: Plan, f: np.ndarray):
    return plan.desc(*array_dims(f, _FILTER_AXES))


def _new_filter_desc(plan: Plan, hwio_shape):
    kh, kw, ci, co = hwio_shape
    logical = (co, ci, kh, kw)
    return plan.desc(logical, contiguous_strides(logical, _FILTER_ORDER))


def _key(*parts) -> tuple:
    return parts


def _layout(a: np.ndarray) -> tuple:
    return a.shape, a.strides


# --- matrix product ---------------------------------------------------------------------------
def _epilogue(activation) -> tuple:
    """The post-ops of a fused activation: ``(alg, alpha, beta)`` (capi's ELTWISE values) or
    None for none."""
    return () if activation is None else (("eltwise", *activation),)


def _bias_arg(bias) -> dict:
    """The bias slot's array for ``Plan.run``, where the plan has one."""
    return {} if bias is None else {"bias": bias}


def _check_bias(bias, n: int) -> None:
    if bias is not None and (bias.dtype != np.float32 or bias.shape != (n,) or
                             not bias.flags.c_contiguous):
        raise plans.UnsupportedError("not a contiguous float32 vector of the output's channels")


def matmul(lib, threads: int, a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None,
           activation: tuple | None = None, into: np.ndarray | None = None) -> np.ndarray:
    """MatMul of 2-d arrays, or BatchMatMul of 3-d ones with the same batch: ``a @ b`` (a
    transposed operand is a view: its strides say so); the result C-contiguous. With ``bias``
    (a vector along the result's last axis) and ``activation`` (see ``_epilogue``), the fused
    ``activation(a @ b + bias)`` of TF's ``_FusedMatMul``: one pass over the result. With
    ``into`` (a C-contiguous float32 array of the result's shape), ``into += a @ b`` in place,
    the product added as it is written (a sum of products without its terms)."""
    nd = a.ndim
    if nd not in (2, 3) or b.ndim != nd or a.shape[-1] != b.shape[-2] or \
            a.shape[:-2] != b.shape[:-2] or not (a.size and b.size):
        raise plans.UnsupportedError("not a product of two non-empty matrices or batches")
    shape = a.shape[:-1] + b.shape[-1:]
    _check_bias(bias, shape[-1])
    if into is not None and (into.shape != shape or into.dtype != np.float32 or
                             not into.flags.c_contiguous or bias is not None):
        raise plans.UnsupportedError("not a float32 C-contiguous sum of the product's shape")
    axes = tuple(range(nd))

    def build():
        lib.use_threads(threads)
        plan = Plan(lib, threads)
        src, weights = plan.desc(*array_dims(a, axes)), plan.desc(*array_dims(b, axes))
        dst = plan.desc(shape, contiguous_strides(shape, axes))
        slots = [("a", src), ("b", weights), ("c", dst)]
        args = [(capi.ARG_SRC, "a"), (capi.ARG_WEIGHTS, "b"), (capi.ARG_DST, "c")]
        bias_md = None
        if bias is not None:  # broadcast over the rows: dimensions of 1 but the last
            bias_md = plan.desc((1,) * (nd - 1) + shape[-1:], (shape[-1],) * (nd - 1) + (1,))
            slots.append(("bias", bias_md))
            args.append((capi.ARG_BIAS, "bias"))
        attr = plan.attr((("sum",),) * (into is not None) + _epilogue(activation))
        pd = plan.primitive_desc(
            lambda out: lib.dnnl_matmul_primitive_desc_create(
                out, lib.engine, src, weights, bias_md, dst, attr),
            "dnnl_matmul_primitive_desc_create")
        plan.impl = lib.impl_info(pd)
        for name, md in slots:
            plan.slot(name, md)
        plan.step(pd, args)
        return plan

    plan = plans.cached(_key("matmul", threads, *_layout(a), *_layout(b), bias is not None,
                             activation, into is not None), build)
    c = np.empty(shape, np.float32) if into is None else into
    plan.run(a=a, b=b, c=c, **_bias_arg(bias))
    return c


# --- convolution ----------------------------------------------------------------------------
def _forward_hint(plan, lib, src_md, dst_md, weights_shape, g: Geometry):
    """The forward primitive descriptor a backward one is made against."""
    weights = plan.any_desc(weights_shape)
    return plan.primitive_desc(
        lambda out: lib.dnnl_convolution_forward_primitive_desc_create(
            out, lib.engine, capi.FORWARD_TRAINING, capi.CONVOLUTION_DIRECT, src_md, weights,
            None, dst_md, *g.conv_args(), plan.attr()),
        "dnnl_convolution_forward_primitive_desc_create")


def _use_weights(plan: Plan, pd, user_md, query: int, slot: str) -> str:
    """The memory the primitive of ``pd`` reads its weights from: the user's array when its
    layout is the one chosen, else a buffer they are reordered into first."""
    chosen = plan.query(pd, query)
    if plan.same(chosen, user_md):
        return slot
    plan.buffer("weights", chosen)
    plan.reorder(slot, user_md, "weights", chosen)
    return "weights"


def _channels_last(plan: Plan, name: str, user_md, logical_shape, fmt: str) -> tuple:
    """``(memory, desc)`` a convolution reads or writes the data slot ``name`` through: the
    slot itself for NHWC data; for NCHW a channels-last buffer (``_in``/``_out`` below move
    the data), since oneDNN's convolutions for channels-first data are generic ones, slower
    than NumPy's (a 5x5x32x64 conv of a (32, 32, 28, 28) batch: 38.7 ms against 31.1; 21.0
    channels-last, reorders included 23)."""
    if fmt == "NHWC":
        return name, user_md
    md = _new_data_desc(plan, logical_shape, "NHWC")
    plan.buffer(name + "_nhwc", md)
    return name + "_nhwc", md


def _in(plan: Plan, name: str, user_md, memory: str, md) -> None:
    if memory != name:
        plan.reorder(name, user_md, memory, md)


def _out(plan: Plan, name: str, user_md, memory: str, md) -> None:
    if memory != name:
        plan.reorder(memory, md, name, user_md)


def conv2d(lib, threads: int, x: np.ndarray, f: np.ndarray, fmt: str, g: Geometry,
           out_hw: tuple[int, int], bias: np.ndarray | None = None,
           activation: tuple | None = None) -> np.ndarray:
    """Conv2D: ``x`` in ``fmt``, ``f`` HWIO; the output in ``fmt``. With ``bias`` (one value
    per output channel) and ``activation`` (see ``_epilogue``), TF's ``_FusedConv2D``:
    ``activation(conv2d(x, f) + bias)`` in the convolution's own pass over its output."""
    n, c = x.shape[0], x.shape[_DATA_AXES[fmt][1]]
    co = f.shape[3]
    logical_out = (n, co) + tuple(out_hw)
    _check_bias(bias, co)

    def build():
        lib.use_threads(threads)
        plan = Plan(lib, threads)
        user_x, user_w = _data_desc(plan, x, fmt), _filter_desc(plan, f)
        user_y = _new_data_desc(plan, logical_out, fmt)
        x_mem, src = _channels_last(plan, "x", user_x, _logical(x.shape, fmt), fmt)
        y_mem, dst = _channels_last(plan, "y", user_y, logical_out, fmt)
        weights = plan.any_desc((co, c, g.kh, g.kw))
        slots = [("x", user_x), ("f", user_w), ("y", user_y)]
        bias_md = None
        if bias is not None:
            bias_md = plan.desc((co,), (1,))
            slots.append(("bias", bias_md))
        attr = plan.attr(_epilogue(activation))
        pd = plan.primitive_desc(
            lambda out: lib.dnnl_convolution_forward_primitive_desc_create(
                out, lib.engine, capi.FORWARD_INFERENCE, capi.CONVOLUTION_DIRECT, src,
                weights, bias_md, dst, *g.conv_args(), attr),
            "dnnl_convolution_forward_primitive_desc_create")
        plan.impl = lib.impl_info(pd)
        for name, md in slots:
            plan.slot(name, md)
        _in(plan, "x", user_x, x_mem, src)
        w = _use_weights(plan, pd, user_w, capi.QUERY_WEIGHTS_MD, "f")
        args = [(capi.ARG_SRC, x_mem), (capi.ARG_WEIGHTS, w), (capi.ARG_DST, y_mem)]
        if bias is not None:
            args.append((capi.ARG_BIAS, "bias"))
        plan.step(pd, args)
        _out(plan, "y", user_y, y_mem, dst)
        return plan

    plan = plans.cached(_key("conv", fmt, g, threads, *_layout(x), *_layout(f), out_hw,
                             bias is not None, activation), build)
    y = np.empty(_to_layout(logical_out, fmt), np.float32)
    plan.run(x=x, f=f, y=y, **_bias_arg(bias))
    return y


def conv2d_backprop_input(lib, threads: int, input_shape: tuple, f: np.ndarray,
                          dy: np.ndarray, fmt: str, g: Geometry) -> np.ndarray:
    """Conv2DBackpropInput: the gradient (in ``fmt``, of ``input_shape``) of the input."""
    logical_in, logical_out = _logical(input_shape, fmt), _logical(dy.shape, fmt)
    kh, kw, ci, co = f.shape

    def build():
        lib.use_threads(threads)
        plan = Plan(lib, threads)
        user_dx = _new_data_desc(plan, logical_in, fmt)
        user_dy, user_w = _data_desc(plan, dy, fmt), _filter_desc(plan, f)
        dx_mem, diff_src = _channels_last(plan, "dx", user_dx, logical_in, fmt)
        dy_mem, diff_dst = _channels_last(plan, "dy", user_dy, logical_out, fmt)
        hint = _forward_hint(plan, lib, diff_src, diff_dst, (co, ci, kh, kw), g)
        weights = plan.any_desc((co, ci, kh, kw))
        pd = plan.primitive_desc(
            lambda out: lib.dnnl_convolution_backward_data_primitive_desc_create(
                out, lib.engine, capi.CONVOLUTION_DIRECT, diff_src, weights, diff_dst,
                *g.conv_args(), hint, plan.attr()),
            "dnnl_convolution_backward_data_primitive_desc_create")
        plan.impl = lib.impl_info(pd)
        for name, md in (("dx", user_dx), ("f", user_w), ("dy", user_dy)):
            plan.slot(name, md)
        _in(plan, "dy", user_dy, dy_mem, diff_dst)
        w = _use_weights(plan, pd, user_w, capi.QUERY_WEIGHTS_MD, "f")
        plan.step(pd, [(capi.ARG_DIFF_SRC, dx_mem), (capi.ARG_WEIGHTS, w),
                       (capi.ARG_DIFF_DST, dy_mem)])
        _out(plan, "dx", user_dx, dx_mem, diff_src)
        return plan

    plan = plans.cached(_key("conv_bwd_data", fmt, g, threads, tuple(input_shape),
                             *_layout(f), *_layout(dy)), build)
    dx = np.empty(tuple(input_shape), np.float32)
    plan.run(dx=dx, f=f, dy=dy)
    return dx


def conv2d_backprop_filter(lib, threads: int, x: np.ndarray, filter_shape: tuple,
                           dy: np.ndarray, fmt: str, g: Geometry) -> np.ndarray:
    """Conv2DBackpropFilter: the gradient of an HWIO filter of ``filter_shape``."""
    kh, kw, ci, co = filter_shape

    def build():
        lib.use_threads(threads)
        plan = Plan(lib, threads)
        user_x, user_dy = _data_desc(plan, x, fmt), _data_desc(plan, dy, fmt)
        x_mem, src = _channels_last(plan, "x", user_x, _logical(x.shape, fmt), fmt)
        dy_mem, diff_dst = _channels_last(plan, "dy", user_dy, _logical(dy.shape, fmt), fmt)
        user_dw = _new_filter_desc(plan, filter_shape)
        hint = _forward_hint(plan, lib, src, diff_dst, (co, ci, kh, kw), g)
        diff_weights = plan.any_desc((co, ci, kh, kw))
        pd = plan.primitive_desc(
            lambda out: lib.dnnl_convolution_backward_weights_primitive_desc_create(
                out, lib.engine, capi.CONVOLUTION_DIRECT, src, diff_weights, None, diff_dst,
                *g.conv_args(), hint, plan.attr()),
            "dnnl_convolution_backward_weights_primitive_desc_create")
        plan.impl = lib.impl_info(pd)
        for name, md in (("x", user_x), ("dy", user_dy), ("df", user_dw)):
            plan.slot(name, md)
        _in(plan, "x", user_x, x_mem, src)
        _in(plan, "dy", user_dy, dy_mem, diff_dst)
        chosen = plan.query(pd, capi.QUERY_DIFF_WEIGHTS_MD)
        direct = plan.same(chosen, user_dw)
        if not direct:
            plan.buffer("diff_weights", chosen)
        target = "df" if direct else "diff_weights"
        plan.step(pd, [(capi.ARG_SRC, x_mem), (capi.ARG_DIFF_WEIGHTS, target),
                       (capi.ARG_DIFF_DST, dy_mem)])
        if not direct:
            plan.reorder("diff_weights", chosen, "df", user_dw)
        return plan

    plan = plans.cached(_key("conv_bwd_filter", fmt, g, threads, tuple(filter_shape),
                             *_layout(x), *_layout(dy)), build)
    df = np.empty(tuple(filter_shape), np.float32)
    plan.run(x=x, dy=dy, df=df)
    return df


# --- pooling --------------------------------------------------------------------------------
def _pool_args(g: Geometry):
    """oneDNN's (strides, kernel, dilation, padding_l, padding_r) of a pooling window."""
    return (plans.dims((g.sh, g.sw)), plans.dims((g.kh, g.kw)), plans.dims((0, 0)),
            plans.dims((g.pt, g.pl)), plans.dims((g.pb, g.pr)))


def _pool_forward_desc(plan, lib, prop, alg, src, dst, g):
    return plan.primitive_desc(
        lambda out: lib.dnnl_pooling_forward_primitive_desc_create(
            out, lib.engine, prop, alg, src, dst, *_pool_args(g), plan.attr()),
        "dnnl_pooling_forward_primitive_desc_create")


def _alg(kind: str) -> int:
    return capi.POOLING_MAX if kind == "max" else capi.POOLING_AVG_EXCLUDE_PADDING


def pool(lib, threads: int, kind: str, x: np.ndarray, fmt: str, g: Geometry,
         out_hw: tuple[int, int]) -> np.ndarray:
    """MaxPool (``kind`` "max") or AvgPool ("avg": SAME windows average the cells inside the
    input, as TF's) of ``x`` in ``fmt``."""
    logical_out = (x.shape[0], x.shape[_DATA_AXES[fmt][1]]) + tuple(out_hw)

    def build():
        lib.use_threads(threads)
        plan = Plan(lib, threads)
        src, dst = _data_desc(plan, x, fmt), _new_data_desc(plan, logical_out, fmt)
        pd = _pool_forward_desc(plan, lib, capi.FORWARD_INFERENCE, _alg(kind), src, dst, g)
        plan.impl = lib.impl_info(pd)
        plan.slot("x", src)
        plan.slot("y", dst)
        plan.step(pd, [(capi.ARG_SRC, "x"), (capi.ARG_DST, "y")])
        return plan

    plan = plans.cached(_key("pool", kind, fmt, g, threads, *_layout(x), out_hw), build)
    y = np.empty(_to_layout(logical_out, fmt), np.float32)
    plan.run(x=x, y=y)
    return y


def pool_grad(lib, threads: int, kind: str, x_shape: tuple, x: np.ndarray | None,
              g_out: np.ndarray, fmt: str, g: Geometry) -> np.ndarray:
    """MaxPoolGrad (``kind`` "max": the pool of ``x`` is run again to find each window's
    maximum, its first in row-major order as TF's CPU kernel picks, then its gradient routed
    there) or AvgPoolGrad ("avg": ``x`` is not needed) of ``g_out``, for an input of
    ``x_shape`` in ``fmt``."""
    logical_in, logical_out = _logical(x_shape, fmt), _logical(g_out.shape, fmt)

    def build():
        lib.use_threads(threads)
        plan = Plan(lib, threads)
        diff_src = _new_data_desc(plan, logical_in, fmt)
        diff_dst = _data_desc(plan, g_out, fmt)
        src = _data_desc(plan, x, fmt) if kind == "max" else diff_src
        dst = _new_data_desc(plan, logical_out, fmt)
        hint = _pool_forward_desc(plan, lib, capi.FORWARD_TRAINING, _alg(kind), src, dst, g)
        pd = plan.primitive_desc(
            lambda out: lib.dnnl_pooling_backward_primitive_desc_create(
                out, lib.engine, _alg(kind), diff_src, diff_dst, *_pool_args(g), hint,
                plan.attr()),
            "dnnl_pooling_backward_primitive_desc_create")
        plan.impl = lib.impl_info(pd)
        plan.slot("dx", diff_src)
        plan.slot("g", diff_dst)
        backward = [(capi.ARG_DIFF_SRC, "dx"), (capi.ARG_DIFF_DST, "g")]
        if kind == "max":
            plan.slot("x", src)
            plan.buffer("y", dst)
            forward = [(capi.ARG_SRC, "x"), (capi.ARG_DST, "y")]
            if plan.buffer("workspace", plan.query(hint, capi.QUERY_WORKSPACE_MD)):
                forward.append((capi.ARG_WORKSPACE, "workspace"))
                backward.append((capi.ARG_WORKSPACE, "workspace"))
            plan.step(hint, forward)
        plan.step(pd, backward)
        return plan

    x_layout = _layout(x) if kind == "max" else ()
    plan = plans.cached(_key("pool_grad", kind, fmt, g, threads, tuple(x_shape), *x_layout,
                             *_layout(g_out)), build)
    dx = np.empty(tuple(x_shape), np.float32)
    if kind == "max":
        plan.run(x=x, g=g_out, dx=dx)
    else:
        plan.run(g=g_out, dx=dx)
    return dx


# --- batch normalization -----------------------------------------------------------------------
def _bn_flags(training: bool) -> int:
    """Scale and shift given; inference normalises by the given statistics."""
    return capi.USE_SCALE | capi.USE_SHIFT | (0 if training else capi.USE_GLOBAL_STATS)


def _vector(a: np.ndarray) -> np.ndarray:
    if a.dtype != np.float32 or a.ndim != 1:
        raise plans.UnsupportedError("a per-channel vector that is not float32")
    return np.ascontiguousarray(a)


def _bn_forward_desc(plan, lib, prop, training, src, dst, epsilon):
    return plan.primitive_desc(
        lambda out: lib.dnnl_batch_normalization_forward_primitive_desc_create(
            out, lib.engine, prop, src, dst, epsilon, _bn_flags(training), plan.attr()),
        "dnnl_batch_normalization_forward_primitive_desc_create")


def batch_norm(lib, threads: int, x: np.ndarray, scale, offset, mean, variance, fmt: str,
               epsilon: float, training: bool):
    """FusedBatchNorm of ``x`` in ``fmt``: ``(y, mean, variance)``, the batch's statistics
    (the variance biased) when ``training``, else the given ones, which normalise ``x``."""
    logical = _logical(x.shape, fmt)
    c = logical[1]
    vectors = {"scale": _vector(scale), "shift": _vector(offset)}
    if training:
        vectors.update(mean=np.empty(c, np.float32), var=np.empty(c, np.float32))
    else:
        vectors.update(mean=_vector(mean), var=_vector(variance))

    def build():
        lib.use_threads(threads)
        plan = Plan(lib, threads)
        src, dst = _data_desc(plan, x, fmt), _new_data_desc(plan, logical, fmt)
        vec = plan.desc((c,), (1,))
        prop = capi.FORWARD_TRAINING if training else capi.FORWARD_INFERENCE
        pd = _bn_forward_desc(plan, lib, prop, training, src, dst, epsilon)
        plan.impl = lib.impl_info(pd)
        plan.slot("x", src)
        plan.slot("y", dst)
        for name in vectors:
            plan.slot(name, vec)
        plan.step(pd, [(capi.ARG_SRC, "x"), (capi.ARG_DST, "y"), (capi.ARG_SCALE, "scale"),
                       (capi.ARG_SHIFT, "shift"), (capi.ARG_MEAN, "mean"),
                       (capi.ARG_VARIANCE, "var")])
        return plan

    plan = plans.cached(_key("batch_norm", fmt, training, epsilon, threads, *_layout(x)),
                        build)
    y = np.empty(_to_layout(logical, fmt), np.float32)
    plan.run(x=x, y=y, **vectors)
    return y, vectors["mean"], vectors["var"]


def batch_norm_grad(lib, threads: int, dy: np.ndarray, x: np.ndarray, scale, mean, variance,
                    fmt: str, epsilon: float, training: bool):
    """FusedBatchNormGrad: ``(dx, dscale, doffset)`` for ``x`` normalised by ``mean`` and
    the biased ``variance`` (its batch's when ``training``: the statistics' own gradients are
    part of ``dx``; the given population's otherwise)."""
    logical = _logical(x.shape, fmt)
    c = logical[1]
    vectors = {"scale": _vector(scale), "mean": _vector(mean), "var": _vector(variance),
               "dscale": np.empty(c, np.float32), "dshift": np.empty(c, np.float32)}

    def build():
        lib.use_threads(threads)
        plan = Plan(lib, threads)
        src, diff_dst = _data_desc(plan, x, fmt), _data_desc(plan, dy, fmt)
        diff_src = _new_data_desc(plan, logical, fmt)
        vec = plan.desc((c,), (1,))
        hint = _bn_forward_desc(plan, lib, capi.FORWARD_TRAINING, training, src,
                                _new_data_desc(plan, logical, fmt), epsilon)
        pd = plan.primitive_desc(
            lambda out: lib.dnnl_batch_normalization_backward_primitive_desc_create(
                out, lib.engine, capi.BACKWARD, diff_src, diff_dst, src, epsilon,
                _bn_flags(training), hint, plan.attr()),
            "dnnl_batch_normalization_backward_primitive_desc_create")
        plan.impl = lib.impl_info(pd)
        plan.slot("x", src)
        plan.slot("dy", diff_dst)
        plan.slot("dx", diff_src)
        for name in vectors:
            plan.slot(name, vec)
        plan.step(pd, [(capi.ARG_SRC, "x"), (capi.ARG_DIFF_DST, "dy"),
                       (capi.ARG_SCALE, "scale"), (capi.ARG_MEAN, "mean"),
                       (capi.ARG_VARIANCE, "var"), (capi.ARG_DIFF_SRC, "dx"),
                       (capi.ARG_DIFF_SCALE, "dscale"), (capi.ARG_DIFF_SHIFT, "dshift")])
        return plan

    plan = plans.cached(_key("batch_norm_grad", fmt, training, epsilon, threads, *_layout(x),
                             *_layout(dy)), build)
    dx = np.empty(_to_layout(logical, fmt), np.float32)
    plan.run(x=x, dy=dy, dx=dx, **vectors)
    return dx, vectors["dscale"], vectors["dshift"]


# --- the Adam update --------------------------------------------------------------------------
# Elements per block: each block's passes after the first read it from cache (four arrays of
# a megabyte each), and a block's dozen calls through ctypes (about 20 us) stay small beside
# its work. A 3.2M-element update on two cores of an AMD EPYC: 2.9 ms in blocks of 229,376
# elements, 3.2 ms whole (memory-bound), 4.8 ms in blocks of 65,536 (the calls).
ADAM_BLOCK = 1 << 18

_ONE = np.ones(1, np.float32)  # the other operand of an exact copy (x * 1)


def _adam_plan(lib, threads: int, n: int) -> Plan:
    """The Adam update of ``n`` elements: four binary primitives, each with post-ops, that
    compute TF's expressions in ``training_kernels._adam``'s order, one operation at a time
    (the same roundings: the same bits as NumPy's)."""
    plan = Plan(lib, threads)
    vec, one = plan.desc((n,), (1,)), plan.desc((1,), (1,))
    for name in ("grad", "var", "m", "v", "var_out", "m_out", "v_out"):
        plan.slot(name, vec)
    for name in ("one", "c1", "c2", "epsilon", "alpha"):
        plan.slot(name, one)
    plan.buffer("denom", vec)

    def binary(alg, src1, post_ops, args, scaled=()):
        attr = plan.attr(post_ops, scaled)
        pd = plan.primitive_desc(
            lambda out: lib.dnnl_binary_primitive_desc_create(
                out, lib.engine, alg, vec, src1, vec, attr),
            "dnnl_binary_primitive_desc_create")
        plan.impl = plan.impl or lib.impl_info(pd)
        plan.step(pd, args)

    post = capi.arg_post_op
    src0, src1, dst = capi.ARG_SRC_0, capi.ARG_SRC_1, capi.ARG_DST
    # m_out = (grad - m) * (1 - beta1) + m
    binary(capi.BINARY_SUB, vec, [("binary", capi.BINARY_MUL, one),
                                  ("binary", capi.BINARY_ADD, vec)],
           [(src0, "grad"), (src1, "m"), (post(0, src1), "c1"), (post(1, src1), "m"),
            (dst, "m_out")])
    # v_out = (grad * grad - v) * (1 - beta2) + v
    binary(capi.BINARY_MUL, vec, [("binary", capi.BINARY_SUB, vec),
                                  ("binary", capi.BINARY_MUL, one),
                                  ("binary", capi.BINARY_ADD, vec)],
           [(src0, "grad"), (src1, "grad"), (post(0, src1), "v"), (post(1, src1), "c2"),
            (post(2, src1), "v"), (dst, "v_out")])
    # denom = sqrt(v_out) + epsilon (an eltwise primitive with post-ops is oneDNN's
    # reference one: a product by one is the fast way to a chain starting with a sqrt)
    binary(capi.BINARY_MUL, one, [("eltwise", capi.ELTWISE_SQRT, 0.0, 0.0),
                                  ("binary", capi.BINARY_ADD, one)],
           [(src0, "v_out"), (src1, "one"), (post(1, src1), "epsilon"), (dst, "denom")])
    # var_out = var - m_out * alpha / denom, as -((m_out * alpha / denom) - var): exact
    binary(capi.BINARY_DIV, vec, [("binary", capi.BINARY_SUB, vec),
                                  ("eltwise", capi.ELTWISE_LINEAR, -1.0, 0.0)],
           [(src0, "m_out"), (src1, "denom"), (capi.ARG_ATTR_SCALES | src0, "alpha"),
            (post(0, src1), "var"), (dst, "var_out")], scaled=[src0])
    return plan


def adam(lib, threads: int, arrays, grad: np.ndarray, outs, consts) -> None:
    """ApplyAdam (without Nesterov) of the flat float32 arrays ``arrays`` (var, m, v) and
    ``grad`` into ``outs``, which may be ``arrays`` themselves (each element is read before
    it is written), block by block on the calling thread, each block's primitives on
    ``threads`` threads. ``consts``: (1 - beta1, 1 - beta2, epsilon, alpha) as
    ``training_kernels._adam_constants`` computes them."""
    flat = [*arrays, grad, *outs]
    if any(a.dtype != np.float32 or a.ndim != 1 or not a.flags.c_contiguous
           or a.shape != grad.shape for a in flat) or not grad.size:
        raise plans.UnsupportedError("not flat contiguous float32 arrays of one size")
    (var, m, v), (var_out, m_out, v_out) = arrays, outs
    c1, c2, epsilon, alpha = (np.full(1, c, np.float32) for c in consts)
    n = grad.size
    lib.use_threads(threads)
    for lo in range(0, n, ADAM_BLOCK):
        hi = min(lo + ADAM_BLOCK, n)
        plan = plans.cached(_key("adam", threads, hi - lo),
                            lambda: _adam_plan(lib, threads, hi - lo))  # noqa: B023
        plan.run(grad=grad[lo:hi], var=var[lo:hi], m=m[lo:hi], v=v[lo:hi],
                 var_out=var_out[lo:hi], m_out=m_out[lo:hi], v_out=v_out[lo:hi], one=_ONE,
                 c1=c1, c2=c2, epsilon=epsilon, alpha=alpha)
