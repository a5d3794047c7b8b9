"""Kernels of local response normalization and fused batch normalization, and their
gradients, against the device's ``xp``.

LRN: with ``n = bias + alpha * window_sum(x ** 2)`` (the window: ``depth_radius`` channels each
side along the last axis) the output is ``x * n ** -beta`` and the gradient
``g * n ** -beta - 2 alpha beta x * window_sum(g * x * n ** (-beta - 1))``: the window sums
are a sum of shifted slices of a zero-padded copy.

Fused batch norm: per channel ``c``, ``y = (x - mean) * scale / sqrt(var + epsilon) + offset``
in the parameters' type (float32 for a float16 input), the statistics summed over every other
axis; TF's CPU kernel's conventions for what the forward op saves for its gradient (the batch
mean and the *biased* batch variance in reserve spaces 1 and 2, an empty third). Float32 NHWC
batches on the host run on oneDNN's batch normalization primitives (traces label them
``_MklFusedBatchNormV3``, as TF's), the rest on ``xp``.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels import onednn
from dflab.kernels.math_kernels import column_sums
from dflab.kernels.registry import kernel
from dflab.ops.normalization_ops import (
    FUSED_BATCH_NORM_GRADS,
    FUSED_BATCH_NORMS,
    fused_bn_attrs,
    fused_bn_channel_axis,
)


def _window_sum(xp, a, radius):
    """``out[..., d] = sum(a[..., max(0, d - r) : d + r + 1])``."""
    depth = a.shape[-1]
    pad = [(0, 0)] * (a.ndim - 1) + [(radius, radius)]
    padded = xp.pad(a, pad)
    out = xp.zeros_like(a)
    for k in range(2 * radius + 1):
        out = out + padded[..., k:k + depth]
    return out


def _attrs(node):
    return (node.attr["depth_radius"], node.attr["bias"], node.attr["alpha"],
            node.attr["beta"])


@kernel("LRN")
def _lrn(node, ctx):
    xp = ctx.xp
    radius, bias, alpha, beta = _attrs(node)

    def lrn(x):
        n = bias + alpha * _window_sum(xp, x * x, radius)
        return (x * n ** -beta).astype(x.dtype, copy=False)

    return lrn


@kernel("LRNGrad")
def _lrn_grad(node, ctx):
    xp = ctx.xp
    radius, bias, alpha, beta = _attrs(node)

    def lrn_grad(grads, x, _out):
        n = bias + alpha * _window_sum(xp, x * x, radius)
        scaled = n ** -beta
        back = _window_sum(xp, grads * x * scaled / n, radius)
        return (grads * scaled - 2.0 * alpha * beta * x * back).astype(x.dtype, copy=False)

    return lrn_grad


# --- fused batch normalization -------------------------------------------------------------
class _Channels:
    """How one input lays out its channels: summing over the other axes, and shaping a
    per-channel vector to broadcast against it."""

    def __init__(self, xp, node, x, fmt):
        if x.ndim != len(fmt):
            raise errors.InvalidArgumentError(
                None, node, f"{node.op}: input must be {len(fmt)}-dimensional for data_format "
                f"{fmt}, got shape {list(x.shape)}")
        self.xp, self.axis = xp, fused_bn_channel_axis(fmt, x.ndim)
        self.count = x.shape[self.axis]
        self.others = tuple(i for i in range(x.ndim) if i != self.axis)
        self.per_channel = x.size // self.count if self.count else 0
        # channels last: a vector broadcasts as it is
        self.shape = None if self.axis == x.ndim - 1 else \
            tuple(-1 if i == self.axis else 1 for i in range(x.ndim))

    def check(self, node, vectors, names):
        for v, name in zip(vectors, names):
            if v.shape != (self.count,):
                raise errors.InvalidArgumentError(
                    None, node, f"{node.op}: {name} must be a vector of the input's "
                    f"{self.count} channels, got shape {list(v.shape)}")

    def sums(self, a):
        """Per-channel sums; on the host a channels-last array is one column sum (BLAS's,
        for a big one)."""
        if self.xp is np and self.shape is None:
            flat = a.reshape(-1, self.count)
            s = column_sums(flat)
            return np.add.reduce(flat, axis=0) if s is None else s
        return self.xp.sum(a, axis=self.others)

    def wide(self, v):
        return v if self.shape is None else v.reshape(self.shape)


def _scalar(dtype, value):
    """A NumPy scalar of ``dtype``: no promotion, and passed to a GPU kernel by value."""
    return np.dtype(dtype).type(value)


def _normalise(ch, x, mean, inv_std, scale, offset):
    """``(x - mean) * inv_std * scale + offset``, in ``scale``'s type, as ``x``'s type."""
    k = inv_std * scale
    out = ch.xp.multiply(x, ch.wide(k), dtype=scale.dtype)
    out += ch.wide(offset - mean * k)
    return out.astype(x.dtype, copy=False)


def _batch_statistics(ch, x, u):
    """The batch mean and biased variance per channel, and ``x`` centred, all of type ``u``."""
    n = _scalar(u, ch.per_channel)
    mean = ch.sums(x.astype(u, copy=False)) / n
    centred = ch.xp.subtract(x, ch.wide(mean), dtype=u)
    variance = ch.sums(centred * centred) / n
    return mean, variance, centred


# Elements from which oneDNN's primitives beat NumPy's passes (per call, 1 thread, AMD EPYC:
# 512 elements 32 against 24 us, 4,096: 17 against 25 us, 524,288: 125 against 767 us).
_ONEDNN_MIN_SIZE = 2048


def _library(node, ctx, fmt):
    """(oneDNN backend or None, its label) for a fused batch norm kernel: float32 NHWC data.
    oneDNN's fast batch norm is for channels-last data; for NCHW it picks a generic one, slower
    than NumPy's (a (32, 64, 16, 16) forward: 1.5 ms against 0.67)."""
    if fmt != "NHWC":
        return None, None
    return (onednn.for_kernel(ctx, node.output_types[0].as_numpy_dtype),
            onednn.label(node.op))


@kernel("FusedBatchNormV3")
def _fused_batch_norm(node, ctx):
    xp = ctx.xp
    epsilon, factor, fmt, training = fused_bn_attrs(node.attr)
    extra = FUSED_BATCH_NORMS.get(node.op, 6) - 5
    dnn, label = _library(node, ctx, fmt)

    def fused_batch_norm(x, scale, offset, mean, variance):
        ch = _Channels(xp, node, x, fmt)
        u = scale.dtype
        names = ["scale", "offset", "mean", "variance"]
        given = [scale, offset] + ([] if training and factor == 1.0 else [mean, variance])
        ch.check(node, given, names)
        eps = _scalar(u, epsilon)
        done = dnn.batch_norm(x, scale, offset, mean, variance, fmt, epsilon, training) \
            if dnn is not None and x.size >= _ONEDNN_MIN_SIZE else None
        fused_batch_norm.kernel_label = label if done is not None else None
        with np.errstate(all="ignore"):  # an empty batch's statistics are NaN, quietly
            if not training:
                y = done[0] if done is not None else _normalise(
                    ch, x, mean, 1 / xp.sqrt(variance + eps), scale, offset)
                return (y, mean, variance, mean, variance) + (xp.empty(0, u),) * extra
            if done is not None:
                y, batch_mean, batch_var = done
            else:
                batch_mean, batch_var, centred = _batch_statistics(ch, x, u)
                inv_std = 1 / xp.sqrt(batch_var + eps)
                y = _normalise(ch, centred, xp.zeros((), u), inv_std, scale, offset)
            # the moving variance averages the unbiased estimate
            unbiased = batch_var * _scalar(u, ch.per_channel / max(ch.per_channel - 1, 1))
            out_mean, out_var = batch_mean, unbiased
            if factor != 1.0:
                f, keep = _scalar(u, factor), _scalar(u, 1.0 - factor)
                out_mean, out_var = keep * mean + f * batch_mean, keep * variance + f * unbiased
        return (y.astype(x.dtype, copy=False), out_mean, out_var, batch_mean,
                batch_var) + (xp.empty(0, u),) * extra

    return fused_batch_norm


@kernel("FusedBatchNormGradV3")
def _fused_batch_norm_grad(node, ctx):
    xp = ctx.xp
    epsilon, _, fmt, training = fused_bn_attrs(node.attr)
    dnn, label = _library(node, ctx, fmt)

    def fused_batch_norm_grad(dy, x, scale, mean, variance, *unused):
        ch = _Channels(xp, node, x, fmt)
        u = scale.dtype
        ch.check(node, [scale, mean, variance], ["scale", "reserve_space_1", "reserve_space_2"])
        if dy.shape != x.shape:
            raise errors.InvalidArgumentError(
                None, node, f"{node.op}: y_backprop and x must have the same shape, got "
                f"{list(dy.shape)} and {list(x.shape)}")
        done = dnn.batch_norm_grad(dy, x, scale, mean, variance, fmt, epsilon, training) \
            if dnn is not None and x.size >= _ONEDNN_MIN_SIZE else None
        fused_batch_norm_grad.kernel_label = label if done is not None else None
        if done is not None:
            empty = xp.empty(0, u)
            return done + (empty, empty)
        with np.errstate(all="ignore"):
            inv_std = 1 / xp.sqrt(variance + _scalar(u, epsilon))
            x_hat = xp.subtract(x, ch.wide(mean), dtype=u)
            x_hat *= ch.wide(inv_std)
            dyf = dy.astype(u, copy=False)
            d_offset = ch.sums(dyf)
            d_scale = ch.sums(dyf * x_hat)
            k = scale * inv_std
            if training:  # dy less its mean and its projection on x_hat, per channel
                n = _scalar(u, ch.per_channel)
                x_hat *= ch.wide(d_scale / n)
                x_hat += ch.wide(d_offset / n)
                dx = xp.subtract(dyf, x_hat)
                dx *= ch.wide(k)
            else:
                dx = dyf * ch.wide(k)
        empty = xp.empty(0, u)
        return dx.astype(x.dtype, copy=False), d_scale, d_offset, empty, empty

    return fused_batch_norm_grad


for _name in FUSED_BATCH_NORMS:
    if _name != "FusedBatchNormV3":
        kernel(_name)(_fused_batch_norm)
for _name in FUSED_BATCH_NORM_GRADS:
    if _name != "FusedBatchNormGradV3":
        kernel(_name)(_fused_batch_norm_grad)
