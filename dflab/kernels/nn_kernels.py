"""Kernels for nn ops, written against the device's array namespace (``ctx.xp``: NumPy on
CPUs, CuPy on GPUs): activations, softmax and cross-entropies, bias add, L2 loss and top-k.
Small host-side arguments (``k`` of top-k) are read with NumPy. Convolution and pooling are in
``conv_kernels``.
"""

from __future__ import annotations

import functools

import numpy as np

from dflab.framework import errors
from dflab.kernels import intra_op
from dflab.kernels.context import host
from dflab.kernels.math_kernels import column_sums
from dflab.kernels.registry import kernel, quiet, register_kernel, split_elementwise
from dflab.ops.nn_ops import bias_channel_axis

_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717


def _like(xp, x, value):
    """``value`` as a NumPy scalar of ``x``'s dtype (NumPy may promote Python scalars in mixed
    math). A scalar, not an array: on a GPU it is passed to the kernel by value, with no copy
    to device memory (which a captured step could not make)."""
    return np.dtype(x.dtype).type(value)


# --- activations ----------------------------------------------------------------------------
def _host_relu(zero):
    """ReLU on the host for ``zero``'s dtype (a 0-d zero of a float dtype). NumPy vectorizes
    ``maximum`` only when the second operand steps along the rows as the first does: against
    a scalar 0 it takes a scalar loop (a 128x512 ReLU: 58 us, 27 us against a row of zeros). A
    small input takes the 0-d zero instead: allocating the row is most of its cost (4
    elements: 0.64 us with a row, 0.37 us without). The same bits every way, NaN and -0.0
    included. A function per dtype, its zero bound, because a small eager ReLU is mostly calls
    (4 elements: 0.42 us against 0.58 through ``_relu``)."""
    maximum, zeros = np.maximum, np.zeros

    def relu(x, out=None):
        if x.size < 256:  # (an ``out=None`` passed on costs a small one a tenth)
            return maximum(x, zero) if out is None else maximum(x, zero, out=out)
        return maximum(x, zeros(x.shape[-1:], x.dtype), out=out)

    return relu


_HOST_RELUS = {np.dtype(t): _host_relu(np.zeros((), t))
               for t in (np.float16, np.float32, np.float64)}


def _relu(xp, x, out=None):
    if xp is np:
        relu = _HOST_RELUS.get(x.dtype)
        if relu is not None:
            return relu(x, out)
        return np.maximum(x, np.zeros(x.shape[-1:], x.dtype), out=out)
    return xp.maximum(x, _like(xp, x, 0), out=out)


def _relu_grad(xp, g, y, out=None):
    # A multiply by the boolean mask is several times faster than xp.where here.
    return xp.multiply(g, y > 0, dtype=g.dtype, out=out)


def _relu6(xp, x, out=None):
    return xp.clip(x, _like(xp, x, 0), _like(xp, x, 6), out=out)


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


# ``maximum`` passes NaN and infinities through without a warning, so ReLU needs no error-state
# switch (~2 us a call: a third of a small eager op); its gradient multiplies inf by 0.
@kernel("Relu")
def _relu_kernel(node, ctx):
    generic = functools.partial(_relu, ctx.xp)
    if node is None:  # a fused kernel's step (``registered_fn``): the dtype is read per call
        return generic
    fn = _HOST_RELUS.get(np.dtype(node.output_types[0].as_numpy_dtype)) if ctx.xp is np else None
    return split_elementwise(fn or generic, node, ctx)


register_kernel("ReluGrad", xp=_relu_grad, quiet_fp=True, elementwise=True)
for _t, _f in (("Relu6", _relu6),
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
def _max_and_sum(xp):
    """``xp``'s max and sum; on the host the ufuncs' own ``reduce``, which ``np.max`` and
    ``np.sum`` call after a Python layer of theirs (a small softmax: a third of its cost)."""
    return (np.maximum.reduce, np.add.reduce) if xp is np else (xp.max, xp.sum)


def _log_softmax(xp, x, axis):
    max_, sum_ = _max_and_sum(xp)
    shifted = x - max_(x, axis=axis, keepdims=True)
    return shifted - xp.log(sum_(xp.exp(shifted), axis=axis, keepdims=True))


@kernel("Softmax")
def _softmax(node, ctx):
    axis = node.attr["axis"]
    xp = ctx.xp
    max_, sum_ = _max_and_sum(xp)

    def softmax(x):
        e = xp.exp(x - max_(x, axis=axis, keepdims=True))
        return e / sum_(e, axis=axis, keepdims=True)

    return quiet(softmax)


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
    xp, pool = ctx.xp, ctx.intra_op

    def sparse_xent(logits, labels):
        logits, labels = xp.asarray(logits), xp.asarray(labels)
        k = logits.shape[-1] if logits.ndim else 0
        if labels.shape != logits.shape[:-1]:
            raise errors.InvalidArgumentError(
                None, node, f"logits and labels must have the same first dimensions, got "
                f"logits shape {list(logits.shape)} and labels shape {list(labels.shape)}")
        if _any_outside(xp, labels, k):
            v = labels[(labels < 0) | (labels >= k)].ravel()[0]
            labels = labels.tolist() if labels.ndim else [labels.item()]  # host list
            raise errors.InvalidArgumentError(
                None, node, f"Received a label value of {v} which is outside the valid range "
                f"of [0, {k}).  Label values: {' '.join(map(str, np.ravel(host(labels))))}")
        if xp is np and logits.ndim >= 1 and logits.size and logits.dtype.kind == "f":
            return _host_sparse_xent(logits, labels, pool)
        idx = labels[..., None].astype(np.intp)
        with np.errstate(all="ignore"):
            log_p = _log_softmax(xp, logits, -1)
            picked = xp.take_along_axis(log_p, idx, -1)[..., 0]
            backprop = xp.exp(log_p)
            xp.put_along_axis(backprop, idx, xp.take_along_axis(backprop, idx, -1) - 1, -1)
        return -picked, backprop

    return sparse_xent


def _any_outside(xp, labels, k) -> bool:
    """Whether a label lies outside [0, k): on the host by the labels' extremes (two passes,
    not four); on a device by one mask, whose test is the one trip to the host."""
    if xp is np:
        return bool(labels.size) and (int(labels.min()) < 0 or int(labels.max()) >= k)
    return bool(((labels < 0) | (labels >= k)).any())


def _host_sparse_xent(logits, labels, pool: intra_op.IntraOpPool):
    """Sparse softmax cross-entropy on the host, row by row as TF's kernel: with ``s`` the
    sum of ``exp(x - max)``, the loss is ``log(s) - (x[label] - max)`` and the gradient
    ``exp(x - max) / s - onehot``, each written into its output buffer in five passes over the
    logits (a language model's 400x10000 logits made a dozen, with four temporaries as big),
    the rows split among ``pool``'s threads."""
    k = logits.shape[-1]
    x = logits.reshape(-1, k)
    # Each row's label as an index into the flattened rows: a flat index costs a fifth of a
    # (row, column) pair's, and the methods' Python layers (``max``, ``sum``) more than a
    # small batch's arithmetic, so the ufuncs' own reductions.
    picks = np.arange(x.shape[0]) * k + labels.reshape(-1)
    loss = np.empty(x.shape[0], logits.dtype)
    backprop = np.empty(x.shape, logits.dtype)

    @quiet
    def rows(lo, hi):
        xs = x[lo:hi]
        e = np.subtract(xs, np.maximum.reduce(xs, axis=1, keepdims=True), out=backprop[lo:hi])
        flat = e.reshape(-1)  # a view: ``backprop`` is contiguous
        at_label = picks[lo:hi] - lo * k if lo else picks[:hi]
        shifted_label = flat[at_label]
        np.exp(e, out=e)
        total = np.add.reduce(e, axis=1, keepdims=True)
        e /= total
        np.subtract(np.log(total[:, 0]), shifted_label, out=loss[lo:hi])
        flat[at_label] -= 1

    work = float(x.size) * 5 * intra_op.PASS_WORK
    pool.run_chunks(rows, pool.chunks(np, x.shape[0], work))
    return loss.reshape(labels.shape), backprop.reshape(logits.shape)


# --- bias add -------------------------------------------------------------------------------
def _bias_shape(rank, c_axis):
    return (-1,) + (1,) * (rank - 1 - c_axis)


@kernel("BiasAdd")
def _bias_add(node, ctx):
    fmt = node.attr["data_format"]

    def bias_add(x, b):  # (the arrays' own attributes: NumPy's functions cost a frame each)
        rank = x.ndim
        c = bias_channel_axis(rank, fmt)
        if x.shape[c] != b.shape[0]:
            raise errors.InvalidArgumentError(
                None, node, f"Must provide as many biases as the channel dimension of the "
                f"input tensor: {list(b.shape)} vs. {list(x.shape)}")
        return x + (b if c == rank - 1 else b.reshape(_bias_shape(rank, c)))

    return bias_add


@kernel("BiasAddGrad")
def _bias_add_grad(node, ctx):
    fmt = node.attr["data_format"]
    xp = ctx.xp

    def bias_add_grad(g):
        rank = xp.ndim(g)
        c = bias_channel_axis(rank, fmt)
        if (xp is np and c == rank - 1 and rank >= 2 and isinstance(g, np.ndarray)
                and g.flags.c_contiguous):
            sums = column_sums(g.reshape(-1, g.shape[-1]))
            if sums is not None:
                return sums
        axes = tuple(i for i in range(rank) if i != c)
        return xp.sum(g, axis=axes, dtype=g.dtype)

    return bias_add_grad


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


