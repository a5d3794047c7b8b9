"""``tf.metrics`` over the top ``k`` predictions of each row: ``precision_at_k``,
``recall_at_k`` (and their ``_at_top_k`` forms, given the top-k indices) and
``average_precision_at_k``, with ``sparse_`` spellings.

Labels are class ids, dense ``[D1, ... DN, num_labels]`` (or without the last dimension) or a
``SparseTensor``; counts come from ``tf.sets`` over each row's label and prediction sets, as
TF's do, and accumulate in float64 local variables named after the metric's name scope.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.sparse_tensor import SparseTensor, convert_to_tensor_or_sparse_tensor
from dflab.ops import array_ops, math_ops, nn_ops, sets_ops, sparse_ops, state_ops
from dflab.ops.metrics_impl import _add_to, _metric_variable


def _at_k_name(name, k=None, class_id=None):
    name = f"{name}_at_{k}" if k is not None else f"{name}_at_k"
    return name if class_id is None else f"{name}_class{class_id}"


def _select_class_id(ids, selected_id):
    """Each row's set reduced to ``selected_id`` where it holds it (empty elsewhere)."""
    from dflab.ops.sparse_compose_ops import sparse_retain

    ids = convert_to_tensor_or_sparse_tensor(ids)
    if isinstance(ids, SparseTensor):
        return sparse_retain(ids, math_ops.equal(ids.values, selected_id))
    ids_shape = array_ops.shape(ids, out_type=_dt.int64)
    filled_shape = array_ops.concat([ids_shape[:-1], [1]], 0)
    filled = array_ops.fill(filled_shape, math_ops.cast(selected_id, _dt.int64))
    result = sets_ops.set_intersection(filled, ids)
    return SparseTensor(result.indices, result.values, ids_shape)


def _maybe_select_class_id(labels, predictions_idx, selected_id=None):
    if selected_id is None:
        return labels, predictions_idx
    return _select_class_id(labels, selected_id), _select_class_id(predictions_idx, selected_id)


def _maybe_expand_labels(labels, predictions):
    """``labels`` given a last dimension of 1 where it has one fewer than ``predictions``."""
    with _ops.name_scope(None, "expand_labels", (labels, predictions)) as scope:
        labels = convert_to_tensor_or_sparse_tensor(labels)
        pred_rank = predictions.shape.ndims
        if isinstance(labels, SparseTensor):
            rank = labels.dense_shape.shape.as_list()[0]
            if rank is not None and pred_rank is not None and pred_rank == rank + 1:
                return sparse_ops.sparse_reshape(
                    labels, array_ops.concat([labels.dense_shape, [1]], 0), name=scope)
            return labels
        labels_rank = labels.shape.ndims
        if labels_rank is not None and pred_rank is not None:
            if pred_rank == labels_rank:
                return labels
            if pred_rank == labels_rank + 1:
                return array_ops.expand_dims(labels, -1, name=scope)
            raise ValueError(f"Unexpected labels shape {labels.shape} for predictions shape "
                             f"{predictions.shape}. Predictions rank should be the same rank "
                             "as labels rank or labels rank plus one .")
        raise ValueError("The ranks of labels and predictions must be known.")


def _weighted(counts, weights):
    counts = math_ops.cast(counts, _dt.float64)
    if weights is None:
        return counts
    return math_ops.multiply(counts, math_ops.cast(weights, _dt.float64))


def _set_counts(kind, labels, predictions_idx, class_id, weights):
    """Per-row (weighted) sizes of the true-positive, false-positive or false-negative set."""
    labels, predictions_idx = _maybe_select_class_id(labels, predictions_idx, class_id)
    if kind == "true_positive":
        found = sets_ops.set_intersection(predictions_idx, labels)
    else:
        found = sets_ops.set_difference(predictions_idx, labels,
                                        aminusb=kind == "false_positive")
    return _weighted(sets_ops.set_size(found), weights)


def _streaming_count(kind, labels, predictions_idx, k, class_id, weights):
    with _ops.name_scope(None, _at_k_name(kind, k, class_id=class_id),
                         (predictions_idx, labels, weights)) as scope:
        counts = _set_counts(kind, labels, predictions_idx, class_id, weights)
        var = _metric_variable([], _dt.float64, scope)
        return var.value(), state_ops.assign_add(var, math_ops.reduce_sum(counts),
                                                 name="update")


def _ratio_at_top_k(other, default):
    def metric(labels, predictions_idx, k=None, class_id=None, weights=None,
               metrics_collections=None, updates_collections=None, name=None):
        with _ops.name_scope(name, _at_k_name(default, k, class_id=class_id),
                             (predictions_idx, labels, weights)) as scope:
            predictions_idx = _ops.convert_to_tensor(predictions_idx)
            labels = _maybe_expand_labels(labels, predictions_idx)
            top_k_idx = math_ops.cast(predictions_idx, _dt.int64)
            tp, tp_update = _streaming_count("true_positive", labels, top_k_idx, k, class_id,
                                             weights)
            rest, rest_update = _streaming_count(other, labels, top_k_idx, k, class_id,
                                                 weights)
            value = math_ops.truediv(tp, math_ops.add(tp, rest), name=scope)
            update = math_ops.truediv(tp_update, math_ops.add(tp_update, rest_update),
                                      name="update")
        _add_to(metrics_collections, value)
        _add_to(updates_collections, update)
        return value, update

    metric.__name__ = metric.__qualname__ = f"{default}_at_top_k"
    metric.__doc__ = (f"The {default} of the given top-k class ids against ``labels`` "
                      "(of ``class_id`` alone if given), over every batch seen so far.")
    return metric


precision_at_top_k = _ratio_at_top_k("false_positive", "precision")
recall_at_top_k = _ratio_at_top_k("false_negative", "recall")


def _ratio_at_k(at_top_k, default):
    def metric(labels, predictions, k, class_id=None, weights=None, metrics_collections=None,
               updates_collections=None, name=None):
        with _ops.name_scope(name, _at_k_name(default, k, class_id=class_id),
                             (predictions, labels, weights)) as scope:
            _, top_k_idx = nn_ops.top_k(predictions, k)
            return at_top_k(labels, top_k_idx, k=k, class_id=class_id, weights=weights,
                            metrics_collections=metrics_collections,
                            updates_collections=updates_collections, name=scope)

    metric.__name__ = metric.__qualname__ = f"{default}_at_k"
    metric.__doc__ = (f"The {default} of each row's ``k`` highest ``predictions`` against "
                      "``labels`` (of ``class_id`` alone if given), over every batch.")
    return metric


precision_at_k = _ratio_at_k(precision_at_top_k, "precision")
recall_at_k = _ratio_at_k(recall_at_top_k, "recall")


def _expand_and_tile(tensor, multiple, dim=0, name=None):
    """``tensor`` with a new axis at ``dim`` (``dim - 1`` counted from the end), repeated
    ``multiple`` times along it; sparse tensors too."""
    if multiple < 1:
        raise ValueError(f"Invalid argument multiple={multiple} for expand_and_tile  call. "
                         "`multiple` must be an integer > 0")
    with _ops.name_scope(name, "expand_and_tile", (tensor, multiple, dim)) as scope:
        tensor = convert_to_tensor_or_sparse_tensor(tensor)
        if isinstance(tensor, SparseTensor):
            cut = (array_ops.reshape(array_ops.size(tensor.dense_shape) + dim, [1])
                   if dim < 0 else [dim])
            expanded_shape = array_ops.concat(
                (array_ops.slice(tensor.dense_shape, [0], cut), [1],
                 array_ops.slice(tensor.dense_shape, cut, [-1])), 0, name="expanded_shape")
            expanded = sparse_ops.sparse_reshape(tensor, expanded_shape, name="expand")
            if multiple == 1:
                return expanded
            return sparse_ops.sparse_concat(dim - 1 if dim < 0 else dim,
                                            [expanded] * multiple, name=scope)
        expanded = array_ops.expand_dims(tensor, dim if dim >= 0 else dim - 1, name="expand")
        if multiple == 1:
            return expanded
        ones = array_ops.ones_like(array_ops.shape(tensor))
        multiples = array_ops.concat((ones[:dim], (multiple,), ones[dim:]), 0,
                                     name="multiples")
        return array_ops.tile(expanded, multiples, name=scope)


def _num_relevant(labels, k):
    """Per row, ``min(number of labels, k)`` (dense labels count entries >= 0)."""
    if k < 1:
        raise ValueError(f"Invalid k={k}")
    with _ops.name_scope(None, "num_relevant", (labels,)) as scope:
        if isinstance(labels, SparseTensor):
            return math_ops.minimum(sets_ops.set_size(labels), k, name=scope)
        num_labels = math_ops.reduce_sum(
            array_ops.where(math_ops.greater_equal(labels, 0), array_ops.ones_like(labels),
                            array_ops.zeros_like(labels)), axis=-1)
        return math_ops.minimum(num_labels, math_ops.cast(k, num_labels.dtype), name=scope)


def _average_precision_at_top_k(labels, predictions_idx):
    """Per row, the mean over the relevant labels of the precision at each rank of the top-k
    predictions where a label is found."""
    with _ops.name_scope(None, "average_precision", (predictions_idx, labels)) as scope:
        predictions_idx = math_ops.cast(predictions_idx, _dt.int64, name="predictions_idx")
        if predictions_idx.shape.ndims == 0:
            raise ValueError("The rank of `predictions_idx` must be at least 1.")
        k = predictions_idx.shape.as_list()[-1]
        if k is None:
            raise ValueError("The last dimension of predictions_idx must be set. Currently, "
                             "it is None.")
        labels = _maybe_expand_labels(labels, predictions_idx)
        per_k_idx = array_ops.expand_dims(predictions_idx, -1, name="predictions_idx_per_k")
        labels_per_k = _expand_and_tile(labels, multiple=k, dim=-1, name="labels_per_k")
        relevant_per_k = _set_counts("true_positive", labels_per_k, per_k_idx, None, None)
        tp_per_k = math_ops.cumsum(relevant_per_k, axis=-1, name="tp_per_k")
        retrieved_per_k = math_ops.cumsum(array_ops.ones_like(relevant_per_k), axis=-1,
                                          name="retrieved_per_k")
        precision_per_k = math_ops.truediv(tp_per_k, retrieved_per_k, name="precision_per_k")
        relevant_precision = math_ops.multiply(precision_per_k, relevant_per_k,
                                               name="relevant_precision_per_k")
        precision_sum = math_ops.reduce_sum(relevant_precision, axis=(-1,),
                                            name="precision_sum")
        num_relevant = math_ops.cast(_num_relevant(labels, k), _dt.float64)
        return math_ops.truediv(precision_sum, num_relevant, name=scope)


def _clean_out_of_range_indices(labels, num_classes):
    """Labels ``>= num_classes`` (the padding of dense labels) replaced by -1."""
    def clean(values):
        return array_ops.where(math_ops.greater_equal(values, num_classes),
                               -1 * array_ops.ones_like(values), values)

    from dflab.ops.control_flow_ops import cond

    sparse = isinstance(labels, SparseTensor)
    values = labels.values if sparse else labels
    max_labels = math_ops.reduce_max(values)
    values = cond(math_ops.greater_equal(max_labels, num_classes), lambda: clean(values),
                  lambda: values)
    return SparseTensor(labels.indices, values, labels.dense_shape) if sparse else values


def average_precision_at_k(labels, predictions, k, weights=None, metrics_collections=None,
                           updates_collections=None, name=None):
    """The mean average precision of each row's ``k`` highest ``predictions`` against its
    ``labels``, over every row seen so far."""
    from dflab.ops.metrics_impl import _safe_div

    if k < 1:
        raise ValueError(f"Invalid k={k}. `k` should be >= 1.")
    with _ops.name_scope(name, _at_k_name("average_precision", k),
                         (predictions, labels, weights)) as scope:
        predictions = _ops.convert_to_tensor(predictions)
        _, predictions_idx = nn_ops.top_k(predictions, k)
        labels = convert_to_tensor_or_sparse_tensor(labels)
        labels = _clean_out_of_range_indices(
            labels, math_ops.cast(array_ops.shape(predictions)[-1], _dt.int64))
        # TF re-enters this scope here, so the variables sit right under it.
        with _ops.name_scope(scope):
            average_precision = _average_precision_at_top_k(labels, predictions_idx)
            if weights is not None:
                weights = math_ops.multiply(math_ops.cast(weights, _dt.float64),
                                            array_ops.ones_like(average_precision))
                average_precision = math_ops.multiply(average_precision, weights)
            with _ops.name_scope(None, "max", (average_precision,)) as max_scope:
                max_var = _metric_variable([], _dt.float64, max_scope)
                if weights is None:
                    batch_max = math_ops.cast(array_ops.size(average_precision), _dt.float64)
                else:
                    batch_max = math_ops.reduce_sum(weights, name="batch_max")
                max_update = state_ops.assign_add(max_var, batch_max, name="update")
            with _ops.name_scope(None, "total", (average_precision,)) as total_scope:
                total_var = _metric_variable([], _dt.float64, total_scope)
                batch_total = math_ops.reduce_sum(average_precision, name="batch_total")
                total_update = state_ops.assign_add(total_var, batch_total, name="update")
            value = _safe_div(total_var.value(), max_var.value(), "mean")
            update = _safe_div(total_update, max_update, scope)
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update)
    return value, update


def _sparse_alias(fn, name):
    def alias(*args, **kwargs):
        return fn(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = name
    alias.__doc__ = f"``{fn.__name__}`` under its older name (labels may be sparse)."
    return alias


sparse_precision_at_k = _sparse_alias(precision_at_k, "sparse_precision_at_k")
sparse_average_precision_at_k = _sparse_alias(average_precision_at_k,
                                              "sparse_average_precision_at_k")

METRICS = ("precision_at_k", "recall_at_k", "precision_at_top_k", "recall_at_top_k",
           "average_precision_at_k", "sparse_precision_at_k", "sparse_average_precision_at_k")
