"""Kernels of local response normalization and its gradient, against the device's ``xp``.

With ``n = bias + alpha * window_sum(x ** 2)`` (the window: ``depth_radius`` channels each side
along the last axis) the output is ``x * n ** -beta`` and the gradient
``g * n ** -beta - 2 alpha beta x * window_sum(g * x * n ** (-beta - 1))``: the window sums
are a sum of shifted slices of a zero-padded copy.
"""

from __future__ import annotations

from dflab.kernels.registry import kernel


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
