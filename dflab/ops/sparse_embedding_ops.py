"""Embedding lookups of sparse ids: ``tf.nn.embedding_lookup_sparse`` and
``tf.nn.safe_embedding_lookup_sparse``, composed as TF composes them.

Each row of the ``SparseTensor`` of ids is one bag: its ids' embeddings (weighted by
``sp_weights``' values when given) are combined by ``sum``, ``mean`` or ``sqrtn``. The safe
form also accepts ids of any rank (the last dimension is the bag), drops negative ids and
(unless summing) non-positive weights, and gives empty bags ``default_id``'s embedding or
zeros. Invariant: only registered ops are composed, so gradients come from them.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.sparse_tensor import SparseTensor
from dflab.framework.tensor_shape import TensorShape, unknown_shape
from dflab.ops import (
    array_ops,
    indexing_ops,
    manip_ops,
    math_ops,
    reduction_ops,
    slicing_ops,
    special_math_ops,
    variables,
)
from dflab.ops.nn_impl import embedding_lookup
from dflab.ops.sparse_compose_ops import sparse_retain
from dflab.ops.sparse_ops import (
    sparse_fill_empty_rows,
    sparse_reshape,
    sparse_segment_mean,
    sparse_segment_sqrt_n,
    sparse_segment_sum,
)

_SEGMENT = {"sum": sparse_segment_sum, "mean": sparse_segment_mean,
            "sqrtn": sparse_segment_sqrt_n}


def _param_list(params) -> list:
    if hasattr(params, "_get_variable_list"):  # a PartitionedVariable
        return list(params._get_variable_list())
    return list(params) if isinstance(params, (list, tuple)) else [params]


def embedding_lookup_sparse(params, sp_ids, sp_weights, partition_strategy="mod", name=None,
                            combiner=None, max_norm=None, allow_fast_lookup=False):
    """One combined embedding per row of ``sp_ids`` (``[rows, dim]``; rows after the last
    non-empty one are not produced, as in TF)."""
    combiner = "mean" if combiner is None else combiner
    if combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError(f"combiner must be one of 'mean', 'sqrtn' or 'sum', got {combiner}")
    params = _param_list(params)
    if not isinstance(sp_ids, SparseTensor):
        raise TypeError(f"sp_ids must be SparseTensor, got {type(sp_ids)}")
    ignore_weights = sp_weights is None
    if not ignore_weights:
        if not isinstance(sp_weights, SparseTensor):
            raise TypeError(f"sp_weights must be either None or SparseTensor,got "
                            f"{type(sp_weights)}")
        sp_ids.values.shape.assert_is_compatible_with(sp_weights.values.shape)
        sp_ids.indices.shape.assert_is_compatible_with(sp_weights.indices.shape)
        sp_ids.dense_shape.shape.assert_is_compatible_with(sp_weights.dense_shape.shape)
    with _ops.name_scope(name, "embedding_lookup_sparse") as scope:
        segment_ids = sp_ids.indices[:, 0]
        ids = sp_ids.values
        return _combine(params, segment_ids, sp_weights, ids, combiner, ignore_weights,
                        max_norm, partition_strategy, scope.rstrip("/") if scope else None)


def _combine(params, segment_ids, sp_weights, ids, combiner, ignore_weights, max_norm,
             partition_strategy, name):
    single = (len(params) == 1 and max_norm is None and ignore_weights)
    if single:
        # TF's direct path: the bags read the table's rows through SparseSegment* ops.
        embeddings = _ops.convert_to_tensor(params[0], name="params")
        idx = ids
    else:
        ids, idx = indexing_ops.unique(ids)
        embeddings = embedding_lookup(params, ids, partition_strategy=partition_strategy,
                                      max_norm=max_norm)
    if ignore_weights:
        return _SEGMENT[combiner](embeddings, idx, segment_ids, name=name)
    segment_ids = math_ops.cast(segment_ids, _dt.int32)
    weights = sp_weights.values
    embeddings = indexing_ops.gather(embeddings, idx)
    original = embeddings.dtype.base_dtype
    if original is _dt.float16:
        embeddings = math_ops.cast(embeddings, _dt.float32)
    if weights.dtype.base_dtype is not embeddings.dtype.base_dtype:
        weights = math_ops.cast(weights, embeddings.dtype.base_dtype)
    ones = array_ops.ones(array_ops.expand_dims(array_ops.rank(embeddings) - 1, 0),
                          dtype=_dt.int32)
    static = weights.shape
    weights = array_ops.reshape(weights, array_ops.concat([array_ops.shape(weights), ones], 0))
    if embeddings.shape.ndims is not None:
        weights.set_shape(static.concatenate([1] * (embeddings.shape.ndims - 1)))
    embeddings = embeddings * weights
    if combiner == "sum":
        out = reduction_ops.segment_sum(embeddings, segment_ids, name=name)
    else:
        total = reduction_ops.segment_sum(embeddings, segment_ids)
        norm = (reduction_ops.segment_sum(weights, segment_ids) if combiner == "mean" else
                math_ops.sqrt(reduction_ops.segment_sum(math_ops.pow(weights, 2), segment_ids)))
        out = special_math_ops.div_no_nan(total, norm, name=name)
    return math_ops.cast(out, original) if out.dtype.base_dtype is not original else out


def safe_embedding_lookup_sparse(embedding_weights, sparse_ids, sparse_weights=None,
                                 combiner="mean", default_id=None, name=None,
                                 partition_strategy="div", max_norm=None,
                                 allow_fast_lookup=False):
    """``embedding_lookup_sparse`` over the last dimension of ids of any rank, dropping
    invalid ids and weights; an empty bag gives ``default_id``'s row, or zeros."""
    if embedding_weights is None:
        raise ValueError(f"Missing embedding_weights {embedding_weights}.")
    embedding_weights = _param_list(embedding_weights)
    if not embedding_weights:
        raise ValueError(f"Missing embedding_weights {embedding_weights}.")
    dtype = sparse_weights.dtype if sparse_weights is not None else None
    # Variables stay variables (their gradient stays sparse), as TF keeps resource variables.
    embedding_weights = [
        w if isinstance(w, variables.Variable) and dtype in (None, w.dtype.base_dtype)
        else _ops.convert_to_tensor(w, dtype=dtype) for w in embedding_weights]
    with _ops.name_scope(name, "embedding_lookup") as scope:
        scope = scope.rstrip("/") if scope else None
        original_shape = sparse_ids.dense_shape
        rank_dim = sparse_ids.dense_shape.shape.dims[0].value
        rank = array_ops.size(original_shape) if rank_dim is None else rank_dim
        sparse_ids = sparse_reshape(sparse_ids, array_ops.stack([
            reduction_ops.reduce_prod(slicing_ops.slice(original_shape, [0],
                                                        array_ops.reshape(rank - 1, [1]))),
            indexing_ops.gather(original_shape, rank - 1)]))
        if sparse_weights is not None:
            sparse_weights = SparseTensor(sparse_ids.indices, sparse_weights.values,
                                          sparse_ids.dense_shape)
        sparse_ids, sparse_weights = _prune(sparse_ids, sparse_weights,
                                            math_ops.greater_equal(sparse_ids.values, 0))
        if combiner != "sum" and sparse_weights is not None:
            sparse_ids, sparse_weights = _prune(
                sparse_ids, sparse_weights, math_ops.greater(sparse_weights.values, 0))
        sparse_ids, is_row_empty = sparse_fill_empty_rows(sparse_ids, default_id or 0)
        if sparse_weights is not None:
            sparse_weights, _ = sparse_fill_empty_rows(sparse_weights, 1.0)
        result = embedding_lookup_sparse(
            embedding_weights, sparse_ids, sparse_weights, combiner=combiner,
            partition_strategy=partition_strategy,
            name=None if default_id is None else scope, max_norm=max_norm)
        if default_id is None:
            is_row_empty = manip_ops.tile(array_ops.reshape(is_row_empty, [-1, 1]),
                                          array_ops.stack([1, array_ops.shape(result)[1]]))
            result = indexing_ops.where(is_row_empty, array_ops.zeros_like(result), result,
                                        name=scope)
        final = array_ops.reshape(result, array_ops.concat([
            slicing_ops.slice(math_ops.cast(original_shape, _dt.int32), [0],
                              array_ops.reshape(rank - 1, [1])),
            slicing_ops.slice(array_ops.shape(result), [1], [-1])], 0))
        lead = unknown_shape() if rank_dim is None else TensorShape([None] * (rank_dim - 1))
        final.set_shape(lead.concatenate(result.shape[1:]))
        return final


def _prune(sparse_ids, sparse_weights, keep):
    sparse_ids = sparse_retain(sparse_ids, keep)
    if sparse_weights is not None:
        sparse_weights = sparse_retain(sparse_weights, keep)
    return sparse_ids, sparse_weights
