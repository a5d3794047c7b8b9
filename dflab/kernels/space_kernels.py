"""Kernels of ``dflab.ops.space_ops``: ``SpaceToBatchND``, ``BatchToSpaceND``,
``SpaceToDepth``, ``DepthToSpace``, ``ExtractImagePatches``, ``ExtractVolumePatches``.

Each is a reshape-transpose-reshape (or, for patches, pad and gather by strided slices)
against the device's ``xp``; block shapes, paddings and crops are host-memory inputs, as in TF.
The result is always a fresh contiguous array, never a view of the input.
"""

from __future__ import annotations

import itertools

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host
from dflab.kernels.registry import kernel
from dflab.ops.conv_ops import conv_output_size


def _bad(node, message):
    return errors.InvalidArgumentError(None, node, message)


def _block_args(node, x, block_shape, pads, what):
    block = [int(b) for b in np.ravel(host(block_shape))]
    m = len(block)
    p = host(pads)
    if p.shape != (m, 2):
        raise _bad(node, f"{what} should have shape [{m}, 2] instead of {list(p.shape)}")
    if x.ndim < m + 1:
        raise _bad(node, f"input rank should be >= {m + 1} instead of {x.ndim}")
    if any(b < 1 for b in block):
        raise _bad(node, f"All values in block_shape must be positive, got value, "
                         f"{min(block)} instead.")
    if (p < 0).any():
        raise _bad(node, f"All values in {what} must be non-negative, got {p.tolist()}")
    return block, [(int(a), int(b)) for a, b in p.tolist()]


@kernel("SpaceToBatchND", host_memory_inputs=(1, 2))
def _space_to_batch_nd(node, ctx):
    xp = ctx.xp

    def space_to_batch_nd(x, block_shape, paddings):
        x = xp.asarray(x)
        block, pads = _block_args(node, x, block_shape, paddings, "paddings")
        m = len(block)
        rest = x.shape[m + 1:]
        x = xp.pad(x, [(0, 0)] + pads + [(0, 0)] * len(rest))
        split = [x.shape[0]]
        for i, b in enumerate(block):
            size = x.shape[i + 1]
            if size % b:
                raise _bad(node, f"padded_shape[{i}]={size} is not divisible by "
                                 f"block_shape[{i}]={b}")
            split += [size // b, b]
        x = x.reshape(split + list(rest))
        # [batch, s0, b0, s1, b1, ..., rest] -> [b0, b1, ..., batch, s0, s1, ..., rest]
        perm = ([2 * i + 2 for i in range(m)] + [0] + [2 * i + 1 for i in range(m)]
                + list(range(2 * m + 1, x.ndim)))
        x = xp.transpose(x, perm)
        out = [int(np.prod(block)) * split[0]] + split[1::2] + list(rest)
        return xp.ascontiguousarray(x).reshape(out)

    return space_to_batch_nd


@kernel("BatchToSpaceND", host_memory_inputs=(1, 2))
def _batch_to_space_nd(node, ctx):
    xp = ctx.xp

    def batch_to_space_nd(x, block_shape, crops):
        x = xp.asarray(x)
        block, crop = _block_args(node, x, block_shape, crops, "crops")
        m = len(block)
        prod = int(np.prod(block))
        if x.shape[0] % prod:
            raise _bad(node, f"Input batch dimension ({x.shape[0]}) is not divisible by "
                             f"product of block sizes ({prod})")
        spatial, rest = list(x.shape[1:m + 1]), list(x.shape[m + 1:])
        for i, (s, b, (c0, c1)) in enumerate(zip(spatial, block, crop)):
            if c0 + c1 > s * b:
                raise _bad(node, f"crops must be less than or equal to input shape: crop "
                                 f"{c0} + {c1} > {s * b} at dimension {i}")
        batch = x.shape[0] // prod
        x = x.reshape(block + [batch] + spatial + rest)
        # [b0, ..., batch, s0, ..., rest] -> [batch, s0, b0, s1, b1, ..., rest]
        perm = [m] + [p for i in range(m) for p in (m + 1 + i, i)] + list(range(2 * m + 1,
                                                                                 x.ndim))
        x = xp.ascontiguousarray(xp.transpose(x, perm))
        x = x.reshape([batch] + [s * b for s, b in zip(spatial, block)] + rest)
        index = (slice(None),) + tuple(slice(c0, x.shape[i + 1] - c1)
                                       for i, (c0, c1) in enumerate(crop))
        return xp.ascontiguousarray(x[index])

    return batch_to_space_nd


def _nhwc(x, fmt):
    return x if fmt == "NHWC" else x.transpose(0, 2, 3, 1)


def _from_nhwc(x, fmt):
    return x if fmt == "NHWC" else x.transpose(0, 3, 1, 2)


def _check_rank4(node, x):
    if x.ndim != 4:
        raise _bad(node, f"input rank should be 4 instead of {x.ndim}")


@kernel("SpaceToDepth")
def _space_to_depth(node, ctx):
    xp = ctx.xp
    size, fmt = int(node.attr["block_size"]), node.attr["data_format"]

    def space_to_depth(x):
        x = xp.asarray(x)
        _check_rank4(node, x)
        x = _nhwc(x, fmt)
        n, h, w, c = x.shape
        if h % size or w % size:
            raise _bad(node, f"Image width {w} and height {h} should be divisible by "
                             f"block_size: {size}")
        x = x.reshape(n, h // size, size, w // size, size, c).transpose(0, 1, 3, 2, 4, 5)
        x = xp.ascontiguousarray(x).reshape(n, h // size, w // size, size * size * c)
        return xp.ascontiguousarray(_from_nhwc(x, fmt))

    return space_to_depth


@kernel("DepthToSpace")
def _depth_to_space(node, ctx):
    xp = ctx.xp
    size, fmt = int(node.attr["block_size"]), node.attr["data_format"]

    def depth_to_space(x):
        x = xp.asarray(x)
        _check_rank4(node, x)
        x = _nhwc(x, fmt)
        n, h, w, c = x.shape
        if c % (size * size):
            raise _bad(node, f"Input depth dimension {c} should be divisible by: "
                             f"{size * size}")
        x = x.reshape(n, h, w, size, size, c // (size * size)).transpose(0, 1, 3, 2, 4, 5)
        x = xp.ascontiguousarray(x).reshape(n, h * size, w * size, c // (size * size))
        return xp.ascontiguousarray(_from_nhwc(x, fmt))

    return depth_to_space


def _patches(node, xp, x, ksizes, strides, rates, padding):
    """[batch, out..., prod(ksizes) * depth]: each window's elements in row-major order, each
    element's ``depth`` values together (TF's layout)."""
    rank = x.ndim
    if x.ndim != len(ksizes):
        raise _bad(node, f"input must be {len(ksizes)}-dimensional, got {list(x.shape)}")
    for what, v in (("ksizes", ksizes), ("strides", strides), ("rates", rates)):
        if v[0] != 1 or v[-1] != 1:
            raise _bad(node, f"{node.op} only supports {what} across space.")
    geometry = []
    for d, k, s, r in zip(x.shape[1:-1], ksizes[1:-1], strides[1:-1], rates[1:-1]):
        try:
            geometry.append(conv_output_size(d, k, s, r, padding))
        except ValueError as e:
            raise _bad(node, str(e)) from None
    pads = [(0, 0)] + [(lo, hi) for _, lo, hi in geometry] + [(0, 0)]
    x = xp.pad(x, pads) if any(p != (0, 0) for p in pads) else x
    outs = [o for o, _, _ in geometry]
    pieces = []
    for offsets in itertools.product(*[range(k) for k in ksizes[1:-1]]):
        index = (slice(None),) + tuple(
            slice(o * r, o * r + (n - 1) * s + 1, s) if n else slice(0, 0)
            for o, r, s, n in zip(offsets, rates[1:-1], strides[1:-1], outs)) + (slice(None),)
        pieces.append(x[index])
    if not pieces:
        return xp.zeros([x.shape[0]] + outs + [0], x.dtype)
    return xp.concatenate(pieces, axis=rank - 1) if len(pieces) > 1 else \
        xp.ascontiguousarray(pieces[0])


@kernel("ExtractImagePatches")
def _extract_image_patches(node, ctx):
    xp = ctx.xp
    ksizes, strides = list(node.attr["ksizes"]), list(node.attr["strides"])
    rates, padding = list(node.attr["rates"]), node.attr["padding"]

    def extract_image_patches(images):
        return _patches(node, xp, xp.asarray(images), ksizes, strides, rates, padding)

    return extract_image_patches


@kernel("ExtractVolumePatches")
def _extract_volume_patches(node, ctx):
    xp = ctx.xp
    ksizes, strides = list(node.attr["ksizes"]), list(node.attr["strides"])
    padding = node.attr["padding"]

    def extract_volume_patches(volumes):
        return _patches(node, xp, xp.asarray(volumes), ksizes, strides, [1] * len(ksizes),
                        padding)

    return extract_volume_patches
