"""Sorting, searching and counting: ``sort``/``argsort`` (TF's composition over ``top_k``),
``math.approx_max_k``/``approx_min_k`` (``ApproxTopK``, exact here),
``searchsorted`` (``LowerBound``/``UpperBound``), ``roll``, ``meshgrid``, ``repeat``,
``unique_with_counts``, ``setdiff1d`` (``ListDiff``), ``unravel_index``, ``bincount``
(``DenseBincount``), ``confusion_matrix``, the fixed-width histograms, and the monotonicity
tests ``is_non_decreasing``/``is_strictly_increasing``.

Schemas, gradients and builders side by side; kernels in ``dflab.kernels.sort_kernels``.
Where TF builds a name in Python from other ops (``sort``, ``meshgrid``, ``repeat``,
``confusion_matrix``, ``histogram_fixed_width_bins``, the monotonicity tests), so does this
module, and the gradients follow from those ops'.
"""

from __future__ import annotations

import collections

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant, constant_value
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops, check_ops, control_flow_ops, nn_ops
from dflab.ops import math_ops as _m
from dflab.ops.array_ops import _as_int_tensor, _check_index_dtype


def _out_type(op, attr="out_type"):
    t = op.get_attr(attr)
    if t not in (_dt.int32, _dt.int64):
        raise TypeError(f"{attr} of '{op.type}' must be int32 or int64, got {t.name}")
    return t


# --- sort / argsort -----------------------------------------------------------------------------
def _static_axis(axis) -> int:
    value = constant_value(_ops.convert_to_tensor(axis)) if _ops.is_tensor_like(axis) else axis
    if value is None or np.ndim(value) != 0:
        raise ValueError(f"Argument `axis` must be a constant scalar. Received: axis={axis}.")
    return int(value)


def _descending(values, axis, return_argsort):
    """TF's: ``top_k`` over the whole axis, moved last and back (a swap is its own inverse)."""
    rank = values.shape.ndims
    k = array_ops.shape(values)[axis]
    if axis == -1 or (rank is not None and axis + 1 == rank):
        perm = None
        top_in = values
    else:
        if rank is None:
            raise ValueError("sort: the rank of values must be known to sort along an axis "
                             "other than the last")
        axis %= rank
        perm = list(range(rank))
        perm[axis], perm[-1] = perm[-1], perm[axis]
        top_in = array_ops.transpose(values, perm)
    out_values, indices = nn_ops.top_k(top_in, k)
    out = indices if return_argsort else out_values
    return out if perm is None else array_ops.transpose(out, perm)


def _ascending(values, axis, return_argsort):
    # TF flips the order so that top_k sorts descending: offset for unsigned integers,
    # -x - 1 for signed ones (no overflow at the minimum), negation for floats.
    dtype = values.dtype.base_dtype
    if dtype.is_unsigned:
        top = constant(dtype.max, dtype=dtype)
        out = _descending(_m.subtract(top, values), axis, return_argsort)
        return out if return_argsort else _m.subtract(top, out)
    if dtype.is_integer:
        one = constant(1, dtype=dtype)
        out = _descending(_m.subtract(_m.negative(values), one), axis, return_argsort)
        return out if return_argsort else _m.subtract(_m.negative(out), one)
    out = _descending(_m.negative(values), axis, return_argsort)
    return out if return_argsort else _m.negative(out)


_SORTS = {"ASCENDING": _ascending, "DESCENDING": _descending}


def _sort_or_argsort(values, axis, direction, return_argsort):
    if direction not in _SORTS:
        raise ValueError(f"Argument `direction` should be one of ASCENDING, DESCENDING. "
                         f"Received: direction={direction}")
    axis = _static_axis(axis)
    return _SORTS[direction](_ops.convert_to_tensor(values), axis, return_argsort)


def sort(values, axis=-1, direction="ASCENDING", name=None):
    """``values`` sorted along ``axis``."""
    with _ops.name_scope(name, "sort"):
        return _sort_or_argsort(values, axis, direction, return_argsort=False)


def argsort(values, axis=-1, direction="ASCENDING", stable=False, name=None):
    """The indices that sort ``values`` along ``axis`` (always stable, as TF's)."""
    del stable  # TF's sort is stable either way
    with _ops.name_scope(name, "argsort"):
        return _sort_or_argsort(values, axis, direction, return_argsort=True)


# --- approx_max_k / approx_min_k ----------------------------------------------------------------
def _approx_top_k_infer(op):
    x = op.inputs[0]
    dt = x.dtype.base_dtype
    if dt not in (_dt.float16, _dt.float32):
        raise TypeError(f"Value passed to parameter 'input' has DataType {dt.name} not in "
                        f"list of allowed values: float16, float32")
    k, dim = op.get_attr("k"), op.get_attr("reduction_dimension")
    if x.shape.ndims is None:
        return [(dt, TensorShape(None)), (_dt.int32, TensorShape(None))]
    rank = x.shape.ndims
    if not -rank <= dim < rank:
        raise ValueError(f"reduction_dimension {dim} is out of range for rank {rank}")
    dims = x.shape.as_list()
    if dims[dim] is not None and k > dims[dim]:
        raise ValueError(f"k ({k}) must not exceed the reduction dimension ({dims[dim]})")
    dims[dim] = k
    return [(dt, TensorShape(dims)), (_dt.int32, TensorShape(dims))]


register_op("ApproxTopK", _approx_top_k_infer)


@RegisterGradient("ApproxTopK")
def _approx_top_k_grad(op, grad, _):
    # TF's: each gradient entry scattered back to where its value came from.
    idx = op.outputs[1]
    shape = idx.shape.as_list()
    rank = len(shape)
    dim = op.get_attr("reduction_dimension") % rank
    lifted = shape + [1]
    parts = []
    for d in range(rank):
        if d == dim:
            parts.append(array_ops.reshape(idx, lifted))
            continue
        iota = [1] * (rank + 1)
        iota[d] = shape[d]
        parts.append(array_ops.broadcast_to(array_ops.reshape(_m.range(shape[d]), iota),
                                            lifted))
    n = int(np.prod(shape))
    flat_idx = array_ops.reshape(array_ops.concat(parts, axis=rank), [n, rank])
    flat_grad = array_ops.reshape(array_ops._dense(grad), [n])
    return [array_ops.scatter_nd(flat_idx, flat_grad, op.inputs[0].shape.as_list())]


def _approx_top_k(operand, k, reduction_dimension, recall_target, is_max_k,
                  reduction_input_size_override, aggregate_to_topk, name):
    attrs = {"k": int(k), "reduction_dimension": int(reduction_dimension),
             "recall_target": float(recall_target), "is_max_k": is_max_k,
             "reduction_input_size_override": int(reduction_input_size_override),
             "aggregate_to_topk": bool(aggregate_to_topk)}
    op = _ops.apply_op("ApproxTopK", [_ops.convert_to_tensor(operand)], attrs, name)
    return op.outputs[0], op.outputs[1]


def approx_top_k(input, k, reduction_dimension=-1, recall_target=0.95,  # noqa: A002
                 is_max_k=True, reduction_input_size_override=-1, aggregate_to_topk=True,
                 name=None):
    """The ``ApproxTopK`` op itself: ``approx_max_k`` or, with ``is_max_k=False``,
    ``approx_min_k``."""
    return _approx_top_k(input, k, reduction_dimension, recall_target, bool(is_max_k),
                         reduction_input_size_override, aggregate_to_topk, name)


def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True, name=None):
    """The ``k`` largest entries along ``reduction_dimension`` and their indices. TF trades
    recall for speed on accelerators; here the result is exact (recall 1)."""
    return _approx_top_k(operand, k, reduction_dimension, recall_target, True,
                         reduction_input_size_override, aggregate_to_topk, name)


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True, name=None):
    """The ``k`` smallest entries along ``reduction_dimension`` and their indices (exact)."""
    return _approx_top_k(operand, k, reduction_dimension, recall_target, False,
                         reduction_input_size_override, aggregate_to_topk, name)


# --- searchsorted -------------------------------------------------------------------------------
def _bound_infer(op):
    seq, values = op.inputs
    if seq.dtype.base_dtype is not values.dtype.base_dtype:
        raise TypeError(f"'{op.type}': values of type {values.dtype.base_dtype.name} do not "
                        f"match sorted_inputs of type {seq.dtype.base_dtype.name}")
    seq.shape.with_rank(2)
    values.shape.with_rank(2)
    return [(_out_type(op), values.shape)]


for _t in ("LowerBound", "UpperBound"):
    register_op(_t, _bound_infer)
    NotDifferentiable(_t)


def searchsorted(sorted_sequence, values, side="left", out_type=_dt.int32, name=None):
    """For each value, its insertion index in the innermost dimension of
    ``sorted_sequence`` (``side``: before or after equal entries)."""
    if side not in ("left", "right"):
        raise ValueError(f"Argument `side` must be either 'right' or 'left'. Received: "
                         f"`side` = '{side}'.")
    seq = _ops.convert_to_tensor(sorted_sequence)
    values = _ops.convert_to_tensor(values, dtype=seq.dtype.base_dtype)
    seq_2d = array_ops.reshape(seq, [-1, array_ops.shape(seq)[-1]])
    values_2d = array_ops.reshape(values, [-1, array_ops.shape(values)[-1]])
    op_type = "UpperBound" if side == "right" else "LowerBound"
    out = _ops.apply_op(op_type, [seq_2d, values_2d],
                        {"out_type": _dt.as_dtype(out_type)}, name).outputs[0]
    return array_ops.reshape(out, array_ops.shape(values))


# --- roll ---------------------------------------------------------------------------------------
def _roll_infer(op):
    x, shift, axis = op.inputs
    _check_index_dtype(shift, "shift")
    _check_index_dtype(axis, "axis")
    if shift.shape.ndims is not None and shift.shape.ndims > 1:
        raise ValueError(f"shift must be a scalar or a 1-D vector, got shape {shift.shape}")
    if axis.shape.ndims is not None and axis.shape.ndims > 1:
        raise ValueError(f"axis must be a scalar or a 1-D vector, got shape {axis.shape}")
    if shift.shape.ndims is not None and axis.shape.ndims is not None and \
            not shift.shape.is_compatible_with(axis.shape):
        raise ValueError(f"shift and axis must have the same size, got {shift.shape} and "
                         f"{axis.shape}")
    x.shape.with_rank_at_least(1)
    return [(x.dtype.base_dtype, x.shape)]


register_op("Roll", _roll_infer)


@RegisterGradient("Roll")
def _roll_grad(op, grad):
    _, shift, axis = op.inputs
    return [roll(array_ops._dense(grad), _m.negative(shift), axis), None, None]


def roll(input, shift, axis, name=None):  # noqa: A002 - TF's argument name
    """Elements of ``input`` shifted cyclically by ``shift`` along ``axis`` (scalars or
    vectors of equal length; an axis named twice is shifted by the sum)."""
    x = _ops.convert_to_tensor(input)
    return _ops.apply_op("Roll", [x, _as_int_tensor(shift), _as_int_tensor(axis)], None,
                         name).outputs[0]


# --- meshgrid / repeat --------------------------------------------------------------------------
def meshgrid(*args, **kwargs):
    """N-d coordinate arrays from N vectors (``indexing``: "xy" Cartesian, "ij" matrix)."""
    indexing = kwargs.pop("indexing", "xy")
    name = kwargs.pop("name", "meshgrid")
    if kwargs:
        key = list(kwargs)[0]
        raise TypeError(f"'{key}' is an invalid keyword argument for this function")
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Argument `indexing` parameter must be either 'xy' or 'ij', got "
                         f"'{indexing}'")
    with _ops.name_scope(name, "meshgrid", args):
        ndim = len(args)
        if not ndim:
            return []
        ones_shape = [1] * ndim
        output = []
        for i, x in enumerate(args):
            shape = ones_shape[:i] + [-1] + ones_shape[i + 1:]
            x = _ops.convert_to_tensor(x) if _ops.is_tensor_like(x) else array_ops.stack(x)
            output.append(array_ops.reshape(x, shape))
        shapes = [array_ops.size(x) for x in args]
        dtype = _ops.convert_to_tensor(args[0]).dtype.base_dtype
        if indexing == "xy" and ndim > 1:
            output[0] = array_ops.reshape(output[0], [1, -1] + [1] * (ndim - 2))
            output[1] = array_ops.reshape(output[1], [-1, 1] + [1] * (ndim - 2))
            shapes[0], shapes[1] = shapes[1], shapes[0]
        ones = array_ops.ones(array_ops.stack(shapes), dtype)
        return [_m.multiply(x, ones) for x in output]


def repeat(input, repeats, axis=None, name=None):  # noqa: A002 - TF's argument name
    """Each element (``axis`` None: of the flattened input) or slice along ``axis``
    repeated ``repeats`` times (a scalar, or one count per slice)."""
    with _ops.name_scope(name, "Repeat", [input, repeats]):
        data = _ops.convert_to_tensor(input)
        repeats = _as_int_tensor(repeats)
        if axis is None:
            data, axis = array_ops.reshape(data, [-1]), 0
        rank = data.shape.ndims
        if rank is None:
            raise ValueError("repeat: the rank of input must be known")
        axis = _static_axis(axis)
        if not -rank <= axis < rank:
            raise ValueError(f"axis={axis} out of bounds for a tensor of rank {rank}")
        axis %= rank
        n = array_ops.shape(data)[axis]
        counts = array_ops.broadcast_to(array_ops.reshape(repeats, [-1]),
                                        array_ops.expand_dims(n, 0))
        ends = _m.cumsum(counts)
        total = _m.reduce_sum(counts)
        # Output position p takes the slice whose run of repeats covers it.
        source = searchsorted(ends, _m.range(total, dtype=ends.dtype), side="right")
        return array_ops.gather(data, source, axis=axis)


# --- unique_with_counts / setdiff1d / unravel_index --------------------------------------------
def _unique_with_counts_infer(op):
    x = op.inputs[0]
    try:
        x.shape.with_rank(1)
    except ValueError:
        raise ValueError(f"unique expects a 1-D vector, got shape {x.shape}") from None
    out_idx = _out_type(op, "out_idx")
    return [(x.dtype.base_dtype, TensorShape([None])), (out_idx, x.shape.with_rank(1)),
            (out_idx, TensorShape([None]))]


register_op("UniqueWithCounts", _unique_with_counts_infer)
NotDifferentiable("UniqueWithCounts")
UniqueWithCountsOutput = collections.namedtuple("UniqueWithCounts", ["y", "idx", "count"])


def unique_with_counts(x, out_idx=_dt.int32, name=None):
    """``unique`` plus how often each distinct value occurs (``count``)."""
    op = _ops.apply_op("UniqueWithCounts", [_ops.convert_to_tensor(x)],
                       {"out_idx": _dt.as_dtype(out_idx)}, name)
    return UniqueWithCountsOutput(*op.outputs)


def _list_diff_infer(op):
    x, y = op.inputs
    if x.dtype.base_dtype is not y.dtype.base_dtype:
        raise TypeError(f"'ListDiff': y of type {y.dtype.base_dtype.name} does not match x of "
                        f"type {x.dtype.base_dtype.name}")
    x.shape.with_rank(1)
    y.shape.with_rank(1)
    return [(x.dtype.base_dtype, TensorShape([None])),
            (_out_type(op, "out_idx"), TensorShape([None]))]


register_op("ListDiff", _list_diff_infer)
NotDifferentiable("ListDiff")
SetDiff1dOutput = collections.namedtuple("ListDiff", ["out", "idx"])


def setdiff1d(x, y, index_dtype=_dt.int32, name=None):
    """The entries of vector ``x`` not in ``y``, in order (``out``), and their positions in
    ``x`` (``idx``)."""
    x = _ops.convert_to_tensor(x)
    y = _ops.convert_to_tensor(y, dtype=x.dtype.base_dtype)
    op = _ops.apply_op("ListDiff", [x, y], {"out_idx": _dt.as_dtype(index_dtype)}, name)
    return SetDiff1dOutput(*op.outputs)


def _unravel_index_infer(op):
    indices, dims = op.inputs
    _check_index_dtype(indices, "indices")
    if indices.dtype.base_dtype is not dims.dtype.base_dtype:
        raise TypeError("unravel_index: indices and dims must have the same dtype")
    dims.shape.with_rank(1)
    n = dims.shape.as_list()[0] if dims.shape.ndims is not None else None
    r = indices.shape.ndims
    if r is None:
        return [(indices.dtype.base_dtype, TensorShape(None))]
    if r == 0:
        return [(indices.dtype.base_dtype, TensorShape([n]))]
    return [(indices.dtype.base_dtype,
             TensorShape([n, indices.shape.num_elements()]))]


register_op("UnravelIndex", _unravel_index_infer)
NotDifferentiable("UnravelIndex")


def unravel_index(indices, dims, name=None):
    """The coordinates in an array of shape ``dims`` of each flat index in ``indices``: shape
    ``[len(dims)]`` for a scalar, ``[len(dims), size(indices)]`` otherwise."""
    indices = _as_int_tensor(indices)
    dims = _as_int_tensor(dims, indices.dtype)
    return _ops.apply_op("UnravelIndex", [indices, dims], None, name).outputs[0]


# --- bincount / confusion_matrix / histograms ---------------------------------------------------
def _bincount_infer(op):
    arr, size, weights = op.inputs
    _check_index_dtype(arr, "input")
    size.shape.with_rank(0)
    n = constant_value(size)
    n = None if n is None else int(n)
    if n is not None and n < 0:
        raise ValueError(f"size ({n}) must be non-negative")
    if arr.shape.ndims == 2:
        return [(weights.dtype.base_dtype, TensorShape([arr.shape.as_list()[0], n]))]
    return [(weights.dtype.base_dtype, TensorShape([n]))]


register_op("DenseBincount", _bincount_infer)
NotDifferentiable("DenseBincount")


def bincount(arr, weights=None, minlength=None, maxlength=None, dtype=_dt.int32):
    """How often each value in ``[0, max(arr)]`` (at least ``minlength``, at most
    ``maxlength`` bins) occurs in ``arr``, or the sums of ``weights`` by value."""
    with _ops.name_scope(None, "bincount", [arr, weights, minlength, maxlength]):
        arr = _ops.convert_to_tensor(arr, name="arr")
        if not arr.dtype.base_dtype.is_integer:
            arr = _m.cast(arr, _dt.int32)
        it = arr.dtype.base_dtype
        nonempty = _m.greater(_m.reduce_prod(array_ops.shape(arr)), 0)
        size = _m.multiply(_m.cast(nonempty, it),
                           _m.add(_m.reduce_max(arr), constant(1, dtype=it)))
        if minlength is not None:
            size = _m.maximum(_ops.convert_to_tensor(minlength, dtype=it), size)
        if maxlength is not None:
            size = _m.minimum(_ops.convert_to_tensor(maxlength, dtype=it), size)
        arr = array_ops.reshape(arr, [-1])
        if weights is None:
            weights = constant([], dtype=_dt.as_dtype(dtype))
        else:
            weights = array_ops.reshape(_ops.convert_to_tensor(weights), [-1])
        return _ops.apply_op("DenseBincount", [arr, size, weights],
                             {"binary_output": False}, None).outputs[0]


def _remove_squeezable_dimensions(labels, predictions):
    """TF's rule, where the ranks are known: drop a trailing 1 from the one of rank one
    more."""
    lr, pr = labels.shape.ndims, predictions.shape.ndims
    if lr is not None and pr is not None:
        if pr - lr == 1 and predictions.shape.as_list()[-1] in (1, None):
            predictions = array_ops.squeeze(predictions, [-1])
        elif pr - lr == -1 and labels.shape.as_list()[-1] in (1, None):
            labels = array_ops.squeeze(labels, [-1])
    return labels, predictions


def confusion_matrix(labels, predictions, num_classes=None, dtype=_dt.int32, name=None,
                     weights=None):
    """``[num_classes, num_classes]`` counts (or summed ``weights``) of each (label,
    prediction) pair; rows are labels."""
    with _ops.name_scope(name, "confusion_matrix", [predictions, labels, num_classes,
                                                    weights]):
        labels, predictions = _remove_squeezable_dimensions(
            _ops.convert_to_tensor(labels, name="labels"),
            _ops.convert_to_tensor(predictions, name="predictions"))
        predictions = _m.cast(predictions, _dt.int64)
        labels = _m.cast(labels, _dt.int64)
        labels = control_flow_ops.with_dependencies(
            [check_ops.assert_non_negative(labels, message="`labels` contains negative "
                                                           "values")], labels)
        predictions = control_flow_ops.with_dependencies(
            [check_ops.assert_non_negative(predictions, message="`predictions` contains "
                                                                "negative values")],
            predictions)
        if num_classes is None:
            num_classes = _m.add(_m.maximum(_m.reduce_max(predictions), _m.reduce_max(labels)),
                                 constant(1, dtype=_dt.int64))
        else:
            num_classes = _m.cast(num_classes, _dt.int64)
            labels = control_flow_ops.with_dependencies(
                [check_ops.assert_less(labels, num_classes, message="`labels` out of bound")],
                labels)
            predictions = control_flow_ops.with_dependencies(
                [check_ops.assert_less(predictions, num_classes,
                                       message="`predictions` out of bound")], predictions)
        dtype = _dt.as_dtype(dtype)
        if weights is not None:
            weights = _ops.convert_to_tensor(weights, name="weights")
            predictions.shape.assert_is_compatible_with(weights.shape)
            values = _m.cast(weights, dtype)
        else:
            values = array_ops.ones_like(predictions, dtype=dtype)
        shape = array_ops.stack([num_classes, num_classes])
        indices = array_ops.stack([labels, predictions], axis=1)
        return array_ops.scatter_nd(indices, values, shape)


def _histogram_infer(op):
    values, value_range, nbins = op.inputs
    if value_range.dtype.base_dtype is not values.dtype.base_dtype:
        raise TypeError("histogram_fixed_width: value_range must have the dtype of values")
    value_range.shape.with_rank(1)
    nbins.shape.with_rank(0)
    n = constant_value(nbins)
    return [(_out_type(op, "dtype"), TensorShape([None if n is None else int(n)]))]


register_op("HistogramFixedWidth", _histogram_infer)
NotDifferentiable("HistogramFixedWidth")


def histogram_fixed_width(values, value_range, nbins=100, dtype=_dt.int32, name=None):
    """Counts of ``values`` in ``nbins`` equal bins over ``value_range`` (values outside go
    to the first or last bin)."""
    with _ops.name_scope(name, "histogram_fixed_width", [values, value_range, nbins]):
        values = _ops.convert_to_tensor(values, name="values")
        value_range = _ops.convert_to_tensor(value_range, dtype=values.dtype.base_dtype,
                                             name="value_range")
        nbins = _ops.convert_to_tensor(nbins, dtype=_dt.int32, name="nbins")
        return _ops.apply_op("HistogramFixedWidth", [values, value_range, nbins],
                             {"dtype": _dt.as_dtype(dtype)}, None).outputs[0]


def histogram_fixed_width_bins(values, value_range, nbins=100, dtype=_dt.int32, name=None):
    """The bin (of ``nbins`` equal bins over ``value_range``) of each value; outside values
    go to the first or last bin (TF's composition; the result is int32)."""
    with _ops.name_scope(name, "histogram_fixed_width_bins", [values, value_range, nbins]):
        values = _ops.convert_to_tensor(values, name="values")
        shape = array_ops.shape(values)
        values = array_ops.reshape(values, [-1])
        value_range = _ops.convert_to_tensor(value_range, dtype=values.dtype.base_dtype,
                                             name="value_range")
        nbins = _ops.convert_to_tensor(nbins, dtype=_dt.int32, name="nbins")
        check = control_flow_ops.Assert(_m.greater(nbins, constant(0)),
                                        [f"nbins {nbins} must > 0"])
        nbins = control_flow_ops.with_dependencies([check], nbins)
        nbins_float = _m.cast(nbins, values.dtype.base_dtype)
        scaled = _m.truediv(_m.subtract(values, value_range[0]),
                            _m.subtract(value_range[1], value_range[0]))
        indices = _m.floor(_m.multiply(nbins_float, scaled))
        one = constant(1, dtype=values.dtype.base_dtype)
        indices = _m.cast(_m.clip_by_value(indices, constant(0, dtype=values.dtype.base_dtype),
                                           _m.subtract(nbins_float, one)), _dt.int32)
        return array_ops.reshape(indices, shape)


# --- monotonicity -------------------------------------------------------------------------------
def _diff(x):
    x = array_ops.reshape(_ops.convert_to_tensor(x, name="x"), [-1])
    dt = x.dtype.base_dtype
    if not (dt.is_integer or dt.is_floating or dt.is_complex):
        raise TypeError(f"Expected x to be numeric, instead found: {dt.name}")
    return _m.subtract(x[1:], x[:-1])


def is_non_decreasing(x, name=None):
    """True when ``x`` (flattened) never decreases; true for fewer than two entries."""
    with _ops.name_scope(name, "is_non_decreasing", [x]):
        diff = _diff(x)
        return _m.reduce_all(_m.less_equal(constant(0, dtype=diff.dtype.base_dtype), diff))


def is_strictly_increasing(x, name=None):
    """True when ``x`` (flattened) always increases; true for fewer than two entries."""
    with _ops.name_scope(name, "is_strictly_increasing", [x]):
        diff = _diff(x)
        return _m.reduce_all(_m.less(constant(0, dtype=diff.dtype.base_dtype), diff))


__all__ = [
    "approx_top_k", "sort", "argsort", "searchsorted", "roll", "meshgrid", "repeat",
    "unique_with_counts", "setdiff1d", "unravel_index", "bincount", "confusion_matrix",
    "histogram_fixed_width", "histogram_fixed_width_bins", "is_non_decreasing",
    "is_strictly_increasing",
]
# Only in tf.math (and approx_* in tf.nn; dflab.namespaces puts them there): bincount,
# confusion_matrix, approx_max_k, approx_min_k.
