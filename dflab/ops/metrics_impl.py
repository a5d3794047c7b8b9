"""``tf.metrics`` (TF 1.x): streaming metrics over many ``Session.run`` calls.

Each metric keeps its running sums in *local* variables (collections ``LOCAL_VARIABLES`` and
``METRIC_VARIABLES``, under a variable scope named after the metric, as TF's), and returns
``(value, update_op)``: running ``update_op`` adds a batch to the sums and yields the metric
so far; ``value`` reads it without changing anything. ``local_variables_initializer()``
resets them.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.ops import GraphKeys
from dflab.ops import array_ops, check_ops, math_ops, state_ops
from dflab.ops import variable_scope as _vs
from dflab.ops.variables import Variable


def _metric_variable(shape, dtype, name):
    # Built outside any control context, as TF's metric variables are.
    with _ops.control_dependencies(None):
        return Variable(array_ops.zeros(shape, dtype), name=name, trainable=False,
                        collections=[GraphKeys.LOCAL_VARIABLES, GraphKeys.METRIC_VARIABLES],
                        validate_shape=True)


def _safe_div(numerator, denominator, name):
    """``numerator / denominator``, 0 where the denominator is 0 (no batch seen yet)."""
    zero = array_ops.zeros_like(denominator)
    safe = array_ops.where(math_ops.greater(denominator, zero), denominator,
                           array_ops.ones_like(denominator))
    return array_ops.where(math_ops.greater(denominator, zero),
                           math_ops.truediv(numerator, safe), zero, name=name)


def _add_to(collections, value):
    if collections:
        _ops.add_to_collections(collections, value)


def mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The (weighted) mean of every value seen so far: ``(mean, update_op)``."""
    with _vs.variable_scope(name, "mean", (values, weights)):
        values = math_ops.cast(_ops.convert_to_tensor(values), _dt.float32)
        total = _metric_variable([], _dt.float32, "total")
        count = _metric_variable([], _dt.float32, "count")
        if weights is None:
            num_values = math_ops.cast(array_ops.size(values), _dt.float32)
            batch_total = math_ops.reduce_sum(values)
        else:
            weights = math_ops.cast(_ops.convert_to_tensor(weights), _dt.float32)
            weights = math_ops.multiply(weights, array_ops.ones_like(values))
            batch_total = math_ops.reduce_sum(math_ops.multiply(values, weights))
            num_values = math_ops.reduce_sum(weights)
        update_total = state_ops.assign_add(total, batch_total)
        update_count = state_ops.assign_add(count, num_values)
        value = _safe_div(total.value(), count.value(), "value")
        update_op = _safe_div(update_total, update_count, "update_op")
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op


def accuracy(labels, predictions, weights=None, metrics_collections=None,
             updates_collections=None, name=None):
    """How often ``predictions`` equals ``labels``, over every batch seen so far."""
    labels = _ops.convert_to_tensor(labels)
    predictions = _ops.convert_to_tensor(predictions)
    if labels.dtype.base_dtype is not predictions.dtype.base_dtype:
        predictions = math_ops.cast(predictions, labels.dtype.base_dtype)
    if not labels.shape.is_compatible_with(predictions.shape):
        raise ValueError(f"Shapes {predictions.shape} and {labels.shape} are incompatible "
                         "(predictions and labels)")
    is_correct = math_ops.cast(math_ops.equal(predictions, labels), _dt.float32)
    return mean(is_correct, weights, metrics_collections, updates_collections,
                name or "accuracy")


def mean_squared_error(labels, predictions, weights=None, metrics_collections=None,
                       updates_collections=None, name=None):
    """The mean of ``(labels - predictions)**2`` over every value seen so far."""
    labels = math_ops.cast(_ops.convert_to_tensor(labels), _dt.float32)
    predictions = math_ops.cast(_ops.convert_to_tensor(predictions), _dt.float32)
    return mean(math_ops.squared_difference(labels, predictions), weights,
                metrics_collections, updates_collections, name or "mean_squared_error")


def mean_absolute_error(labels, predictions, weights=None, metrics_collections=None,
                        updates_collections=None, name=None):
    """The mean of ``|labels - predictions|`` over every value seen so far."""
    labels = math_ops.cast(_ops.convert_to_tensor(labels), _dt.float32)
    predictions = math_ops.cast(_ops.convert_to_tensor(predictions), _dt.float32)
    return mean(math_ops.abs(math_ops.subtract(labels, predictions)), weights,
                metrics_collections, updates_collections, name or "mean_absolute_error")




def _remove_squeezable_dimensions(predictions, labels, weights):
    """TF's rule where ranks are known: drop a trailing 1 from whichever of ``predictions``
    and ``labels`` has rank one more, then bring ``weights`` (unless scalar) to that rank."""
    predictions = _ops.convert_to_tensor(predictions)
    if labels is not None:
        labels = _ops.convert_to_tensor(labels)
        pr, lr = predictions.shape.ndims, labels.shape.ndims
        if pr is not None and lr is not None:
            if pr - lr == 1 and predictions.shape.as_list()[-1] in (1, None):
                predictions = array_ops.squeeze(predictions, [-1])
            elif lr - pr == 1 and labels.shape.as_list()[-1] in (1, None):
                labels = array_ops.squeeze(labels, [-1])
        predictions.shape.assert_is_compatible_with(labels.shape)
    if weights is None:
        return predictions, labels, None
    weights = _ops.convert_to_tensor(weights)
    wr, pr = weights.shape.ndims, predictions.shape.ndims
    if wr not in (0, None) and pr is not None:
        if wr - pr == 1:
            weights = array_ops.squeeze(weights, [-1])
        elif pr - wr == 1:
            weights = array_ops.expand_dims(weights, -1)
    return predictions, labels, weights


def _count_condition(values, weights, metrics_collections, updates_collections):
    """The (weighted) number of true entries of the bool ``values`` seen so far."""
    count = _metric_variable([], _dt.float32, "count")
    values = math_ops.cast(values, _dt.float32)
    if weights is not None:
        values = math_ops.multiply(values, math_ops.cast(weights, _dt.float32))
    value = count.value()
    update_op = state_ops.assign_add(count, math_ops.reduce_sum(values))
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op


def _bool_inputs(labels, predictions, weights):
    return _remove_squeezable_dimensions(
        math_ops.cast(_ops.convert_to_tensor(predictions), _dt.bool),
        math_ops.cast(_ops.convert_to_tensor(labels), _dt.bool), weights)


def _condition_metric(default_name, label_true, prediction_true):
    """One of TF's four counts: entries whose bool label is ``label_true`` and whose bool
    prediction is ``prediction_true``."""

    def metric(labels, predictions, weights=None, metrics_collections=None,
               updates_collections=None, name=None):
        with _vs.variable_scope(name, default_name, (predictions, labels, weights)):
            predictions, labels, weights = _bool_inputs(labels, predictions, weights)
            hit = math_ops.logical_and(math_ops.equal(labels, label_true),
                                       math_ops.equal(predictions, prediction_true))
            return _count_condition(hit, weights, metrics_collections, updates_collections)

    metric.__name__ = metric.__qualname__ = default_name
    metric.__doc__ = (f"The (weighted) number of {default_name.replace('_', ' ')} seen so "
                      "far, with ``labels`` and ``predictions`` cast to bool.")
    return metric


true_positives = _condition_metric("true_positives", True, True)
false_positives = _condition_metric("false_positives", False, True)
true_negatives = _condition_metric("true_negatives", False, False)
false_negatives = _condition_metric("false_negatives", True, False)

_CM_NAMES = {"tp": "true_positives", "fn": "false_negatives", "tn": "true_negatives",
             "fp": "false_positives"}


def _confusion_matrix_at_thresholds(labels, predictions, thresholds, weights=None,
                                    includes=None):
    """Per-threshold counts of ``predictions > threshold`` against bool ``labels``: dicts
    (values, update ops) keyed by "tp", "fn", "tn", "fp" for those in ``includes``."""
    includes = tuple(_CM_NAMES) if includes is None else includes
    for include in includes:
        if include not in _CM_NAMES:
            raise ValueError(f"Invalid key: {include}")
    predictions = _ops.convert_to_tensor(predictions)
    in_range = [
        check_ops.assert_greater_equal(predictions, math_ops.cast(0.0, predictions.dtype),
                                       message="predictions must be in [0, 1]"),
        check_ops.assert_less_equal(predictions, math_ops.cast(1.0, predictions.dtype),
                                    message="predictions must be in [0, 1]")]
    with _ops.control_dependencies(in_range):
        predictions, labels, weights = _remove_squeezable_dimensions(
            math_ops.cast(predictions, _dt.float32),
            math_ops.cast(_ops.convert_to_tensor(labels), _dt.bool), weights)
    num_thresholds = len(thresholds)
    predictions_2d = array_ops.reshape(predictions, [-1, 1])
    labels_2d = array_ops.reshape(labels, [1, -1])
    thresh = array_ops.reshape(_ops.convert_to_tensor(list(thresholds), _dt.float32), [-1, 1])
    # [num_thresholds, num_predictions] by broadcasting, as TF's tiling gives.
    pred_is_pos = math_ops.greater(array_ops.transpose(predictions_2d), thresh)
    pred_is_neg = math_ops.logical_not(pred_is_pos)
    label_is_pos = array_ops.tile(labels_2d, [num_thresholds, 1])
    label_is_neg = math_ops.logical_not(label_is_pos)
    weights_row = None
    if weights is not None:
        weights = math_ops.multiply(math_ops.cast(weights, _dt.float32),
                                    array_ops.ones_like(predictions))
        weights_row = array_ops.reshape(weights, [1, -1])
    cases = {"tp": (label_is_pos, pred_is_pos), "fn": (label_is_pos, pred_is_neg),
             "tn": (label_is_neg, pred_is_neg), "fp": (label_is_neg, pred_is_pos)}
    values, update_ops = {}, {}
    for key in ("tp", "fn", "tn", "fp"):
        if key not in includes:
            continue
        var = _metric_variable([num_thresholds], _dt.float32, _CM_NAMES[key])
        hits = math_ops.cast(math_ops.logical_and(*cases[key]), _dt.float32)
        if weights_row is not None:
            hits = math_ops.multiply(hits, weights_row)
        update_ops[key] = state_ops.assign_add(var, math_ops.reduce_sum(hits, 1))
        values[key] = var.value()
    return values, update_ops


def _at_thresholds_metric(key):
    default_name = _CM_NAMES[key]

    def metric(labels, predictions, thresholds, weights=None, metrics_collections=None,
               updates_collections=None, name=None):
        with _vs.variable_scope(name, default_name, (predictions, labels, weights)):
            values, update_ops = _confusion_matrix_at_thresholds(
                labels, predictions, thresholds, weights=weights, includes=(key,))
        _add_to(metrics_collections, values[key])
        _add_to(updates_collections, update_ops[key])
        return values[key], update_ops[key]

    metric.__name__ = metric.__qualname__ = default_name + "_at_thresholds"
    metric.__doc__ = (f"The (weighted) {default_name.replace('_', ' ')} of "
                      "``predictions > t`` for each ``t`` in ``thresholds``, seen so far.")
    return metric


true_positives_at_thresholds = _at_thresholds_metric("tp")
false_positives_at_thresholds = _at_thresholds_metric("fp")
true_negatives_at_thresholds = _at_thresholds_metric("tn")
false_negatives_at_thresholds = _at_thresholds_metric("fn")


def _ratio_metric(default_name, other):
    """``tp / (tp + other)`` (0 before any positive), over two streaming counts."""

    def metric(labels, predictions, weights=None, metrics_collections=None,
               updates_collections=None, name=None):
        with _vs.variable_scope(name, default_name, (predictions, labels, weights)):
            predictions, labels, weights = _bool_inputs(labels, predictions, weights)
            tp, tp_update = true_positives(labels, predictions, weights)
            rest, rest_update = other(labels, predictions, weights)

            def compute(tp, rest, name):
                total = math_ops.add(tp, rest)
                return _safe_div(tp, total, name)

            value = compute(tp, rest, "value")
            update_op = compute(tp_update, rest_update, "update_op")
        _add_to(metrics_collections, value)
        _add_to(updates_collections, update_op)
        return value, update_op

    metric.__name__ = metric.__qualname__ = default_name
    return metric


precision = _ratio_metric("precision", false_positives)
precision.__doc__ = "``tp / (tp + fp)`` over every batch seen so far (bool inputs)."
recall = _ratio_metric("recall", false_negatives)
recall.__doc__ = "``tp / (tp + fn)`` over every batch seen so far (bool inputs)."


def _ratio_at_thresholds(default_name, key, other):
    epsilon = 1e-7

    def metric(labels, predictions, thresholds, weights=None, metrics_collections=None,
               updates_collections=None, name=None):
        with _vs.variable_scope(name, default_name, (predictions, labels, weights)):
            values, update_ops = _confusion_matrix_at_thresholds(
                labels, predictions, thresholds, weights, includes=("tp", other))

            def compute(tp, rest, suffix):
                return math_ops.truediv(tp, epsilon + tp + rest, name=f"{key}_{suffix}")

            value = compute(values["tp"], values[other], "value")
            update_op = compute(update_ops["tp"], update_ops[other], "update_op")
        _add_to(metrics_collections, value)
        _add_to(updates_collections, update_op)
        return value, update_op

    metric.__name__ = metric.__qualname__ = default_name
    metric.__doc__ = (f"The {key} of ``predictions > t`` for each ``t`` in ``thresholds``, "
                      "over every batch seen so far.")
    return metric


precision_at_thresholds = _ratio_at_thresholds("precision_at_thresholds", "precision", "fp")
recall_at_thresholds = _ratio_at_thresholds("recall_at_thresholds", "recall", "fn")


def _auc_sum(x, y, n, summation_method, name):
    dx = x[:n - 1] - x[1:]
    if summation_method in ("trapezoidal", "careful_interpolation"):
        height = (y[:n - 1] + y[1:]) / 2.0
    elif summation_method == "minoring":
        height = math_ops.minimum(y[:n - 1], y[1:])
    elif summation_method == "majoring":
        height = math_ops.maximum(y[:n - 1], y[1:])
    else:
        raise ValueError(f"Invalid summation_method: {summation_method} summation_method "
                         "should be 'trapezoidal', 'careful_interpolation', 'minoring', or "
                         "'majoring'.")
    return math_ops.reduce_sum(math_ops.multiply(dx, height), name=name)


def _interpolate_pr_auc(tp, fp, fn, n):
    """The PR-AUC integrated with precision interpolated between thresholds (TF's
    "careful_interpolation", after Davis & Goadrich 2006)."""
    from dflab.ops.special_math_ops import div_no_nan

    dtp = tp[:n - 1] - tp[1:]
    p = tp + fp
    prec_slope = div_no_nan(dtp, math_ops.maximum(p[:n - 1] - p[1:], 0.0), name="prec_slope")
    intercept = tp[1:] - math_ops.multiply(prec_slope, p[1:])
    safe_p_ratio = array_ops.where(
        math_ops.logical_and(p[:n - 1] > 0, p[1:] > 0),
        div_no_nan(p[:n - 1], math_ops.maximum(p[1:], 0.0), name="recall_relative_ratio"),
        array_ops.ones_like(p[1:]))
    return math_ops.reduce_sum(
        div_no_nan(prec_slope * (dtp + intercept * math_ops.log(safe_p_ratio)),
                   math_ops.maximum(tp[1:] + fn[1:], 0.0), name="pr_auc_increment"),
        name="interpolate_pr_auc")


def auc(labels, predictions, weights=None, num_thresholds=200, metrics_collections=None,
        updates_collections=None, curve="ROC", name=None, summation_method="trapezoidal",
        thresholds=None):
    """The area under the ROC or PR curve, from streaming counts at ``num_thresholds``
    evenly spaced thresholds (or the given ``thresholds``) in [0, 1]."""
    with _vs.variable_scope(name, "auc", (labels, predictions, weights)):
        if curve not in ("ROC", "PR"):
            raise ValueError(f"Curve must be either ROC or PR. Curve {curve} is unknown.")
        kepsilon = 1e-7  # so that 0 and 1 fall strictly inside the outer thresholds
        if thresholds is not None:
            thresholds = sorted(thresholds)
            num_thresholds = len(thresholds) + 2
        else:
            thresholds = [(i + 1) * 1.0 / (num_thresholds - 1)
                          for i in range(num_thresholds - 2)]
        thresholds = [0.0 - kepsilon] + list(thresholds) + [1.0 + kepsilon]
        values, update_ops = _confusion_matrix_at_thresholds(labels, predictions, thresholds,
                                                             weights)
        epsilon = 1.0e-6
        n = num_thresholds

        def compute(c, name):
            tp, fn, tn, fp = c["tp"], c["fn"], c["tn"], c["fp"]
            if curve == "PR" and summation_method == "careful_interpolation":
                return _interpolate_pr_auc(tp, fp, fn, n)
            rec = math_ops.truediv(tp + epsilon, tp + fn + epsilon)
            if curve == "ROC":
                x, y = math_ops.truediv(fp, fp + tn + epsilon), rec
            else:
                x, y = rec, math_ops.truediv(tp + epsilon, tp + fp + epsilon)
            return _auc_sum(x, y, n, summation_method, name)

        value = compute(values, "value")
        update_op = compute(update_ops, "update_op")
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op


def root_mean_squared_error(labels, predictions, weights=None, metrics_collections=None,
                            updates_collections=None, name=None):
    """The square root of the mean of ``(labels - predictions)**2`` seen so far."""
    predictions, labels, weights = _remove_squeezable_dimensions(predictions, labels, weights)
    mse, update_mse = mean_squared_error(labels, predictions, weights, None, None,
                                         name or "root_mean_squared_error")
    value = math_ops.sqrt(mse)
    update_op = math_ops.sqrt(update_mse)
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op


def _flatten(t):
    if t is not None and (t.shape.ndims is None or t.shape.ndims > 1):
        return array_ops.reshape(t, [-1])
    return t


def mean_per_class_accuracy(labels, predictions, num_classes, weights=None,
                            metrics_collections=None, updates_collections=None, name=None):
    """The mean over classes of each class's accuracy (rows: labels), seen so far."""
    from dflab.ops.special_math_ops import div_no_nan

    with _vs.variable_scope(name, "mean_accuracy", (predictions, labels, weights)):
        labels = _flatten(math_ops.cast(_ops.convert_to_tensor(labels), _dt.int64))
        predictions = _flatten(_ops.convert_to_tensor(predictions))
        predictions.shape.assert_is_compatible_with(labels.shape)
        total = _metric_variable([num_classes], _dt.float32, "total")
        count = _metric_variable([num_classes], _dt.float32, "count")
        ones = array_ops.ones(array_ops.reshape(array_ops.size(labels), [1]), _dt.float32)
        if labels.dtype is not predictions.dtype:
            predictions = math_ops.cast(predictions, labels.dtype)
        is_correct = math_ops.cast(math_ops.equal(predictions, labels), _dt.float32)
        if weights is not None:
            weights = _flatten(math_ops.cast(_ops.convert_to_tensor(weights), _dt.float32))
            is_correct = math_ops.multiply(is_correct, weights)
            ones = math_ops.multiply(ones, weights)
        update_total = state_ops.scatter_add(total, labels, ones)
        update_count = state_ops.scatter_add(count, labels, is_correct)
        per_class = div_no_nan(count.value(), math_ops.maximum(total.value(), 0.0))
        value = math_ops.reduce_mean(per_class, name="mean_accuracy")
        update_op = div_no_nan(update_count, math_ops.maximum(update_total, 0.0),
                               name="update_op")
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op


def mean_iou(labels, predictions, num_classes, weights=None, metrics_collections=None,
             updates_collections=None, name=None):
    """The mean over classes (that occur) of intersection-over-union, from a streaming
    confusion matrix; ``update_op`` returns the matrix."""
    from dflab.ops import matrix_ops
    from dflab.ops.sort_ops import confusion_matrix

    with _vs.variable_scope(name, "mean_iou", (predictions, labels, weights)):
        labels = _ops.convert_to_tensor(labels)
        predictions = _ops.convert_to_tensor(predictions)
        predictions.shape.assert_is_compatible_with(labels.shape)
        total_cm = _metric_variable([num_classes, num_classes], _dt.float64,
                                    "total_confusion_matrix")
        predictions = _flatten(math_ops.cast(predictions, _dt.int64))
        labels = _flatten(math_ops.cast(labels, _dt.int64))
        if weights is not None:
            weights = _flatten(_ops.convert_to_tensor(weights))
        current = confusion_matrix(labels, predictions, math_ops.cast(num_classes, _dt.int64),
                                   weights=weights, dtype=_dt.float64)
        update_op = state_ops.assign_add(total_cm, current)
        cm = total_cm.value()
        sum_over_row = math_ops.cast(math_ops.reduce_sum(cm, 0), _dt.float32)
        sum_over_col = math_ops.cast(math_ops.reduce_sum(cm, 1), _dt.float32)
        cm_diag = math_ops.cast(matrix_ops.diag_part(cm), _dt.float32)
        denominator = sum_over_row + sum_over_col - cm_diag
        num_valid = math_ops.reduce_sum(
            math_ops.cast(math_ops.not_equal(denominator, 0.0), _dt.float32))
        denominator = array_ops.where(math_ops.greater(denominator, 0.0), denominator,
                                      array_ops.ones_like(denominator))
        iou = math_ops.truediv(cm_diag, denominator)
        value = array_ops.where(math_ops.greater(num_valid, 0.0),
                                math_ops.reduce_sum(iou, name="mean_iou") / num_valid,
                                array_ops.zeros_like(num_valid))
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op


__all__: list = []


def mean_relative_error(labels, predictions, normalizer, weights=None, metrics_collections=None,
                        updates_collections=None, name=None):
    """The mean of ``|labels - predictions| / normalizer`` (0 where ``normalizer`` is 0)."""
    predictions, labels, weights = _remove_squeezable_dimensions(predictions, labels, weights)
    normalizer = _ops.convert_to_tensor(normalizer)
    pr, nr = predictions.shape.ndims, normalizer.shape.ndims
    if pr is not None and nr is not None:
        if nr - pr == 1 and normalizer.shape.as_list()[-1] in (1, None):
            normalizer = array_ops.squeeze(normalizer, [-1])
        elif pr - nr == 1 and predictions.shape.as_list()[-1] in (1, None):
            predictions = array_ops.squeeze(predictions, [-1])
    predictions.shape.assert_is_compatible_with(normalizer.shape)
    relative_errors = array_ops.where(
        math_ops.equal(normalizer, 0.0), array_ops.zeros_like(labels),
        math_ops.truediv(math_ops.abs(labels - predictions), normalizer))
    return mean(relative_errors, weights, metrics_collections, updates_collections,
                name or "mean_relative_error")


def mean_cosine_distance(labels, predictions, dim, weights=None, metrics_collections=None,
                         updates_collections=None, name=None):
    """``1 - mean(sum(labels * predictions, dim))`` (inputs taken as unit vectors)."""
    predictions, labels, weights = _remove_squeezable_dimensions(predictions, labels, weights)
    radial = math_ops.reduce_sum(math_ops.multiply(predictions, labels), axis=[dim],
                                 keepdims=True)
    mean_distance, update_op = mean(radial, weights, None, None,
                                    name or "mean_cosine_distance")
    value = math_ops.subtract(1.0, mean_distance)
    update_op = math_ops.subtract(1.0, update_op)
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op


def mean_tensor(values, weights=None, metrics_collections=None, updates_collections=None,
                name=None):
    """The element-wise (weighted) mean of every ``values`` seen so far (fixed shape)."""
    from dflab.ops.special_math_ops import div_no_nan

    with _vs.variable_scope(name, "mean", (values, weights)):
        values = math_ops.cast(_ops.convert_to_tensor(values), _dt.float32)
        total = _metric_variable(values.shape, _dt.float32, "total_tensor")
        count = _metric_variable(values.shape, _dt.float32, "count_tensor")
        num_values = array_ops.ones_like(values)
        if weights is not None:
            values, _, weights = _remove_squeezable_dimensions(values, None, weights)
            weights = math_ops.multiply(math_ops.cast(weights, _dt.float32),
                                        array_ops.ones_like(values))
            values = math_ops.multiply(values, weights)
            num_values = math_ops.multiply(num_values, weights)
        update_total = state_ops.assign_add(total, values)
        with _ops.control_dependencies([values]):
            update_count = state_ops.assign_add(count, num_values)
        value = div_no_nan(total.value(), math_ops.maximum(count.value(), 0.0), name="value")
        update_op = div_no_nan(update_total, math_ops.maximum(update_count, 0.0),
                               name="update_op")
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op


def percentage_below(values, threshold, weights=None, metrics_collections=None,
                     updates_collections=None, name=None):
    """The (weighted) fraction of values below ``threshold`` seen so far."""
    below = math_ops.cast(math_ops.less(values, threshold), _dt.float32)
    return mean(below, weights, metrics_collections, updates_collections,
                name or "percentage_below_threshold")


def _even_thresholds(num_thresholds, last):
    """``num_thresholds`` thresholds: just below 0, evenly spaced inside (0, 1), ``last``."""
    inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    return [0.0 - 1e-7] + inner + [last]


def sensitivity_at_specificity(labels, predictions, specificity, weights=None,
                               num_thresholds=200, metrics_collections=None,
                               updates_collections=None, name=None):
    """The recall at the threshold whose specificity is nearest ``specificity``."""
    if specificity < 0 or specificity > 1:
        raise ValueError("`specificity` must be in the range [0, 1]. Currently, "
                         f"`specificity` got {specificity}.")
    with _vs.variable_scope(name, "sensitivity_at_specificity",
                            (predictions, labels, weights)):
        kepsilon = 1e-7
        thresholds = _even_thresholds(num_thresholds, 1.0 + kepsilon)
        values, update_ops = _confusion_matrix_at_thresholds(labels, predictions, thresholds,
                                                             weights)

        def compute(c, name):
            specificities = math_ops.truediv(c["tn"], c["tn"] + c["fp"] + kepsilon)
            index = math_ops.cast(
                math_ops.argmin(math_ops.abs(specificities - specificity), 0), _dt.int32)
            tp, fn = c["tp"][index], c["fn"][index]
            return math_ops.truediv(tp, tp + fn + kepsilon, name=name)

        value = compute(values, "value")
        update_op = compute(update_ops, "update_op")
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op


def specificity_at_sensitivity(labels, predictions, sensitivity, weights=None,
                               num_thresholds=200, metrics_collections=None,
                               updates_collections=None, name=None):
    """The specificity at the last threshold whose recall is nearest ``sensitivity``."""
    if sensitivity < 0 or sensitivity > 1:
        raise ValueError("`sensitivity` must be in the range [0, 1]. Currently, "
                         f"`sensitivity` is {sensitivity}.")
    with _vs.variable_scope(name, "specificity_at_sensitivity",
                            (predictions, labels, weights)):
        kepsilon = 1e-7
        # TF's last threshold here is 1 - epsilon (not 1 + epsilon as elsewhere).
        thresholds = _even_thresholds(num_thresholds, 1.0 - kepsilon)
        values, update_ops = _confusion_matrix_at_thresholds(labels, predictions, thresholds,
                                                             weights)

        def compute(c, name):
            sensitivities = math_ops.truediv(c["tp"], c["tp"] + c["fn"] + kepsilon)
            gap = math_ops.abs(sensitivities - sensitivity)
            at_min = math_ops.cast(math_ops.equal(gap, math_ops.reduce_min(gap)), _dt.int64)
            index = math_ops.cast(math_ops.argmax(math_ops.cumsum(at_min), 0), _dt.int32)
            tn, fp = c["tn"][index], c["fp"][index]
            return math_ops.truediv(tn, tn + fp + kepsilon, name=name)

        value = compute(values, "value")
        update_op = compute(update_ops, "update_op")
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op

# The metrics beyond the first four, all served as ``tf.metrics.<name>``.
METRICS = (
    "true_positives", "false_positives", "true_negatives", "false_negatives",
    "true_positives_at_thresholds", "false_positives_at_thresholds",
    "true_negatives_at_thresholds", "false_negatives_at_thresholds",
    "precision", "recall", "precision_at_thresholds", "recall_at_thresholds", "auc",
    "root_mean_squared_error", "mean_per_class_accuracy", "mean_iou",
    "mean_relative_error", "mean_cosine_distance", "mean_tensor", "percentage_below",
    "sensitivity_at_specificity", "specificity_at_sensitivity",
)
