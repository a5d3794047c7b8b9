"""Composite nn functions built from existing ops (TF's ``nn_impl``): sigmoid and weighted
cross-entropy, embedding lookup, 1-D convolution, moments, batch normalisation, L2 normalisation,
``xw_plus_b`` and ``zero_fraction``.

These add no op types: each builds a small subgraph of math, array, random and nn ops, so
gradients come from those ops' rules and graphs look like TF's. Public names reach users as
``tf.nn.*`` through ``dflab.nn``.
"""

from __future__ import annotations

import contextlib
import numbers

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import builder_constant, constant
from dflab.ops import array_ops, math_ops, nn_ops


def _tensors(*values):
    return [v for v in values if _ops.is_tensor_like(v)]


def _as_float_pair(labels, logits):
    logits = _ops.convert_to_tensor(logits, name="logits")
    labels = _ops.convert_to_tensor(labels, dtype=None if _ops.is_tensor_like(labels)
                                    else logits.dtype.base_dtype, name="labels")
    if labels.dtype.base_dtype is not logits.dtype.base_dtype:
        raise TypeError(f"logits and labels must have the same dtype, got "
                        f"{logits.dtype.base_dtype.name} and {labels.dtype.base_dtype.name}")
    try:
        labels.shape.merge_with(logits.shape)
    except ValueError:
        raise ValueError(f"logits and labels must have the same shape ({logits.shape} vs "
                         f"{labels.shape})") from None
    return labels, logits


# --- logistic losses ----------------------------------------------------------------------------
def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    """Elementwise logistic loss, in the overflow-free form
    ``max(x, 0) - x * z + log(1 + exp(-|x|))``."""
    nn_ops._sentinel_check(_sentinel, "sigmoid_cross_entropy_with_logits")
    with _ops.name_scope(name, "logistic_loss", _tensors(labels, logits)) as scope:
        labels, logits = _as_float_pair(labels, logits)
        zeros = array_ops.zeros_like(logits)
        cond = math_ops.greater_equal(logits, zeros)
        relu_logits = array_ops.where(cond, logits, zeros)
        neg_abs_logits = array_ops.where(cond, math_ops.negative(logits), logits)
        return math_ops.add(
            math_ops.subtract(relu_logits, math_ops.multiply(logits, labels)),
            math_ops.log1p(math_ops.exp(neg_abs_logits)), name=scope)


def weighted_cross_entropy_with_logits(labels=None, logits=None, pos_weight=None, name=None,
                                       targets=None):
    """Logistic loss with positive examples weighted by ``pos_weight``."""
    if labels is None:
        labels = targets
    elif targets is not None:
        raise ValueError("Cannot specify both 'labels' and 'targets'")
    with _ops.name_scope(name, "logistic_loss", _tensors(labels, logits)) as scope:
        labels, logits = _as_float_pair(labels, logits)
        dt = logits.dtype.base_dtype
        one = builder_constant(1, dtype=dt)
        log_weight = math_ops.add(one, math_ops.multiply(
            math_ops.subtract(_ops.convert_to_tensor(pos_weight, dtype=dt), one), labels))
        softplus_neg = math_ops.add(
            math_ops.log1p(math_ops.exp(math_ops.negative(math_ops.abs(logits)))),
            nn_ops.relu(math_ops.negative(logits)))
        return math_ops.add(math_ops.multiply(math_ops.subtract(one, labels), logits),
                            math_ops.multiply(log_weight, softplus_neg), name=scope)


# --- embeddings ---------------------------------------------------------------------------------
def embedding_lookup(params, ids, partition_strategy="mod", name=None, validate_indices=True,
                     max_norm=None):
    """Rows ``ids`` of ``params`` (a tensor, a variable, a ``PartitionedVariable`` or a list of
    shards).

    Sharded, as the paper's sharded embedding layer: the ids are split per shard
    (``dynamic_partition``; with ``"mod"`` id i lives in shard ``i % n`` at row ``i // n``, with
    ``"div"`` shards hold consecutive ids), each shard's rows are gathered where the shard
    lives (colocated with it), and the results are put back in order (``dynamic_stitch``). So
    only the rows asked for leave a shard's device, and each shard's gradient is an
    ``IndexedSlices`` of the rows it gave.
    """
    if partition_strategy not in ("mod", "div"):
        raise ValueError(f"Unrecognized partition strategy: {partition_strategy}")
    if hasattr(params, "_get_variable_list"):  # a PartitionedVariable
        params = params._get_variable_list()
    if params is None or (isinstance(params, (list, tuple)) and not params):
        raise ValueError("Need at least one param")
    shards = list(params) if isinstance(params, (list, tuple)) else [params]
    with _ops.name_scope(name, "embedding_lookup", _tensors(*shards, ids)) as scope:
        ids = _ops.convert_to_tensor(ids, name="ids")
        if not ids.dtype.base_dtype.is_integer:
            raise TypeError(f"ids must be integers, got {ids.dtype.name}")
        if len(shards) == 1:
            with _colocated_with(shards[0]):
                result = array_ops.gather(shards[0], ids)
        else:
            result = _sharded_lookup(shards, ids, partition_strategy)
        if max_norm is not None:
            result = _clip_rows(result, ids.shape.ndims, max_norm)
        return array_ops.identity(result, name=scope)


def _colocated_with(shard):
    """A graph's lookup runs next to its shard; executing eagerly there is no op to sit
    next to (an eager tensor has none), and the gather is placed with its inputs."""
    if _ops.executing_eagerly():
        return contextlib.nullcontext()
    op = shard.op if hasattr(shard, "op") else _ops.convert_to_tensor(shard).op
    return _ops.colocate_with(op)


def _sharded_lookup(shards, ids, strategy):
    """TF's sharded lookup: partition the flat ids per shard, gather on each shard's device,
    stitch the rows back in the ids' order, restore the ids' shape."""
    n = len(shards)
    flat = array_ops.reshape(ids, [-1])
    positions = math_ops.range(array_ops.size(flat))
    if strategy == "mod":
        owner = math_ops.floormod(flat, n)
        row = math_ops.floordiv(flat, n)
    else:
        owner, row = _div_assignment(shards, flat)
    owner = math_ops.cast(owner, _dt.int32)
    rows = array_ops.dynamic_partition(row, owner, n)
    where = array_ops.dynamic_partition(positions, owner, n)
    gathered = []
    for shard, r in zip(shards, rows):
        with _colocated_with(shard):
            gathered.append(array_ops.gather(shard, r))
    stitched = array_ops.dynamic_stitch(where, gathered)
    row_shape = array_ops.shape(stitched)[1:]
    out = array_ops.reshape(stitched, array_ops.concat([array_ops.shape(ids), row_shape], 0))
    static_row = _ops.convert_to_tensor(shards[0]).shape[1:]
    out.set_shape(ids.shape.concatenate(static_row))
    return out


def _div_assignment(shards, flat):
    """``"div"``: shard k holds ids [start_k, start_k + size_k); the first ``total % n``
    shards hold one id more (TF's rule, from the shards' total row count)."""
    n = len(shards)
    dt = flat.dtype.base_dtype
    sizes = [_ops.convert_to_tensor(s).shape[0] for s in shards]
    if all(d is not None for d in sizes):
        total = constant(sum(int(d) for d in sizes), dtype=dt)
    else:
        total = math_ops.add_n([math_ops.cast(array_ops.shape(_ops.convert_to_tensor(s))[0], dt)
                                for s in shards])
    per = math_ops.floordiv(total, n)
    extras = math_ops.floormod(total, n)
    owner = math_ops.maximum(math_ops.floordiv(flat, per + 1),
                             math_ops.floordiv(flat - extras, per))
    in_extras = math_ops.less(owner, extras)
    row = array_ops.where(in_extras, math_ops.floormod(flat, per + 1),
                          math_ops.floormod(flat - extras, per))
    return owner, row


def _clip_rows(x, ids_rank, max_norm):
    """Rescale each embedding so its L2 norm is at most ``max_norm`` (TF's clip_by_norm)."""
    rank = x.shape.ndims
    if rank is None or ids_rank is None:
        raise ValueError("max_norm needs statically known ranks")
    axes = list(range(ids_rank, rank))
    if not axes:
        return x
    dt = x.dtype.base_dtype
    mx = builder_constant(max_norm, dtype=dt)
    norm = math_ops.sqrt(math_ops.reduce_sum(math_ops.square(x), axes, keepdims=True))
    return math_ops.truediv(math_ops.multiply(x, mx), math_ops.maximum(norm, mx))


# --- moments and normalisation ------------------------------------------------------------------
def moments(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
    """Mean and (biased) variance of ``x`` over ``axes``."""
    if keep_dims is not None and keepdims is not None:
        raise ValueError("Cannot specify both 'keep_dims' and 'keepdims'")
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with _ops.name_scope(name, "moments", _tensors(x)):
        x = _ops.convert_to_tensor(x, name="x")
        y = math_ops.cast(x, _dt.float32) if x.dtype.base_dtype is _dt.float16 else x
        mean = math_ops.reduce_mean(y, axes, keepdims=True, name="mean")
        # stop_gradient: the mean's own gradient through the variance is zero anyway (the
        # deviations sum to zero), so TF saves the work.
        variance = math_ops.reduce_mean(
            math_ops.squared_difference(y, array_ops.stop_gradient(mean)), axes,
            keepdims=True, name="variance")
        if not keep:
            axes_list = [axes] if isinstance(axes, numbers.Integral) else list(axes)
            mean = array_ops.squeeze(mean, axes_list)
            variance = array_ops.squeeze(variance, axes_list)
        if x.dtype.base_dtype is _dt.float16:
            return math_ops.cast(mean, _dt.float16), math_ops.cast(variance, _dt.float16)
        return mean, variance


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
    """``scale * (x - mean) / sqrt(variance + epsilon) + offset`` (offset/scale may be None)."""
    with _ops.name_scope(name, "batchnorm", _tensors(x, mean, variance, scale, offset)):
        x = _ops.convert_to_tensor(x, name="x")
        dt = x.dtype.base_dtype
        variance = _ops.convert_to_tensor(variance, dtype=None if _ops.is_tensor_like(variance)
                                          else dt)
        inv = math_ops.rsqrt(math_ops.add(variance, constant(variance_epsilon,
                                                             dtype=variance.dtype.base_dtype)))
        if scale is not None:
            inv = math_ops.multiply(inv, scale)
        shift = math_ops.negative(math_ops.multiply(mean, inv))
        if offset is not None:
            shift = math_ops.add(offset, shift)
        return math_ops.add(math_ops.multiply(x, math_ops.cast(inv, dt)),
                            math_ops.cast(shift, dt))


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """``x / sqrt(max(sum(x ** 2, axis), epsilon))``."""
    if dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'dim'")
        axis = dim
    with _ops.name_scope(name, "l2_normalize", _tensors(x)) as scope:
        x = _ops.convert_to_tensor(x, name="x")
        dt = x.dtype.base_dtype
        square_sum = math_ops.reduce_sum(math_ops.square(x), axis, keepdims=True)
        inv_norm = math_ops.rsqrt(math_ops.maximum(square_sum, builder_constant(epsilon, dtype=dt)))
        return math_ops.multiply(x, inv_norm, name=scope)


# --- 1-D convolution ------------------------------------------------------------------------------
def _conv1d_sequence(value, name, channel_index):
    """stride/dilation for conv1d (an int or a list of 1 or 3) -> conv2d's 4-list."""
    if value is None:
        value = 1
    if isinstance(value, numbers.Integral):
        value = [value]
    value = [int(v) for v in value]
    if len(value) == 3:
        value = [value[1 if channel_index == 2 else 2]]
    if len(value) != 1:
        raise ValueError(f"{name} should be of length 1 or 3 but was {len(value)}")
    return [1, 1, 1, value[0]] if channel_index == 1 else [1, 1, value[0], 1]


def conv1d(value=None, filters=None, stride=None, padding=None, use_cudnn_on_gpu=None,
           data_format=None, name=None, input=None, dilations=None):  # noqa: A002
    """1-D convolution of [batch, width, channels] (NWC) data with [width, in, out] filters,
    computed as a ``conv2d`` over a height-1 image (as TF does)."""
    value = input if value is None else value
    if data_format in (None, "NWC", "NHWC"):
        fmt, spatial, channel = "NHWC", 1, 2
    elif data_format in ("NCW", "NCHW"):
        fmt, spatial, channel = "NCHW", 2, 1
    else:
        raise ValueError(f"data_format must be 'NWC' or 'NCW', got {data_format!r}")
    with _ops.name_scope(name, "conv1d", _tensors(value, filters)) as scope:
        value = array_ops.expand_dims(value, spatial)
        filters = array_ops.expand_dims(filters, 0)
        result = nn_ops.conv2d(value, filters, _conv1d_sequence(stride, "stride", channel),
                               padding, data_format=fmt,
                               dilations=_conv1d_sequence(dilations, "dilations", channel))
        return array_ops.squeeze(result, [spatial], name=scope)


# --- small helpers ------------------------------------------------------------------------------
def xw_plus_b(x, weights, biases, name=None):
    """``matmul(x, weights) + biases`` (bias added with ``bias_add``)."""
    with _ops.name_scope(name, "xw_plus_b", _tensors(x, weights, biases)) as scope:
        mm = math_ops.matmul(x, weights)
        return nn_ops.bias_add(mm, biases, name=scope)


def zero_fraction(value, name=None):
    """Fraction of the entries of ``value`` that are zero (a float32 scalar)."""
    with _ops.name_scope(name, "zero_fraction", _tensors(value)):
        value = _ops.convert_to_tensor(value, name="value")
        zero = builder_constant(0, dtype=value.dtype.base_dtype)
        return math_ops.reduce_mean(math_ops.cast(math_ops.equal(value, zero), _dt.float32))


__all__: list[str] = []
