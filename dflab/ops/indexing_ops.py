"""Indexing ops: gathering and scattering by integer indices (``GatherV2``, ``GatherNd``,
``ScatterNd``), one-hot encoding, selecting by a condition (``Select``/``SelectV2``, ``Where``),
boolean masks (``boolean_mask``, ``SequenceMask``) and ``Unique``.

Part of the array family: schema, shape rule, gradient and builder side by side; kernels in
``dflab.kernels.array_kernels``. ``array_ops`` re-exports the builders (it stays the one module
to import array ops from) and imports this module only at its end, after defining the helpers
and basic ops that this module imports from it.
"""

from __future__ import annotations

import collections
import math

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import builder_constant, constant, constant_value_as_shape
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape, broadcast_shapes
from dflab.ops.array_ops import (
    _apply,
    _as_int_tensor,
    _check_index_dtype,
    _dense,
    _normalize_axis,
    _py_slice,
    _range,
    _shape_of,
    concat,
    expand_dims,
    rank,
    reshape,
    size,
    squeeze,
    transpose,
    zeros_like,
)
from dflab.ops.manip_ops import _sum_to
from dflab.ops.op_util import as_data, scalar_int
from dflab.ops.slicing_ops import _slice_helper


# --- GatherV2 / GatherNd / ScatterNd -------------------------------------------------------------
def _gather_infer(op):
    params, indices, axis_t = op.inputs
    _check_index_dtype(indices, "indices")
    _check_index_dtype(axis_t, "axis")
    if op.attrs.get("batch_dims", 0):
        raise ValueError("batch_dims other than 0 is not supported")
    dt = params.dtype.base_dtype
    pr, ir = params.shape.ndims, indices.shape.ndims
    if pr == 0:
        raise ValueError("params must be at least 1 dimensional")
    a = scalar_int(axis_t)
    if pr is None or ir is None:
        return [(dt, TensorShape(None))]
    if a is None:
        return [(dt, TensorShape([None] * (pr - 1 + ir)))]
    a = _normalize_axis(a, pr)
    p = params.shape.as_list()
    return [(dt, TensorShape(p[:a] + indices.shape.as_list() + p[a + 1:]))]


register_op("GatherV2", _gather_infer)


@RegisterGradient("GatherV2")
def _gather_grad(op, grad):
    """Axis 0: an ``IndexedSlices`` (one row of gradient per index, as TF gives). Other axes:
    move the gathered axis to the front, scatter-add the rows, move it back."""
    from dflab.ops.gradients import IndexedSlices

    params, indices, axis_t = op.inputs
    grad = _dense(grad)
    pr = params.shape.ndims
    a = scalar_int(axis_t)
    if a is not None and pr is not None:
        a %= pr
    params_shape = _shape_of(params)
    p = params.shape.as_tuple()
    if a == 0:
        if p is not None and None not in p[1:] and indices.shape.is_fully_defined():
            values_shape = [indices.shape.num_elements()] + list(p[1:])
        else:
            values_shape = concat([expand_dims(size(indices), 0),
                                   _slice_helper(params_shape, _py_slice(1, None))], 0)
        values = reshape(grad, values_shape)
        return [IndexedSlices(values, reshape(indices, [-1]), params_shape), None, None]
    # Flatten the indices so their rank does not matter: grad becomes P[:a] + [n] + P[a+1:].
    n_idx = indices.shape.num_elements()
    n_idx_t = [n_idx] if n_idx is not None else expand_dims(size(indices), 0)
    flat_indices = expand_dims(reshape(indices, [-1]), -1)
    if a is not None and pr is not None:
        rest = list(p[:a]) + list(p[a + 1:])
        if None not in rest and n_idx is not None:
            values_shape = list(p[:a]) + [n_idx] + list(p[a + 1:])
            target = [p[a]] + rest
        else:
            values_shape = concat([_slice_helper(params_shape, _py_slice(None, a)), n_idx_t,
                                   _slice_helper(params_shape, _py_slice(a + 1, None))], 0)
            target = concat([_slice_helper(params_shape, _py_slice(a, a + 1)),
                             _slice_helper(params_shape, _py_slice(None, a)),
                             _slice_helper(params_shape, _py_slice(a + 1, None))], 0)
        front = [a] + list(range(a)) + list(range(a + 1, pr))
        back = list(range(1, a + 1)) + [0] + list(range(a + 1, pr))
    else:  # the axis or the rank of params is known only at run time
        from dflab.ops import math_ops

        r = rank(params)
        a = _apply("FloorMod", [math_ops.cast(axis_t, _dt.int32), r])
        a1 = math_ops.add(a, 1)
        outer = _slice_helper(params_shape, _py_slice(None, a))
        inner = _slice_helper(params_shape, _py_slice(a1, None))
        values_shape = concat([outer, n_idx_t, inner], 0)
        target = concat([_slice_helper(params_shape, _py_slice(a, a1)), outer, inner], 0)
        front = concat([expand_dims(a, 0), _range(0, a), _range(a1, r)], 0)
        back = concat([_range(1, a1), [0], _range(a1, r)], 0)
    moved = transpose(reshape(grad, values_shape), front)  # the gathered axis first
    dense = scatter_nd(flat_indices, moved, target)  # rows of repeated indices add up
    return [transpose(dense, back), None, None]


def gather(params, indices, validate_indices=None, name=None, axis=None, batch_dims=0):
    """Slices of ``params`` along ``axis`` at ``indices`` (out-of-range indices are an error)."""
    if axis is None:
        axis = 0
    if hasattr(params, "sparse_read") and isinstance(axis, int) and axis == 0 and not batch_dims:
        # A resource variable: only the gathered rows are read (ResourceGather on its handle),
        # as in TF, so a lookup in a large embedding table never reads the table whole.
        return params.sparse_read(indices, name=name or "Gather")
    params = _ops.convert_to_tensor(params)
    indices = _as_int_tensor(indices)
    if batch_dims:
        raise ValueError("gather: batch_dims other than 0 is not supported")
    return _apply("GatherV2", [params, indices, _as_int_tensor(axis)], _GATHER_ATTRS, name)


_GATHER_ATTRS = _ops.FrozenAttrs(batch_dims=0)


def _gather_nd_infer(op):
    params, indices = op.inputs
    _check_index_dtype(indices, "indices")
    dt = params.dtype.base_dtype
    idims = indices.shape.as_tuple()
    if idims is None or params.shape.ndims is None:
        return [(dt, TensorShape(None))]
    if not idims:
        raise ValueError("indices must be at least a vector")
    k = idims[-1]
    if k is None:
        return [(dt, TensorShape(None))]
    if k > params.shape.ndims:
        raise ValueError(f"index innermost dimension length must be <= params rank; saw: {k} "
                         f"vs. {params.shape.ndims}")
    return [(dt, TensorShape(list(idims[:-1]) + params.shape.as_list()[k:]))]


register_op("GatherNd", _gather_nd_infer)


@RegisterGradient("GatherNd")
def _gather_nd_grad(op, grad):
    params, indices = op.inputs
    return [scatter_nd(indices, _dense(grad), _shape_of(params, out_type=indices.dtype)), None]


def gather_nd(params, indices, name=None, batch_dims=0):
    """Gather slices of ``params`` addressed by the last axis of ``indices``."""
    if batch_dims:
        raise ValueError("gather_nd: batch_dims other than 0 is not supported")
    return _apply("GatherNd", [_ops.convert_to_tensor(params), _as_int_tensor(indices)], None,
                  name)


def _scatter_nd_infer(op):
    indices, updates, shape_t = op.inputs
    _check_index_dtype(indices, "indices")
    _check_index_dtype(shape_t, "shape")
    out = constant_value_as_shape(shape_t)
    idims, udims = indices.shape.as_tuple(), updates.shape.as_tuple()
    if idims is not None and len(idims) == 0:
        raise ValueError("indices must be at least a vector")
    if idims is not None and idims[-1] is not None and out.ndims is not None:
        k = idims[-1]
        if k > out.ndims:
            raise ValueError(f"The inner {k} dimensions of indices exceed the rank "
                             f"{out.ndims} of shape")
        want = TensorShape(list(idims[:-1]) + out.as_list()[k:])
        if udims is not None and not want.is_compatible_with(updates.shape):
            raise ValueError(f"updates has shape {updates.shape}, expected {want} "
                             f"(indices.shape[:-1] + shape[{k}:])")
    return [(updates.dtype.base_dtype, out)]


register_op("ScatterNd", _scatter_nd_infer)


@RegisterGradient("ScatterNd")
def _scatter_nd_grad(op, grad):
    indices = op.inputs[0]
    return [None, gather_nd(_dense(grad), indices), None]


def scatter_nd(indices, updates, shape, name=None):
    """A zero tensor of ``shape`` with ``updates`` added at ``indices`` (repeats are summed)."""
    indices = _as_int_tensor(indices)
    return _apply("ScatterNd", [indices, as_data(updates, "updates"),
                                _as_int_tensor(shape, indices.dtype)], None,
                  name)


# --- OneHot --------------------------------------------------------------------------------------
def _one_hot_infer(op):
    indices, depth, on_value, off_value = op.inputs
    if indices.dtype.base_dtype not in (_dt.uint8, _dt.int32, _dt.int64):
        raise TypeError(f"indices must be uint8, int32 or int64, got "
                        f"{indices.dtype.base_dtype.name}")
    if depth.dtype.base_dtype is not _dt.int32:
        raise TypeError(f"depth must be int32, got {depth.dtype.base_dtype.name}")
    dt = on_value.dtype.base_dtype
    if off_value.dtype.base_dtype is not dt:
        raise TypeError(f"on_value ({dt.name}) and off_value "
                        f"({off_value.dtype.base_dtype.name}) must have the same dtype")
    for t, what in ((depth, "depth"), (on_value, "on_value"), (off_value, "off_value")):
        if t.shape.ndims not in (None, 0):
            raise ValueError(f"{what} must be a scalar, got shape {t.shape}")
    d = scalar_int(depth)
    if d is not None and d < 0:
        raise ValueError(f"depth must be non-negative, got {d}")
    axis = op.get_attr("axis")
    if indices.shape.ndims is None:
        return [(dt, TensorShape(None))]
    dims = indices.shape.as_list()
    if not -1 <= axis <= len(dims):
        raise ValueError(f"Expected axis to be -1 or between [0, {len(dims)}].  But received: "
                         f"{axis}")
    dims.insert(len(dims) if axis == -1 else axis, d)
    return [(dt, TensorShape(dims))]


register_op("OneHot", _one_hot_infer)
NotDifferentiable("OneHot")


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """One-hot vectors of length ``depth`` along a new ``axis`` (default last): ``on_value``
    where the index matches, ``off_value`` elsewhere (indices outside [0, depth) are all off)."""
    with _ops.name_scope(name, "one_hot") as scope:
        on_t = _ops.convert_to_tensor(on_value, name="on_value") if on_value is not None \
            else None
        off_t = _ops.convert_to_tensor(off_value, name="off_value") if off_value is not None \
            else None
        dtype = _dt.as_dtype(dtype).base_dtype if dtype is not None else None
        if on_t is not None or off_t is not None:
            if dtype is not None:
                for t, what in ((on_t, "on_value"), (off_t, "off_value")):
                    if t is not None and t.dtype.base_dtype is not dtype:
                        raise TypeError(f"dtype {t.dtype.base_dtype.name} of {what} does not "
                                        f"match dtype parameter {dtype.name}")
            else:
                dtype = (on_t if on_t is not None else off_t).dtype.base_dtype
        elif dtype is None:
            dtype = _dt.float32
        if on_t is None:
            on_t = builder_constant(1, dtype=dtype, name="on_value")
        if off_t is None:
            off_t = builder_constant(0, dtype=dtype, name="off_value")
        if on_t.dtype.base_dtype is not off_t.dtype.base_dtype:
            raise TypeError(f"dtype {on_t.dtype.base_dtype.name} of on_value does not match "
                            f"dtype {off_t.dtype.base_dtype.name} of off_value")
        indices = _as_int_tensor(indices, dtype=_dt.int64)
        depth = _as_int_tensor(depth)
        axis = -1 if axis is None else int(axis)
        return _apply("OneHot", [indices, depth, on_t, off_t], _ops.frozen_attrs(axis=axis),
                      name=scope)


# --- Select / SelectV2 / Where ---------------------------------------------------------------
def _select_infer(op):
    cond, x, y = op.inputs
    if cond.dtype.base_dtype is not _dt.bool:
        raise TypeError(f"condition must be bool, got {cond.dtype.base_dtype.name}")
    if x.dtype.base_dtype is not y.dtype.base_dtype:
        raise TypeError(f"x and y must have the same dtype, got {x.dtype.base_dtype.name} and "
                        f"{y.dtype.base_dtype.name}")
    try:
        out = x.shape.merge_with(y.shape)
    except ValueError:
        raise ValueError(f"x and y must have the same shape, got {x.shape} and "
                         f"{y.shape}") from None
    c = cond.shape
    # TF1 Select: a scalar condition picks x or y whole; a vector one picks rows of x or y.
    if c.ndims is not None and c.ndims != 0 and out.ndims is not None:
        if c.ndims == out.ndims:
            try:
                out = out.merge_with(c)
            except ValueError:
                raise ValueError(f"condition of shape {c} does not match x's shape "
                                 f"{out}") from None
        elif c.ndims == 1 and out.ndims > 1:
            if not c[0].is_compatible_with(out[0]):
                raise ValueError(f"condition of shape {c} must match the first dimension of "
                                 f"x's shape {out}")
            if out.as_list()[0] is None:
                out = TensorShape([c.as_list()[0]] + out.as_list()[1:])
        else:
            raise ValueError(f"condition must be a scalar, a vector matching x's first "
                             f"dimension, or x's shape; got {c} for x of shape {out}")
    return [(x.dtype.base_dtype, out)]


register_op("Select", _select_infer)


@RegisterGradient("Select")
def _select_grad(op, grad):
    c, x = op.inputs[0], op.inputs[1]
    grad = _dense(grad)
    zeros_t = zeros_like(x)
    return [None, where(c, grad, zeros_t), where(c, zeros_t, grad)]


def _select_v2_infer(op):
    cond, x, y = op.inputs
    if cond.dtype.base_dtype is not _dt.bool:
        raise TypeError(f"condition must be bool, got {cond.dtype.base_dtype.name}")
    if x.dtype.base_dtype is not y.dtype.base_dtype:
        raise TypeError(f"x and y must have the same dtype, got {x.dtype.base_dtype.name} and "
                        f"{y.dtype.base_dtype.name}")
    out = broadcast_shapes(broadcast_shapes(cond.shape, x.shape), y.shape)
    return [(x.dtype.base_dtype, out)]


register_op("SelectV2", _select_v2_infer)


@RegisterGradient("SelectV2")
def _select_v2_grad(op, grad):
    c, x, y = op.inputs
    grad = _dense(grad)
    zeros_t = zeros_like(grad)
    gx = _apply("SelectV2", [c, grad, zeros_t])
    gy = _apply("SelectV2", [c, zeros_t, grad])
    return [None, _sum_to(gx, x), _sum_to(gy, y)]


def _where_infer(op):
    x = op.inputs[0]
    return [(_dt.int64, TensorShape([None, x.shape.ndims]))]


register_op("Where", _where_infer)
NotDifferentiable("Where")


def where(condition, x=None, y=None, name=None):
    """TF1 ``tf.where``: with ``x`` and ``y``, elements of x where ``condition`` is true and of
    y elsewhere (condition has x's shape, or is a vector over x's first dimension, or a
    scalar); without them, the int64 coordinates [N, rank] of the true elements."""
    if x is None and y is None:
        return _apply("Where", [_as_bool_tensor(condition)], None, name)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    cond = _as_bool_tensor(condition)
    x, y = _convert_pair(x, y)
    return _apply("Select", [cond, x, y], None, name)


def where_v2(condition, x=None, y=None, name=None):
    """``tf.where_v2``: like ``where`` but ``condition``, x and y broadcast together."""
    if x is None and y is None:
        return where(condition, name=name)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    cond = _as_bool_tensor(condition)
    x, y = _convert_pair(x, y)
    return _apply("SelectV2", [cond, x, y], None, name)


def _as_bool_tensor(condition):
    # Tensors keep their dtype so that a non-bool one is the shape rule's TypeError (as TF).
    if isinstance(condition, _ops.Tensor) or hasattr(condition, "_as_tensor"):
        return _ops.convert_to_tensor(condition)
    return _ops.convert_to_tensor(condition, dtype=_dt.bool)


def _convert_pair(x, y):
    """x and y as tensors; a Python value takes the dtype of the other, tensor, argument."""
    if isinstance(x, _ops.Tensor) or hasattr(x, "_as_tensor"):
        x = _ops.convert_to_tensor(x)
        return x, _ops.convert_to_tensor(y, dtype=x.dtype.base_dtype) if not isinstance(
            y, _ops.Tensor) else y
    y = _ops.convert_to_tensor(y)
    return _ops.convert_to_tensor(x, dtype=y.dtype.base_dtype), y


# --- boolean_mask / sequence_mask ------------------------------------------------------------
def boolean_mask(tensor, mask, name="boolean_mask", axis=None):
    """The elements (or slices) of ``tensor`` where ``mask`` is true, flattened along the
    masked dims: ``mask`` covers dims [axis, axis + mask.ndim) of ``tensor``.

    Built as TF builds it (reshape, ``where``, ``gather``), so its gradient is gather's.
    """
    with _ops.name_scope(name, "boolean_mask", [tensor, mask]):
        tensor = _ops.convert_to_tensor(tensor, name="tensor")
        mask = _ops.convert_to_tensor(mask, name="mask")
        if mask.dtype.base_dtype is not _dt.bool:
            raise TypeError(f"mask must be a bool tensor, got {mask.dtype.base_dtype.name}")
        shape_mask = mask.shape
        ndims_mask = shape_mask.ndims
        shape_tensor = tensor.shape
        if ndims_mask == 0:
            raise ValueError("mask cannot be scalar.")
        if ndims_mask is None:
            raise ValueError("Number of mask dimensions must be specified, even if some "
                             "dimensions are None.  E.g. shape=[None] is ok, but shape=None "
                             "is not.")
        axis = 0 if axis is None else int(axis)
        if shape_tensor.ndims is not None:
            if axis < 0:
                axis += shape_tensor.ndims
            if not 0 <= axis <= shape_tensor.ndims - ndims_mask:
                raise ValueError(f"mask of rank {ndims_mask} at axis {axis} does not fit a "
                                 f"tensor of rank {shape_tensor.ndims}")
            shape_tensor[axis:axis + ndims_mask].assert_is_compatible_with(shape_mask)
        elif axis < 0:
            raise ValueError("a negative axis needs a tensor of known rank")
        first_dim = shape_tensor[axis:axis + ndims_mask].num_elements()
        if first_dim is None:
            first_dim = shape_mask.num_elements()
        if shape_tensor.is_fully_defined():
            dims = shape_tensor.as_list()
            new_shape = dims[:axis] + [first_dim] + dims[axis + ndims_mask:]
        else:
            # mask has the shape of the dims it covers, so their product is size(mask).
            full = _shape_of(tensor)
            new_shape = concat([_slice_helper(full, _py_slice(None, axis)),
                                expand_dims(size(mask), 0),
                                _slice_helper(full, _py_slice(axis + ndims_mask, None))], 0)
        flat = reshape(tensor, new_shape)
        if shape_tensor.ndims is not None:
            flat.set_shape(shape_tensor[:axis].concatenate([first_dim]).concatenate(
                shape_tensor[axis + ndims_mask:]))
        indices = squeeze(where(reshape(mask, [-1])), axis=[1])
        return gather(flat, indices, axis=axis)


def _sequence_mask_infer(op):
    lengths = op.inputs[0]
    _check_index_dtype(lengths, "lengths")
    maxlen = None
    if len(op.inputs) > 1:
        m = op.inputs[1]
        _check_index_dtype(m, "maxlen")
        if m.shape.ndims not in (None, 0):
            raise ValueError(f"maxlen must be scalar for sequence_mask, got shape {m.shape}")
        maxlen = scalar_int(m)
    return [(op.get_attr("dtype"), lengths.shape.concatenate([maxlen]))]


register_op("SequenceMask", _sequence_mask_infer)
NotDifferentiable("SequenceMask")


def sequence_mask(lengths, maxlen=None, dtype=_dt.bool, name=None):
    """``mask[i..., j] = j < lengths[i...]`` for j in [0, maxlen) (default: max(lengths)).

    One ``SequenceMask`` op (TF composes Range and Less; the values are the same). Float
    lengths, or a float tensor as ``maxlen``, compose TF's ops: a range in ``maxlen``'s dtype
    compared with the lengths cast to it.
    """
    if dtype is None:  # TF: the comparison's own dtype
        dtype = _dt.bool
    float_lengths = _holds_floats(lengths)
    if _holds_floats(maxlen) if isinstance(maxlen, _ops.Tensor) else (
            float_lengths and (maxlen is None or isinstance(maxlen, (float, np.floating)))):
        return _composed_sequence_mask(lengths, maxlen, dtype, name)
    if float_lengths:
        # An integer maxlen: TF casts the lengths to its dtype, which is this one op on them
        # (a step with it stays capturable on a GPU).
        from dflab.ops import math_ops

        maxlen = _as_int_tensor(maxlen)
        lengths = math_ops.cast(lengths, maxlen.dtype.base_dtype)
    lengths = _as_int_tensor(lengths)
    inputs = [lengths]
    if isinstance(maxlen, (float, np.floating)):
        # TF ranges over a float maxlen in its own dtype: ceil(maxlen) columns.
        maxlen = math.ceil(maxlen)
    if maxlen is not None:
        inputs.append(_as_int_tensor(maxlen, dtype=lengths.dtype.base_dtype))
    return _apply("SequenceMask", inputs, {"dtype": _dt.as_dtype(dtype).base_dtype},
                  name or "SequenceMask")


def _holds_floats(value) -> bool:
    """Whether ``value`` (a tensor, a NumPy value, a Python number or list) holds floats."""
    if value is None:
        return False
    try:
        dtype = (value.dtype if isinstance(value, _ops.Tensor)
                 else _dt.dtype_of_value(value))
        return dtype.base_dtype.is_floating
    except (TypeError, ValueError, KeyError):  # a list holding tensors: not a constant
        return False


def _composed_sequence_mask(lengths, maxlen, dtype, name):
    """TF's own ``sequence_mask``: ``range(maxlen) < cast(lengths[..., None], maxlen.dtype)``
    with maxlen (by default ``max(0, max(lengths))``) setting the dtype."""
    from dflab.ops import math_ops, reduction_ops, sequence_ops

    with _ops.name_scope(name, "SequenceMask", [lengths, maxlen]):
        lengths = _ops.convert_to_tensor(lengths)
        if maxlen is None:
            maxlen = math_ops.maximum(constant(0, lengths.dtype.base_dtype),
                                      reduction_ops.reduce_max(lengths))
        else:
            maxlen = _ops.convert_to_tensor(maxlen)
        if maxlen.shape.ndims not in (None, 0):
            raise ValueError(f"Argument `maxlen` must be scalar for sequence_mask, received "
                             f"`maxlen` = {maxlen}.")
        dt = maxlen.dtype.base_dtype
        row = sequence_ops.range(constant(0, dt), maxlen, constant(1, dt))
        mask = math_ops.less(row, math_ops.cast(expand_dims(lengths, -1), dt))
        out = _dt.as_dtype(dtype).base_dtype
        return mask if out == _dt.bool else math_ops.cast(mask, out)


# --- Unique --------------------------------------------------------------------------------------
def _unique_infer(op):
    x = op.inputs[0]
    try:
        x.shape.with_rank(1)
    except ValueError:
        raise ValueError(f"unique expects a 1-D vector, got shape {x.shape}") from None
    out_idx = op.get_attr("out_idx")
    if out_idx not in (_dt.int32, _dt.int64):
        raise TypeError(f"out_idx must be int32 or int64, got {out_idx.name}")
    return [(x.dtype.base_dtype, TensorShape([None])), (out_idx, x.shape.with_rank(1))]


register_op("Unique", _unique_infer)
NotDifferentiable("Unique")

UniqueOutput = collections.namedtuple("Unique", ["y", "idx"])


def unique(x, out_idx=_dt.int32, name=None):
    """The distinct values of a vector in order of first appearance (``y``) and, for each
    element, the position of its value in ``y`` (``idx``)."""
    op = _ops.apply_op("Unique", [x], {"out_idx": _dt.as_dtype(out_idx)}, name)
    return UniqueOutput(*op.outputs)


# --- DynamicPartition / DynamicStitch -----------------------------------------------------------
def _dynamic_partition_infer(op):
    data, partitions = op.inputs
    n = op.get_attr("num_partitions")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"num_partitions must be a positive integer, got {n!r}")
    if partitions.dtype.base_dtype is not _dt.int32:
        raise TypeError(f"partitions must be int32, got {partitions.dtype.base_dtype.name}")
    pr, d = partitions.shape.ndims, data.shape
    if pr is not None and d.ndims is not None:
        if not d[:pr].is_compatible_with(partitions.shape):
            raise ValueError(f"partitions.shape {partitions.shape} must be a prefix of "
                             f"data.shape {d}")
        row = d[pr:]
    else:
        row = TensorShape(None)
    return [(data.dtype.base_dtype, TensorShape([None]).concatenate(row))] * n


register_op("DynamicPartition", _dynamic_partition_infer)


@RegisterGradient("DynamicPartition")
def _dynamic_partition_grad(op, *grads):
    """The positions each partition took, stitched back with the partitions' gradients."""
    from dflab.ops import math_ops

    data, partitions = op.inputs
    prefix = _shape_of(partitions)
    original = reshape(math_ops.range(math_ops.reduce_prod(prefix)), prefix)
    taken = dynamic_partition(original, partitions, op.get_attr("num_partitions"))
    grads = [_dense(g) if g is not None else
             _apply("Fill", [concat([[0], _slice_helper(_shape_of(data),
                                                         _py_slice(partitions.shape.ndims or 1,
                                                                   None))], 0),
                             constant(0, dtype=data.dtype.base_dtype)], {})
             for g in grads]
    stitched = dynamic_stitch(taken, grads)
    return [reshape(stitched, _shape_of(data)), None]


def _dynamic_stitch_infer(op):
    n = op.get_attr("N")
    indices, data = op.inputs[:n], op.inputs[n:]
    if len(data) != n or n < 1:
        raise ValueError(f"dynamic_stitch needs as many data as indices tensors, got "
                         f"{n} and {len(data)}")
    dts = {d.dtype.base_dtype for d in data}
    if len(dts) != 1:
        raise TypeError(f"dynamic_stitch: data of different dtypes {sorted(t.name for t in dts)}")
    row = None
    for i, d in zip(indices, data):
        if i.dtype.base_dtype is not _dt.int32:
            raise TypeError(f"dynamic_stitch: indices must be int32, got "
                            f"{i.dtype.base_dtype.name}")
        if i.shape.ndims is not None and d.shape.ndims is not None:
            if not d.shape[:i.shape.ndims].is_compatible_with(i.shape):
                raise ValueError(f"dynamic_stitch: data shape {d.shape} does not start with "
                                 f"indices shape {i.shape}")
            this = d.shape[i.shape.ndims:]
            row = this if row is None else row.merge_with(this)
    return [(dts.pop(), TensorShape([None]).concatenate(row if row is not None
                                                         else TensorShape(None)))]


register_op("DynamicStitch", _dynamic_stitch_infer)


@RegisterGradient("DynamicStitch")
def _dynamic_stitch_grad(op, grad):
    """Each data tensor's gradient: the rows of the merged gradient it was stitched into."""
    from dflab.ops import math_ops
    from dflab.ops.gradients import IndexedSlices

    n = op.get_attr("N")
    if isinstance(grad, IndexedSlices):
        rows = _slice_helper(_shape_of(op.outputs[0]), 0)
        grad = math_ops.unsorted_segment_sum(grad.values, grad.indices, rows)
    return [None] * n + [gather(grad, i) for i in op.inputs[:n]]


def dynamic_partition(data, partitions, num_partitions, name=None):
    """``num_partitions`` tensors: the slices of ``data`` whose ``partitions`` entry is 0, 1, …
    (in their order in ``data``)."""
    data = _ops.convert_to_tensor(data, name="data")
    partitions = _ops.convert_to_tensor(partitions, dtype=_dt.int32, name="partitions")
    op = _ops.apply_op("DynamicPartition", [data, partitions],
                       {"num_partitions": int(num_partitions)}, name)
    return list(op.outputs)


def dynamic_stitch(indices, data, name=None):
    """Interleave ``data[m]`` into one tensor: ``merged[indices[m][i]] = data[m][i]`` (a later
    ``m`` wins where indices repeat)."""
    indices = [_ops.convert_to_tensor(i, dtype=_dt.int32, name="indices") for i in indices]
    data = [_ops.convert_to_tensor(d, name="data") for d in data]
    if len(indices) != len(data):
        raise ValueError(f"dynamic_stitch: {len(indices)} indices tensors for {len(data)} data "
                         "tensors")
    return _ops.apply_op("DynamicStitch", indices + data, {"N": len(indices)},
                         name).outputs[0]


parallel_dynamic_stitch = dynamic_stitch

__all__ = [
    "gather", "gather_nd", "scatter_nd", "one_hot", "where", "where_v2", "boolean_mask",
    "sequence_mask", "unique", "dynamic_partition", "dynamic_stitch", "parallel_dynamic_stitch",
]
