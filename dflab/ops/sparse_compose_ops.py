"""``tf.SparseTensor`` ops built from other ops, as TF's own Python builds them:
``sparse_placeholder``, ``from_dense``, ``sparse_retain``, ``sparse_transpose``,
``sparse.expand_dims``, ``sparse.eye``, ``sparse_reset_shape``, ``sparse_merge``,
``sparse_to_indicator`` and ``sparse_matmul`` (a dense product with sparsity hints).

Invariant: every function here only composes registered ops (``sparse_ops`` and the dense
families), so gradients and kernels come from those ops.
"""

from __future__ import annotations

import numbers

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant_value, constant_value_as_shape
from dflab.framework.sparse_tensor import (
    SparseTensor,
    SparseTensorValue,
    convert_to_tensor_or_sparse_tensor,
)
from dflab.framework.sparse_tensor import convert_to_sparse_tensor as _sparse
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import (
    array_ops,
    check_ops,
    control_flow_ops,
    indexing_ops,
    math_ops,
    reduction_ops,
    sequence_ops,
    slicing_ops,
)
from dflab.ops.sparse_ops import sparse_reorder, sparse_tensor_to_dense


def sparse_placeholder(dtype, shape=None, name=None) -> SparseTensor:
    """A ``SparseTensor`` of placeholders, fed a ``SparseTensorValue`` or an
    ``(indices, values, dense_shape)`` triple. With ``shape`` (None or -1 for an unknown
    dimension) the dense shape has that default and the static shape is known."""
    shape_name = f"{name}/shape" if name is not None else None
    if shape is None:
        rank = None
        dense_shape = array_ops.placeholder(_dt.int64, shape=[rank], name=shape_name)
        static = constant_value_as_shape(dense_shape)
    else:
        if isinstance(shape, _ops.Tensor):
            rank = shape.shape.dims[0].value
            static = constant_value_as_shape(shape)
        else:
            rank = len(shape)
            static = TensorShape([None if d == -1 else d for d in shape])
            shape = [-1 if d is None else int(d) for d in shape]
            shape = _ops.convert_to_tensor(
                np.asarray(shape, dtype=np.int64).reshape(rank), dtype=_dt.int64,
                name=f"{name}/shape_default" if name is not None else None)
        # Feedable, as TF's: a placeholder with the given shape as its default.
        dense_shape = array_ops.placeholder_with_default(shape, shape=shape.shape,
                                                         name=shape_name)
    result = SparseTensor(
        values=array_ops.placeholder(dtype, shape=[None],
                                     name=f"{name}/values" if name is not None else None),
        indices=array_ops.placeholder(_dt.int64, shape=[None, rank],
                                      name=f"{name}/indices" if name is not None else None),
        dense_shape=dense_shape)
    result.set_shape(static)
    return result


def from_dense(tensor, name=None) -> SparseTensor:
    """The ``SparseTensor`` of ``tensor``'s non-zero entries."""
    with _ops.name_scope(name, "dense_to_sparse"):
        tensor = _ops.convert_to_tensor(tensor)
        indices = indexing_ops.where_v2(
            math_ops.not_equal(tensor, array_ops.zeros_like(tensor)))
        values = indexing_ops.gather_nd(tensor, indices)
        shape = array_ops.shape(tensor, out_type=_dt.int64)
        return SparseTensor(indices, values, shape)


def sparse_retain(sp_input, to_retain) -> SparseTensor:
    """The entries of ``sp_input`` where the boolean vector ``to_retain`` is true."""
    sp_input = _sparse(sp_input)
    to_retain = _ops.convert_to_tensor(to_retain)
    to_retain.shape.with_rank(1)
    sp_input.values.shape.with_rank(1).dims[0].merge_with(to_retain.shape.dims[0])
    where_true = array_ops.reshape(indexing_ops.where_v2(to_retain), [-1])
    return SparseTensor(indexing_ops.gather(sp_input.indices, where_true),
                        indexing_ops.gather(sp_input.values, where_true),
                        array_ops.identity(sp_input.dense_shape))


def sparse_transpose(sp_input, perm=None, name=None) -> SparseTensor:
    """``sp_input`` with its dimensions permuted (reversed by default), reordered."""
    sp_input = _sparse(sp_input)
    with _ops.name_scope(name, "SparseTranspose", [sp_input.indices]):
        if perm is None:
            rank = sp_input.shape.ndims
            if rank is not None:
                perm = rank - 1 - np.arange(0, rank, 1)
            else:
                rank = array_ops.size(sp_input.dense_shape)
                perm = rank - 1 - sequence_ops.range(0, rank, 1)
        perm_t = _ops.convert_to_tensor(perm)
        indices = array_ops.transpose(indexing_ops.gather(
            array_ops.transpose(sp_input.indices), perm_t))
        perm_c = constant_value(perm_t)
        if perm_c is not None and sp_input.shape.is_fully_defined():
            old = sp_input.shape.as_list()
            shape = [old[int(p)] for p in np.ravel(perm_c)]
        else:
            shape = indexing_ops.gather(sp_input.dense_shape, perm_t)
        return sparse_reorder(SparseTensor(indices, sp_input.values, shape))


def sparse_expand_dims(sp_input, axis=None, name=None) -> SparseTensor:
    """``sp_input`` with a dimension of size 1 inserted at ``axis`` (-1: last)."""
    sp_input = _sparse(sp_input)
    rank = sp_input.dense_shape.shape.dims[0].value
    if rank is None:
        rank = array_ops.shape(sp_input.dense_shape)[0]
    axis = -1 if axis is None else axis
    with _ops.name_scope(name, "expand_dims", [sp_input.indices]):
        if isinstance(axis, numbers.Integral):
            axis = _ops.convert_to_tensor(axis, name="axis", dtype=_dt.int32)
        elif not isinstance(axis, _ops.Tensor):
            raise TypeError("axis must be an integer value in range [-rank(sp_input) - 1, "
                            "rank(sp_input)]")
        axis = indexing_ops.where_v2(axis >= 0, axis, axis + rank + 1)
        entries = array_ops.shape(sp_input.indices)[0]
        new_index = array_ops.zeros(array_ops.stack([entries, 1]), dtype=_dt.int64)
        before = slicing_ops.slice(sp_input.indices, [0, 0], array_ops.stack([-1, axis]))
        after = slicing_ops.slice(sp_input.indices, array_ops.stack([0, axis]), [-1, -1])
        indices = array_ops.concat([before, new_index, after], axis=1)
        shape_before = slicing_ops.slice(sp_input.dense_shape, [0], array_ops.stack([axis]))
        shape_after = slicing_ops.slice(sp_input.dense_shape, array_ops.stack([axis]), [-1])
        one = _ops.convert_to_tensor([1], name="new_shape", dtype=_dt.int64)
        shape = array_ops.concat([shape_before, one, shape_after], axis=0)
        return SparseTensor(indices=indices, values=sp_input.values, dense_shape=shape)


def sparse_eye(num_rows, num_columns=None, dtype=_dt.float32, name=None) -> SparseTensor:
    """A sparse identity matrix of ``num_rows`` x ``num_columns`` (square by default)."""
    with _ops.name_scope(name, "eye"):
        num_rows = math_ops.cast(_ops.convert_to_tensor(num_rows, name="num_rows"), _dt.int64)
        num_columns = num_rows if num_columns is None else math_ops.cast(
            _ops.convert_to_tensor(num_columns, name="num_columns"), _dt.int64)
        size = math_ops.minimum(num_rows, num_columns)
        diag = sequence_ops.range(size, dtype=_dt.int64)
        return SparseTensor(indices=array_ops.stack([diag, diag], axis=1),
                            values=array_ops.ones(array_ops.reshape(size, [1]), dtype=dtype),
                            dense_shape=array_ops.stack([num_rows, num_columns]))


def sparse_reset_shape(sp_input, new_shape=None) -> SparseTensor:
    """``sp_input`` with dense shape ``new_shape`` (no smaller than the old one), or by
    default the tightest shape holding its entries."""
    sp_input = _sparse(sp_input)
    in_indices = array_ops.identity(sp_input.indices)
    in_values = array_ops.identity(sp_input.values)
    in_shape = array_ops.identity(sp_input.dense_shape)
    if new_shape is None:
        low = reduction_ops.reduce_max(in_indices, axis=0)
        out_shape = math_ops.maximum(_ops.convert_to_tensor(0, dtype=_dt.int64),
                                     math_ops.add(low, array_ops.ones_like(in_shape)))
        return SparseTensor(in_indices, in_values, out_shape)
    out_shape = _ops.convert_to_tensor(new_shape)
    out_shape.shape.with_rank(1)
    out_shape = math_ops.cast(out_shape, _dt.int64)
    if out_shape.shape.ndims is not None:
        out_shape.shape.dims[0].merge_with(in_shape.shape.dims[0])
    const = constant_value(out_shape)
    if const is not None and sp_input.shape.is_fully_defined():
        old = np.array(sp_input.shape.as_list())
        if not np.all(old <= const):
            raise ValueError(f"Requested new_shape should have dimension sizes >= "
                             f"sp_input.shape.  Found new_shape ({old}), sp_input.shape "
                             f"({const}).")
        out_shape = const
    else:
        out_shape = control_flow_ops.with_dependencies(
            [check_ops.assert_equal(array_ops.shape(in_shape), array_ops.shape(out_shape))],
            out_shape)
        out_shape = control_flow_ops.with_dependencies(
            [check_ops.assert_less_equal(in_shape, out_shape)], out_shape)
    return SparseTensor(in_indices, in_values, out_shape)


def _merge(sp_ids, sp_values, vocab_size, name=None, already_sorted=False) -> SparseTensor:
    if isinstance(sp_ids, (SparseTensor, SparseTensorValue)):
        sp_ids = [sp_ids]
        if not isinstance(vocab_size, (_ops.Tensor, numbers.Integral)):
            raise TypeError(f"vocab_size has to be a Tensor or Python int. Found "
                            f"{type(vocab_size)}")
        vocab_size = [vocab_size]
    else:
        if not isinstance(sp_ids, (list, tuple)):
            raise TypeError(f"sp_ids has to be a SparseTensor or list thereof. Found "
                            f"{type(sp_ids)}")
        if not isinstance(vocab_size, (list, tuple)):
            raise TypeError(f"vocab_size has to be a list of Tensors or Python ints. Found "
                            f"{type(vocab_size)}")
    if len(sp_ids) != len(vocab_size):
        raise ValueError("sp_ids and vocab_size have to have equal lengths.")
    with _ops.name_scope(name, "SparseMerge"):
        sp_ids = [_sparse(s) for s in sp_ids]
        sp_values = _sparse(sp_values)
        ids = [array_ops.expand_dims(math_ops.cast(s.values, _dt.int64), axis=1)
               for s in sp_ids]
        sizes = [array_ops.reshape(math_ops.cast(v, _dt.int64), [1]) for v in vocab_size]
        kept = sp_ids[0].indices[:, :-1]
        indices = array_ops.concat([kept] + ids, 1)
        shape = array_ops.concat([sp_ids[0].dense_shape[:-1]] + sizes, 0)
        result = SparseTensor(indices, sp_values.values, shape)
        if already_sorted:
            return result
        ordered = sparse_reorder(result)
        return SparseTensor(ordered.indices, ordered.values, shape)


def sparse_merge(sp_ids, sp_values, vocab_size, name=None, already_sorted=False):
    """The ``SparseTensor`` whose last dimension is indexed by ``sp_ids``' values (one
    dimension per id tensor when given a list) and holds ``sp_values``' values."""
    return _merge(sp_ids, sp_values, vocab_size, name, already_sorted)


def sparse_to_indicator(sp_input, vocab_size, name=None):
    """A dense bool tensor, one more dimension of ``vocab_size``: true where an id of the
    row's entries is."""
    sp_input = _sparse(sp_input)
    with _ops.name_scope(name, "SparseToIndicator") as scope:
        entries = array_ops.shape(sp_input.indices)[0]
        flags = array_ops.fill(array_ops.expand_dims(entries, 0), True)
        merged = _merge(sp_input, SparseTensor(sp_input.indices, flags, sp_input.dense_shape),
                        vocab_size)
        return sparse_tensor_to_dense(merged, default_value=False, validate_indices=False,
                                      name=scope.rstrip("/") if scope else None)


def sparse_mask(a, mask_indices, name=None):
    """The rows of the ``IndexedSlices`` ``a`` whose index is not in ``mask_indices``."""
    from dflab.ops.gradients import IndexedSlices

    with _ops.name_scope(name, "sparse_mask") as scope:
        indices = a.indices
        mask = _ops.convert_to_tensor(mask_indices, dtype=indices.dtype)
        # TF's ListDiff keeps the indices absent from the mask, in their order.
        masked = reduction_ops.reduce_any(math_ops.equal(
            array_ops.expand_dims(indices, 1), array_ops.expand_dims(mask, 0)), axis=1)
        keep = array_ops.reshape(indexing_ops.where_v2(math_ops.logical_not(masked)), [-1])
        values = indexing_ops.gather(a.values, keep,
                                     name=scope.rstrip("/") if scope else None)
        return IndexedSlices(values, indexing_ops.gather(indices, keep), a.dense_shape)


def sparse_matmul(a, b, transpose_a=False, transpose_b=False, a_is_sparse=False,
                  b_is_sparse=False, name=None):
    """TF1's ``sparse_matmul``: the dense product of float32 matrices, the sparsity flags
    being hints only; float32 result."""
    with _ops.name_scope(name, "SparseMatMul"):
        a = _ops.convert_to_tensor(a, name="a")
        b = _ops.convert_to_tensor(b, name="b")
        for arg, t in (("a", a), ("b", b)):
            if t.dtype.base_dtype is not _dt.float32:
                raise TypeError(f"Value passed to parameter '{arg}' has DataType "
                                f"{t.dtype.base_dtype.name} not in list of allowed values: "
                                "float32, bfloat16")
        return math_ops.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b)


__all__ = ["convert_to_tensor_or_sparse_tensor", "sparse_mask", "sparse_matmul", "sparse_merge",
           "sparse_placeholder", "sparse_reset_shape", "sparse_retain", "sparse_to_indicator",
           "sparse_transpose"]
