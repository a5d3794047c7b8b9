"""Convolution and pooling kernels (Conv2D and its two backprops, MaxPool, AvgPool and their
gradients), written against the device's array namespace ``xp`` (NumPy on CPUs, CuPy on GPUs).

Layout: kernels compute in NHWC and transpose NCHW data at the boundary. Inputs are never
written to.

Convolution is im2col plus one matrix product. The padded input is viewed (no copy) as its
windows in ``(N, OH, OW, KH, KW, C)`` order with ``as_strided`` (NumPy and CuPy both have it),
and that view is copied once into a preallocated patch matrix ``[N*OH*OW, KH*KW*C]``:
``copyto`` into an empty buffer walks the view several times faster than ``reshape`` does.
The product with the filter is one GEMM (BLAS on a CPU); with intra-op threads configured,
the batch is split into one chunk per thread, each with its own im2col and GEMM
(``intra_op``). The filter gradient is the transposed product of the same patch matrix with the
output gradient. The input gradient of a stride-1 convolution is itself a stride-1 convolution
(of the output gradient, padded, with the filter flipped and its channel axes swapped), so it
reuses the same im2col + GEMM path; only strided convolutions scatter patch columns back
(col2im), one slice-add per filter tap.

Pooling works tap by tap: each of the ``KH*KW`` window positions is one strided slice of the
padded input, so a pool is ``KH*KW`` elementwise ``maximum``/``add`` passes into one output
buffer instead of a reduction over a 6-d strided view, and the max-pool gradient routes each
window's gradient to its first maximal tap (TF's CPU tie-break, row-major window order) with
one masked slice-add per tap, never ``add.at`` or ``bincount``; on the host it works on blocks
of images small enough for those passes to stay in cache, split among the intra-op threads.
The common 2x2, stride-2 window has its own host path: two pairwise choices (left or right
cell of each row, then upper or lower row) instead of four taps, most of it in long
contiguous loops (``_route_2x2``).
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels import intra_op, onednn
from dflab.kernels.context import host
from dflab.kernels.registry import kernel
from dflab.ops.conv_ops import conv_output_size


# --- window geometry ------------------------------------------------------------------------
class _Window:
    """Spatial geometry of one conv/pool op for a given input size (all NHWC), and the window
    steps built on it, computed with the device's namespace ``xp`` (on the host, big ones
    split among the intra-op ``pool``'s threads)."""

    __slots__ = ("xp", "pool", "kh", "kw", "sh", "sw", "dh", "dw", "oh", "ow", "pt", "pb", "pl",
                 "pr")

    def __init__(self, xp, h, w, kh, kw, sh, sw, dh, dw, padding,
                 pool: intra_op.IntraOpPool = intra_op.SERIAL):
        self.xp = xp
        self.pool = pool  # the intra-op threads a host op of this window splits among
        self.kh, self.kw, self.sh, self.sw, self.dh, self.dw = kh, kw, sh, sw, dh, dw
        self.oh, self.pt, self.pb = conv_output_size(h, kh, sh, dh, padding)
        self.ow, self.pl, self.pr = conv_output_size(w, kw, sw, dw, padding)

    @property
    def empty_output(self) -> bool:
        return self.oh == 0 or self.ow == 0

    def pad(self, x, value=0):
        if not (self.pt or self.pb or self.pl or self.pr):
            return x
        return self.xp.pad(x, ((0, 0), (self.pt, self.pb), (self.pl, self.pr), (0, 0)),
                           constant_values=value)

    def padded_shape(self, n, h, w, c):
        return (n, h + self.pt + self.pb, w + self.pl + self.pr, c)

    def windows(self, padded):
        """View of ``padded`` (this window's padded NHWC input) as its (N, OH, OW, KH, KW, C)
        windows, strided by the stride and dilation; no copy."""
        # The view stays inside ``padded``: the output size rule makes the last window end at
        # or before its last row and column.
        n, _, _, c = padded.shape
        s_n, s_h, s_w, s_c = padded.strides
        return self.xp.lib.stride_tricks.as_strided(
            padded, shape=(n, self.oh, self.ow, self.kh, self.kw, c),
            strides=(s_n, s_h * self.sh, s_w * self.sw, s_h * self.dh, s_w * self.dw, s_c))

    def tap(self, padded, i, j):
        """The (N, OH, OW, C) slice of ``padded`` that window position (i, j) reads."""
        r, c = i * self.dh, j * self.dw
        return padded[:, r:r + self.sh * (self.oh - 1) + 1:self.sh,
                      c:c + self.sw * (self.ow - 1) + 1:self.sw, :]

    def taps(self):
        return ((i, j) for i in range(self.kh) for j in range(self.kw))

    def crop(self, padded, h, w):
        return padded[:, self.pt:self.pt + h, self.pl:self.pl + w, :]


def _hw(vals, fmt):
    return (vals[1], vals[2]) if fmt == "NHWC" else (vals[2], vals[3])


def _to_nhwc(x, fmt):
    return x if fmt == "NHWC" else x.transpose(0, 2, 3, 1)


def _from_nhwc(x, fmt):
    return x if fmt == "NHWC" else x.transpose(0, 3, 1, 2)


def _nhwc_shape(shape, fmt):
    """A sizes input (host-side, as TF keeps it) as an NHWC shape."""
    s = [int(d) for d in np.ravel(host(shape))]
    return tuple(s) if fmt == "NHWC" else (s[0], s[2], s[3], s[1])


def _conv_params(node):
    a = node.attr
    fmt = a["data_format"]
    return fmt, _hw(a["strides"], fmt), _hw(a["dilations"], fmt), a["padding"]


def _window(node, ctx, h, w, kh, kw):
    fmt, (sh, sw), (dh, dw), padding = _conv_params(node)
    try:
        return _Window(ctx.xp, h, w, kh, kw, sh, sw, dh, dw, padding, ctx.intra_op)
    except ValueError as e:
        raise errors.InvalidArgumentError(None, node, str(e)) from None


def _check_rank4(xp, node, **arrays):
    for nm, a in arrays.items():
        if xp.ndim(a) != 4:
            raise errors.InvalidArgumentError(None, node, f"{nm} must be 4-dimensional, got "
                                              f"shape {list(xp.shape(a))}")


# --- im2col and col2im ----------------------------------------------------------------------
# Host im2col works on blocks of images whose patch matrix is about this big, reusing one
# buffer: a whole batch's patch matrix (tens of MB) is written and read back from memory,
# while a block's stays in cache and its buffer is not faulted in afresh on every call.
_BLOCK_BYTES = 4 << 20


def _patch_matrix(win, x, out=None):
    """(N*OH*OW, KH*KW*C) im2col matrix of NHWC ``x``, in the filter's (KH, KW, C) order;
    written into ``out`` (a buffer of at least that many elements) when given."""
    xp = win.xp
    n, c = x.shape[0], x.shape[3]
    rows, cols = n * win.oh * win.ow, win.kh * win.kw * c
    if rows == 0:
        return xp.zeros((rows, cols), dtype=x.dtype)
    shape = (n, win.oh, win.ow, win.kh, win.kw, c)
    if out is None:
        patches = xp.empty(shape, dtype=x.dtype)
    else:
        patches = out.ravel()[:rows * cols].reshape(shape)
    xp.copyto(patches, win.windows(win.pad(x)))
    return patches.reshape(rows, cols)


def _patch_blocks(win, x, lo, hi):
    """(start, end, patch matrix of images start..end) over ``x[lo:hi]``, in blocks of about
    ``_BLOCK_BYTES`` sharing one buffer on the host (one block on other devices)."""
    xp = win.xp
    per_image = win.oh * win.ow * win.kh * win.kw * x.shape[3]
    step = hi - lo
    if xp is np and per_image:
        step = max(1, min(step, _BLOCK_BYTES // (per_image * x.dtype.itemsize)))
    buf = xp.empty(step * per_image, dtype=x.dtype) if step < hi - lo else None
    for s in range(lo, hi, max(step, 1)):
        e = min(s + step, hi)
        yield s, e, _patch_matrix(win, x[s:e], buf)


def _correlate(win, x, f2d, co):
    """NHWC output (N, OH, OW, CO) of ``x`` correlated with a filter given as its
    (KH*KW*C, CO) matrix: im2col and GEMM per block of images, the batch split among the
    intra-op threads."""
    xp = win.xp
    n = x.shape[0]
    y = xp.empty((n, win.oh, win.ow, co), dtype=xp.result_type(x, f2d))

    def chunk(lo, hi):
        for s, e, patches in _patch_blocks(win, x, lo, hi):
            y[s:e] = (patches @ f2d).reshape(e - s, win.oh, win.ow, co)

    win.pool.run_chunks(chunk, _batch_chunks(win, x, co))
    return y


def _filter_grad(win, x, dy, co):
    """(KH*KW*C, CO) gradient of a filter: im2col of ``x``, transposed, times ``dy``, summed
    over blocks of images and over the intra-op threads' chunks of the batch."""

    def chunk(lo, hi):
        total = None
        for s, e, patches in _patch_blocks(win, x, lo, hi):
            part = patches.T @ dy[s:e].reshape(-1, co)
            if total is None:
                total = part
            else:
                total += part
        return total

    parts = win.pool.run_chunks(chunk, _batch_chunks(win, x, co))
    df = parts[0]
    for p in parts[1:]:
        df += p
    return df


def _batch_chunks(win, x, co):
    """How to split a convolution of ``x`` over the batch (see ``intra_op``)."""
    work = float(x.size) * win.kh * win.kw * co
    return win.pool.chunks(win.xp, x.shape[0], work, products=True)


def _pad_or_crop(xp, a, top, bottom, left, right):
    """``a`` (NHWC) with rows/columns added (positive) or removed (negative) at each edge."""
    h, w = a.shape[1], a.shape[2]
    a = a[:, max(-top, 0):h - max(-bottom, 0), max(-left, 0):w - max(-right, 0), :]
    pads = ((0, 0), (max(top, 0), max(bottom, 0)), (max(left, 0), max(right, 0)), (0, 0))
    return xp.pad(a, pads) if any(p for pair in pads for p in pair) else a


def _input_grad_stride1(win, dy, f, h, w):
    """dx of a stride-1 convolution, as a correlation of the padded ``dy`` with the filter
    flipped in space and with its channel axes swapped (a full convolution)."""
    xp = win.xp
    kh, kw, ci, co = f.shape
    eh, ew = (kh - 1) * win.dh, (kw - 1) * win.dw
    # dx[r] = sum_i dy[r + pt - i*dh] f[i]: pad dy so that output row r reads rows
    # r .. r + eh of the padded gradient, i.e. shift it down by eh - pt.
    top, left = eh - win.pt, ew - win.pl
    z = _pad_or_crop(xp, dy, top, h + eh - win.oh - top, left, w + ew - win.ow - left)
    flipped = xp.ascontiguousarray(f[::-1, ::-1].transpose(0, 1, 3, 2))
    full = _Window(xp, z.shape[1], z.shape[2], kh, kw, 1, 1, win.dh, win.dw, "VALID", win.pool)
    return _correlate(full, z, flipped.reshape(kh * kw * co, ci), ci)


def _input_grad_col2im(win, dy, f, shape):
    """dx of a strided convolution: patch gradients by GEMM, summed back tap by tap."""
    xp = win.xp
    n, h, w, c = shape
    kh, kw, ci, co = f.shape
    f2d_t = xp.reshape(f, (kh * kw * ci, co)).T
    out = xp.zeros(win.padded_shape(n, h, w, c), dtype=xp.result_type(dy, f))

    def chunk(lo, hi):
        cols = (dy[lo:hi].reshape(-1, co) @ f2d_t).reshape(hi - lo, win.oh, win.ow, kh, kw, ci)
        part = out[lo:hi]
        for i, j in win.taps():
            win.tap(part, i, j)[...] += cols[:, :, :, i, j, :]

    win.pool.run_chunks(chunk, win.pool.chunks(xp, n, float(dy.size) * kh * kw * ci,
                                               products=True))
    return win.crop(out, h, w)


# --- Conv2D ---------------------------------------------------------------------------------
# --- oneDNN ---------------------------------------------------------------------------------
# With oneDNN (``dflab.kernels.onednn``), float32 host kernels run on it and fall back to the
# NumPy code below for what it does not take (empty tensors, shapes it has no fast
# implementation for). ``fn.kernel_label`` names the library the last call ran on (traces
# show ``_MklConv2D`` as TF's do), None for NumPy.
def _library(node, ctx):
    """(oneDNN backend or None, its label for ``node``'s op) for a kernel bound on ``ctx``."""
    backend = onednn.for_kernel(ctx, node.output_types[0].as_numpy_dtype)
    return backend, onednn.label(node.op)


def _nonempty(*arrays) -> bool:
    return all(a.size for a in arrays)


@kernel("Conv2D")
def _conv2d(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp
    dnn, label = _library(node, ctx)

    def conv2d(x, f):
        _check_rank4(xp, node, input=x, filter=f)
        given = xp.asarray(x)
        x = _to_nhwc(given, fmt)
        n, h, w, c = x.shape
        kh, kw, ci, co = f.shape
        if c != ci:
            raise errors.InvalidArgumentError(
                None, node, f"input depth must equal filter depth: {c} vs {ci}")
        win = _window(node, ctx, h, w, kh, kw)
        y = None
        if dnn is not None and _nonempty(x, f) and not win.empty_output:
            y = dnn.conv2d(given, f, fmt, win)
        conv2d.kernel_label = label if y is not None else None
        if y is not None:
            return y
        y = _correlate(win, x, xp.reshape(f, (kh * kw * ci, co)), co)
        return _from_nhwc(y, fmt)

    return conv2d


@kernel("Conv2DBackpropInput", host_memory_inputs=(0,))
def _conv2d_backprop_input(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp
    dnn, label = _library(node, ctx)

    def backprop_input(sizes, f, dy):
        _check_rank4(xp, node, filter=f, out_backprop=dy)
        n, h, w, c = _nhwc_shape(sizes, fmt)
        given = xp.asarray(dy)
        dy = _to_nhwc(given, fmt)
        kh, kw, ci, co = f.shape
        win = _window(node, ctx, h, w, kh, kw)
        if dy.shape != (n, win.oh, win.ow, co) or ci != c:
            raise errors.InvalidArgumentError(
                None, node, f"Conv2DBackpropInput: shapes do not agree: input {[n, h, w, c]}, "
                f"filter {list(f.shape)}, out_backprop {list(dy.shape)} (NHWC)")
        dx = None
        if dnn is not None and _nonempty(f, dy) and n * h * w * c:
            shape = (n, h, w, c) if fmt == "NHWC" else (n, c, h, w)
            dx = dnn.conv2d_backprop_input(shape, f, given, fmt, win)
        backprop_input.kernel_label = label if dx is not None else None
        if dx is not None:
            return dx
        # A stride-1 gradient is a convolution too, cheaper than col2im unless the input has
        # far fewer channels than the output (its GEMM would then be a thin matrix-vector).
        if win.sh == 1 and win.sw == 1 and 4 * ci >= co and dy.size and n * h * w:
            dx = _input_grad_stride1(win, dy, xp.asarray(f), h, w)
        else:
            dx = _input_grad_col2im(win, dy, f, (n, h, w, c))
        return _from_nhwc(xp.ascontiguousarray(dx), fmt)

    return backprop_input


@kernel("Conv2DBackpropFilter", host_memory_inputs=(1,))
def _conv2d_backprop_filter(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp
    dnn, label = _library(node, ctx)

    def backprop_filter(x, sizes, dy):
        _check_rank4(xp, node, input=x, out_backprop=dy)
        kh, kw, ci, co = (int(d) for d in np.ravel(host(sizes)))  # host-side, as TF keeps it
        given_x, given_dy = xp.asarray(x), xp.asarray(dy)
        x = _to_nhwc(given_x, fmt)
        dy = _to_nhwc(given_dy, fmt)
        n, h, w, c = x.shape
        win = _window(node, ctx, h, w, kh, kw)
        if dy.shape != (n, win.oh, win.ow, co) or ci != c:
            raise errors.InvalidArgumentError(
                None, node, f"Conv2DBackpropFilter: shapes do not agree: input {list(x.shape)},"
                f" filter {[kh, kw, ci, co]}, out_backprop {list(dy.shape)} (NHWC)")
        df = None
        if dnn is not None and _nonempty(x, dy) and kh * kw * ci * co:
            df = dnn.conv2d_backprop_filter(given_x, (kh, kw, ci, co), given_dy, fmt, win)
        backprop_filter.kernel_label = label if df is not None else None
        if df is not None:
            return df
        if n == 0:
            return xp.zeros((kh, kw, ci, co), dtype=xp.result_type(x, dy))
        return _filter_grad(win, x, dy, co).reshape(kh, kw, ci, co)

    return backprop_filter


# --- pooling --------------------------------------------------------------------------------
def _pool_window(node, ctx, h, w):
    a = node.attr
    fmt = a["data_format"]
    (kh, kw), (sh, sw) = _hw(a["ksize"], fmt), _hw(a["strides"], fmt)
    try:
        return _Window(ctx.xp, h, w, kh, kw, sh, sw, 1, 1, a["padding"], ctx.intra_op)
    except ValueError as e:
        raise errors.InvalidArgumentError(None, node, str(e)) from None


def _lowest(dt):
    return -np.inf if dt.kind == "f" else np.iinfo(dt).min


def _avg_counts(win, h, w):
    """Cells of each window inside the unpadded input (SAME windows exclude padding, as TF).
    Window geometry only: computed on the host, with NumPy."""
    def counts(o, k, s, pad, size):
        start = np.arange(o) * s - pad
        return np.minimum(start + k, size) - np.maximum(start, 0)

    ch = counts(win.oh, win.kh, win.sh, win.pt, h)
    cw = counts(win.ow, win.kw, win.sw, win.pl, w)
    return ch[:, None] * cw[None, :]


def _reduce_taps(win, padded, ufunc, out=None):
    """``ufunc`` (maximum or add) folded over the window taps: an (N, OH, OW, C) array,
    written into ``out`` when given."""
    xp = win.xp
    taps = win.taps()
    first = win.tap(padded, *next(taps))
    if out is None:
        out = xp.array(first)
    else:
        out[...] = first
    for i, j in taps:
        ufunc(out, win.tap(padded, i, j), out=out)
    return out


def _host_reduce_taps(win, padded, ufunc):
    """``_reduce_taps`` on the host, the batch split among the intra-op threads."""
    n, c = padded.shape[0], padded.shape[3]
    out = np.empty((n, win.oh, win.ow, c), padded.dtype)
    work = float(out.size) * win.kh * win.kw * intra_op.PASS_WORK
    win.pool.run_chunks(lambda lo, hi: _reduce_taps(win, padded[lo:hi], ufunc, out[lo:hi]),
                        win.pool.chunks(np, n, work))
    return out


def _empty_pool(xp, win, x, fmt):
    n, _, _, c = x.shape
    return _from_nhwc(xp.zeros((n, win.oh, win.ow, c), x.dtype), fmt)


def _above_lowest(x) -> bool:
    """Whether every element of the float array ``x`` is a number above -inf: oneDNN's max
    pooling never picks a NaN and starts from the lowest finite float, where NumPy's (and
    TF's CPU kernels) take a NaN as its window's maximum and give an all -inf window -inf.
    One pass over ``x`` (a min reduction, a NaN anywhere makes it NaN)."""
    return bool(x.min() > -np.inf)


@kernel("MaxPool")
def _max_pool(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp
    dnn, label = _library(node, ctx)

    def max_pool(x):
        _check_rank4(xp, node, input=x)
        given = xp.asarray(x)
        x = _to_nhwc(given, fmt)
        win = _pool_window(node, ctx, x.shape[1], x.shape[2])
        max_pool.kernel_label = None
        if win.empty_output or x.size == 0:
            return _empty_pool(xp, win, x, fmt)
        if dnn is not None and _above_lowest(x):
            y = dnn.pool("max", given, fmt, win)
            if y is not None:
                max_pool.kernel_label = label
                return y
        padded = win.pad(x, _lowest(x.dtype))
        if xp is np:
            return _from_nhwc(_host_reduce_taps(win, padded, np.maximum), fmt)
        return _from_nhwc(_reduce_taps(win, padded, xp.maximum), fmt)

    return max_pool


@kernel("AvgPool")
def _avg_pool(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp
    dnn, label = _library(node, ctx)

    def avg_pool(x):
        _check_rank4(xp, node, value=x)
        given = xp.asarray(x)
        x = _to_nhwc(given, fmt)
        n, h, w, c = x.shape
        win = _pool_window(node, ctx, h, w)
        avg_pool.kernel_label = None
        if win.empty_output or x.size == 0:
            return _empty_pool(xp, win, x, fmt)
        if dnn is not None:
            y = dnn.pool("avg", given, fmt, win)
            if y is not None:
                avg_pool.kernel_label = label
                return y
        s = _reduce_taps(win, win.pad(x), xp.add)
        counts = xp.asarray(_avg_counts(win, h, w))
        y = (s / counts[None, :, :, None]).astype(x.dtype)
        return _from_nhwc(y, fmt)

    return avg_pool


def _check_pool_grad(node, win, g, n, c):
    if g.shape != (n, win.oh, win.ow, c):
        raise errors.InvalidArgumentError(None, node, f"grad shape {list(g.shape)} does not "
                                          "match the pooling output shape")


def _router(xp, g):
    """``mask -> g where mask, else 0``. A product with the mask is several times faster than
    ``where``, and exact while ``g`` is finite (inf * 0 would be NaN)."""
    if g.dtype.kind != "f" or bool(xp.isfinite(g).all()):
        return lambda mask: g * mask
    zero = xp.zeros((), dtype=g.dtype)
    return lambda mask: xp.where(mask, g, zero)


def _route_to_max(win, x, g):
    """NHWC gradient of a max pool of ``x`` (N, H, W, C): each window's ``g`` goes to its first
    maximal cell in row-major window order (TF's CPU tie-break), tap by tap."""
    xp = win.xp
    h, w = x.shape[1], x.shape[2]
    padded = win.pad(x, _lowest(x.dtype))
    top = _reduce_taps(win, padded, xp.maximum)
    # A NaN is its window's maximum (as an argmax would pick it); the extra comparison is paid
    # only when there is one.
    nan = bool(xp.isnan(top).any()) if top.dtype.kind == "f" else False
    route = _router(xp, g)
    dx = xp.zeros(padded.shape, dtype=g.dtype)
    unrouted = xp.ones(g.shape, dtype=bool)  # windows whose gradient is not placed yet
    disjoint = win.sh >= win.kh and win.sw >= win.kw  # each cell in at most one window
    for i, j in win.taps():
        t = win.tap(padded, i, j)
        hit = t == top
        if nan:
            hit |= t != t
        hit &= unrouted
        unrouted ^= hit  # hit is a subset of unrouted: this clears the routed windows
        if disjoint:
            win.tap(dx, i, j)[...] = route(hit)
        else:
            win.tap(dx, i, j)[...] += route(hit)
    return win.crop(dx, h, w)


# Host max-pool gradients work on blocks of images about this big, so that the dozen passes
# over each block find it in cache.
_POOL_BLOCK_BYTES = 1 << 20


def _pair_split(src, first, out_first, out_second, exact: bool) -> None:
    """``out_first = src where first else 0`` and ``out_second`` the rest of ``src``. With
    ``exact`` (``src`` finite) as a product and a difference, several times faster than
    ``where``: ``g * 1 = g``, ``g - g = 0`` and ``g - 0 = g`` exactly."""
    if exact:
        np.multiply(src, first, out=out_first)
        np.subtract(src, out_first, out=out_second)
        return
    zero = np.zeros((), dtype=src.dtype)
    out_first[...] = np.where(first, src, zero)
    out_second[...] = np.where(first, zero, src)


def _first_of_pair(a0, a1, nan: bool, out) -> None:
    """``out = a0 is the first maximum of (a0, a1)``: ties and NaNs (a NaN is a window's
    maximum, as an argmax would pick it) go to ``a0``, a NaN ``a1`` beats a number ``a0``."""
    np.greater_equal(a0, a1, out=out)
    if nan:
        out |= a0 != a0


def _route_2x2(x, g, dx, exact: bool) -> None:
    """``dx`` = the gradient of a 2x2, stride-2 max pool of ``x`` (N, 2*OH, 2*OW, C), NumPy,
    for ``g`` (N, OH, OW, C): each window's gradient to its first maximum in row-major order.

    Two pairwise stages instead of four taps: within each row, the left or the right cell of
    each column pair; then, between the two rows' winners, the top or the bottom one. Choosing
    the column first and then the row reproduces row-major order: (0,0) wins a tie with any
    cell, (0,1) one with row 1, (1,0) one with (1,1). The second stage and the split of ``g``
    between the rows run over whole rows (long contiguous loops); only the column stage and
    the final split work pair by pair.
    """
    n, h, w, c = x.shape
    oh, owc = h // 2, (w // 2) * c
    a0, a1 = x[:, :, 0::2], x[:, :, 1::2]
    col_max = np.maximum(a0, a1)  # (N, H, OW, C): each row's winner of each column pair
    nan = x.dtype.kind == "f" and bool(np.isnan(col_max.max()))
    left = np.empty(col_max.shape, dtype=bool)
    _first_of_pair(a0, a1, nan, left)
    rows = col_max.reshape(n, oh, 2, owc)
    upper = np.empty((n, oh, owc), dtype=bool)
    _first_of_pair(rows[:, :, 0], rows[:, :, 1], nan, upper)
    g_rows = np.empty(col_max.shape, dtype=g.dtype)  # g moved to its window's winning row
    g_split = g_rows.reshape(n, oh, 2, owc)
    _pair_split(g.reshape(n, oh, owc), upper, g_split[:, :, 0], g_split[:, :, 1], exact)
    _pair_split(g_rows, left, dx[:, :, 0::2], dx[:, :, 1::2], exact)


def _max_pool_grad_2x2(win, x, g):
    """Host MaxPoolGrad of a 2x2, stride-2 pool (any padding), in blocks of images that stay
    in cache, the blocks split among the intra-op threads."""
    n, h, w, _ = x.shape
    padded = win.pad(x, _lowest(x.dtype))
    core = (slice(None), slice(0, 2 * win.oh), slice(0, 2 * win.ow))
    whole = padded.shape[1:3] == (2 * win.oh, 2 * win.ow) and padded is x
    # VALID windows may leave the last row or column out: those cells get no gradient.
    dxp = np.empty(x.shape, x.dtype) if whole else np.zeros(padded.shape, x.dtype)
    xs, dxs = padded[core], dxp[core]
    g = g.astype(x.dtype, copy=False)
    exact = g.dtype.kind != "f" or bool(np.isfinite(g).all())
    step = max(1, _POOL_BLOCK_BYTES // max(x[0].nbytes, 1))

    def chunk(lo, hi):
        for s in range(lo, hi, step):
            e = min(s + step, hi)
            _route_2x2(xs[s:e], g[s:e], dxs[s:e], exact)

    win.pool.run_chunks(chunk, win.pool.chunks(np, n, float(x.size) * 4 * intra_op.PASS_WORK))
    return dxp if whole else np.ascontiguousarray(win.crop(dxp, h, w))


@kernel("MaxPoolGrad")
def _max_pool_grad(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp
    dnn, label = _library(node, ctx)

    def max_pool_grad(x, y, g):
        # The maximum is recomputed from x (as TF's CPU kernel does), so the routing does not
        # depend on the forward output passed in.
        given_x, given_g = xp.asarray(x), xp.asarray(g)
        x, g = _to_nhwc(given_x, fmt), _to_nhwc(given_g, fmt)
        n, h, w, c = x.shape
        win = _pool_window(node, ctx, h, w)
        _check_pool_grad(node, win, g, n, c)
        max_pool_grad.kernel_label = None
        if g.size == 0:
            return _from_nhwc(xp.zeros_like(x), fmt)
        if dnn is not None and _above_lowest(x):
            dx = dnn.pool_grad("max", given_x.shape, given_x, given_g, fmt, win)
            if dx is not None:
                max_pool_grad.kernel_label = label
                return dx
        if xp is not np:
            dx = _route_to_max(win, x, g).astype(x.dtype)
            return _from_nhwc(xp.ascontiguousarray(dx), fmt)
        if (win.kh, win.kw, win.sh, win.sw) == (2, 2, 2, 2):
            return _from_nhwc(_max_pool_grad_2x2(win, x, g), fmt)
        dx = np.empty(x.shape, dtype=x.dtype)
        step = max(1, _POOL_BLOCK_BYTES // max(x[0].nbytes, 1))

        def chunk(lo, hi):
            for s in range(lo, hi, step):
                e = min(s + step, hi)
                dx[s:e] = _route_to_max(win, x[s:e], g[s:e])

        work = float(x.size) * win.kh * win.kw * 8  # a dozen cheap passes per tap
        win.pool.run_chunks(chunk, win.pool.chunks(np, n, work))
        return _from_nhwc(dx, fmt)

    return max_pool_grad


@kernel("AvgPoolGrad")
def _avg_pool_grad(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp
    dnn, label = _library(node, ctx)

    def avg_pool_grad(sizes, g):
        n, h, w, c = _nhwc_shape(sizes, fmt)
        given = xp.asarray(g)
        g = _to_nhwc(given, fmt)
        win = _pool_window(node, ctx, h, w)
        _check_pool_grad(node, win, g, n, c)
        avg_pool_grad.kernel_label = None
        if g.size == 0:
            return _from_nhwc(xp.zeros((n, h, w, c), g.dtype), fmt)
        if dnn is not None:
            shape = (n, h, w, c) if fmt == "NHWC" else (n, c, h, w)
            dx = dnn.pool_grad("avg", shape, None, given, fmt, win)
            if dx is not None:
                avg_pool_grad.kernel_label = label
                return dx
        counts = xp.asarray(_avg_counts(win, h, w).astype(g.dtype))
        share = g / counts[None, :, :, None]
        dx = xp.zeros(win.padded_shape(n, h, w, c), dtype=share.dtype)
        for i, j in win.taps():
            win.tap(dx, i, j)[...] += share
        dx = win.crop(dx, h, w)
        return _from_nhwc(xp.ascontiguousarray(dx), fmt)

    return avg_pool_grad
