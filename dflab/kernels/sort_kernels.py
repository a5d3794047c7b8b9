"""Kernels of ``dflab.ops.sort_ops``: ``LowerBound``/``UpperBound``, ``Roll``,
``UniqueWithCounts``, ``ListDiff``, ``UnravelIndex``, ``DenseBincount`` and
``HistogramFixedWidth``, written against the device's ``xp``; small host-side arguments
(shifts, axes, sizes, bin counts) read with NumPy, as TF keeps them in host memory.

Checks that TF's CPU kernels make (indices in range, non-negative counts) raise
``InvalidArgumentError`` naming the node.
"""

from __future__ import annotations

import numpy as np

from dflab.kernels.array_kernels import _bad, _ints
from dflab.kernels.context import host
from dflab.kernels.registry import kernel


def _bound(side):
    def factory(node, ctx):
        xp = ctx.xp
        out = node.attr["out_type"]._np

        def bound(seq, values):
            seq, values = xp.asarray(seq), xp.asarray(values)
            if seq.shape[0] != values.shape[0]:
                raise _bad(node, f"Leading dim_size of both tensors must match, got "
                                 f"{seq.shape[0]} and {values.shape[0]}")
            rows = [xp.searchsorted(seq[r], values[r], side=side)
                    for r in range(values.shape[0])]
            if not rows:
                return xp.zeros(values.shape, dtype=out)
            return xp.stack(rows).astype(out)

        return bound

    return factory


kernel("LowerBound")(_bound("left"))
kernel("UpperBound")(_bound("right"))


@kernel("ApproxTopK")
def _approx_top_k(node, ctx):
    xp = ctx.xp
    k, dim = node.attr["k"], node.attr["reduction_dimension"]
    largest = node.attr["is_max_k"]

    def approx_top_k(x):
        # Exact: the k extreme entries in order, ties by lower index first (TF's CPU kernel).
        x = xp.moveaxis(xp.asarray(x), dim, -1)
        n = x.shape[-1]
        if k > n:
            raise _bad(node, f"k ({k}) must not exceed the reduction dimension ({n})")
        if largest:
            order = (n - 1 - xp.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1])
        else:
            order = xp.argsort(x, axis=-1, kind="stable")
        idx = order[..., :k].astype(np.int32)
        values = xp.take_along_axis(x, idx, -1)
        return xp.moveaxis(values, -1, dim), xp.moveaxis(idx, -1, dim)

    return approx_top_k


@kernel("Roll", host_memory_inputs=(1, 2))
def _roll(node, ctx):
    xp = ctx.xp

    def roll(x, shift, axis):
        x = xp.asarray(x)
        shifts, axes = _ints(shift), _ints(axis)
        if len(shifts) != len(axes):
            raise _bad(node, f"shift and axis must have the same size, got {len(shifts)} and "
                             f"{len(axes)}")
        for a in axes:
            if not -x.ndim <= a < x.ndim:
                raise _bad(node, f"axis {a} is out of range for a tensor of rank {x.ndim}")
        if not axes:
            return x.copy()
        return xp.roll(x, tuple(shifts), axis=tuple(axes))

    return roll


@kernel("UniqueWithCounts")
def _unique_with_counts(node, ctx):
    xp = ctx.xp
    idx_dt = node.attr["out_idx"]._np

    def unique_with_counts(x):
        x = xp.asarray(x)
        if x.size == 0:
            return x.copy(), xp.zeros(0, dtype=idx_dt), xp.zeros(0, dtype=idx_dt)
        values, first, inverse, counts = xp.unique(x, return_index=True, return_inverse=True,
                                                   return_counts=True)
        # TF lists values in order of first appearance, NumPy sorted: renumber.
        order = xp.argsort(first, kind="stable")
        position = xp.empty_like(order)
        position[order] = xp.arange(order.size)
        return (values[order], position[inverse.ravel()].astype(idx_dt),
                counts[order].astype(idx_dt))

    return unique_with_counts


@kernel("ListDiff")
def _list_diff(node, ctx):
    xp = ctx.xp
    idx_dt = node.attr["out_idx"]._np

    def list_diff(x, y):
        x, y = xp.asarray(x), xp.asarray(y)
        keep = ~xp.isin(x, y)
        return x[keep], xp.nonzero(keep)[0].astype(idx_dt)

    return list_diff


@kernel("UnravelIndex", host_memory_inputs=(1,))
def _unravel_index(node, ctx):
    xp = ctx.xp

    def unravel_index(indices, dims):
        idx = xp.asarray(indices)
        shape = tuple(_ints(dims))
        if idx.ndim > 1:
            raise _bad(node, f"The indices can only be scalar or vector, got "
                             f"{list(idx.shape)}")
        if any(d <= 0 for d in shape) and idx.size:
            raise _bad(node, "dims must contain positive values")
        total = int(np.prod(shape, dtype=np.int64))
        if idx.size and bool(((idx < 0) | (idx >= total)).any()):
            raise _bad(node, f"index out of bounds for array of dimension {total}")
        coords = xp.unravel_index(idx.ravel(), shape) if idx.ndim else \
            xp.unravel_index(idx, shape)
        return xp.stack([xp.asarray(c) for c in coords]).astype(idx.dtype)

    return unravel_index


@kernel("DenseBincount", host_memory_inputs=(1,))
def _dense_bincount(node, ctx):
    xp = ctx.xp
    binary = node.attr.get("binary_output", False)
    out_dt = node.output_types[0]._np

    def bincount(arr, size, weights):
        arr, weights = xp.asarray(arr), xp.asarray(weights)
        n = int(host(size))
        if n < 0:
            raise _bad(node, f"size ({n}) must be non-negative")
        if arr.size and bool((arr < 0).any()):
            raise _bad(node, "Input arr must be non-negative!")
        use_weights = weights.size > 0 and not binary
        if use_weights and weights.shape != arr.shape:
            raise _bad(node, f"Weights and arr must have the same shape, got "
                             f"{list(weights.shape)} and {list(arr.shape)}")
        keep = arr < n  # values past the last bin are dropped (maxlength)
        flat = arr[keep].astype(np.int64)
        w = weights[keep] if use_weights else None
        counts = xp.bincount(flat, weights=w, minlength=n)[:n] if n else \
            xp.zeros(0, dtype=out_dt)
        if binary:
            counts = counts > 0
        return counts.astype(out_dt)

    return bincount


@kernel("HistogramFixedWidth", host_memory_inputs=(1, 2))
def _histogram_fixed_width(node, ctx):
    xp = ctx.xp
    out_dt = node.attr["dtype"]._np

    def histogram(values, value_range, nbins):
        lo, hi = (float(v) for v in host(value_range).ravel()[:2])
        n = int(host(nbins))
        if n <= 0:
            raise _bad(node, f"nbins should be a positive number, but got '{n}'")
        if not lo < hi:
            raise _bad(node, f"value_range should satisfy value_range[0] < value_range[1], "
                             f"but got '[{lo}, {hi}]'")
        # TF's arithmetic: in double, step = (hi - lo) / nbins, clamped at both ends.
        v = xp.asarray(values).ravel()
        step = (hi - lo) / n
        bins = xp.minimum((xp.maximum(v, v.dtype.type(lo)) - v.dtype.type(lo))
                          .astype(np.float64) / step, n - 1).astype(np.int32)
        return xp.bincount(bins, minlength=n)[:n].astype(out_dt)

    return histogram
