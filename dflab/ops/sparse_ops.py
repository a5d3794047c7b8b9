"""Sparse ops on coordinate lists (indices, values, dense shape) and ``tf.SparseTensor``'s
ops (``tf.sparse.*``, TF1's ``sparse_*``).

Schema, shape rule, gradient and builder side by side; kernels in
``dflab.kernels.sparse_kernels``. ``SparseToDense`` takes int32 or int64 indices ``[N, rank]``
(or a vector for a rank-1 output, or a scalar), values ``[N]`` or a scalar for all. The ops on a
``SparseTensor`` take its three components as separate inputs, as TF's do, and the builders
wrap their outputs in a new ``SparseTensor``; most expect indices in row-major order
(``sparse_reorder``). Compositions of these (transpose, retain, merge, ...) live in
``sparse_compose_ops``.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant_value, constant_value_as_shape
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.sparse_tensor import SparseTensor, SparseTensorValue
from dflab.framework.sparse_tensor import convert_to_sparse_tensor as _sparse
from dflab.framework.tensor_shape import TensorShape, unknown_shape
from dflab.ops import array_ops, indexing_ops, reduction_ops, sequence_ops, slicing_ops
from dflab.ops import math_ops as _m


def _sparse_to_dense_infer(op):
    indices, shape, values, default = op.inputs
    if indices.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"sparse_indices must be int32 or int64, got {indices.dtype.name}")
    if values.dtype.base_dtype is not default.dtype.base_dtype:
        raise TypeError(f"sparse_values ({values.dtype.base_dtype.name}) and default_value "
                        f"({default.dtype.base_dtype.name}) must have the same type")
    default.shape.with_rank(0)
    return [(values.dtype.base_dtype, constant_value_as_shape(shape)
             if shape.shape.ndims == 1 else TensorShape([]))]


register_op("SparseToDense", _sparse_to_dense_infer)


@RegisterGradient("SparseToDense")
def _sparse_to_dense_grad(op, grad):
    indices = op.inputs[0]
    values_grad = array_ops.gather_nd(grad, indices)
    default_grad = _m.subtract(_m.reduce_sum(grad), _m.reduce_sum(values_grad))
    return [None, None, values_grad, default_grad]


def sparse_to_dense(sparse_indices, output_shape, sparse_values, default_value=0,
                    validate_indices=True, name=None):
    """A dense tensor of ``output_shape`` holding ``sparse_values`` at ``sparse_indices`` and
    ``default_value`` elsewhere. With ``validate_indices`` the indices must be in range,
    sorted in row-major order and not repeated; without it a repeated index keeps its last
    value."""
    indices = _ops.convert_to_tensor(sparse_indices)
    if indices.dtype.base_dtype not in (_dt.int32, _dt.int64):
        indices = _m.cast(indices, _dt.int64)
    values = _ops.convert_to_tensor(sparse_values)
    shape = _ops.convert_to_tensor(output_shape, dtype=indices.dtype.base_dtype)
    default = _ops.convert_to_tensor(default_value, dtype=values.dtype.base_dtype)
    return _ops.apply_op("SparseToDense", [indices, shape, values, default],
                         {"validate_indices": bool(validate_indices)}, name).outputs[0]




# --- schemas -----------------------------------------------------------------------------------
def _ids(rank=None):
    return (_dt.int64, TensorShape([None, rank]))


def _shape_vec(rank=None):
    return (_dt.int64, TensorShape([rank]))


def _rank_of(shape_t):
    return shape_t.shape.with_rank(1).dims[0].value


def _matmul_infer(op):
    _, values, a_shape, b = op.inputs
    b.shape.with_rank(2)
    a = constant_value_as_shape(a_shape).with_rank(2)
    rows = a.dims[1].value if op.get_attr("adjoint_a") else a.dims[0].value
    cols = b.shape.dims[0 if op.get_attr("adjoint_b") else 1].value
    return [(values.dtype.base_dtype, TensorShape([rows, cols]))]


def _reduce_infer(op):
    shape = constant_value_as_shape(op.inputs[2])
    axes = constant_value(op.inputs[3])
    if shape.ndims is None or axes is None:
        out = unknown_shape()
    else:
        rank = shape.ndims
        reduced = {int(a) % rank for a in np.ravel(axes)} if rank else set()
        keep = op.get_attr("keep_dims")
        out = TensorShape([1 if k in reduced else d for k, d in enumerate(shape.as_list())
                           if keep or k not in reduced])
    return [(op.inputs[1].dtype.base_dtype, out)]


def _reduce_sparse_infer(op):
    return [_ids(), (op.inputs[1].dtype.base_dtype, TensorShape([None])), _shape_vec()]


def _add_infer(op):
    rank = _rank_of(op.inputs[2])
    return [_ids(rank), (op.inputs[1].dtype.base_dtype, TensorShape([None])),
            _shape_vec(rank)]


def _values_like(k):
    return lambda op: [(op.inputs[k].dtype.base_dtype, op.inputs[k].shape)]


def _reorder_infer(op):
    return [(_dt.int64, op.inputs[0].shape), _values_like(1)(op)[0]]


def _reshape_infer(op):
    rank = _rank_of(op.inputs[2])
    return [_ids(rank), _shape_vec(rank)]


def _concat_infer(op):
    n = op.get_attr("N")
    rank = _rank_of(op.inputs[2 * n])
    return [_ids(rank), (op.inputs[n].dtype.base_dtype, TensorShape([None])),
            _shape_vec(rank)]


def _slice_infer(op):
    rank = _rank_of(op.inputs[2])
    return [_ids(rank), (op.inputs[1].dtype.base_dtype, TensorShape([None])),
            _shape_vec(rank)]


def _split_infer(op):
    n = op.get_attr("num_split")
    rank = _rank_of(op.inputs[3])
    return ([_ids(rank)] * n + [(op.inputs[2].dtype.base_dtype, TensorShape([None]))] * n
            + [_shape_vec(rank)] * n)


def _fill_infer(op):
    rank = _rank_of(op.inputs[2])
    return [_ids(rank), (op.inputs[1].dtype.base_dtype, TensorShape([None])),
            (_dt.bool, TensorShape([None])), (_dt.int64, TensorShape([None]))]


def _fill_grad_infer(op):
    dtype = op.inputs[1].dtype.base_dtype
    return [(dtype, op.inputs[0].shape), (dtype, TensorShape([]))]


def _min_max_infer(op):
    return [_ids(_rank_of(op.inputs[2])), (op.inputs[1].dtype.base_dtype, TensorShape([None]))]


def _add_grad_infer(op):
    dtype = op.inputs[0].dtype.base_dtype
    return [(dtype, TensorShape([op.inputs[1].shape.dims[0].value
                                 if op.inputs[1].shape.ndims else None])),
            (dtype, TensorShape([op.inputs[2].shape.dims[0].value
                                 if op.inputs[2].shape.ndims else None]))]


def _slice_grad_infer(op):
    rows = op.inputs[1].shape.dims[0].value if op.inputs[1].shape.ndims else None
    return [(op.inputs[0].dtype.base_dtype, TensorShape([rows]))]


def _segment_infer(op):
    data = op.inputs[0]
    if data.shape.ndims is None:
        return [(data.dtype.base_dtype, unknown_shape())]
    n = None
    if op.type.endswith("WithNumSegments"):
        c = constant_value(op.inputs[3])
        n = None if c is None else int(c)
    return [(data.dtype.base_dtype, TensorShape([n]).concatenate(data.shape[1:]))]


register_op("SparseTensorDenseMatMul", _matmul_infer)
for _name in ("SparseReduceSum", "SparseReduceMax"):
    register_op(_name, _reduce_infer)
for _name in ("SparseReduceSumSparse", "SparseReduceMaxSparse"):
    register_op(_name, _reduce_sparse_infer)
register_op("SparseAdd", _add_infer)
register_op("SparseAddGrad", _add_grad_infer)
register_op("SparseTensorDenseAdd", _values_like(3))
for _name in ("SparseDenseCwiseMul", "SparseDenseCwiseAdd", "SparseDenseCwiseDiv",
              "SparseSoftmax"):
    register_op(_name, _values_like(1))
register_op("SparseReorder", _reorder_infer)
register_op("SparseReshape", _reshape_infer)
register_op("SparseConcat", _concat_infer)
register_op("SparseSlice", _slice_infer)
register_op("SparseSliceGrad", _slice_grad_infer)
register_op("SparseSplit", _split_infer)
register_op("SparseFillEmptyRows", _fill_infer)
register_op("SparseFillEmptyRowsGrad", _fill_grad_infer)
register_op("SparseSparseMaximum", _min_max_infer)
register_op("SparseSparseMinimum", _min_max_infer)
for _name in ("SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN"):
    register_op(_name, _segment_infer)
    register_op(_name + "WithNumSegments", _segment_infer)
for _name in ("SparseAddGrad", "SparseConcat", "SparseReshape", "SparseSplit",
              "SparseReduceMax", "SparseReduceMaxSparse", "SparseReduceSumSparse",
              "SparseSliceGrad", "SparseFillEmptyRowsGrad"):
    NotDifferentiable(_name)


# --- gradients (TF's) --------------------------------------------------------------------------
@RegisterGradient("SparseReorder")
def _sparse_reorder_grad(op, _unused_indices_grad, values_grad):
    indices, _, shape = op.inputs
    entries = sequence_ops.range(array_ops.shape(indices, out_type=_dt.int64)[0])
    ordered = sparse_reorder(SparseTensor(indices, entries, shape))
    inverse = array_ops.invert_permutation(ordered.values)
    return [None, indexing_ops.gather(values_grad, inverse), None]


@RegisterGradient("SparseAdd")
def _sparse_add_grad(op, _unused_indices_grad, values_grad, _unused_shape_grad):
    a_grad, b_grad = _ops.apply_op("SparseAddGrad", [values_grad, op.inputs[0], op.inputs[3],
                                                     op.outputs[0]], {}).outputs
    return [None, a_grad, None, None, b_grad, None, None]


@RegisterGradient("SparseTensorDenseAdd")
def _sparse_dense_add_grad(op, grad):
    return [None, indexing_ops.gather_nd(grad, op.inputs[0]), None, grad]


@RegisterGradient("SparseReduceSum")
def _sparse_reduce_sum_grad(op, grad):
    indices, _, shape, axes = op.inputs
    kept = _kept_dims_shape(shape, axes)
    grad = array_ops.reshape(grad, kept)
    scale = _m.floordiv(shape, kept)
    return [None, indexing_ops.gather_nd(grad, _m.floordiv(indices, scale)), None, None]


def _kept_dims_shape(shape, axes):
    """``shape`` with the reduced ``axes`` set to 1 (int64)."""
    rank = array_ops.size(shape, out_type=_dt.int64)
    axes = _m.floormod(_m.cast(array_ops.reshape(axes, [-1]), _dt.int64), rank)
    dims = sequence_ops.range(rank)
    hit = reduction_ops.reduce_any(
        _m.equal(array_ops.expand_dims(dims, 1), array_ops.expand_dims(axes, 0)), axis=1)
    return indexing_ops.where_v2(hit, array_ops.ones_like(shape), shape)


@RegisterGradient("SparseSlice")
def _sparse_slice_grad(op, *grads):
    values_grad = grads[1]
    indices, start = op.inputs[0], op.inputs[3]
    return [None, _ops.apply_op("SparseSliceGrad", [values_grad, indices, start,
                                                    op.outputs[0]], {}).outputs[0],
            None, None, None]


@RegisterGradient("SparseTensorDenseMatMul")
def _sparse_dense_matmul_grad(op, grad):
    indices, values, shape, b = op.inputs
    adj_a, adj_b = op.get_attr("adjoint_a"), op.get_attr("adjoint_b")
    b_grad = _ops.apply_op("SparseTensorDenseMatMul", [indices, values, shape, grad],
                           {"adjoint_a": not adj_a, "adjoint_b": False}).outputs[0]
    if adj_b:
        b_grad = array_ops.matrix_transpose(b_grad, conjugate=True)
    rows, cols = indices[:, 0], indices[:, 1]
    if adj_a:
        rows, cols = cols, rows
    b_rows = indexing_ops.gather(array_ops.matrix_transpose(b, conjugate=True) if adj_b else b,
                                 cols)
    values_grad = reduction_ops.reduce_sum(indexing_ops.gather(grad, rows) * b_rows, axis=1)
    if adj_a and values.dtype.is_complex:
        values_grad = _m.conj(values_grad)
    return [None, values_grad, None, b_grad]


def _cwise_mul_or_div_grad(op, grad, is_mul):
    indices, values, x_shape, y = op.inputs
    y_shape = _m.cast(array_ops.shape(y), _dt.int64)
    added = array_ops.expand_dims(array_ops.size(x_shape) - array_ops.size(y_shape), 0)
    full_y_shape = array_ops.concat([array_ops.ones(added, _dt.int64), y_shape], 0)
    scaled = _m.floordiv(indices, _m.floordiv(x_shape, full_y_shape))
    scaled = slicing_ops.slice(scaled, array_ops.concat([[0], added], 0), [-1, -1])
    dense = indexing_ops.gather_nd(y, scaled)
    if is_mul:
        dx, dy_val = grad * dense, grad * values
    else:
        dx, dy_val = grad / dense, grad * (-values / _m.square(dense))
    dy = sparse_add(array_ops.zeros_like(y), SparseTensor(scaled, dy_val, y_shape))
    return [None, dx, None, dy]


RegisterGradient("SparseDenseCwiseMul")(lambda op, g: _cwise_mul_or_div_grad(op, g, True))
RegisterGradient("SparseDenseCwiseDiv")(lambda op, g: _cwise_mul_or_div_grad(op, g, False))


@RegisterGradient("SparseDenseCwiseAdd")
def _cwise_add_grad(op, grad):
    raise NotImplementedError("Gradient for SparseDenseCwiseAdd is not implemented.")


@RegisterGradient("SparseSoftmax")
def _sparse_softmax_grad(op, grad):
    indices, _, shape = op.inputs
    out = op.outputs[0]
    product = SparseTensor(indices, out * grad, shape)
    total = _m.negative(sparse_reduce_sum(product, [-1], keepdims=True))
    summed = _ops.apply_op("SparseDenseCwiseAdd", [indices, grad, shape, total], {}).outputs[0]
    return [None, summed * out, None]


@RegisterGradient("SparseSparseMaximum")
def _max_grad(op, *grads):
    raise NotImplementedError("Gradient for SparseSparseMaximum is not implemented.")


@RegisterGradient("SparseSparseMinimum")
def _min_grad(op, *grads):
    raise NotImplementedError("Gradient for SparseSparseMinimum is not implemented.")


@RegisterGradient("SparseFillEmptyRows")
def _fill_empty_rows_grad(op, _indices_grad, values_grad, _indicator_grad, _map_grad):
    d_values, d_default = _ops.apply_op("SparseFillEmptyRowsGrad",
                                        [op.outputs[3], values_grad], {}).outputs
    return [None, d_values, None, d_default]


def _segment_grad(how):
    def grad_fn(op, grad):
        data, indices, segment_ids = op.inputs[:3]
        rows = indexing_ops.gather(grad, segment_ids)
        if how != "sum":
            ones = array_ops.ones_like(segment_ids, dtype=grad.dtype)
            counts = reduction_ops.unsorted_segment_sum(
                ones, segment_ids, array_ops.shape(grad)[0])
            counts = _m.maximum(counts, _ops.convert_to_tensor(1, dtype=grad.dtype))
            scale = _m.sqrt(counts) if how == "sqrt_n" else counts
            scale = indexing_ops.gather(scale, segment_ids)
            rank = array_ops.rank(data)
            scale = array_ops.reshape(scale, array_ops.concat(
                [[-1], array_ops.ones(array_ops.expand_dims(rank - 1, 0), _dt.int32)], 0))
            rows = rows / scale
        data_grad = reduction_ops.unsorted_segment_sum(rows, indices,
                                                       array_ops.shape(data)[0])
        return [data_grad] + [None] * (len(op.inputs) - 1)

    return grad_fn


for _how, _name in (("sum", "SparseSegmentSum"), ("mean", "SparseSegmentMean"),
                    ("sqrt_n", "SparseSegmentSqrtN")):
    RegisterGradient(_name)(_segment_grad(_how))
    RegisterGradient(_name + "WithNumSegments")(_segment_grad(_how))


# --- builders ----------------------------------------------------------------------------------
def _components(sp):
    return [sp.indices, sp.values, sp.dense_shape]


def _with_static_shape(st: SparseTensor, shape: TensorShape) -> SparseTensor:
    st.set_shape(shape)
    return st


def sparse_tensor_to_dense(sp_input, default_value=None, validate_indices=True, name=None):
    """The dense tensor of ``sp_input`` (``default_value``, 0 unless given, elsewhere)."""
    sp_input = _sparse(sp_input)
    if default_value is None:
        default_value = array_ops.zeros([], dtype=sp_input.dtype)
    default = _ops.convert_to_tensor(default_value, dtype=sp_input.dtype)
    return _ops.apply_op("SparseToDense", [sp_input.indices, sp_input.dense_shape,
                                           sp_input.values, default],
                         {"validate_indices": bool(validate_indices)},
                         name or "SparseToDense").outputs[0]


def sparse_tensor_dense_matmul(sp_a, b, adjoint_a=False, adjoint_b=False, name=None):
    """``op(sp_a) @ op(b)``, ``op`` the adjoint where asked; with ``b`` sparse instead,
    computed as the transpose of the swapped product (TF's rule)."""
    if isinstance(b, (SparseTensor, SparseTensorValue)):
        if adjoint_a != adjoint_b:
            return array_ops.transpose(sparse_tensor_dense_matmul(b, sp_a, adjoint_a,
                                                                  adjoint_b))
        return array_ops.transpose(sparse_tensor_dense_matmul(
            b, sp_a, adjoint_a=not adjoint_a, adjoint_b=not adjoint_b))
    sp_a = _sparse(sp_a)
    with _ops.name_scope(name, "SparseTensorDenseMatMul", [sp_a.indices, sp_a.values]):
        b = _ops.convert_to_tensor(b, name="b")
        if b.dtype.base_dtype is not sp_a.dtype.base_dtype:
            raise TypeError(f"Input 'b' of 'SparseTensorDenseMatMul' Op has type "
                            f"{b.dtype.name} that does not match type {sp_a.dtype.name} of "
                            "argument 'a_values'.")
        return _ops.apply_op("SparseTensorDenseMatMul", [*_components(sp_a), b],
                             {"adjoint_a": bool(adjoint_a), "adjoint_b": bool(adjoint_b)},
                             "SparseTensorDenseMatMul").outputs[0]


def _reduction_axes(sp, axis):
    if axis is None:
        rank = sp.shape.ndims
        if rank is not None:
            return _ops.convert_to_tensor(np.arange(rank, dtype=np.int32))
        return sequence_ops.range(0, array_ops.size(sp.dense_shape))
    return _ops.convert_to_tensor(axis, dtype=_dt.int32)


def _pick(new, new_name, old, old_name):
    if new is not None and old is not None:
        raise ValueError(f"Cannot specify both '{new_name}' and '{old_name}'")
    return new if new is not None else old


def _reduce(op_type, sp_input, axis, keepdims, reduction_axes, keep_dims, name=None):
    keepdims = bool(_pick(keepdims, "keepdims", keep_dims, "keep_dims"))
    axis = _pick(axis, "axis", reduction_axes, "reduction_axes")
    sp_input = _sparse(sp_input)
    op = _ops.apply_op(op_type, [*_components(sp_input), _reduction_axes(sp_input, axis)],
                       {"keep_dims": keepdims}, name or op_type)
    if op_type.endswith("Sparse"):
        return SparseTensor(*op.outputs)
    return op.outputs[0]


def sparse_reduce_sum(sp_input, axis=None, keepdims=None, reduction_axes=None,
                      keep_dims=None):
    """The sum of ``sp_input``'s entries along ``axis`` (all by default): a dense tensor."""
    return _reduce("SparseReduceSum", sp_input, axis, keepdims, reduction_axes, keep_dims)


def sparse_reduce_sum_sparse(sp_input, axis=None, keepdims=None, reduction_axes=None,
                             keep_dims=None):
    """``sparse_reduce_sum`` as a ``SparseTensor`` (an entry per non-empty group)."""
    return _reduce("SparseReduceSumSparse", sp_input, axis, keepdims, reduction_axes,
                   keep_dims)


def sparse_reduce_max(sp_input, axis=None, keepdims=None, reduction_axes=None,
                      keep_dims=None):
    """The maximum of the entries present along ``axis`` (implicit zeros are not
    considered; a group without entries is 0)."""
    return _reduce("SparseReduceMax", sp_input, axis, keepdims, reduction_axes, keep_dims)


def sparse_reduce_max_sparse(sp_input, axis=None, keepdims=None, reduction_axes=None,
                             keep_dims=None):
    """``sparse_reduce_max`` as a ``SparseTensor``."""
    return _reduce("SparseReduceMaxSparse", sp_input, axis, keepdims, reduction_axes,
                   keep_dims)


def sparse_add(a, b, threshold=None, thresh=None):
    """``a + b`` with at least one of them sparse: a ``SparseTensor`` when both are (entries
    whose magnitude is below ``threshold`` dropped), else a dense tensor."""
    threshold = _pick(threshold, "threshold", thresh, "thresh")
    threshold = 0 if threshold is None else threshold
    classes = (SparseTensor, SparseTensorValue)
    if not any(isinstance(x, classes) for x in (a, b)):
        raise TypeError("At least one input should be SparseTensor; do you mean to use "
                        "tf.add()?")
    if all(isinstance(x, classes) for x in (a, b)):
        a, b = _sparse(a), _sparse(b)
        real = a.values.dtype.base_dtype
        real = {_dt.complex64: _dt.float32, _dt.complex128: _dt.float64}.get(real, real)
        thresh_t = _ops.convert_to_tensor(threshold, dtype=real, name="threshold")
        op = _ops.apply_op("SparseAdd", [*_components(a), *_components(b), thresh_t], {},
                           "SparseAdd")
        a.shape.assert_is_compatible_with(b.shape)
        static = a.shape.merge_with(b.shape)
        shape = static.as_list() if static.is_fully_defined() else op.outputs[2]
        return SparseTensor(op.outputs[0], op.outputs[1], shape)
    if isinstance(b, classes):
        a, b = b, a
    a = _sparse(a)
    b = _ops.convert_to_tensor(b, dtype=a.dtype)
    return _ops.apply_op("SparseTensorDenseAdd", [*_components(a), b], {},
                         "SparseTensorDenseAdd").outputs[0]


def sparse_reorder(sp_input, name=None):
    """``sp_input`` with its entries in row-major (canonical) order."""
    sp_input = _sparse(sp_input)
    with _ops.name_scope(name, "SparseReorder", [sp_input.indices, sp_input.values]):
        indices, values = _ops.apply_op("SparseReorder", _components(sp_input), {},
                                        "SparseReorder").outputs
    if sp_input.shape.is_fully_defined():
        shape = _ops.convert_to_tensor(sp_input.shape.as_list(), dtype=_dt.int64)
    else:
        shape = array_ops.identity(sp_input.dense_shape)
    return _with_static_shape(SparseTensor(indices, values, shape), sp_input.shape)


def sparse_reshape(sp_input, shape, name=None):
    """``sp_input`` with a new dense shape (one dimension may be -1) holding the same
    entries in row-major order; a static mismatch is a ValueError, as TF's."""
    sp_input = _sparse(sp_input)
    shape = _m.cast(shape, _dt.int64)
    with _ops.name_scope(name, "SparseReshape", [sp_input.indices]) as scope:
        indices, out_shape = _ops.apply_op("SparseReshape", [sp_input.indices,
                                                             sp_input.dense_shape, shape],
                                           {}, scope.rstrip("/") if scope else None).outputs
        wanted = constant_value(shape)
        if wanted is not None and sp_input.shape.is_fully_defined():
            wanted = [int(d) for d in np.ravel(wanted)]
            if sum(d == -1 for d in wanted) > 1:
                raise ValueError(f"At most one dimension can be inferred (-1). Found: "
                                 f"{wanted}")
            size = int(np.prod(sp_input.shape.as_list()))
            known = [d for d in wanted if d != -1]
            dims = list(wanted)
            if -1 in wanted and 0 not in known:
                dims[wanted.index(-1)] = size // int(np.prod(known))
            if -1 not in dims:
                if int(np.prod(dims)) != size:
                    raise ValueError(f"Cannot reshape a tensor with {size} elements to shape "
                                     f"{[None if d == -1 else d for d in wanted]} "
                                     f"({int(np.prod(dims))} elements).")
                out_shape = _ops.convert_to_tensor(dims, dtype=_dt.int64)
        return SparseTensor(indices, array_ops.identity(sp_input.values), out_shape)


def sparse_concat(axis, sp_inputs, name=None, expand_nonconcat_dim=False, concat_dim=None,
                  expand_nonconcat_dims=None):
    """The ``SparseTensor``s of ``sp_inputs`` joined along ``axis`` (entries in row-major
    order); with ``expand_nonconcat_dim`` the other dimensions grow to the largest."""
    if expand_nonconcat_dims is not None:
        expand_nonconcat_dim = expand_nonconcat_dims
    axis = _pick(axis, "axis", concat_dim, "concat_dim")
    if not isinstance(sp_inputs, (list, tuple)):
        raise TypeError("Inputs must be a list")
    sp_inputs = [_sparse(s) for s in sp_inputs]
    if not sp_inputs:
        raise ValueError("sp_inputs must not be empty")
    shapes = [s.dense_shape for s in sp_inputs]
    if expand_nonconcat_dim:
        biggest = reduction_ops.reduce_max(array_ops.stack(shapes), axis=0)
        rank = _rank_of(shapes[0])
        ax = int(axis) % rank if rank else int(axis)
        shapes = [array_ops.concat([biggest[:ax], s[ax:ax + 1], biggest[ax + 1:]], 0)
                  for s in shapes]
    with _ops.name_scope(name, "SparseConcat"):
        op = _ops.apply_op("SparseConcat", [s.indices for s in sp_inputs]
                           + [s.values for s in sp_inputs] + shapes,
                           {"concat_dim": int(axis), "N": len(sp_inputs)}, "SparseConcat")
    out = SparseTensor(*op.outputs)
    static = [s.shape for s in sp_inputs]
    if not expand_nonconcat_dim and all(s.is_fully_defined() for s in static):
        dims = static[0].as_list()
        ax = int(axis) % len(dims)
        dims[ax] = sum(s.as_list()[ax] for s in static)
        out.set_shape(dims)
    return out


def sparse_slice(sp_input, start, size, name=None):
    """The entries of ``sp_input`` inside the box ``[start, start + size)``, re-indexed
    from ``start`` (the box is clipped to the dense shape)."""
    sp_input = _sparse(sp_input)
    start = _ops.convert_to_tensor(start, _dt.int64)
    size = _ops.convert_to_tensor(size, _dt.int64)
    with _ops.name_scope(name, "SparseSlice", [sp_input.indices]):
        op = _ops.apply_op("SparseSlice", [*_components(sp_input), start, size], {},
                           "SparseSlice")
    return SparseTensor(*op.outputs)


def sparse_split(keyword_required=None, sp_input=None, num_split=None, axis=None, name=None,
                 split_dim=None):
    """``num_split`` ``SparseTensor``s cut from ``sp_input`` along ``axis`` (the first
    ``size % num_split`` pieces one longer). Keyword arguments only, as TF's."""
    if keyword_required is not None:
        raise ValueError("Keyword arguments are required for this function.")
    if sp_input is None:
        raise ValueError("sp_input is required")
    if num_split is None:
        raise ValueError("num_split is required")
    axis = _pick(axis, "axis", split_dim, "split_dim")
    if axis is None:
        raise ValueError("axis is required")
    sp_input = _sparse(sp_input)
    axis_t = _ops.convert_to_tensor(axis, dtype=_dt.int64)
    op = _ops.apply_op("SparseSplit", [axis_t, *_components(sp_input)],
                       {"num_split": int(num_split)}, name or "SparseSplit")
    n = int(num_split)
    outs = op.outputs
    return [SparseTensor(outs[k], outs[n + k], outs[2 * n + k]) for k in range(n)]


def sparse_softmax(sp_input, name=None):
    """Softmax over the last dimension of the entries present (implicit zeros take no
    part): a ``SparseTensor`` with ``sp_input``'s indices."""
    sp_input = _sparse(sp_input)
    with _ops.name_scope(name, "SparseSoftmax", [sp_input.indices, sp_input.values]):
        values = _ops.apply_op("SparseSoftmax", _components(sp_input), {},
                               "SparseSoftmax").outputs[0]
    return SparseTensor(sp_input.indices, values, sp_input.dense_shape)


def sparse_fill_empty_rows(sp_input, default_value, name=None):
    """``(filled, empty_row_indicator)``: ``sp_input`` with an entry ``[row, 0, ...]`` of
    ``default_value`` in every row that had none."""
    sp_input = _sparse(sp_input)
    with _ops.name_scope(name, "SparseFillEmptyRows", [sp_input.indices]):
        default = _ops.convert_to_tensor(default_value, dtype=sp_input.values.dtype)
        out = _ops.apply_op("SparseFillEmptyRows", [*_components(sp_input), default], {},
                            "SparseFillEmptyRows").outputs
    return SparseTensor(out[0], out[1], sp_input.dense_shape), out[2]


def _min_max(op_type, sp_a, sp_b, name):
    sp_a, sp_b = _sparse(sp_a), _sparse(sp_b)
    with _ops.name_scope(name, op_type, [sp_a.indices, sp_b.indices]):
        indices, values = _ops.apply_op(op_type, [*_components(sp_a), *_components(sp_b)],
                                        {}, op_type).outputs
    return SparseTensor(indices, values, sp_a.dense_shape)


def sparse_maximum(sp_a, sp_b, name=None):
    """Elementwise maximum of two ``SparseTensor``s of one shape (a missing entry is 0)."""
    return _min_max("SparseSparseMaximum", sp_a, sp_b, name)


def sparse_minimum(sp_a, sp_b, name=None):
    """Elementwise minimum of two ``SparseTensor``s of one shape (a missing entry is 0)."""
    return _min_max("SparseSparseMinimum", sp_a, sp_b, name)


def _segment(op_type, data, indices, segment_ids, name, num_segments):
    data = _ops.convert_to_tensor(data, name="data")
    indices = _ops.convert_to_tensor(indices, name="indices")
    segment_ids = _ops.convert_to_tensor(segment_ids, name="segment_ids")
    inputs = [data, indices, segment_ids]
    if num_segments is not None:
        op_type += "WithNumSegments"
        inputs.append(_ops.convert_to_tensor(num_segments, name="num_segments"))
    return _ops.apply_op(op_type, inputs, {}, name or op_type).outputs[0]


def sparse_segment_sum(data, indices, segment_ids, name=None, num_segments=None):
    """``segment_sum`` of the rows ``data[indices]`` (segment ids sorted)."""
    return _segment("SparseSegmentSum", data, indices, segment_ids, name, num_segments)


def sparse_segment_mean(data, indices, segment_ids, name=None, num_segments=None):
    """``segment_mean`` of the rows ``data[indices]`` (an empty segment is 0)."""
    return _segment("SparseSegmentMean", data, indices, segment_ids, name, num_segments)


def sparse_segment_sqrt_n(data, indices, segment_ids, name=None, num_segments=None):
    """The sum of each segment's rows of ``data[indices]`` over the root of its size."""
    return _segment("SparseSegmentSqrtN", data, indices, segment_ids, name, num_segments)


def sparse_dense_cwise(op_type, sp_t: SparseTensor, dense, name=None) -> SparseTensor:
    """``sp_t``'s entries combined with ``dense`` broadcast to its shape (``op_type`` is
    ``SparseDenseCwiseMul``, ``Div`` or ``Add``)."""
    dense = _ops.convert_to_tensor(dense, dtype=sp_t.dtype)
    values = _ops.apply_op(op_type, [*_components(sp_t), dense], {}, name or op_type).outputs[0]
    return SparseTensor(sp_t.indices, values, sp_t.dense_shape)


# TF's true division of a sparse integer tensor: in floating point, as for dense tensors.
_TRUEDIV = {_dt.uint8: _dt.float32, _dt.int8: _dt.float32, _dt.uint16: _dt.float32,
            _dt.int16: _dt.float32, _dt.int32: _dt.float64, _dt.int64: _dt.float64}


def _sparse_truediv(sp: SparseTensor, y) -> SparseTensor:
    with _ops.name_scope(None, "truediv"):
        y = _ops.convert_to_tensor(y, name="y")
        if y.dtype.base_dtype is not sp.dtype.base_dtype:
            raise TypeError(f"`x` and `y` must have the same dtype, got {sp.dtype.name} != "
                            f"{y.dtype.name}.")
        to = _TRUEDIV.get(sp.dtype.base_dtype)
        if to is not None:
            sp, y = sp.with_values(_m.cast(sp.values, to)), _m.cast(y, to)
        return sparse_dense_cwise("SparseDenseCwiseDiv", sp, y)


def _install_operators() -> None:
    # TF's SparseTensor operators: a sparse * or / a dense tensor keeps the sparsity.
    SparseTensor.__mul__ = lambda sp, y: sparse_dense_cwise("SparseDenseCwiseMul", sp, y)
    SparseTensor.__truediv__ = _sparse_truediv
    SparseTensor.__div__ = lambda sp, y: sparse_dense_cwise("SparseDenseCwiseDiv", sp, y)


_install_operators()

__all__ = ["SparseTensor", "SparseTensorValue", "sparse_add", "sparse_concat",
           "sparse_fill_empty_rows", "sparse_maximum", "sparse_minimum", "sparse_reduce_max",
           "sparse_reduce_max_sparse", "sparse_reduce_sum", "sparse_reduce_sum_sparse",
           "sparse_reorder", "sparse_reshape", "sparse_segment_mean", "sparse_segment_sqrt_n",
           "sparse_segment_sum", "sparse_slice", "sparse_softmax", "sparse_split",
           "sparse_tensor_dense_matmul", "sparse_tensor_to_dense", "sparse_to_dense"]


# --- tf.sparse.bincount ------------------------------------------------------------------------
def _count_infer(op):
    dense = op.type == "DenseCountSparseOutput"
    values = op.inputs[0] if dense else op.inputs[2]
    rank = (values.shape.ndims if dense else
            (values.shape.dims[0].value if values.shape.ndims == 1 else None))
    weights = op.inputs[1] if dense else op.inputs[3]
    return [_ids(rank), (weights.dtype.base_dtype, TensorShape([None])), _shape_vec(rank)]


for _name in ("DenseCountSparseOutput", "SparseCountSparseOutput"):
    register_op(_name, _count_infer)
    NotDifferentiable(_name)


def sparse_bincount(values, weights=None, axis=0, minlength=None, maxlength=None,
                    binary_output=False, name=None) -> SparseTensor:
    """Counts of each value as a ``SparseTensor``: over everything (``axis=0``) or per row
    (``axis=-1``); ``weights`` summed instead of counting, or 1 per value present with
    ``binary_output``; values of at least ``maxlength`` are dropped."""
    with _ops.name_scope(name, "count"):
        if isinstance(values, SparseTensorValue):
            values = SparseTensor.from_value(values)
        if not isinstance(values, SparseTensor):
            values = _ops.convert_to_tensor(values, name="values")
        if weights is not None and not isinstance(weights, SparseTensor):
            weights = _ops.convert_to_tensor(weights, name="weights")
        if weights is not None and binary_output:
            raise ValueError("Arguments `binary_output` and `weights` are mutually exclusive. "
                             "Please specify only one.")
        axis = 0 if axis is None else axis
        if axis not in (0, -1):
            raise ValueError(f"Unsupported value for argument axis={axis}. Only 0 and -1 are "
                             "currently supported.")
        if values.dtype.base_dtype not in (_dt.int32, _dt.int64):
            raise TypeError(f"Value passed to parameter 'values' has DataType "
                            f"{values.dtype.base_dtype.name} not in list of allowed values: "
                            "int32, int64")
        attrs = {"minlength": -1 if minlength is None else int(minlength),
                 "maxlength": -1 if maxlength is None else int(maxlength),
                 "binary_output": bool(binary_output)}
        if axis == 0:
            if isinstance(values, SparseTensor):
                weights = weights.values if isinstance(weights, SparseTensor) else weights
                values = values.values
            else:
                values = array_ops.reshape(values, [-1])
                if weights is not None:
                    weights = array_ops.reshape(weights, [-1])
        if weights is None:
            weights = _ops.convert_to_tensor(np.zeros(0, values.dtype.base_dtype._np))
        elif isinstance(weights, SparseTensor):
            weights = weights.values
        if isinstance(values, SparseTensor):
            op = _ops.apply_op("SparseCountSparseOutput", [*_components(values), weights],
                               attrs, "SparseCountSparseOutput")
        else:
            op = _ops.apply_op("DenseCountSparseOutput", [values, weights], attrs,
                               "DenseCountSparseOutput")
        return SparseTensor(*op.outputs)
