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
from dflab.ops import array_ops, math_ops, state_ops
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


__all__: list = []
