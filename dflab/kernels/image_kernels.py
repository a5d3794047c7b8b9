"""Kernels of the image geometry ops (``dflab.ops.image_ops``): resizing and its gradients,
crop-and-resize, patches.

Every resize but nearest-neighbour is linear and separable, so it is two matrix products:
``out[b] = Wh @ image[b] @ Ww.T`` per channel, where each interpolation matrix ``W[out, in]``
holds the weights TF's kernel gives input row (column) ``in`` for output ``out``; the
gradient is the same products with the matrices transposed. The matrices are built on the
host from TF's index arithmetic (float32 scales, its half-pixel and align-corners rules, the
bicubic coefficient table with 1024 steps), and applied with the device's ``xp``.
Nearest-neighbour gathers rows and columns (exact for every dtype); its gradient adds the
incoming gradient back with the transposed one-hot matrices.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host
from dflab.kernels.registry import kernel

_TABLE_SIZE = 1024


def resize_scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    """TF's ``CalculateResizeScale``, in float32 as TF computes it."""
    if align_corners and out_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


def _source_coords(out_size, scale, half_pixel, nn=False):
    x = np.arange(out_size, dtype=np.float32)
    if half_pixel:
        return (x + np.float32(0.5)) * scale - (np.float32(0) if nn else np.float32(0.5))
    return x * scale


def nearest_indices(in_size, out_size, align_corners, half_pixel) -> np.ndarray:
    scale = resize_scale(in_size, out_size, align_corners)
    src = _source_coords(out_size, scale, half_pixel, nn=True)
    if align_corners:  # TF's roundf: halves away from zero
        idx = np.sign(src) * np.floor(np.abs(src) + np.float32(0.5))
    else:
        idx = np.floor(src)
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    return np.maximum(idx, 0) if half_pixel else idx


def _bilinear_matrix(in_size, out_size, align_corners, half_pixel):
    scale = resize_scale(in_size, out_size, align_corners)
    src = _source_coords(out_size, scale, half_pixel)
    low = np.floor(src)
    frac = (src - low).astype(np.float32)
    lo = np.clip(low, 0, in_size - 1).astype(np.int64)
    hi = np.clip(np.ceil(src) if half_pixel else low + 1, 0, in_size - 1).astype(np.int64)
    w = np.zeros((out_size, in_size), np.float32)
    rows = np.arange(out_size)
    np.add.at(w, (rows, lo), 1 - frac)
    np.add.at(w, (rows, hi), frac)
    return w


def _cubic_coeffs(a: float):
    """TF's coefficient table: (near, far) kernel values at i / 1024, i = 0..1024."""
    x = np.arange(_TABLE_SIZE + 1, dtype=np.float64) / _TABLE_SIZE
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    x1 = x + 1
    far = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a
    return near.astype(np.float32), far.astype(np.float32)


def _bicubic_matrix(in_size, out_size, align_corners, half_pixel):
    keys = half_pixel  # TF: Keys' cubic (a = -0.5) with half-pixel centres, else a = -0.75
    near, far = _cubic_coeffs(-0.5 if keys else -0.75)
    scale = resize_scale(in_size, out_size, align_corners)
    src = _source_coords(out_size, scale, half_pixel)
    w = np.zeros((out_size, in_size), np.float32)
    for o, s in enumerate(src):
        base = int(np.floor(s))
        offset = int(np.rint((s - np.float32(base)) * _TABLE_SIZE))
        weights = [far[offset], near[offset], near[_TABLE_SIZE - offset],
                   far[_TABLE_SIZE - offset]]
        taps = [base - 1, base, base + 1, base + 2]
        bounded = [min(max(t, 0), in_size - 1) for t in taps]
        if keys:  # taps outside the image get no weight; the rest are renormalized
            weights = [wt if b == t else np.float32(0) for wt, b, t in zip(weights, bounded, taps)]
            total = np.float32(sum(weights))
            if abs(total) >= 1000.0 * np.finfo(np.float32).tiny:
                weights = [np.float32(wt / total) for wt in weights]
        for b, wt in zip(bounded, weights):
            w[o, b] += wt
    return w


def _area_matrix(in_size, out_size, align_corners, half_pixel=False):
    scale = resize_scale(in_size, out_size, align_corners)
    w = np.zeros((out_size, in_size), np.float32)
    for o in range(out_size):
        start, end = np.float32(o) * scale, np.float32(o + 1) * scale
        for i in range(int(np.floor(start)), int(np.ceil(end))):
            part = min(np.float32(i + 1), end) - max(np.float32(i), start)
            w[o, min(max(i, 0), in_size - 1)] += part / scale
    return w


MATRICES = {"bilinear": _bilinear_matrix, "bicubic": _bicubic_matrix, "area": _area_matrix}


def _size(node, size):
    hw = [int(v) for v in np.ravel(host(size))]
    if len(hw) != 2 or min(hw) <= 0:
        raise errors.InvalidArgumentError(
            None, node, f"size must be two positive integers, got {hw}")
    return hw


def _check_image(node, image):
    if image.ndim != 4:
        raise errors.InvalidArgumentError(
            None, node, f"input must be 4-dimensional {list(image.shape)}")


def _apply(xp, image, wh, ww):
    """``wh @ image[b, :, :, c] @ ww.T`` for every batch and channel, in float32."""
    x = xp.asarray(image).astype(np.float32, copy=False)
    tmp = xp.einsum("oh,bhwc->bowc", xp.asarray(wh), x)
    return xp.einsum("pw,bowc->bopc", xp.asarray(ww), tmp)


def _linear_resize(kind):
    def factory(node, ctx):
        xp = ctx.xp
        align, half = node.attr["align_corners"], node.attr.get("half_pixel_centers", False)
        make = MATRICES[kind]

        def resize(image, size):
            _check_image(node, image)
            oh, ow = _size(node, size)
            _, h, w, _ = image.shape
            return _apply(xp, image, make(h, oh, align, half), make(w, ow, align, half))

        return resize

    return factory


def _linear_resize_grad(kind):
    def factory(node, ctx):
        xp = ctx.xp
        align, half = node.attr["align_corners"], node.attr.get("half_pixel_centers", False)
        make = MATRICES[kind]

        def resize_grad(grads, original):
            _, h, w, _ = original.shape
            _, oh, ow, _ = grads.shape
            g = _apply(xp, grads, make(h, oh, align, half).T, make(w, ow, align, half).T)
            return g.astype(original.dtype, copy=False)

        return resize_grad

    return factory


for _kind, _op in (("bilinear", "ResizeBilinear"), ("bicubic", "ResizeBicubic"),
                   ("area", "ResizeArea")):
    kernel(_op, host_memory_inputs=(1,))(_linear_resize(_kind))
for _kind, _op in (("bilinear", "ResizeBilinearGrad"), ("bicubic", "ResizeBicubicGrad")):
    kernel(_op)(_linear_resize_grad(_kind))


@kernel("ResizeNearestNeighbor", host_memory_inputs=(1,))
def _resize_nearest(node, ctx):
    xp = ctx.xp
    align, half = node.attr["align_corners"], node.attr.get("half_pixel_centers", False)

    def resize(image, size):
        _check_image(node, image)
        oh, ow = _size(node, size)
        _, h, w, _ = image.shape
        rows = xp.asarray(nearest_indices(h, oh, align, half))
        cols = xp.asarray(nearest_indices(w, ow, align, half))
        return xp.take(xp.take(image, rows, axis=1), cols, axis=2)

    return resize


@kernel("ResizeNearestNeighborGrad", host_memory_inputs=(1,))
def _resize_nearest_grad(node, ctx):
    xp = ctx.xp
    align, half = node.attr["align_corners"], node.attr.get("half_pixel_centers", False)

    def one_hot(in_size, out_size):
        m = np.zeros((out_size, in_size), np.float64)
        m[np.arange(out_size), nearest_indices(in_size, out_size, align, half)] = 1
        return m

    def resize_grad(grads, size):
        h, w = _size(node, size)
        _, oh, ow, _ = grads.shape
        x = xp.asarray(grads)
        tmp = xp.einsum("oh,bowc->bhwc", xp.asarray(one_hot(h, oh).astype(x.dtype)), x)
        out = xp.einsum("pw,bhpc->bhwc", xp.asarray(one_hot(w, ow).astype(x.dtype)), tmp)
        return out.astype(grads.dtype, copy=False)

    return resize_grad
