"""Kernels for nn ops, written against the device's array namespace (``ctx.xp``: NumPy on
CPUs, CuPy on GPUs). Small host-side arguments (``Conv2DBackprop*``'s sizes, ``k`` of top-k,
the window geometry) are read and computed with NumPy.

Convolution is im2col: the padded input is viewed (no copy) as its windows, strided by the
stride and dilation, copied once into a ``[N*OH*OW, KH*KW*C]`` patch matrix, and multiplied
with the filter in one matmul (BLAS on a CPU). The window view is built with
``xp.lib.stride_tricks.as_strided``, which NumPy and CuPy both have (NumPy's
``sliding_window_view`` builds the same view, but older CuPy lacks it). The filter gradient is
the transposed product; the input gradient multiplies the other way and scatters the patches
back (col2im) with one vectorised slice-add per filter tap, never a loop over pixels. Pooling
reduces the same window views. Kernels compute in NHWC and transpose NCHW data at the
boundary. Inputs are never written to.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host
from dflab.kernels.registry import kernel, quiet, register_kernel
from dflab.ops.conv_ops import conv_output_size
from dflab.ops.nn_ops import bias_channel_axis

_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717


def _like(xp, x, value):
    """``value`` as a NumPy scalar of ``x``'s dtype (NumPy may promote Python scalars in mixed
    math). A scalar, not an array: on a GPU it is passed to the kernel by value, with no copy
    to device memory (which a captured step could not make)."""
    return np.dtype(x.dtype).type(value)


# --- activations ----------------------------------------------------------------------------
def _relu(xp, x):
    return xp.maximum(x, _like(xp, x, 0))


def _relu_grad(xp, g, y):
    # A multiply by the boolean mask is several times faster than xp.where here.
    return xp.multiply(g, y > 0, dtype=g.dtype)


def _relu6(xp, x):
    return xp.clip(x, _like(xp, x, 0), _like(xp, x, 6))


def _relu6_grad(xp, g, y):
    return xp.where((y > 0) & (y < 6), g, _like(xp, g, 0))


def _elu(xp, x):
    return xp.where(x > 0, x, xp.expm1(xp.minimum(x, _like(xp, x, 0))))


def _elu_grad(xp, g, y):
    return xp.where(y > 0, g, g * (y + _like(xp, y, 1)))


def _selu(xp, x):
    neg = _like(xp, x, _SELU_SCALE * _SELU_ALPHA) * xp.expm1(xp.minimum(x, _like(xp, x, 0)))
    return xp.where(x > 0, _like(xp, x, _SELU_SCALE) * x, neg)


def _selu_grad(xp, g, y):
    scale, neg = _like(xp, g, _SELU_SCALE), _like(xp, y, _SELU_SCALE * _SELU_ALPHA)
    return xp.where(y > 0, g * scale, g * (y + neg))


def _softplus(xp, x):
    return xp.logaddexp(_like(xp, x, 0), x)


def _softplus_grad(xp, g, x):
    # sigmoid(x), written to stay finite for large |x|
    return g * _like(xp, g, 0.5) * (xp.tanh(x * _like(xp, x, 0.5)) + _like(xp, x, 1))


def _softsign(xp, x):
    return x / (xp.abs(x) + _like(xp, x, 1))


def _softsign_grad(xp, g, x):
    d = xp.abs(x) + _like(xp, x, 1)
    return g / (d * d)


for _t, _f in (("Relu", _relu), ("ReluGrad", _relu_grad), ("Relu6", _relu6),
               ("Relu6Grad", _relu6_grad), ("Elu", _elu), ("EluGrad", _elu_grad),
               ("Selu", _selu), ("SeluGrad", _selu_grad), ("Softplus", _softplus),
               ("SoftplusGrad", _softplus_grad), ("Softsign", _softsign),
               ("SoftsignGrad", _softsign_grad)):
    register_kernel(_t, xp=_f, quiet_fp=True)


@kernel("LeakyRelu")
def _leaky_relu(node, ctx):
    alpha = node.attr["alpha"]
    xp = ctx.xp
    return lambda x: xp.where(x > 0, x, x * _like(xp, x, alpha))


@kernel("LeakyReluGrad")
def _leaky_relu_grad(node, ctx):
    alpha = node.attr["alpha"]
    xp = ctx.xp
    return lambda g, x: xp.where(x > 0, g, g * _like(xp, g, alpha))


# --- softmax and cross-entropy --------------------------------------------------------------
def _log_softmax(xp, x, axis):
    shifted = x - xp.max(x, axis=axis, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))


@kernel("Softmax")
def _softmax(node, ctx):
    axis = node.attr["axis"]
    xp = ctx.xp

    def softmax(x):
        with np.errstate(all="ignore"):
            e = xp.exp(x - xp.max(x, axis=axis, keepdims=True))
            return e / xp.sum(e, axis=axis, keepdims=True)

    return softmax


@kernel("LogSoftmax")
def _log_softmax_kernel(node, ctx):
    axis = node.attr["axis"]
    xp = ctx.xp
    return quiet(lambda x: _log_softmax(xp, x, axis))


@kernel("SoftmaxCrossEntropyWithLogits")
def _xent(node, ctx):
    axis = node.attr["axis"]
    xp = ctx.xp

    def xent(logits, labels):
        if xp.shape(logits) != xp.shape(labels):
            raise errors.InvalidArgumentError(
                None, node, f"logits and labels must be same size: logits_size="
                f"{list(xp.shape(logits))} labels_size={list(xp.shape(labels))}")
        with np.errstate(all="ignore"):
            log_p = _log_softmax(xp, logits, axis)
            # 0 * -inf (a zero label on a -inf logit) contributes 0, as in TF
            terms = xp.where(labels == 0, _like(xp, labels, 0), labels * log_p)
            loss = -xp.sum(terms, axis=axis)
            return loss, xp.exp(log_p) - labels

    return xent


@kernel("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_xent(node, ctx):
    xp = ctx.xp

    def sparse_xent(logits, labels):
        logits, labels = xp.asarray(logits), xp.asarray(labels)
        k = logits.shape[-1] if logits.ndim else 0
        if labels.shape != logits.shape[:-1]:
            raise errors.InvalidArgumentError(
                None, node, f"logits and labels must have the same first dimensions, got "
                f"logits shape {list(logits.shape)} and labels shape {list(labels.shape)}")
        bad = (labels < 0) | (labels >= k)
        if bad.any():
            v = labels[bad].ravel()[0]
            labels = labels.tolist() if labels.ndim else [labels.item()]  # host list
            raise errors.InvalidArgumentError(
                None, node, f"Received a label value of {v} which is outside the valid range "
                f"of [0, {k}).  Label values: {' '.join(map(str, np.ravel(host(labels))))}")
        idx = labels[..., None].astype(np.intp)
        with np.errstate(all="ignore"):
            log_p = _log_softmax(xp, logits, -1)
            picked = xp.take_along_axis(log_p, idx, -1)[..., 0]
            backprop = xp.exp(log_p)
            xp.put_along_axis(backprop, idx, xp.take_along_axis(backprop, idx, -1) - 1, -1)
        return -picked, backprop

    return sparse_xent


# --- bias add -------------------------------------------------------------------------------
def _bias_shape(rank, c_axis):
    return (-1,) + (1,) * (rank - 1 - c_axis)


@kernel("BiasAdd")
def _bias_add(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp

    def bias_add(x, b):
        rank = xp.ndim(x)
        c = bias_channel_axis(rank, fmt)
        if xp.shape(x)[c] != xp.shape(b)[0]:
            raise errors.InvalidArgumentError(
                None, node, f"Must provide as many biases as the channel dimension of the "
                f"input tensor: {list(xp.shape(b))} vs. {list(xp.shape(x))}")
        return x + xp.reshape(b, _bias_shape(rank, c))

    return bias_add


@kernel("BiasAddGrad")
def _bias_add_grad(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp

    def bias_add_grad(g):
        rank = xp.ndim(g)
        c = bias_channel_axis(rank, fmt)
        axes = tuple(i for i in range(rank) if i != c)
        return xp.sum(g, axis=axes, dtype=g.dtype)

    return bias_add_grad


# --- window geometry ------------------------------------------------------------------------
class _Window:
    """Spatial geometry of one conv/pool op for a given input size (all NHWC), and the window
    steps built on it, computed with the device's namespace ``xp``."""

    __slots__ = ("xp", "kh", "kw", "sh", "sw", "dh", "dw", "oh", "ow", "pt", "pb", "pl", "pr")

    def __init__(self, xp, h, w, kh, kw, sh, sw, dh, dw, padding):
        self.xp = xp
        self.kh, self.kw, self.sh, self.sw, self.dh, self.dw = kh, kw, sh, sw, dh, dw
        self.oh, self.pt, self.pb = conv_output_size(h, kh, sh, dh, padding)
        self.ow, self.pl, self.pr = conv_output_size(w, kw, sw, dw, padding)

    def pad(self, x, value=0):
        if not (self.pt or self.pb or self.pl or self.pr):
            return x
        return self.xp.pad(x, ((0, 0), (self.pt, self.pb), (self.pl, self.pr), (0, 0)),
                           constant_values=value)

    def windows(self, padded):
        """View of ``padded`` (this window's padded NHWC input) as its (N, OH, OW, C, KH, KW)
        windows, strided by the stride and dilation; no copy."""
        # The view sliding_window_view gives once strided, made in one as_strided call (NumPy
        # and CuPy both have it, strides in bytes). It stays inside ``padded``: the output
        # size rule makes the last window end at or before its last row and column.
        n, _, _, c = padded.shape
        s_n, s_h, s_w, s_c = padded.strides
        return self.xp.lib.stride_tricks.as_strided(
            padded, shape=(n, self.oh, self.ow, c, self.kh, self.kw),
            strides=(s_n, s_h * self.sh, s_w * self.sw, s_c, s_h * self.dh, s_w * self.dw))

    def scatter_taps(self, cols, padded_shape):
        """col2im: sum (N, OH, OW, KH, KW, C) patch values back into a padded input."""
        out = self.xp.zeros(padded_shape, dtype=cols.dtype)
        hspan, wspan = self.sh * (self.oh - 1) + 1, self.sw * (self.ow - 1) + 1
        for i in range(self.kh):
            for j in range(self.kw):
                r, c = i * self.dh, j * self.dw
                out[:, r:r + hspan:self.sh, c:c + wspan:self.sw, :] += cols[:, :, :, i, j, :]
        return out

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


def _window(node, xp, h, w, kh, kw):
    fmt, (sh, sw), (dh, dw), padding = _conv_params(node)
    try:
        return _Window(xp, h, w, kh, kw, sh, sw, dh, dw, padding)
    except ValueError as e:
        raise errors.InvalidArgumentError(None, node, str(e)) from None


def _patch_matrix(win, x):
    """(N*OH*OW, KH*KW*C) im2col matrix of NHWC ``x``, in the filter's (KH, KW, C) order."""
    padded = win.pad(x)
    n, c = x.shape[0], x.shape[3]
    if win.oh == 0 or win.ow == 0 or n == 0:
        return win.xp.zeros((n * win.oh * win.ow, win.kh * win.kw * c), dtype=x.dtype)
    cols = win.windows(padded).transpose(0, 1, 2, 4, 5, 3)
    return cols.reshape(n * win.oh * win.ow, win.kh * win.kw * c)


def _check_rank4(xp, node, **arrays):
    for nm, a in arrays.items():
        if xp.ndim(a) != 4:
            raise errors.InvalidArgumentError(None, node, f"{nm} must be 4-dimensional, got "
                                              f"shape {list(xp.shape(a))}")


# --- Conv2D ---------------------------------------------------------------------------------
@kernel("Conv2D")
def _conv2d(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp

    def conv2d(x, f):
        _check_rank4(xp, node, input=x, filter=f)
        x = _to_nhwc(xp.asarray(x), fmt)
        n, h, w, c = x.shape
        kh, kw, ci, co = f.shape
        if c != ci:
            raise errors.InvalidArgumentError(
                None, node, f"input depth must equal filter depth: {c} vs {ci}")
        win = _window(node, xp, h, w, kh, kw)
        y = _patch_matrix(win, x) @ xp.reshape(f, (kh * kw * ci, co))
        return _from_nhwc(y.reshape(n, win.oh, win.ow, co), fmt)

    return conv2d


@kernel("Conv2DBackpropInput")
def _conv2d_backprop_input(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp

    def backprop_input(sizes, f, dy):
        _check_rank4(xp, node, filter=f, out_backprop=dy)
        n, h, w, c = _nhwc_shape(sizes, fmt)
        dy = _to_nhwc(xp.asarray(dy), fmt)
        kh, kw, ci, co = f.shape
        win = _window(node, xp, h, w, kh, kw)
        if dy.shape != (n, win.oh, win.ow, co) or ci != c:
            raise errors.InvalidArgumentError(
                None, node, f"Conv2DBackpropInput: shapes do not agree: input {[n, h, w, c]}, "
                f"filter {list(f.shape)}, out_backprop {list(dy.shape)} (NHWC)")
        cols = dy.reshape(-1, co) @ xp.reshape(f, (kh * kw * ci, co)).T
        cols = cols.reshape(n, win.oh, win.ow, kh, kw, ci)
        padded = (n, h + win.pt + win.pb, w + win.pl + win.pr, c)
        dx = win.crop(win.scatter_taps(cols, padded), h, w)
        return _from_nhwc(xp.ascontiguousarray(dx), fmt)

    return backprop_input


@kernel("Conv2DBackpropFilter")
def _conv2d_backprop_filter(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp

    def backprop_filter(x, sizes, dy):
        _check_rank4(xp, node, input=x, out_backprop=dy)
        kh, kw, ci, co = (int(d) for d in np.ravel(host(sizes)))  # host-side, as TF keeps it
        x = _to_nhwc(xp.asarray(x), fmt)
        dy = _to_nhwc(xp.asarray(dy), fmt)
        n, h, w, c = x.shape
        win = _window(node, xp, h, w, kh, kw)
        if dy.shape != (n, win.oh, win.ow, co) or ci != c:
            raise errors.InvalidArgumentError(
                None, node, f"Conv2DBackpropFilter: shapes do not agree: input {list(x.shape)},"
                f" filter {[kh, kw, ci, co]}, out_backprop {list(dy.shape)} (NHWC)")
        df = _patch_matrix(win, x).T @ dy.reshape(-1, co)
        return df.reshape(kh, kw, ci, co)

    return backprop_filter


# --- pooling --------------------------------------------------------------------------------
def _pool_window(node, xp, h, w):
    a = node.attr
    fmt = a["data_format"]
    (kh, kw), (sh, sw) = _hw(a["ksize"], fmt), _hw(a["strides"], fmt)
    try:
        return _Window(xp, h, w, kh, kw, sh, sw, 1, 1, a["padding"])
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


@kernel("MaxPool")
def _max_pool(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp

    def max_pool(x):
        _check_rank4(xp, node, input=x)
        x = _to_nhwc(xp.asarray(x), fmt)
        n, h, w, c = x.shape
        win = _pool_window(node, xp, h, w)
        if win.oh == 0 or win.ow == 0:
            return _from_nhwc(xp.zeros((n, win.oh, win.ow, c), x.dtype), fmt)
        y = win.windows(win.pad(x, _lowest(x.dtype))).max(axis=(4, 5))
        return _from_nhwc(xp.ascontiguousarray(y), fmt)

    return max_pool


@kernel("AvgPool")
def _avg_pool(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp

    def avg_pool(x):
        _check_rank4(xp, node, value=x)
        x = _to_nhwc(xp.asarray(x), fmt)
        n, h, w, c = x.shape
        win = _pool_window(node, xp, h, w)
        if win.oh == 0 or win.ow == 0:
            return _from_nhwc(xp.zeros((n, win.oh, win.ow, c), x.dtype), fmt)
        s = win.windows(win.pad(x)).sum(axis=(4, 5))
        counts = xp.asarray(_avg_counts(win, h, w))
        y = (s / counts[None, :, :, None]).astype(x.dtype)
        return _from_nhwc(y, fmt)

    return avg_pool


@kernel("MaxPoolGrad")
def _max_pool_grad(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp

    def max_pool_grad(x, y, g):
        # Each window's gradient goes to its first maximal cell in row-major window order
        # (TF's CPU tie-break); overlapping windows accumulate through one bincount.
        x, g = _to_nhwc(xp.asarray(x), fmt), _to_nhwc(xp.asarray(g), fmt)
        n, h, w, c = x.shape
        win = _pool_window(node, xp, h, w)
        if g.shape != (n, win.oh, win.ow, c):
            raise errors.InvalidArgumentError(None, node, f"grad shape {list(g.shape)} does not "
                                              "match the pooling output shape")
        if g.size == 0:
            return _from_nhwc(xp.zeros_like(x), fmt)
        padded = win.pad(x, _lowest(x.dtype))
        hp, wp = padded.shape[1], padded.shape[2]
        vals = win.windows(padded).reshape(n, win.oh, win.ow, c, win.kh * win.kw)
        ki, kj = xp.divmod(xp.argmax(vals, axis=-1), win.kw)
        rows = xp.arange(win.oh)[None, :, None, None] * win.sh + ki
        cols = xp.arange(win.ow)[None, None, :, None] * win.sw + kj
        flat = ((xp.arange(n)[:, None, None, None] * hp + rows) * wp + cols) * c \
            + xp.arange(c)[None, None, None, :]
        dxp = xp.bincount(flat.ravel(), weights=g.ravel(), minlength=n * hp * wp * c)
        dx = win.crop(dxp.reshape(n, hp, wp, c), h, w).astype(x.dtype)
        return _from_nhwc(xp.ascontiguousarray(dx), fmt)

    return max_pool_grad


@kernel("AvgPoolGrad")
def _avg_pool_grad(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp

    def avg_pool_grad(sizes, g):
        n, h, w, c = _nhwc_shape(sizes, fmt)
        g = _to_nhwc(xp.asarray(g), fmt)
        win = _pool_window(node, xp, h, w)
        if g.shape != (n, win.oh, win.ow, c):
            raise errors.InvalidArgumentError(None, node, f"grad shape {list(g.shape)} does not "
                                              "match the pooling output shape")
        if g.size == 0:
            return _from_nhwc(xp.zeros((n, h, w, c), g.dtype), fmt)
        counts = xp.asarray(_avg_counts(win, h, w).astype(g.dtype))
        share = g / counts[None, :, :, None]
        cols = xp.broadcast_to(share[:, :, :, None, None, :],
                               (n, win.oh, win.ow, win.kh, win.kw, c))
        padded = (n, h + win.pt + win.pb, w + win.pl + win.pr, c)
        dx = win.crop(win.scatter_taps(cols, padded), h, w)
        return _from_nhwc(xp.ascontiguousarray(dx), fmt)

    return avg_pool_grad


# --- L2Loss, InTopK, TopK -------------------------------------------------------------------
def _l2_loss(xp, x):
    x = xp.asarray(x)
    return xp.asarray(xp.sum(xp.square(x)) / 2, dtype=x.dtype)


register_kernel("L2Loss", xp=_l2_loss)


def _in_top_k(xp, pred, targets, k):
    pred, targets, k = xp.asarray(pred), xp.asarray(targets), int(k)  # k: host-side
    batch, classes = pred.shape
    if targets.shape != (batch,):
        raise ValueError(f"targets must have shape [{batch}], got {list(targets.shape)}")
    valid = (targets >= 0) & (targets < classes)
    safe = xp.where(valid, targets, 0).astype(np.intp)
    target_pred = pred[xp.arange(batch), safe]
    finite = xp.all(xp.isfinite(pred), axis=1)
    # Ties with the target's score count in its favour: only strictly larger scores compete.
    better = xp.sum(pred > target_pred[:, None], axis=1)
    return valid & finite & (better < k)


register_kernel("InTopKV2", xp=_in_top_k)


def _top_k(xp, x, k):
    x, k = xp.asarray(x), int(k)  # k: host-side
    n = x.shape[-1]
    if k < 0 or k > n:
        raise ValueError(f"input must have at least k={k} columns, got {n}")
    # Descending and stable (lower index first among ties): stable ascending sort of the
    # reversed row, read backwards. (CuPy's sorts are always stable; it accepts "stable".)
    order = xp.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1][..., :k]
    idx = (n - 1 - order).astype(np.int32)
    return xp.take_along_axis(x, idx, -1), idx


register_kernel("TopKV2", xp=_top_k)
