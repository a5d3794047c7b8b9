"""Kernels of the segment reductions beyond sums (``dflab.ops.segment_ops``): maxima, minima,
products and means over sorted segment ids, and maxima, minima and products over unsorted
ones, written against the device's ``xp`` with the row scatter of the segment sums
(``math_kernels._segment_scatter``).

What an empty segment holds is TF's: 0 for the sorted max, min and mean, 1 for products, and
for the unsorted max and min the lowest (highest) value of the dtype. Products scatter with
``multiply.at`` on the host; CuPy has none, so a device multiplies each segment's masked rows.
"""

from __future__ import annotations

import numpy as np

from dflab.kernels.math_kernels import _segment_scatter, _sorted_segment_count
from dflab.kernels.registry import register_kernel


def _limits(dtype):
    """(lowest, highest) finite values of ``dtype`` (NumPy's numeric limits)."""
    info = np.finfo(dtype) if np.dtype(dtype).kind == "f" else np.iinfo(dtype)
    return info.min, info.max


def _counts(xp, ids, n):
    """How many ids fall in each of the ``n`` segments (negative ids dropped)."""
    ids = xp.asarray(ids).ravel()
    return xp.bincount(ids[ids >= 0], minlength=n)[:n]


def _empty_rows_to_zero(xp, out, ids, n):
    empty = _counts(xp, ids, n) == 0
    out[empty] = 0
    return out


def _masked_product(xp, data, ids, n):
    """Segment products without ``multiply.at`` (CuPy has none): each segment's product over
    the rows masked to it, ``[n, rows, ...]`` at once; negative ids are dropped."""
    data, ids = xp.asarray(data), xp.asarray(ids)
    if data.shape[:ids.ndim] != ids.shape:
        raise ValueError(f"segment_ids shape {ids.shape} must be a prefix of data shape "
                         f"{data.shape}")
    rest = data.shape[ids.ndim:]
    rows = data.reshape((-1,) + rest)
    flat = ids.reshape(-1)
    if flat.size and int(flat.max()) >= n:
        raise ValueError(f"segment_ids value {int(flat.max())} is out of range [0, {n})")
    mask = (flat[None, :] == xp.arange(n, dtype=flat.dtype)[:, None])
    mask = mask.reshape(mask.shape + (1,) * len(rest))
    one = xp.ones((), dtype=data.dtype)
    return xp.prod(xp.where(mask, rows[None], one), axis=1, dtype=data.dtype)


def _scatter_or_mask(xp, data, ids, n, combine, initial):
    # NumPy scatters products with multiply.at; other namespaces multiply masked rows.
    if combine == "multiply" and xp is not np:
        return _masked_product(xp, data, ids, n)
    return _segment_scatter(xp, data, ids, n, combine, initial)


def _sorted(combine, identity_of, empty_to_zero):
    def segment(xp, data, ids):
        data = xp.asarray(data)
        n = _sorted_segment_count(xp, ids)
        out = _scatter_or_mask(xp, data, ids, n, combine, identity_of(data.dtype))
        return _empty_rows_to_zero(xp, out, ids, n) if empty_to_zero else out

    return segment


def _segment_mean(xp, data, ids):
    data = xp.asarray(data)
    n = _sorted_segment_count(xp, ids)
    total = _segment_scatter(xp, data, ids, n)
    count = xp.maximum(_counts(xp, ids, n), 1).reshape((n,) + (1,) * (data.ndim - 1))
    return (total / count.astype(data.dtype)).astype(data.dtype, copy=False)


def _unsorted(combine, identity_of):
    def segment(xp, data, ids, num_segments):
        n = int(num_segments)
        if n < 0:
            raise ValueError(f"num_segments must be >= 0, got {n}")
        data = xp.asarray(data)
        return _scatter_or_mask(xp, data, ids, n, combine, identity_of(data.dtype))

    return segment


def _lowest(dtype):
    return _limits(dtype)[0]


def _highest(dtype):
    return _limits(dtype)[1]


def _one(dtype):
    return 1


register_kernel("SegmentMax", xp=_sorted("maximum", _lowest, True))
register_kernel("SegmentMin", xp=_sorted("minimum", _highest, True))
register_kernel("SegmentMean", xp=_segment_mean)
register_kernel("UnsortedSegmentMax", host_memory_inputs=(2,),
                xp=_unsorted("maximum", _lowest))
register_kernel("UnsortedSegmentMin", host_memory_inputs=(2,),
                xp=_unsorted("minimum", _highest))
register_kernel("SegmentProd", xp=_sorted("multiply", _one, False))
register_kernel("UnsortedSegmentProd", host_memory_inputs=(2,), xp=_unsorted("multiply", _one))
