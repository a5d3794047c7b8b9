"""Segment reductions beyond sums: ``segment_max/min/prod/mean`` over sorted ids,
``unsorted_segment_max/min/prod`` over any ids, and TF's compositions
``unsorted_segment_mean`` and ``unsorted_segment_sqrt_n``.

Each op: schema (the shape rule of ``SegmentSum``/``UnsortedSegmentSum``), gradient and
builder side by side; kernels in ``dflab.kernels.segment_kernels``. The gradients are TF's
(``math_grad.py``): a max or min passes its gradient to the entries equal to the result,
shared evenly among ties; a product's gradient is the product of the other entries, zeros
included.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant
from dflab.framework.registry import RegisterGradient, register_op
from dflab.framework.tensor_shape import Dimension
from dflab.ops import array_ops
from dflab.ops import math_ops as _m
from dflab.ops.math_ops import _check_dtype, _is_real
from dflab.ops.reduction_ops import (
    _segment_sum_infer,
    _unsorted_segment_sum_infer,
    segment_sum,
    unsorted_segment_sum,
)


def _real_only(infer):
    def check(op):
        _check_dtype(op, op.inputs[0].dtype.base_dtype, _is_real)
        return infer(op)

    return check


register_op("SegmentMax", _real_only(_segment_sum_infer))
register_op("SegmentMin", _real_only(_segment_sum_infer))
register_op("SegmentProd", _segment_sum_infer)
register_op("SegmentMean", _segment_sum_infer)
register_op("UnsortedSegmentMax", _real_only(_unsorted_segment_sum_infer))
register_op("UnsortedSegmentMin", _real_only(_unsorted_segment_sum_infer))
register_op("UnsortedSegmentProd", _unsorted_segment_sum_infer)


def _ids(segment_ids):
    if _ops.is_tensor_like(segment_ids):
        return _ops.convert_to_tensor(segment_ids)
    return constant(segment_ids, dtype=_dt.int32)


def _num(num_segments):
    if isinstance(num_segments, Dimension):
        num_segments = num_segments.value
    if not _ops.is_tensor_like(num_segments):
        return constant(int(num_segments), dtype=_dt.int32)
    return _ops.convert_to_tensor(num_segments)


def _sorted(op_type, data, segment_ids, name):
    data = _ops.convert_to_tensor(data)
    return _ops.apply_op(op_type, [data, _ids(segment_ids)], None, name).outputs[0]


def _unsorted(op_type, data, segment_ids, num_segments, name):
    data = _ops.convert_to_tensor(data)
    return _ops.apply_op(op_type, [data, _ids(segment_ids), _num(num_segments)], None,
                         name).outputs[0]


def segment_max(data, segment_ids, name=None):
    """Maxima of rows of ``data`` over sorted ``segment_ids`` (an empty segment gives 0)."""
    return _sorted("SegmentMax", data, segment_ids, name)


def segment_min(data, segment_ids, name=None):
    """Minima of rows of ``data`` over sorted ``segment_ids`` (an empty segment gives 0)."""
    return _sorted("SegmentMin", data, segment_ids, name)


def segment_prod(data, segment_ids, name=None):
    """Products of rows of ``data`` over sorted ``segment_ids`` (an empty segment gives 1)."""
    return _sorted("SegmentProd", data, segment_ids, name)


def segment_mean(data, segment_ids, name=None):
    """Means of rows of ``data`` over sorted ``segment_ids`` (an empty segment gives 0)."""
    return _sorted("SegmentMean", data, segment_ids, name)


def unsorted_segment_max(data, segment_ids, num_segments, name=None):
    """``out[i] = max(data[j] for j where segment_ids[j] == i)``; an empty segment holds the
    dtype's lowest value, negative ids are dropped."""
    return _unsorted("UnsortedSegmentMax", data, segment_ids, num_segments, name)


def unsorted_segment_min(data, segment_ids, num_segments, name=None):
    """``out[i] = min(data[j] for j where segment_ids[j] == i)``; an empty segment holds the
    dtype's highest value, negative ids are dropped."""
    return _unsorted("UnsortedSegmentMin", data, segment_ids, num_segments, name)


def unsorted_segment_prod(data, segment_ids, num_segments, name=None):
    """``out[i] = prod(data[j] for j where segment_ids[j] == i)``; an empty segment holds 1,
    negative ids are dropped."""
    return _unsorted("UnsortedSegmentProd", data, segment_ids, num_segments, name)


def _unsorted_segment_n(data, segment_ids, num_segments):
    """Entries per segment (at least 1), shaped to divide the segment sums of ``data``."""
    ones = array_ops.ones(array_ops.shape(segment_ids), dtype=data.dtype)
    n = unsorted_segment_sum(ones, segment_ids, num_segments)
    extra = array_ops.ones([array_ops.rank(data) - array_ops.rank(segment_ids)],
                           dtype=num_segments.dtype)
    n = array_ops.reshape(n, array_ops.concat([array_ops.expand_dims(num_segments, 0), extra],
                                              0))
    return _m.maximum(n, constant(1, dtype=data.dtype))


def unsorted_segment_mean(data, segment_ids, num_segments, name=None):
    """Means over segments in any order (TF's composition of segment sums); an empty segment
    gives 0."""
    with _ops.name_scope(name, "UnsortedSegmentMean"):
        data, ids, num = _ops.convert_to_tensor(data), _ids(segment_ids), _num(num_segments)
        n = _unsorted_segment_n(data, ids, num)
        return _m.truediv(unsorted_segment_sum(data, ids, num), n)


def unsorted_segment_sqrt_n(data, segment_ids, num_segments, name=None):
    """Segment sums divided by the square root of each segment's size."""
    with _ops.name_scope(name, "UnsortedSegmentSqrtN"):
        data, ids, num = _ops.convert_to_tensor(data), _ids(segment_ids), _num(num_segments)
        n = _unsorted_segment_n(data, ids, num)
        return _m.truediv(unsorted_segment_sum(data, ids, num), _m.sqrt(n))


# --- gradients ----------------------------------------------------------------------------------
def _zero(t):
    return constant(0, dtype=t.dtype.base_dtype)


def _gather_drop_negatives(params, ids, clipped=None, is_positive=None):
    """TF's helper: ``params[ids]`` with 0 where an id is negative; also returns the clipped
    ids and the (broadcast) mask of non-negative ids, for reuse."""
    if clipped is None:
        clipped = _m.maximum(ids, array_ops.zeros_like(ids))
    gathered = array_ops.gather(params, clipped)
    if is_positive is None:
        is_positive = _m.greater_equal(ids, _zero(ids))
        shape = array_ops.concat(
            [array_ops.shape(is_positive),
             array_ops.ones([array_ops.rank(gathered) - array_ops.rank(is_positive)],
                            dtype=_dt.int32)], 0)
        is_positive = _m.logical_and(array_ops.reshape(is_positive, shape),
                                     array_ops.ones_like(gathered, dtype=_dt.bool))
    return (array_ops.where_v2(is_positive, gathered, array_ops.zeros_like(gathered)),
            clipped, is_positive)


def _segment_min_or_max_grad(op, grad):
    data, ids = op.inputs
    is_selected = _m.equal(data, array_ops.gather(op.outputs[0], ids))
    num_selected = segment_sum(_m.cast(is_selected, grad.dtype), ids)
    gathered = array_ops.gather(_m.divide(grad, num_selected), ids)
    return [array_ops.where_v2(is_selected, gathered, array_ops.zeros_like(data)), None]


RegisterGradient("SegmentMax")(_segment_min_or_max_grad)
RegisterGradient("SegmentMin")(_segment_min_or_max_grad)


@RegisterGradient("SegmentMean")
def _segment_mean_grad(op, grad):
    data, ids = op.inputs
    ones_shape = array_ops.concat(
        [array_ops.shape(ids),
         array_ops.ones(array_ops.expand_dims(array_ops.rank(data) - 1, 0), dtype=_dt.int32)],
        0)
    ones = array_ops.ones(ones_shape, dtype=grad.dtype)
    return [array_ops.gather(_m.divide(grad, segment_sum(ones, ids)), ids), None]


@RegisterGradient("SegmentProd")
def _segment_prod_grad(op, grad):
    data, ids = op.inputs
    is_zero = _m.equal(data, _zero(data))
    num_zeros = segment_sum(_m.cast(is_zero, _dt.int32), ids)
    grad = array_ops.where_v2(_m.greater(num_zeros, constant(1)), array_ops.zeros_like(grad),
                              grad)
    non_zero_data = array_ops.where_v2(is_zero, array_ops.ones_like(data), data)
    non_zero_prod = segment_prod(non_zero_data, ids)
    by_el = _m.truediv(array_ops.gather(op.outputs[0], ids), non_zero_data)
    partial = array_ops.where_v2(is_zero, array_ops.gather(non_zero_prod, ids), by_el)
    return [_m.multiply(array_ops.gather(grad, ids), partial), None]


def _unsorted_segment_min_or_max_grad(op, grad):
    data, ids, num = op.inputs
    gathered_out, clipped, is_positive = _gather_drop_negatives(op.outputs[0], ids)
    is_selected = _m.logical_and(_m.equal(data, gathered_out), is_positive)
    num_selected = unsorted_segment_sum(_m.cast(is_selected, grad.dtype), ids, num)
    gathered, _, _ = _gather_drop_negatives(_m.divide(grad, num_selected), None, clipped,
                                            is_positive)
    return [array_ops.where_v2(is_selected, gathered, array_ops.zeros_like(gathered)), None,
            None]


RegisterGradient("UnsortedSegmentMax")(_unsorted_segment_min_or_max_grad)
RegisterGradient("UnsortedSegmentMin")(_unsorted_segment_min_or_max_grad)


@RegisterGradient("UnsortedSegmentProd")
def _unsorted_segment_prod_grad(op, grad):
    data, ids, num = op.inputs
    is_zero = _m.equal(data, _zero(data))
    num_zeros = unsorted_segment_sum(_m.cast(is_zero, _dt.int32), ids, num)
    grad = array_ops.where_v2(_m.greater(num_zeros, constant(1)), array_ops.zeros_like(grad),
                              grad)
    non_zero_data = array_ops.where_v2(is_zero, array_ops.ones_like(data), data)
    non_zero_prod = unsorted_segment_prod(non_zero_data, ids, num)
    clipped = _m.maximum(ids, array_ops.zeros_like(ids))
    by_el = _m.truediv(array_ops.gather(op.outputs[0], clipped), data)  # may hold inf/NaN
    partial = array_ops.where_v2(is_zero, array_ops.gather(non_zero_prod, clipped), by_el)
    gathered_grad = _gather_drop_negatives(grad, ids, clipped)[0]
    return [_m.multiply(gathered_grad, partial), None, None]


__all__ = [
    "segment_max", "segment_min", "segment_prod", "segment_mean", "unsorted_segment_max",
    "unsorted_segment_min", "unsorted_segment_prod", "unsorted_segment_mean",
    "unsorted_segment_sqrt_n",
]
