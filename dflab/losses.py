"""``tf.losses``: TF1's loss functions with weights and reductions, and the LOSSES collection.

Every loss is added to ``GraphKeys.LOSSES`` (``loss_collection``) as in TF1, so
``get_total_loss`` can sum them with the regularization losses.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.ops import GraphKeys
from dflab.ops import array_ops, math_ops


class Reduction:
    NONE = "none"
    SUM = "weighted_sum"
    MEAN = "weighted_mean"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls):
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE,
                cls.SUM_BY_NONZERO_WEIGHTS)


def _num_present(losses, weights):
    """How many loss entries have a non-zero weight (TF1 semantics, broadcasting weights)."""
    present = math_ops.cast(math_ops.not_equal(weights, 0.0), _dt.float32)
    present = present * array_ops.ones_like(math_ops.cast(losses, _dt.float32))
    return math_ops.reduce_sum(present)


def _safe_div(num, den):
    """num / den, and 0 where den is 0 (all weights zero gives a zero loss, as in TF1)."""
    return array_ops.where(math_ops.greater(den, 0.0), num / math_ops.maximum(den, 1e-30),
                           array_ops.zeros_like(num))


def compute_weighted_loss(losses, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    if reduction not in Reduction.all():
        raise ValueError(f"Invalid Reduction Key {reduction}.")
    with _ops.name_scope(scope, "weighted_loss", [losses, weights]):
        losses = _ops.convert_to_tensor(losses)
        dtype = losses.dtype.base_dtype
        losses = math_ops.cast(losses, _dt.float32)
        weights = math_ops.cast(_ops.convert_to_tensor(weights), _dt.float32)
        weighted = math_ops.multiply(losses, weights)
        if reduction == Reduction.NONE:
            loss = weighted
        else:
            loss = math_ops.reduce_sum(weighted)
            if reduction == Reduction.MEAN:
                loss = _safe_div(loss, math_ops.reduce_sum(
                    array_ops.ones_like(losses) * weights))
            elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
                loss = _safe_div(loss, math_ops.cast(array_ops.size(losses), _dt.float32))
            elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
                loss = _safe_div(loss, _num_present(losses, weights))
        loss = math_ops.cast(loss, dtype)
        if loss_collection:
            _ops.add_to_collection(loss_collection, loss)
        return loss


def _prepare(labels, predictions):
    predictions = _ops.convert_to_tensor(predictions)
    labels = math_ops.cast(_ops.convert_to_tensor(labels), predictions.dtype.base_dtype)
    if not predictions.shape.is_compatible_with(labels.shape):
        raise ValueError(f"Shapes {predictions.shape} and {labels.shape} are incompatible")
    return labels, predictions


def mean_squared_error(labels, predictions, weights=1.0, scope=None,
                       loss_collection=GraphKeys.LOSSES,
                       reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with _ops.name_scope(scope, "mean_squared_error", [predictions, labels, weights]) as sc:
        labels, predictions = _prepare(labels, predictions)
        losses = math_ops.squared_difference(predictions, labels)
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def absolute_difference(labels, predictions, weights=1.0, scope=None,
                        loss_collection=GraphKeys.LOSSES,
                        reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with _ops.name_scope(scope, "absolute_difference", [predictions, labels, weights]) as sc:
        labels, predictions = _prepare(labels, predictions)
        losses = math_ops.abs(predictions - labels)
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def huber_loss(labels, predictions, weights=1.0, delta=1.0, scope=None,
               loss_collection=GraphKeys.LOSSES, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with _ops.name_scope(scope, "huber_loss", [predictions, labels, weights]) as sc:
        labels, predictions = _prepare(labels, predictions)
        error = predictions - labels
        abs_error = math_ops.abs(error)
        quadratic = math_ops.minimum(abs_error, delta)
        linear = abs_error - quadratic
        losses = 0.5 * quadratic * quadratic + delta * linear
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def log_loss(labels, predictions, weights=1.0, epsilon=1e-7, scope=None,
             loss_collection=GraphKeys.LOSSES, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with _ops.name_scope(scope, "log_loss", [predictions, labels, weights]) as sc:
        labels, predictions = _prepare(labels, predictions)
        losses = -labels * math_ops.log(predictions + epsilon) - \
            (1.0 - labels) * math_ops.log(1.0 - predictions + epsilon)
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    from dflab import nn

    with _ops.name_scope(scope, "softmax_cross_entropy_loss",
                         [logits, onehot_labels, weights]) as sc:
        logits = _ops.convert_to_tensor(logits)
        labels = math_ops.cast(onehot_labels, logits.dtype.base_dtype)
        if label_smoothing > 0:
            n = math_ops.cast(array_ops.shape(labels)[-1], logits.dtype.base_dtype)
            labels = labels * (1.0 - label_smoothing) + label_smoothing / n
        losses = nn.softmax_cross_entropy_with_logits_v2(
            labels=array_ops.stop_gradient(labels), logits=logits)
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None,
                                 loss_collection=GraphKeys.LOSSES,
                                 reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    from dflab import nn

    with _ops.name_scope(scope, "sparse_softmax_cross_entropy_loss",
                         [logits, labels, weights]) as sc:
        losses = nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0, label_smoothing=0,
                          scope=None, loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    from dflab import nn

    with _ops.name_scope(scope, "sigmoid_cross_entropy_loss",
                         [logits, multi_class_labels, weights]) as sc:
        logits = _ops.convert_to_tensor(logits)
        labels = math_ops.cast(multi_class_labels, logits.dtype.base_dtype)
        if label_smoothing > 0:
            labels = labels * (1.0 - label_smoothing) + 0.5 * label_smoothing
        losses = nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def _as_float32_pair(labels, predictions):
    """Both cast to float32 with compatible static shapes, as TF1's later losses require."""
    predictions = math_ops.cast(predictions, _dt.float32)
    labels = math_ops.cast(labels, _dt.float32)
    predictions.shape.assert_is_compatible_with(labels.shape)
    return labels, predictions


def cosine_distance(labels, predictions, axis=None, weights=1.0, scope=None,
                    loss_collection=GraphKeys.LOSSES,
                    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS, dim=None):
    """1 - sum(labels * predictions, axis): both are assumed unit-normalized along ``axis``."""
    if dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'dim'")
        axis = dim
    if axis is None:
        raise ValueError("You must specify argument `axis`.")
    if labels is None:
        raise ValueError("Argument `labels` must not be None.")
    if predictions is None:
        raise ValueError("Argument `predictions` must not be None.")
    with _ops.name_scope(scope, "cosine_distance_loss", [predictions, labels, weights]) as sc:
        labels, predictions = _as_float32_pair(labels, predictions)
        radial = math_ops.multiply(predictions, labels)
        losses = 1 - math_ops.reduce_sum(radial, axis=(axis,), keepdims=True)
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def hinge_loss(labels, logits, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """max(0, 1 - y * logits) with labels in {0, 1} mapped to y in {-1, 1}."""
    from dflab.ops import nn_ops

    if labels is None:
        raise ValueError("Argument `labels` must not be None.")
    if logits is None:
        raise ValueError("Argument `logits` must not be None.")
    with _ops.name_scope(scope, "hinge_loss", [logits, labels, weights]) as sc:
        labels, logits = _as_float32_pair(labels, logits)
        all_ones = array_ops.ones_like(labels)
        signs = math_ops.subtract(2 * labels, all_ones)
        losses = nn_ops.relu(math_ops.subtract(all_ones, math_ops.multiply(signs, logits)))
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def mean_pairwise_squared_error(labels, predictions, weights=1.0, scope=None,
                                loss_collection=GraphKeys.LOSSES):
    """The mean over pairs (i, j) within each batch entry of ((p_i - p_j) - (l_i - l_j))^2.

    Computed as TF1 does, without forming the pairs: per batch entry, 2 * sum(d^2) / (n - 1)
    - 2 * sum(d)^2 / (n * (n - 1)) with d = predictions - labels and n the entries present
    (non-zero weight); the per-entry results are weighted and summed.
    """
    from dflab.ops import sequence_ops, special_math_ops

    if labels is None:
        raise ValueError("Argument `labels` must not be None.")
    if predictions is None:
        raise ValueError("Argument `predictions` must not be None.")
    with _ops.name_scope(scope, "mean_pairwise_squared_error",
                         [predictions, labels, weights]):
        weights = math_ops.cast(weights, _dt.float32)
        labels, predictions = _as_float32_pair(labels, predictions)
        diffs = math_ops.subtract(predictions, labels)
        axis = sequence_ops.range(1, array_ops.rank(diffs))
        sum_squares = math_ops.reduce_sum(math_ops.square(diffs), axis=axis, keepdims=True)
        with _ops.name_scope(None, "num_present", [diffs, weights]):
            present = array_ops.where(math_ops.equal(weights, 0.0),
                                      array_ops.zeros_like(weights),
                                      array_ops.ones_like(weights))
            present = present * array_ops.ones_like(diffs)
            n = math_ops.reduce_sum(present, axis=sequence_ops.range(1, array_ops.rank(present)),
                                    keepdims=True)
        term1 = 2.0 * special_math_ops.div_no_nan(sum_squares, math_ops.maximum(n - 1, 0.0),
                                                  name="value")
        sum_diff = math_ops.reduce_sum(diffs, axis=axis, keepdims=True)
        term2 = 2.0 * special_math_ops.div_no_nan(
            math_ops.square(sum_diff), math_ops.maximum(math_ops.multiply(n, n - 1), 0.0),
            name="value")
        loss = math_ops.reduce_sum(math_ops.multiply(term1 - term2, weights))
        mean_loss = array_ops.where(math_ops.greater(math_ops.reduce_sum(n), 0.0), loss,
                                    array_ops.zeros_like(loss), name="value")
        add_loss(mean_loss, loss_collection)
        return mean_loss


def add_loss(loss, loss_collection=GraphKeys.LOSSES):
    if loss_collection:
        _ops.add_to_collection(loss_collection, loss)


def get_losses(scope=None, loss_collection=GraphKeys.LOSSES):
    return _ops.get_collection(loss_collection, scope)


def get_regularization_losses(scope=None):
    return _ops.get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
    losses = get_regularization_losses(scope)
    if losses:
        return math_ops.add_n(losses, name=name)
    from dflab.framework.constant_op import constant

    return constant(0.0)


def get_total_loss(add_regularization_losses=True, name="total_loss", scope=None):
    losses = get_losses(scope)
    if add_regularization_losses:
        losses = losses + get_regularization_losses(scope)
    if not losses:
        raise ValueError("No losses found in the LOSSES collection.")
    return math_ops.add_n(losses, name=name)
