"""Kernels of ``dflab.ops.conv_nd_ops`` (3-D convolution and pooling, depthwise 2-D
convolution, the generic ``Conv`` of ``tf.conv``) and ``dflab.ops.morphology_ops``
(``MaxPoolWithArgmax``, ``Dilation2D``), written once against the device's ``xp`` for any
number of spatial dimensions.

Layout: kernels compute channels-last (``N, spatial..., C``) and transpose channels-first data
at the boundary; inputs are never written to. A convolution is im2col (the padded input viewed
as its windows with ``as_strided``, copied once) and one matrix product; its input gradient
scatters the patch gradients back tap by tap (col2im, one slice-add per window position).
The depthwise convolution and the pools work tap by tap: each window position is one strided
slice of the padded input. The max-pool gradient routes each window's gradient to its first
maximal cell in window order (TF's CPU tie-break); argmax pooling and dilation keep the first
strictly greater tap the same way, over the taps inside the unpadded input.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host
from dflab.kernels.registry import kernel
from dflab.ops import morphology_ops  # noqa: F401 - the schemas of the ops below
from dflab.ops.conv_nd_ops import conv_geometry, generic_conv_layout, split_dims


class WindowND:
    """Geometry of one conv/pool op over channels-last data with ``len(sizes)`` spatial
    dimensions, and the window steps built on it (``xp``: the device's namespace)."""

    def __init__(self, xp, sizes, ksizes, strides, dilations, padding, explicit=None):
        self.xp = xp
        self.k, self.s, self.d = list(ksizes), list(strides), list(dilations)
        geo = conv_geometry(sizes, ksizes, strides, dilations, padding, explicit)
        self.out = [g[0] for g in geo]
        self.lo = [g[1] for g in geo]
        self.hi = [g[2] for g in geo]

    @property
    def empty_output(self) -> bool:
        return any(o == 0 for o in self.out)

    def pad(self, x, value=0):
        if not any(self.lo) and not any(self.hi):
            return x
        pads = ((0, 0), *zip(self.lo, self.hi), (0, 0))
        return self.xp.pad(x, pads, constant_values=value)

    def padded_shape(self, shape):
        n, *sp, c = shape
        return (n, *(s + lo + hi for s, lo, hi in zip(sp, self.lo, self.hi)), c)

    def windows(self, padded):
        """``padded`` viewed as its (N, O..., K..., C) windows; no copy."""
        st = padded.strides
        inner = st[1:-1]
        shape = (padded.shape[0], *self.out, *self.k, padded.shape[-1])
        strides = (st[0], *(t * s for t, s in zip(inner, self.s)),
                   *(t * d for t, d in zip(inner, self.d)), st[-1])
        return self.xp.lib.stride_tricks.as_strided(padded, shape=shape, strides=strides)

    def tap(self, padded, idx):
        """The (N, O..., C) slice of ``padded`` that window position ``idx`` reads."""
        sl = tuple(slice(i * d, i * d + s * (o - 1) + 1, s)
                   for i, d, s, o in zip(idx, self.d, self.s, self.out))
        return padded[(slice(None), *sl, slice(None))]

    def taps(self):
        return itertools.product(*(range(k) for k in self.k))

    def crop(self, padded, sizes):
        sl = tuple(slice(lo, lo + n) for lo, n in zip(self.lo, sizes))
        return padded[(slice(None), *sl, slice(None))]


# --- layout -----------------------------------------------------------------------------------
def _to_last(x, fmt):
    if fmt.endswith("C"):
        return x
    r = x.ndim
    return x.transpose(0, *range(2, r), 1)


def _from_last(x, fmt):
    if fmt.endswith("C"):
        return x
    r = x.ndim
    return x.transpose(0, r - 1, *range(1, r - 1))


def _last_shape(dims, fmt):
    n, sp, c = split_dims(list(dims), fmt)
    return (n, *sp, c)


def _sizes(v):
    return [int(d) for d in np.ravel(host(v))]  # a sizes input lives on the host, as in TF


def _spatial(node, name):
    return split_dims(list(node.attr[name]), node.attr["data_format"])[1]


def _window(node, xp, sizes, ksizes, dilations=None):
    a = node.attr
    dil = dilations if dilations is not None else _spatial(node, "dilations")
    try:
        return WindowND(xp, sizes, ksizes, _spatial(node, "strides"), dil, a["padding"])
    except ValueError as e:
        raise errors.InvalidArgumentError(None, node, str(e)) from None


def _check_rank(xp, node, rank, **arrays):
    for nm, a in arrays.items():
        if xp.ndim(a) != rank:
            raise errors.InvalidArgumentError(None, node, f"{nm} must be {rank}-dimensional, "
                                              f"got shape {list(xp.shape(a))}")


def _disagree(node, **shapes):
    parts = ", ".join(f"{k} {list(v)}" for k, v in shapes.items())
    return errors.InvalidArgumentError(None, node, f"{node.op}: shapes do not agree: {parts} "
                                       "(channels last)")


# --- dense N-d convolution --------------------------------------------------------------------
def _patches(win, x):
    """(N*prod(O), prod(K)*C) im2col matrix of channels-last ``x``."""
    rows = x.shape[0] * math.prod(win.out)
    cols = math.prod(win.k) * x.shape[-1]
    if rows == 0 or cols == 0:
        return win.xp.zeros((rows, cols), dtype=x.dtype)
    return win.xp.ascontiguousarray(win.windows(win.pad(x))).reshape(rows, cols)


def _col2im(win, cols, shape):
    """Sum the (N, O..., K..., C) patch gradients ``cols`` back into a ``shape`` input."""
    xp = win.xp
    out = xp.zeros(win.padded_shape(shape), dtype=cols.dtype)
    nsp = len(win.k)
    for idx in win.taps():
        sel = (slice(None),) * (1 + nsp) + tuple(idx)
        win.tap(out, idx)[...] += cols[sel]
    return win.crop(out, shape[1:-1])


@kernel("Conv3D")
def _conv3d(node, ctx):
    fmt, xp = node.attr["data_format"], ctx.xp

    def conv3d(x, f):
        _check_rank(xp, node, 5, input=x, filter=f)
        x = _to_last(xp.asarray(x), fmt)
        *ks, ci, co = f.shape
        if x.shape[-1] != ci:
            raise errors.InvalidArgumentError(
                None, node, f"input depth must equal filter depth: {x.shape[-1]} vs {ci}")
        win = _window(node, xp, x.shape[1:-1], ks)
        y = _patches(win, x) @ xp.reshape(f, (-1, co))
        return _from_last(y.reshape(x.shape[0], *win.out, co), fmt)

    return conv3d


@kernel("Conv3DBackpropInputV2", host_memory_inputs=(0,))
def _conv3d_backprop_input(node, ctx):
    fmt, xp = node.attr["data_format"], ctx.xp

    def backprop_input(sizes, f, dy):
        _check_rank(xp, node, 5, filter=f, out_backprop=dy)
        shape = _last_shape(_sizes(sizes), fmt)
        dy = _to_last(xp.asarray(dy), fmt)
        *ks, ci, co = f.shape
        win = _window(node, xp, shape[1:-1], ks)
        if dy.shape != (shape[0], *win.out, co) or ci != shape[-1]:
            raise _disagree(node, input=shape, filter=f.shape, out_backprop=dy.shape)
        cols = dy.reshape(-1, co) @ xp.reshape(f, (-1, co)).T
        cols = cols.reshape(shape[0], *win.out, *ks, ci)
        return _from_last(xp.ascontiguousarray(_col2im(win, cols, shape)), fmt)

    return backprop_input


@kernel("Conv3DBackpropFilterV2", host_memory_inputs=(1,))
def _conv3d_backprop_filter(node, ctx):
    fmt, xp = node.attr["data_format"], ctx.xp

    def backprop_filter(x, sizes, dy):
        _check_rank(xp, node, 5, input=x, out_backprop=dy)
        fshape = tuple(_sizes(sizes))
        *ks, ci, co = fshape
        x = _to_last(xp.asarray(x), fmt)
        dy = _to_last(xp.asarray(dy), fmt)
        win = _window(node, xp, x.shape[1:-1], ks)
        if dy.shape != (x.shape[0], *win.out, co) or ci != x.shape[-1]:
            raise _disagree(node, input=x.shape, filter=fshape, out_backprop=dy.shape)
        return (_patches(win, x).T @ dy.reshape(-1, co)).reshape(fshape)

    return backprop_filter


# --- depthwise 2-D convolution ----------------------------------------------------------------
def _depthwise_check(node, shape, fshape, dy_shape, win):
    if win.s[0] != win.s[1]:
        raise errors.InvalidArgumentError(
            None, node, "Current implementation only supports equal length strides in the "
            "row and column dimensions.")
    n, h, w, c = shape
    kh, kw, ci, m = fshape
    if ci != c or (dy_shape is not None and tuple(dy_shape) != (n, *win.out, c * m)):
        raise _disagree(node, input=shape, filter=fshape, out_backprop=dy_shape or ())


@kernel("DepthwiseConv2dNative")
def _depthwise(node, ctx):
    fmt, xp = node.attr["data_format"], ctx.xp

    def depthwise(x, f):
        _check_rank(xp, node, 4, input=x, filter=f)
        x = _to_last(xp.asarray(x), fmt)
        kh, kw, c, m = f.shape
        win = _window(node, xp, x.shape[1:3], (kh, kw))
        _depthwise_check(node, x.shape, f.shape, None, win)
        y = xp.zeros((x.shape[0], *win.out, c, m), dtype=xp.result_type(x, f))
        padded = win.pad(x)
        for i, j in win.taps():
            y += win.tap(padded, (i, j))[..., None] * f[i, j]
        return _from_last(y.reshape(x.shape[0], *win.out, c * m), fmt)

    return depthwise


@kernel("DepthwiseConv2dNativeBackpropInput", host_memory_inputs=(0,))
def _depthwise_backprop_input(node, ctx):
    fmt, xp = node.attr["data_format"], ctx.xp

    def backprop_input(sizes, f, dy):
        _check_rank(xp, node, 4, filter=f, out_backprop=dy)
        shape = _last_shape(_sizes(sizes), fmt)
        dy = _to_last(xp.asarray(dy), fmt)
        kh, kw, c, m = f.shape
        win = _window(node, xp, shape[1:3], (kh, kw))
        _depthwise_check(node, shape, f.shape, dy.shape, win)
        dy = dy.reshape(*dy.shape[:3], c, m)
        out = xp.zeros(win.padded_shape(shape), dtype=xp.result_type(dy, f))
        for i, j in win.taps():
            win.tap(out, (i, j))[...] += (dy * f[i, j]).sum(axis=-1)
        return _from_last(xp.ascontiguousarray(win.crop(out, shape[1:3])), fmt)

    return backprop_input


@kernel("DepthwiseConv2dNativeBackpropFilter", host_memory_inputs=(1,))
def _depthwise_backprop_filter(node, ctx):
    fmt, xp = node.attr["data_format"], ctx.xp

    def backprop_filter(x, sizes, dy):
        _check_rank(xp, node, 4, input=x, out_backprop=dy)
        fshape = tuple(_sizes(sizes))
        kh, kw, c, m = fshape
        x = _to_last(xp.asarray(x), fmt)
        dy = _to_last(xp.asarray(dy), fmt)
        win = _window(node, xp, x.shape[1:3], (kh, kw))
        _depthwise_check(node, x.shape, fshape, dy.shape, win)
        dy = dy.reshape(-1, c, m)
        padded = win.pad(x)
        df = xp.zeros(fshape, dtype=xp.result_type(x, dy))
        for i, j in win.taps():
            df[i, j] = (win.tap(padded, (i, j)).reshape(-1, c)[:, :, None] * dy).sum(axis=0)
        return df

    return backprop_filter


# --- 3-D pooling ------------------------------------------------------------------------------
def _pool_window(node, xp, sizes):
    return _window(node, xp, sizes, _spatial(node, "ksize"), dilations=[1] * len(sizes))


def _lowest(dt):
    return -np.inf if dt.kind == "f" else np.iinfo(dt).min


def max_taps(win, padded):
    """The maximum over the window taps, an (N, O..., C) array."""
    xp = win.xp
    taps = win.taps()
    out = xp.array(win.tap(padded, next(taps)))
    for idx in taps:
        xp.maximum(out, win.tap(padded, idx), out=out)
    return out


def avg_counts(win, sizes):
    """Cells of each window inside the unpadded input (padding is not counted, as in TF);
    window geometry only, computed on the host."""
    total = np.ones((), dtype=np.int64)
    for o, k, s, lo, n in zip(win.out, win.k, win.s, win.lo, sizes):
        start = np.arange(o) * s - lo
        cnt = np.minimum(start + k, n) - np.maximum(start, 0)
        total = np.multiply.outer(total, cnt)
    return total


def _empty(xp, win, x):
    return xp.zeros((x.shape[0], *win.out, x.shape[-1]), x.dtype)


@kernel("MaxPool3D")
def _max_pool3d(node, ctx):
    fmt, xp = node.attr["data_format"], ctx.xp

    def max_pool3d(x):
        _check_rank(xp, node, 5, input=x)
        x = _to_last(xp.asarray(x), fmt)
        win = _pool_window(node, xp, x.shape[1:-1])
        if win.empty_output or x.size == 0:
            return _from_last(_empty(xp, win, x), fmt)
        return _from_last(max_taps(win, win.pad(x, _lowest(x.dtype))), fmt)

    return max_pool3d


@kernel("AvgPool3D")
def _avg_pool3d(node, ctx):
    fmt, xp = node.attr["data_format"], ctx.xp

    def avg_pool3d(x):
        _check_rank(xp, node, 5, input=x)
        x = _to_last(xp.asarray(x), fmt)
        win = _pool_window(node, xp, x.shape[1:-1])
        if win.empty_output or x.size == 0:
            return _from_last(_empty(xp, win, x), fmt)
        padded = win.pad(x)
        taps = win.taps()
        s = xp.array(win.tap(padded, next(taps)))
        for idx in taps:
            s += win.tap(padded, idx)
        counts = xp.asarray(avg_counts(win, x.shape[1:-1]).astype(x.dtype))
        return _from_last((s / counts[None, ..., None]).astype(x.dtype), fmt)

    return avg_pool3d


def route_to_max(win, padded, y, g):
    """Each window's ``g`` added to the padded cell of its first maximum (``y``)."""
    xp = win.xp
    out = xp.zeros(padded.shape, dtype=g.dtype)
    taken = xp.zeros(y.shape, dtype=bool)
    zero = xp.zeros((), dtype=g.dtype)
    for idx in win.taps():
        hit = (win.tap(padded, idx) == y) & ~taken
        win.tap(out, idx)[...] += xp.where(hit, g, zero)
        taken |= hit
    return out


@kernel("MaxPool3DGrad")
def _max_pool3d_grad(node, ctx):
    fmt, xp = node.attr["data_format"], ctx.xp

    def max_pool3d_grad(x, y, g):
        _check_rank(xp, node, 5, orig_input=x, orig_output=y, grad=g)
        x, y, g = (_to_last(xp.asarray(a), fmt) for a in (x, y, g))
        win = _pool_window(node, xp, x.shape[1:-1])
        if g.shape != (x.shape[0], *win.out, x.shape[-1]) or y.shape != g.shape:
            raise _disagree(node, orig_input=x.shape, orig_output=y.shape, grad=g.shape)
        if x.size == 0 or win.empty_output:
            return _from_last(xp.zeros(x.shape, g.dtype), fmt)
        out = route_to_max(win, win.pad(x, _lowest(x.dtype)), y, g)
        return _from_last(xp.ascontiguousarray(win.crop(out, x.shape[1:-1])), fmt)

    return max_pool3d_grad


@kernel("AvgPool3DGrad", host_memory_inputs=(0,))
def _avg_pool3d_grad(node, ctx):
    fmt, xp = node.attr["data_format"], ctx.xp

    def avg_pool3d_grad(sizes, g):
        _check_rank(xp, node, 5, grad=g)
        shape = _last_shape(_sizes(sizes), fmt)
        g = _to_last(xp.asarray(g), fmt)
        win = _pool_window(node, xp, shape[1:-1])
        if g.shape != (shape[0], *win.out, shape[-1]):
            raise _disagree(node, orig_input_shape=shape, grad=g.shape)
        out = xp.zeros(win.padded_shape(shape), dtype=g.dtype)
        if g.size:
            counts = xp.asarray(avg_counts(win, shape[1:-1]).astype(g.dtype))
            share = g / counts[None, ..., None]
            for idx in win.taps():
                win.tap(out, idx)[...] += share
        return _from_last(xp.ascontiguousarray(win.crop(out, shape[1:-1])), fmt)

    return avg_pool3d_grad


# --- one cell per window: MaxPoolWithArgmax, Dilation2D ---------------------------------------
def _nhwc_window(node, xp, x, ksizes, rates_attr=None):
    a = node.attr
    st = a["strides"][1:3]
    dil = a[rates_attr][1:3] if rates_attr else (1, 1)
    try:
        return WindowND(xp, x.shape[1:3], ksizes, st, dil, a["padding"])
    except ValueError as e:
        raise errors.InvalidArgumentError(None, node, str(e)) from None


def _tap_rows_cols(win, idx):
    """The unpadded (row, column) each output cell reads at window position ``idx``: two
    host arrays of shape (OH, 1) and (1, OW)."""
    rows = np.arange(win.out[0]) * win.s[0] + idx[0] * win.d[0] - win.lo[0]
    cols = np.arange(win.out[1]) * win.s[1] + idx[1] * win.d[1] - win.lo[1]
    return rows[:, None], cols[None, :]


def _first_best(win, padded, shape, add=None):
    """(best value, winning tap number) per output cell over the taps that fall inside the
    unpadded ``shape`` (N, H, W, C); a later tap wins only if strictly greater (TF's CPU
    order). ``add(t, idx)`` is added to each tap's values (the dilation's filter)."""
    xp = win.xp
    n, h, w, c = shape
    dt = padded.dtype
    low = np.finfo(dt).min if dt.kind == "f" else np.iinfo(dt).min
    best = xp.full((n, *win.out, c), low, dtype=dt)
    arg = xp.zeros((n, *win.out, c), dtype=np.int64)
    for t, idx in enumerate(win.taps()):
        r, q = _tap_rows_cols(win, idx)
        inside = xp.asarray(((r >= 0) & (r < h) & (q >= 0) & (q < w))[None, :, :, None])
        v = win.tap(padded, idx)
        if add is not None:
            v = v + add(idx)
        better = inside & (v > best)
        best = xp.where(better, v, best)
        arg = xp.where(better, t, arg)
    return best, arg


@kernel("MaxPoolWithArgmax")
def _max_pool_with_argmax(node, ctx):
    xp = ctx.xp
    out_type = node.attr["Targmax"].as_numpy_dtype
    with_batch = node.attr["include_batch_in_index"]

    def max_pool_with_argmax(x):
        _check_rank(xp, node, 4, input=x)
        x = xp.asarray(x)
        n, h, w, c = x.shape
        win = _nhwc_window(node, xp, x, node.attr["ksize"][1:3])
        best, arg = _first_best(win, win.pad(x), x.shape)
        # The winning tap's flat input index, computed per tap on the host.
        index = xp.zeros(arg.shape, dtype=np.int64)
        chan = np.arange(c)[None, None, :]
        for t, idx in enumerate(win.taps()):
            r, q = _tap_rows_cols(win, idx)
            flat = xp.asarray(((r * w + q)[:, :, None] * c + chan)[None])
            index = xp.where(arg == t, flat, index)
        if with_batch:
            index = index + xp.asarray(np.arange(n) * (h * w * c))[:, None, None, None]
        return best, index.astype(out_type)

    return max_pool_with_argmax


@kernel("MaxPoolGradWithArgmax")
def _max_pool_grad_with_argmax(node, ctx):
    xp = ctx.xp
    with_batch = node.attr["include_batch_in_index"]

    def max_pool_grad_with_argmax(x, g, argmax):
        _check_rank(xp, node, 4, input=x, grad=g, argmax=argmax)
        n = x.shape[0]
        per_image = math.prod(x.shape[1:])
        idx = xp.asarray(argmax).astype(np.int64)
        if not with_batch:
            idx = idx + xp.asarray(np.arange(n) * per_image)[:, None, None, None]
        if idx.size and (bool((idx < 0).any()) or bool((idx >= n * per_image).any())):
            raise errors.InvalidArgumentError(None, node, "Invalid argmax: an index is out of "
                                              "the input's range")
        dx = xp.zeros(n * per_image, dtype=g.dtype)
        xp.add.at(dx, idx.ravel(), xp.asarray(g).ravel())
        return dx.reshape(x.shape)

    return max_pool_grad_with_argmax


def _dilation(node, ctx, x, f):
    xp = ctx.xp
    _check_rank(xp, node, 4, input=x)
    _check_rank(xp, node, 3, filter=f)
    x, f = xp.asarray(x), xp.asarray(f)
    if x.shape[3] != f.shape[2]:
        raise errors.InvalidArgumentError(None, node, f"input depth {x.shape[3]} != filter "
                                          f"depth {f.shape[2]}")
    win = _nhwc_window(node, xp, x, f.shape[:2], "rates")
    best, arg = _first_best(win, win.pad(x), x.shape, add=lambda idx: f[idx])
    return win, best, arg


@kernel("Dilation2D")
def _dilation2d(node, ctx):
    def dilation2d(x, f):
        return _dilation(node, ctx, x, f)[1]

    return dilation2d


def _check_dilation_grad(node, win, best, g):
    if g.shape != best.shape:
        raise errors.InvalidArgumentError(None, node, f"out_backprop shape {list(g.shape)} "
                                          f"does not match the output shape {list(best.shape)}")


@kernel("Dilation2DBackpropInput")
def _dilation2d_backprop_input(node, ctx):
    xp = ctx.xp

    def backprop_input(x, f, g):
        win, best, arg = _dilation(node, ctx, x, f)
        _check_dilation_grad(node, win, best, g)
        out = xp.zeros(win.padded_shape(x.shape), dtype=g.dtype)
        zero = xp.zeros((), dtype=g.dtype)
        for t, idx in enumerate(win.taps()):
            win.tap(out, idx)[...] += xp.where(arg == t, g, zero)
        return xp.ascontiguousarray(win.crop(out, x.shape[1:3]))

    return backprop_input


@kernel("Dilation2DBackpropFilter")
def _dilation2d_backprop_filter(node, ctx):
    xp = ctx.xp

    def backprop_filter(x, f, g):
        win, best, arg = _dilation(node, ctx, x, f)
        _check_dilation_grad(node, win, best, g)
        df = xp.zeros(f.shape, dtype=g.dtype)
        zero = xp.zeros((), dtype=g.dtype)
        for t, idx in enumerate(win.taps()):
            df[idx] = xp.where(arg == t, g, zero).sum(axis=(0, 1, 2))
        return df

    return backprop_filter


# --- Conv (tf.conv): any batch dims, 2 or 3 spatial dims, groups, EXPLICIT padding ------------
class _AttrView:
    def __init__(self, node):
        self._attr = node.attr

    def get_attr(self, name):
        return self._attr[name]


@kernel("Conv")
def _generic_conv(node, ctx):
    xp = ctx.xp
    groups = node.attr["groups"]

    def conv(x, f):
        x = xp.asarray(x)
        try:
            nsp, bd, last, st, dil, pairs = generic_conv_layout(_AttrView(node), x.ndim)
        except ValueError as e:
            raise errors.InvalidArgumentError(None, node, str(e)) from None
        _check_rank(xp, node, nsp + 2, filter=f)
        lead = x.shape[:bd]
        x = x.reshape((-1, *x.shape[bd:]))
        if not last:
            x = _to_last(x, "NCHW")  # any channels-first format: channels to the end
        *ks, ci, co = f.shape
        c = x.shape[-1]
        if ci * groups != c or co % groups:
            raise errors.InvalidArgumentError(
                None, node, f"input depth {c} must be the filter's input depth {ci} times "
                f"groups {groups}, and the output depth {co} a multiple of groups")
        try:
            win = WindowND(xp, x.shape[1:-1], ks, st, dil, node.attr["padding"], pairs)
        except ValueError as e:
            raise errors.InvalidArgumentError(None, node, str(e)) from None
        cog = co // groups
        parts = []
        for g in range(groups):
            xg = x[..., g * ci:(g + 1) * ci]
            fg = xp.reshape(f[..., g * cog:(g + 1) * cog], (-1, cog))
            parts.append((_patches(win, xg) @ fg).reshape(x.shape[0], *win.out, cog))
        y = parts[0] if groups == 1 else xp.concatenate(parts, axis=-1)
        if not last:
            y = _from_last(y, "NCHW")
        return xp.ascontiguousarray(y).reshape((*lead, *y.shape[1:]))

    return conv
