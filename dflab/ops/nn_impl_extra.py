"""More of ``tf.nn``'s composites: activations (``crelu``, ``swish``/``silu``, ``relu_layer``),
losses (``log_poisson_loss``, ``compute_average_loss``, ``scale_regularization_loss``),
moments from sufficient statistics and weighted moments, TF1's
``batch_norm_with_global_normalization`` and CTC's ``collapse_repeated``.

Each is built from existing ops the way TF builds it (same name scopes, same arithmetic), so
its gradients are the ops' gradients. dflab has no distribution strategies: the replica count
TF divides losses by is 1.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant
from dflab.ops import (
    array_ops,
    indexing_ops,
    math_ops,
    nn_impl,
    nn_ops,
    reduction_ops,
    sequence_ops,
    special_math_ops,
)


def _tensors(*values):
    return [v for v in values if _ops.is_tensor_like(v)]


def _keep(keep_dims, keepdims):
    if keep_dims is not None and keepdims is not None:
        raise ValueError("Cannot specify both 'keep_dims' and 'keepdims'")
    return bool(keepdims if keepdims is not None else keep_dims)


# --- activations ------------------------------------------------------------------------------
def crelu(features, name=None, axis=-1):
    """Concatenated ReLU: ``relu(concat([features, -features], axis))``, twice the depth."""
    with _ops.name_scope(name, "CRelu", _tensors(features)) as scope:
        features = _ops.convert_to_tensor(features, name="features")
        c = array_ops.concat([features, math_ops.negative(features)], axis, name=scope)
        return nn_ops.relu(c)


def swish(features, beta=1.0):
    """``features * sigmoid(beta * features)`` (also ``tf.nn.silu``)."""
    features = _ops.convert_to_tensor(features, name="features")
    beta = math_ops.cast(_ops.convert_to_tensor(beta, name="beta"), features.dtype.base_dtype)
    return math_ops.multiply(features, math_ops.sigmoid(math_ops.multiply(beta, features)))


silu = swish


def relu_layer(x, weights, biases, name=None):
    """``relu(matmul(x, weights) + biases)``."""
    with _ops.name_scope(name, "relu_layer", _tensors(x, weights, biases)) as scope:
        x = _ops.convert_to_tensor(x, name="x")
        weights = _ops.convert_to_tensor(weights, name="weights")
        biases = _ops.convert_to_tensor(biases, name="biases")
        return nn_ops.relu(nn_ops.bias_add(math_ops.matmul(x, weights), biases), name=scope)


# --- losses -----------------------------------------------------------------------------------
def log_poisson_loss(targets, log_input, compute_full_loss=False, name=None):
    """``exp(log_input) - log_input * targets``, plus Stirling's approximation of
    ``log(targets!)`` (for targets above 1) with ``compute_full_loss``."""
    with _ops.name_scope(name, "log_poisson_loss", _tensors(log_input, targets)) as scope:
        log_input = _ops.convert_to_tensor(log_input, name="log_input")
        targets = _ops.convert_to_tensor(targets, name="targets")
        if not targets.shape.is_compatible_with(log_input.shape):
            raise ValueError("`log_input` and `targets` must have the same shape, received "
                             f"({log_input.shape} vs {targets.shape}).")
        result = math_ops.subtract(math_ops.exp(log_input),
                                   math_ops.multiply(log_input, targets))
        if compute_full_loss:
            dt = targets.dtype.base_dtype
            half = constant(0.5, dtype=dt)
            two_pi = constant(2 * 3.141592653589793, dtype=dt)
            stirling = math_ops.add(
                math_ops.subtract(math_ops.multiply(targets, math_ops.log(targets)), targets),
                math_ops.multiply(half, math_ops.log(math_ops.multiply(two_pi, targets))))
            zeros = array_ops.zeros_like(targets)
            ones = array_ops.ones_like(targets)
            cond = math_ops.logical_and(math_ops.greater_equal(targets, zeros),
                                        math_ops.less_equal(targets, ones))
            result = math_ops.add(result, indexing_ops.where(cond, zeros, stirling))
        return array_ops.identity(result, name=scope)


def _match_weight_rank(losses, weight):
    """``weight`` squeezed or expanded by its last axis to ``losses``' rank where they differ
    by one (TF's ``squeeze_or_expand_dimensions``)."""
    lr, wr = losses.shape.ndims, weight.shape.ndims
    if lr is None or wr is None:
        return weight
    if wr == lr + 1 and weight.shape.as_list()[-1] in (1, None):
        return array_ops.squeeze(weight, [-1])
    if wr == lr - 1:
        return array_ops.expand_dims(weight, -1)
    return weight


def compute_average_loss(per_example_loss, sample_weight=None, global_batch_size=None):
    """The sum of the (weighted) per-example losses over the global batch size (by default
    the first dimension of ``per_example_loss``); 0 for an empty batch."""
    per_example_loss = _ops.convert_to_tensor(per_example_loss)
    dt = per_example_loss.dtype.base_dtype
    if per_example_loss.shape.ndims == 0:
        raise ValueError("Invalid value passed for `per_example_loss`. Expected a tensor with "
                         f"at least rank 1. Received per_example_loss={per_example_loss} "
                         "with rank 0")
    if sample_weight is not None:
        weight = math_ops.cast(_ops.convert_to_tensor(sample_weight), _dt.float32)
        losses = math_ops.cast(per_example_loss, _dt.float32)
        per_example_loss = math_ops.multiply(losses, _match_weight_rank(losses, weight))
    per_example_loss = math_ops.cast(per_example_loss, dt)
    if global_batch_size is None:
        global_batch_size = array_ops.shape(per_example_loss)[0]
    else:
        size = _ops.convert_to_tensor(global_batch_size)
        if size.shape.ndims not in (None, 0):
            raise ValueError("global_batch_size must be scalar.")
        if not size.dtype.base_dtype.is_integer:
            raise TypeError("global_batch_size must be an integer.")
        global_batch_size = size
    loss = reduction_ops.reduce_sum(per_example_loss)
    return special_math_ops.div_no_nan(loss, math_ops.cast(global_batch_size, dt))


def scale_regularization_loss(regularization_loss):
    """The summed regularization loss divided by the number of replicas (1 here)."""
    return math_ops.divide(reduction_ops.reduce_sum(regularization_loss), 1)


# --- moments ----------------------------------------------------------------------------------
def sufficient_statistics(x, axes, shift=None, keep_dims=None, name=None, keepdims=None):
    """(count, sum of ``x - shift``, sum of ``(x - shift)**2``, shift) over ``axes``."""
    axes = sorted(set(axes))
    keep = _keep(keep_dims, keepdims)
    with _ops.name_scope(name, "sufficient_statistics", _tensors(x, shift)):
        x = _ops.convert_to_tensor(x, name="x")
        dims = x.shape.as_list() if x.shape.ndims is not None else None
        if dims is not None and all(dims[d] is not None for d in axes):
            n = 1
            for d in axes:
                n *= dims[d]
            counts = constant(n, dtype=x.dtype.base_dtype)
        else:
            rank = array_ops.rank(x)
            positive = [a + rank if a < 0 else a for a in axes]
            sizes = indexing_ops.gather(math_ops.cast(array_ops.shape(x), x.dtype.base_dtype),
                                        positive)
            counts = reduction_ops.reduce_prod(sizes, name="count")
        if shift is not None:
            shift = _ops.convert_to_tensor(shift, name="shift")
            m_ss = math_ops.subtract(x, shift)
            v_ss = math_ops.squared_difference(x, shift)
        else:
            m_ss, v_ss = x, math_ops.square(x)
        m_ss = reduction_ops.reduce_sum(m_ss, axes, keepdims=keep, name="mean_ss")
        v_ss = reduction_ops.reduce_sum(v_ss, axes, keepdims=keep, name="var_ss")
    return counts, m_ss, v_ss, shift


def normalize_moments(counts, mean_ss, variance_ss, shift, name=None):
    """Mean and variance from ``sufficient_statistics``' outputs."""
    with _ops.name_scope(name, "normalize", _tensors(counts, mean_ss, variance_ss, shift)):
        divisor = math_ops.reciprocal(counts, name="divisor")
        if shift is not None:
            shifted_mean = math_ops.multiply(mean_ss, divisor, name="shifted_mean")
            mean = math_ops.add(shifted_mean, shift, name="mean")
        else:
            shifted_mean = math_ops.multiply(mean_ss, divisor, name="mean")
            mean = shifted_mean
        variance = math_ops.subtract(math_ops.multiply(variance_ss, divisor),
                                     math_ops.square(shifted_mean), name="variance")
    return mean, variance


def weighted_moments(x, axes, frequency_weights, name=None, keep_dims=None, keepdims=None):
    """Mean and variance of ``x`` over ``axes`` with each element counted
    ``frequency_weights`` times (broadcast against ``x``); 0 where the weights sum to 0."""
    keep = _keep(keep_dims, keepdims)
    with _ops.name_scope(name, "weighted_moments", _tensors(x, frequency_weights)):
        x = _ops.convert_to_tensor(x, name="x")
        w = _ops.convert_to_tensor(frequency_weights, name="frequency_weights")
        half = x.dtype.base_dtype is _dt.float16
        if half:
            x = math_ops.cast(x, _dt.float32)
        if w.dtype.base_dtype is not x.dtype.base_dtype:
            w = math_ops.cast(w, x.dtype.base_dtype)
        weighted_sum = reduction_ops.reduce_sum(math_ops.multiply(w, x), axes,
                                                name="weighted_input_sum", keepdims=True)
        weights = math_ops.add(w, array_ops.zeros_like(x))
        total = reduction_ops.reduce_sum(weights, axes, name="sum_of_weights", keepdims=True)
        mean = special_math_ops.div_no_nan(weighted_sum, total)
        distsq = reduction_ops.reduce_sum(
            math_ops.multiply(w, math_ops.squared_difference(x, mean)), axes,
            name="weighted_distsq", keepdims=True)
        variance = special_math_ops.div_no_nan(distsq, total)
        if not keep:
            axes_list = [axes] if isinstance(axes, int) else list(axes)
            mean = array_ops.squeeze(mean, axes_list)
            variance = array_ops.squeeze(variance, axes_list)
        if half:
            mean, variance = math_ops.cast(mean, _dt.float16), math_ops.cast(variance,
                                                                             _dt.float16)
        return mean, variance


def batch_norm_with_global_normalization(t=None, m=None, v=None, beta=None, gamma=None,
                                         variance_epsilon=None,
                                         scale_after_normalization=None, name=None,
                                         input=None, mean=None,  # noqa: A002
                                         variance=None):
    """TF1's batch normalization by given moments: ``batch_normalization`` with ``gamma``
    applied only when ``scale_after_normalization``."""
    t = input if t is None else t
    m = mean if m is None else m
    v = variance if v is None else v
    return nn_impl.batch_normalization(t, m, v, beta,
                                       gamma if scale_after_normalization else None,
                                       variance_epsilon, name)


# --- CTC label helpers ------------------------------------------------------------------------
def _dim(t, axis):
    d = t.shape.as_list()[axis] if t.shape.ndims is not None else None
    return d if d is not None else array_ops.shape(t)[axis]


def collapse_repeated(labels, seq_length, name=None):
    """Merge repeated labels of each [batch, time] row into one: (collapsed labels padded
    with 0 to the longest new row, new lengths)."""
    with _ops.name_scope(name, "collapse_repeated_labels", _tensors(labels, seq_length)):
        labels = _ops.convert_to_tensor(labels, name="labels")
        seq_length = _ops.convert_to_tensor(seq_length, name="seq_length")
        label_mask = array_ops.concat(
            [array_ops.ones_like(labels[:, :1], dtype=_dt.bool),
             math_ops.not_equal(labels[:, 1:], labels[:, :-1])], axis=1)
        seq_mask = indexing_ops.sequence_mask(seq_length, maxlen=_dim(labels, 1))
        label_mask = math_ops.logical_and(label_mask, seq_mask)
        new_len = reduction_ops.reduce_sum(math_ops.cast(label_mask, _dt.int32), axis=1)
        new_maxlen = reduction_ops.reduce_max(new_len)
        idx_mask = indexing_ops.sequence_mask(new_len, maxlen=new_maxlen)
        flat_labels = array_ops.reshape(labels, [-1])
        flat_label_mask = array_ops.reshape(label_mask, [-1])
        flat_idx_mask = array_ops.reshape(idx_mask, [-1])
        idx = sequence_ops.range(_dim(flat_idx_mask, 0))
        flat = indexing_ops.scatter_nd(
            array_ops.expand_dims(indexing_ops.boolean_mask(idx, flat_idx_mask), axis=1),
            indexing_ops.boolean_mask(flat_labels, flat_label_mask),
            array_ops.shape(flat_idx_mask))
        out = array_ops.reshape(flat, array_ops.stack_ints([_dim(labels, 0), new_maxlen]))
        return out, math_ops.cast(new_len, seq_length.dtype.base_dtype)


__all__: list[str] = []
