"""Reduction ops: ``AddN`` (the sum of a list of tensors), reductions along axes
(``Sum``, ``Mean``, ``Max``, ``Min``, ``Prod``, ``Any``, ``All`` and the composites built on
them), ``ArgMax``/``ArgMin``, scans (``Cumsum``, ``Cumprod``) and segment sums.

Part of the math family: schema, gradient and builder side by side; kernels in
``dflab.kernels.math_kernels``; dtype checks and elementwise ops from ``math_ops``.
``math_ops`` re-exports the builders (it stays the one module to import math ops from) and
imports this module only at its end, after defining what this module imports from it.
"""

from __future__ import annotations

import builtins as _py

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import builder_constant, constant, constant_value, index_constant
from dflab.framework.eager_tensor import EagerTensor
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import Dimension, TensorShape
from dflab.ops import array_ops
from dflab.ops.math_ops import (
    _check_dtype,
    _is_bool,
    _is_numeric,
    _is_real,
    _scalar_like,
    add,
    cast,
    equal,
    exp,
    floordiv,
    greater_equal,
    log,
    maximum,
    minimum,
    multiply,
    not_equal,
    realdiv,
    subtract,
)
from dflab.ops.op_util import as_data, axis_list, check_same_dtype


# --- AddN -----------------------------------------------------------------------------------------
def _addn_infer(op):
    dt = check_same_dtype(op)
    _check_dtype(op, dt, _is_numeric)
    shape = TensorShape(None)
    for t in op.inputs:
        shape = shape.merge_with(t.shape)
    return [(dt, shape)]


register_op("AddN", _addn_infer)


@RegisterGradient("AddN")
def _addn_grad(op, grad):
    return [grad] * len(op.inputs)


def add_n(inputs, name=None):
    """Sum of a list of tensors of one shape and dtype (no broadcasting)."""
    if isinstance(inputs, _ops.Tensor) or not isinstance(inputs, (list, tuple)):
        raise ValueError("inputs must be a list of at least one Tensor with the same dtype and "
                         "shape")
    inputs = list(inputs)
    if not inputs:
        raise ValueError("inputs must be a non-empty list of tensors")
    if len(inputs) == 1:
        return array_ops.identity(inputs[0], name=name)
    return _ops.apply_op("AddN", inputs, {"N": len(inputs)}, name).outputs[0]


# --- reductions -----------------------------------------------------------------------------------
def _reduction_infer(op):
    x, axes = op.inputs
    keep = op.get_attr("keep_dims")
    dt = x.dtype.base_dtype
    _check_dtype(op, dt, _is_bool if op.type in ("Any", "All") else _is_numeric)
    if axes.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"reduction axes must be int32 or int64, got {axes.dtype.name}")
    if axes.shape.ndims not in (None, 0, 1):
        raise ValueError(f"reduction axes must be a scalar or vector, got shape {axes.shape}")
    rank = x.shape.ndims
    av = constant_value(axes)
    if rank is None:
        return [(dt, TensorShape(None))]
    if av is None:
        return [(dt, TensorShape([None] * rank if keep else None))]
    ax = axis_list(av, rank)
    dims = x.shape.as_list()
    if keep:
        out = [1 if i in ax else d for i, d in enumerate(dims)]
    else:
        out = [d for i, d in enumerate(dims) if i not in ax]
    return [(dt, TensorShape(out))]


for _t in ("Sum", "Mean", "Max", "Min", "Prod", "Any", "All"):
    register_op(_t, _reduction_infer)
NotDifferentiable("Any")
NotDifferentiable("All")


def _keepdims_arg(keepdims, keep_dims):
    if keepdims is not None and keep_dims is not None:
        raise ValueError("Cannot specify both 'keepdims' and 'keep_dims'")
    return bool(keep_dims if keep_dims is not None else keepdims)


def _axis_arg(axis, reduction_indices):
    if axis is not None and reduction_indices is not None:
        raise ValueError("Cannot specify both 'axis' and 'reduction_indices'")
    return reduction_indices if axis is None else axis


def _axis_tensor(x, axis):
    """The reduction axes of ``x`` as an int tensor (all axes when ``axis`` is None).
    Executing eagerly, the same axes are the same cached constant (``index_constant``)."""
    if type(axis) is int:
        return index_constant(axis)
    if isinstance(axis, _ops.Tensor):
        return axis
    if axis is None:
        ndim = x._value.ndim if type(x) is EagerTensor else x.shape.ndims
        if ndim is not None:
            return index_constant(_ALL_AXES[ndim] if ndim < len(_ALL_AXES) else
                                  tuple(range(ndim)))
        # unknown rank: all axes, computed at run time
        return _ops.apply_op("Range", [0, array_ops.rank(x), 1], {"Tidx": _dt.int32}).outputs[0]
    if isinstance(axis, (list, tuple)) and any(isinstance(a, _ops.Tensor) for a in axis):
        return array_ops.stack_ints(axis)
    arr = np.asarray(axis)
    if arr.dtype.kind not in "iu" and arr.size:
        raise TypeError(f"reduction axis must be an integer or a list of integers, got {axis!r}")
    arr = arr.astype(np.int32)
    return index_constant(tuple(arr.tolist())) if arr.ndim == 1 else constant(arr)


_ALL_AXES = tuple(tuple(range(n)) for n in range(9))  # every axis of a tensor of rank n

# The reductions' attributes, made once: an eager reduction takes the fast path.
_KEEP_DIMS = {keep: _ops.FrozenAttrs(keep_dims=keep) for keep in (False, True)}


def _reduce(op_type, input_tensor, axis, keepdims, name, keep_dims=None, reduction_indices=None):
    if type(input_tensor) is EagerTensor and keep_dims is None and reduction_indices is None:
        # An eager tensor, with TF 2's argument names: nothing to convert or reconcile.
        return _ops.apply_binary(op_type, input_tensor, _axis_tensor(input_tensor, axis), name,
                                 _KEEP_DIMS[bool(keepdims)])
    x = _ops.convert_to_tensor(input_tensor)
    axis = _axis_arg(axis, reduction_indices)
    keep = _keepdims_arg(keepdims, keep_dims)
    out = _ops.apply_binary(op_type, x, _axis_tensor(x, axis), name, _KEEP_DIMS[keep])
    if axis is None and not keep and out.shape.ndims is None:
        out.set_shape([])  # every axis of a tensor of unknown rank: a scalar (TF's)
    return out


def reduce_sum(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    return _reduce("Sum", input_tensor, axis, keepdims, name, keep_dims, reduction_indices)


def reduce_mean(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                keep_dims=None):
    """Mean over ``axis``; integer means truncate toward zero, as in TF."""
    return _reduce("Mean", input_tensor, axis, keepdims, name, keep_dims, reduction_indices)


def reduce_max(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    return _reduce("Max", input_tensor, axis, keepdims, name, keep_dims, reduction_indices)


def reduce_min(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    return _reduce("Min", input_tensor, axis, keepdims, name, keep_dims, reduction_indices)


def reduce_prod(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                keep_dims=None):
    return _reduce("Prod", input_tensor, axis, keepdims, name, keep_dims, reduction_indices)


def reduce_any(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    return _reduce("Any", input_tensor, axis, keepdims, name, keep_dims, reduction_indices)


def reduce_all(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    return _reduce("All", input_tensor, axis, keepdims, name, keep_dims, reduction_indices)


def reduce_logsumexp(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                     keep_dims=None):
    """``log(sum(exp(x)))`` computed stably by subtracting the (non-differentiated) max.

    A non-finite max is clamped into the finite range (TF replaces it by 0); both give the
    same result: the subtracted value is added back, and an infinite input dominates anyway.
    """
    keep = _keepdims_arg(keepdims, keep_dims)
    axis = _axis_arg(axis, reduction_indices)
    with _ops.name_scope(name, "ReduceLogSumExp", [input_tensor]) as scope:
        x = _ops.convert_to_tensor(input_tensor)
        raw_max = reduce_max(x, axis, keepdims=True)
        lo, hi = _scalar_like(x.dtype.min, x), _scalar_like(x.dtype.max, x)
        my_max = array_ops.stop_gradient(minimum(maximum(raw_max, lo), hi))
        result = log(reduce_sum(exp(subtract(x, my_max)), axis, keepdims=keep))
        if not keep:
            my_max = array_ops.reshape(my_max, array_ops.shape(result))
        return add(result, my_max, name=scope)


def count_nonzero(input_tensor, axis=None, keepdims=None, dtype=_dt.int64, name=None,
                  reduction_indices=None, keep_dims=None):
    keep = _keepdims_arg(keepdims, keep_dims)
    axis = _axis_arg(axis, reduction_indices)
    with _ops.name_scope(name, "count_nonzero", [input_tensor]):
        x = _ops.convert_to_tensor(input_tensor)
        zero = constant(np.zeros((), dtype=x.dtype._np), dtype=x.dtype.base_dtype)
        nonzero = cast(not_equal(x, zero), _dt.int64)
        return cast(reduce_sum(nonzero, axis, keepdims=keep), dtype)


def _reduced_shape_keepdims(op):
    """The input's shape with reduced axes set to 1 (list or tensor)."""
    x, axes = op.inputs
    av = constant_value(axes)
    if x.shape.is_fully_defined() and av is not None:
        ax = axis_list(av, x.shape.ndims)
        return [1 if i in ax else d for i, d in enumerate(x.shape.as_list())]
    return _ops.apply_op("ReducedShape", [array_ops.shape(x), axes]).outputs[0]


def _reduced_shape_infer(op):
    return [(_dt.int32, op.inputs[0].shape)]


register_op("ReducedShape", _reduced_shape_infer)
NotDifferentiable("ReducedShape")


def _keepdims_view(op, t):
    """``t`` (shaped like the op's output) reshaped as if the reduction had kept its dims."""
    if op.get_attr("keep_dims"):
        return t
    return array_ops.reshape(t, _reduced_shape_keepdims(op))


def _broadcast_to_like(grad, x):
    """``grad`` broadcast to ``x``'s shape, in one pass (as TF's ``_SumGrad``): a product with
    ``ones_like(x)`` would write a tensor of ones and read it back."""
    if x.shape.is_fully_defined():
        if grad.shape.is_fully_defined() and grad.shape.as_list() == x.shape.as_list():
            return grad
        return array_ops.broadcast_to(grad, x.shape.as_list())
    return array_ops.broadcast_to(grad, array_ops.shape(x))


@RegisterGradient("Sum")
def _sum_grad(op, grad):
    return [_broadcast_to_like(_keepdims_view(op, grad), op.inputs[0]), None]


@RegisterGradient("Mean")
def _mean_grad(op, grad):
    x, y = op.inputs[0], op.outputs[0]
    sum_grad = _sum_grad(op, grad)[0]
    n_in, n_out = x.shape.num_elements(), y.shape.num_elements()
    if n_in is not None and n_out is not None:
        factor = _scalar_like(n_in // _py.max(n_out, 1), sum_grad)
    else:
        size_in = reduce_prod(array_ops.shape(x))
        size_out = maximum(reduce_prod(array_ops.shape(y)), 1)
        factor = cast(floordiv(size_in, size_out), sum_grad.dtype)
    return [realdiv(sum_grad, factor), None]


def _min_or_max_grad(op, grad):
    """The gradient goes to the selected entries, split equally among ties (as in TF)."""
    x, axes = op.inputs
    y = _keepdims_view(op, op.outputs[0])
    grad = _keepdims_view(op, grad)
    indicators = cast(equal(y, x), grad.dtype)
    num_selected = reduce_sum(indicators, axes, keepdims=True)
    return [multiply(realdiv(indicators, num_selected), grad), None]


RegisterGradient("Max")(_min_or_max_grad)
RegisterGradient("Min")(_min_or_max_grad)


def _prod_of_others(x, axes):
    """For each entry of ``x``: the product of the other entries of its reduction block.

    Built from exclusive cumulative products, so zeros in ``x`` are handled exactly. Over
    several axes: (product along the first axis without self) times (the same quantity for the
    per-line totals over the remaining axes).
    """
    a, rest = axes[0], axes[1:]
    out = multiply(cumprod(x, a, exclusive=True), cumprod(x, a, exclusive=True, reverse=True))
    if rest:
        out = multiply(out, _prod_of_others(reduce_prod(x, a, keepdims=True), rest))
    return out


@RegisterGradient("Prod")
def _prod_grad(op, grad):
    x, axes = op.inputs
    grad = _broadcast_to_like(_keepdims_view(op, grad), x)
    av = constant_value(axes)
    try:
        ax = axis_list(av, x.shape.ndims) if av is not None else None
    except ValueError:
        ax = None
    if ax is None:  # axes unknown at build time: the simple formula (wrong where x == 0)
        return [realdiv(multiply(grad, _keepdims_view(op, op.outputs[0])), x), None]
    if not ax:
        return [grad, None]
    return [multiply(grad, _prod_of_others(x, ax)), None]


# --- ArgMax / ArgMin ----------------------------------------------------------------------------
def _arg_infer(op):
    x, axis = op.inputs
    _check_dtype(op, x.dtype.base_dtype, _is_real)
    out = op.get_attr("output_type")
    if axis.shape.ndims not in (None, 0):
        raise ValueError(f"dimension must be a scalar, got shape {axis.shape}")
    av = constant_value(axis)
    rank = x.shape.ndims
    if rank is None:
        return [(out, TensorShape(None))]
    if rank == 0:
        raise ValueError(f"{op.type} needs an input of rank >= 1")
    if av is None:
        return [(out, TensorShape([None] * (rank - 1)))]
    a = int(av)
    if not -rank <= a < rank:
        raise ValueError(f"axis {a} is out of range for a tensor of rank {rank}")
    dims = x.shape.as_list()
    del dims[a % rank]
    return [(out, TensorShape(dims))]


for _t in ("ArgMax", "ArgMin"):
    register_op(_t, _arg_infer)
    NotDifferentiable(_t)


def _arg_op(op_type, input, axis, name, dimension, output_type):  # noqa: A002
    if axis is not None and dimension is not None:
        raise ValueError("Cannot specify both 'axis' and 'dimension'")
    axis = dimension if axis is None else axis
    axis = 0 if axis is None else axis
    input = _ops.convert_to_tensor(input)  # noqa: A001
    out = _dt.as_dtype(output_type).base_dtype
    if out not in (_dt.int32, _dt.int64):
        raise TypeError(f"output_type must be int32 or int64, got {out.name}")
    if not isinstance(axis, _ops.Tensor):
        axis = builder_constant(axis, dtype=_dt.int32)
    return _ops.apply_op_output(op_type, [input, axis], _ops.frozen_attrs(output_type=out), name)


def argmax(input, axis=None, name=None, dimension=None, output_type=_dt.int64):  # noqa: A002
    return _arg_op("ArgMax", input, axis, name, dimension, output_type)


def argmin(input, axis=None, name=None, dimension=None, output_type=_dt.int64):  # noqa: A002
    return _arg_op("ArgMin", input, axis, name, dimension, output_type)


def arg_max(input, dimension, output_type=_dt.int64, name=None):  # noqa: A002
    """TF1's older spelling of ``argmax`` (``dimension`` is required)."""
    return _arg_op("ArgMax", input, None, name, dimension, output_type)


def arg_min(input, dimension, output_type=_dt.int64, name=None):  # noqa: A002
    """TF1's older spelling of ``argmin``."""
    return _arg_op("ArgMin", input, None, name, dimension, output_type)


# --- scans ----------------------------------------------------------------------------------------
def _scan_infer(op):
    x, axis = op.inputs
    _check_dtype(op, x.dtype.base_dtype, _is_numeric)
    if axis.shape.ndims not in (None, 0):
        raise ValueError(f"axis must be a scalar, got shape {axis.shape}")
    av, rank = constant_value(axis), x.shape.ndims
    if av is not None and rank is not None:
        a = int(av)
        if not -rank <= a < rank:
            raise ValueError(f"axis {a} is out of range for a tensor of rank {rank}")
    return [(x.dtype.base_dtype, x.shape)]


register_op("Cumsum", _scan_infer)
register_op("Cumprod", _scan_infer)


def _scan(op_type, x, axis, exclusive, reverse, name):
    x = _ops.convert_to_tensor(x)
    if not isinstance(axis, _ops.Tensor):
        axis = builder_constant(axis, dtype=_dt.int32)
    attrs = {"exclusive": bool(exclusive), "reverse": bool(reverse)}
    return _ops.apply_op(op_type, [x, axis], attrs, name).outputs[0]


def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):
    """Running sum along ``axis``; ``exclusive`` leaves out the current entry."""
    return _scan("Cumsum", x, axis, exclusive, reverse, name)


def cumprod(x, axis=0, exclusive=False, reverse=False, name=None):
    """Running product along ``axis``; ``exclusive`` leaves out the current entry."""
    return _scan("Cumprod", x, axis, exclusive, reverse, name)


@RegisterGradient("Cumsum")
def _cumsum_grad(op, grad):
    return [cumsum(grad, op.inputs[1], exclusive=op.get_attr("exclusive"),
                   reverse=not op.get_attr("reverse")), None]


@RegisterGradient("Cumprod")
def _cumprod_grad(op, grad):
    # TF's formula: exact wherever x != 0.
    x, axis = op.inputs
    out = cumsum(multiply(op.outputs[0], grad), axis, exclusive=op.get_attr("exclusive"),
                 reverse=not op.get_attr("reverse"))
    return [realdiv(out, x), None]


# --- segment sums -------------------------------------------------------------------------------
def _segment_ids_check(op, data, ids):
    if ids.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"segment_ids must be int32 or int64, got {ids.dtype.base_dtype.name}")
    _check_dtype(op, data.dtype.base_dtype, _is_numeric)
    if data.shape.ndims is None or ids.shape.ndims is None:
        return None
    prefix = data.shape.as_list()[:ids.shape.ndims]
    if len(prefix) < ids.shape.ndims or not TensorShape(prefix).is_compatible_with(ids.shape):
        raise ValueError(f"segment_ids shape {ids.shape} must be a prefix of data shape "
                         f"{data.shape}")
    return data.shape.as_list()[ids.shape.ndims:]


def _unsorted_segment_sum_infer(op):
    data, ids, num = op.inputs
    if num.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"num_segments must be int32 or int64, got {num.dtype.base_dtype.name}")
    rest = _segment_ids_check(op, data, ids)
    n = constant_value(num)
    n = None if n is None else int(n)
    if n is not None and n < 0:
        raise ValueError(f"num_segments must be >= 0, got {n}")
    if rest is None:
        return [(data.dtype.base_dtype, TensorShape(None))]
    return [(data.dtype.base_dtype, TensorShape([n] + rest))]


register_op("UnsortedSegmentSum", _unsorted_segment_sum_infer)


def _gather_drop_negatives(params, ids):
    """``params[ids]`` with rows for negative ids zeroed (those entries were dropped)."""
    gathered = array_ops.gather(params, maximum(ids, _scalar_like(0, ids)))
    keep = cast(greater_equal(ids, _scalar_like(0, ids)), gathered.dtype)
    extra = (gathered.shape.ndims or 0) - (ids.shape.ndims or 0)
    if ids.shape.ndims is None or gathered.shape.ndims is None:
        return gathered  # cannot line the mask up statically; negative ids are rare
    for _ in _py.range(extra):
        keep = array_ops.expand_dims(keep, -1)
    return multiply(gathered, keep)


@RegisterGradient("UnsortedSegmentSum")
def _unsorted_segment_sum_grad(op, grad):
    return [_gather_drop_negatives(grad, op.inputs[1]), None, None]


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    """``out[i] = sum(data[j] for j where segment_ids[j] == i)``; negative ids are dropped."""
    data = _ops.convert_to_tensor(data)
    ids = _ops.convert_to_tensor(segment_ids) if _ops.is_tensor_like(segment_ids) else \
        constant(segment_ids, dtype=_dt.int32)
    if isinstance(num_segments, Dimension):
        num_segments = num_segments.value
    if not _ops.is_tensor_like(num_segments):
        num_segments = builder_constant(int(num_segments), dtype=_dt.int32)
    return _ops.apply_op("UnsortedSegmentSum", [data, ids, num_segments], None,
                         name).outputs[0]


def _segment_sum_infer(op):
    data, ids = op.inputs
    if ids.shape.ndims not in (None, 1):
        raise ValueError(f"segment_ids must be a vector, got shape {ids.shape}")
    rest = _segment_ids_check(op, data, ids)
    if rest is None:
        return [(data.dtype.base_dtype, TensorShape(None))]
    return [(data.dtype.base_dtype, TensorShape([None] + rest))]


register_op("SegmentSum", _segment_sum_infer)


@RegisterGradient("SegmentSum")
def _segment_sum_grad(op, grad):
    return [array_ops.gather(grad, op.inputs[1]), None]


def segment_sum(data, segment_ids, name=None):
    """Sums of rows of ``data`` over sorted ``segment_ids``; the output has max(id)+1 rows."""
    ids = _ops.convert_to_tensor(segment_ids) if _ops.is_tensor_like(segment_ids) else \
        constant(segment_ids, dtype=_dt.int32)
    return _ops.apply_op("SegmentSum", [as_data(data, "data"), ids], None, name).outputs[0]


__all__ = [
    "add_n", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod",
    "reduce_any", "reduce_all", "reduce_logsumexp", "count_nonzero", "argmax", "argmin",
    "cumsum", "cumprod", "unsorted_segment_sum", "segment_sum",
]
