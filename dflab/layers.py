"""``tf.layers``: the TF1 layers, as functions and as classes (dense, 1-D to 3-D and
transposed and separable convolutions, pooling, flatten, dropout, batch normalization).

Each layer is a ``variable_scope`` holding its variables (``kernel``, ``bias``) made with
``get_variable``, so reuse and naming follow TF1 (``dense/kernel``, ``dense_1/kernel`` …). A
layer class calls its function inside the scope it opened on its first call.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import threading

import numpy as np

from dflab.autograph.conversion import converted_call
from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.eager_tensor import EagerTensor
from dflab.module import Module
from dflab.ops import (
    array_ops,
    control_flow_ops,
    conv_impl,
    conv_nd_ops,
    init_ops,
    math_ops,
    nn_impl,
    nn_ops,
    normalization_ops,
    variable_scope,
)
from dflab.ops.variable_scope import EagerVariableStore, get_variable
from dflab.ops.variables import variable_creator_scope


def _glorot():
    return init_ops.glorot_uniform_initializer()


class _OwnWeights(threading.local):
    """``weights``: ``(scope name, {name: variable})`` of the built layer whose eager call
    (``Layer.__call__``) is running on this thread, else None. Its function's ``_weight``
    calls in that scope take the variables from here rather than from the store, which would
    only find them again (a third of a small eager ``Conv2D`` call)."""

    weights = None


_OWN = _OwnWeights()


def _layer_scope(name, default_name, reuse):
    return variable_scope.variable_scope(name, default_name=default_name, reuse=reuse)


def _weight(name, *args, **kwargs):
    """``get_variable(name, ...)``, or, in the scope of the built layer whose eager call is
    running, its own variable of that name (see ``_OwnWeights``)."""
    own = _OWN.weights
    if own is not None and own[0] == variable_scope.get_variable_scope().name:
        found = own[1].get(name)
        if found is not None:
            return found
    return get_variable(name, *args, **kwargs)


@contextlib.contextmanager
def _owning(scope, weights):
    saved, _OWN.weights = _OWN.weights, (scope.name, weights)
    try:
        yield
    finally:
        _OWN.weights = saved


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None,
          bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
          activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
          trainable=True, name=None, reuse=None):
    inputs = _ops.convert_to_tensor(inputs)
    in_dim = inputs.shape[-1].value
    if in_dim is None:
        raise ValueError("The last dimension of the inputs to `dense` should be defined. "
                         "Found `None`.")
    dtype = inputs.dtype.base_dtype
    with _layer_scope(name, "dense", reuse):
        kernel = _weight("kernel", [in_dim, units], dtype=dtype,
                         initializer=kernel_initializer or _glorot(),
                         regularizer=kernel_regularizer, trainable=trainable)
        out = _dense_product(inputs, kernel, in_dim, units)
        if use_bias:
            bias = _weight("bias", [units], dtype=dtype,
                           initializer=bias_initializer or init_ops.zeros_initializer(),
                           regularizer=bias_regularizer, trainable=trainable)
            out = nn_ops.bias_add(out, bias)
        if activation is not None:
            out = activation(out)
        return out


def _dense_product(inputs, kernel, in_dim, units):
    """``inputs @ kernel`` over the last axis of ``inputs`` (of any rank from 2)."""
    rank = inputs._value.ndim if type(inputs) is EagerTensor else inputs.shape.ndims
    if rank is not None and rank > 2:
        flat = array_ops.reshape(inputs, [-1, in_dim])
        out = math_ops.matmul(flat, kernel)
        out_shape = array_ops.concat([array_ops.shape(inputs)[:-1], [units]], 0)
        return array_ops.reshape(out, out_shape)
    return math_ops.matmul(inputs, kernel)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid",
           data_format="channels_last", dilation_rate=(1, 1), activation=None, use_bias=True,
           kernel_initializer=None, bias_initializer=None, kernel_regularizer=None,
           bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
           bias_constraint=None, trainable=True, name=None, reuse=None):
    if data_format != "channels_last":
        raise ValueError("dflab's conv2d supports data_format='channels_last' (NHWC) only")
    inputs = _ops.convert_to_tensor(inputs)
    in_ch = inputs.shape[-1].value
    if in_ch is None:
        raise ValueError("The channel dimension of the inputs should be defined.")
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(strides)
    dh, dw = _pair(dilation_rate)
    dtype = inputs.dtype.base_dtype
    with _layer_scope(name, "conv2d", reuse):
        kernel = _weight("kernel", [kh, kw, in_ch, filters], dtype=dtype,
                         initializer=kernel_initializer or _glorot(),
                         regularizer=kernel_regularizer, trainable=trainable)
        out = nn_ops.conv2d(inputs, kernel, strides=[1, sh, sw, 1], padding=padding.upper(),
                            dilations=[1, dh, dw, 1])
        if use_bias:
            bias = _weight("bias", [filters], dtype=dtype,
                           initializer=bias_initializer or init_ops.zeros_initializer(),
                           regularizer=bias_regularizer, trainable=trainable)
            out = nn_ops.bias_add(out, bias)
        if activation is not None:
            out = activation(out)
        return out


def _pool(fn, default_name, inputs, pool_size, strides, padding, data_format, name):
    if data_format != "channels_last":
        raise ValueError("dflab's pooling supports data_format='channels_last' (NHWC) only")
    ph, pw = _pair(pool_size)
    sh, sw = _pair(strides)
    with _ops.name_scope(name, default_name, [inputs]):
        return fn(inputs, ksize=[1, ph, pw, 1], strides=[1, sh, sw, 1], padding=padding.upper())


def max_pooling2d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                  name=None):
    return _pool(nn_ops.max_pool, "max_pooling2d", inputs, pool_size, strides, padding,
                 data_format, name)


def average_pooling2d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                      name=None):
    return _pool(nn_ops.avg_pool, "average_pooling2d", inputs, pool_size, strides, padding,
                 data_format, name)


def flatten(inputs, name=None, data_format="channels_last"):
    inputs = _ops.convert_to_tensor(inputs)
    with _ops.name_scope(name, "flatten", [inputs]):
        dims = inputs.shape.as_list()[1:] if inputs.shape.ndims is not None else None
        if dims is not None and all(d is not None for d in dims):
            return array_ops.reshape(inputs, [-1, int(np.prod(dims)) if dims else 1])
        return array_ops.reshape(inputs, array_ops.stack([array_ops.shape(inputs)[0], -1]))


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """Dropout when ``training`` is True (a Python bool or a boolean tensor)."""
    with _ops.name_scope(name, "dropout", [inputs]):
        if isinstance(training, bool):
            if not training:
                return array_ops.identity(inputs)
            return nn_ops.dropout(inputs, rate=rate, noise_shape=noise_shape, seed=seed)
        keep = math_ops.cast(training, _dt.float32)
        dropped = nn_ops.dropout(inputs, rate=rate, noise_shape=noise_shape, seed=seed)
        # A tensor-valued `training` selects arithmetically (dflab's cond arrives with control
        # flow; both branches are cheap elementwise work here).
        return dropped * math_ops.cast(keep, inputs.dtype) + \
            inputs * math_ops.cast(1.0 - keep, inputs.dtype)


__all__ = ["dense", "conv2d", "max_pooling2d", "average_pooling2d", "flatten", "dropout"]


# --- 3-D convolution and pooling, separable convolutions -----------------------------------
def _ntuple(v, n):
    return (int(v),) * n if isinstance(v, (int, np.integer)) else tuple(int(x) for x in v)


def _channels_last_only(data_format, what):
    if data_format != "channels_last":
        raise ValueError(f"dflab's {what} supports data_format='channels_last' only")


def _in_channels(inputs):
    c = inputs.shape[-1].value if inputs.shape.ndims is not None else None
    if c is None:
        raise ValueError("The channel dimension of the inputs should be defined. Found `None`.")
    return c


def _bias_and_activation(out, filters, dtype, use_bias, bias_initializer, bias_regularizer,
                         activation, trainable):
    if use_bias:
        bias = _weight("bias", [filters], dtype=dtype,
                       initializer=bias_initializer or init_ops.zeros_initializer(),
                       regularizer=bias_regularizer, trainable=trainable)
        out = nn_ops.bias_add(out, bias)
    return activation(out) if activation is not None else out


def conv3d(inputs, filters, kernel_size, strides=(1, 1, 1), padding="valid",
           data_format="channels_last", dilation_rate=(1, 1, 1), activation=None,
           use_bias=True, kernel_initializer=None, bias_initializer=None,
           kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
           kernel_constraint=None, bias_constraint=None, trainable=True, name=None,
           reuse=None):
    """3-D convolution layer (variables ``kernel`` [d, h, w, in, filters] and ``bias``)."""
    _channels_last_only(data_format, "conv3d")
    inputs = _ops.convert_to_tensor(inputs)
    in_ch, dtype = _in_channels(inputs), inputs.dtype.base_dtype
    ks, st = _ntuple(kernel_size, 3), _ntuple(strides, 3)
    dil = _ntuple(dilation_rate, 3)
    with _layer_scope(name, "conv3d", reuse):
        kernel = _weight("kernel", [*ks, in_ch, filters], dtype=dtype,
                         initializer=kernel_initializer or _glorot(),
                         regularizer=kernel_regularizer, trainable=trainable)
        out = conv_nd_ops.conv3d(inputs, kernel, [1, *st, 1], padding.upper(),
                                 dilations=[1, *dil, 1])
        return _bias_and_activation(out, filters, dtype, use_bias, bias_initializer,
                                    bias_regularizer, activation, trainable)


def _deconv_length(size, k, stride, padding):
    if size is None:
        return None
    return size * stride if padding == "same" else size * stride + max(k - stride, 0)


def _conv_transpose(rank, op, default_name, inputs, filters, kernel_size, strides, padding,
                    data_format, activation, use_bias, kernel_initializer, bias_initializer,
                    kernel_regularizer, bias_regularizer, trainable, name, reuse):
    """The transposed convolution layers of ``rank`` spatial dimensions (``kernel``
    [*spatial, filters, in]), through ``op`` (``conv2d_transpose`` or ``conv3d_transpose``)."""
    _channels_last_only(data_format, default_name)
    inputs = _ops.convert_to_tensor(inputs)
    in_ch, dtype = _in_channels(inputs), inputs.dtype.base_dtype
    ks, st = _ntuple(kernel_size, rank), _ntuple(strides, rank)
    with _layer_scope(name, default_name, reuse):
        kernel = _weight("kernel", [*ks, filters, in_ch], dtype=dtype,
                         initializer=kernel_initializer or _glorot(),
                         regularizer=kernel_regularizer, trainable=trainable)
        dyn = array_ops.shape(inputs)
        static = inputs.shape.as_list()
        sizes = [_deconv_length(static[i + 1], ks[i], st[i], padding) for i in range(rank)]
        out_shape = array_ops.stack_ints(
            [static[0] if static[0] is not None else dyn[0]]
            + [s if s is not None else _deconv_length(dyn[i + 1], ks[i], st[i], padding)
               for i, s in enumerate(sizes)] + [filters])
        out = op(inputs, kernel, out_shape, [1, *st, 1], padding.upper())
        out.set_shape([static[0], *sizes, filters])
        return _bias_and_activation(out, filters, dtype, use_bias, bias_initializer,
                                    bias_regularizer, activation, trainable)


def conv3d_transpose(inputs, filters, kernel_size, strides=(1, 1, 1), padding="valid",
                     data_format="channels_last", activation=None, use_bias=True,
                     kernel_initializer=None, bias_initializer=None, kernel_regularizer=None,
                     bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                     bias_constraint=None, trainable=True, name=None, reuse=None):
    """Transposed 3-D convolution layer (``kernel`` [d, h, w, filters, in])."""
    return _conv_transpose(3, conv_nd_ops.conv3d_transpose, "conv3d_transpose", inputs,
                           filters, kernel_size, strides, padding, data_format, activation,
                           use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
                           bias_regularizer, trainable, name, reuse)


def _pool3d(fn, default_name, inputs, pool_size, strides, padding, data_format, name):
    _channels_last_only(data_format, default_name)
    with _ops.name_scope(name, default_name, [inputs]):
        return fn(inputs, [1, *_ntuple(pool_size, 3), 1], [1, *_ntuple(strides, 3), 1],
                  padding.upper())


def max_pooling3d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                  name=None):
    return _pool3d(conv_nd_ops.max_pool3d, "max_pooling3d", inputs, pool_size, strides,
                   padding, data_format, name)


def average_pooling3d(inputs, pool_size, strides, padding="valid",
                      data_format="channels_last", name=None):
    return _pool3d(conv_nd_ops.avg_pool3d, "average_pooling3d", inputs, pool_size, strides,
                   padding, data_format, name)


def _separable(inputs, filters, ks, strides, padding, rate, depth_multiplier, activation,
               use_bias, depthwise_initializer, pointwise_initializer, bias_initializer,
               depthwise_regularizer, pointwise_regularizer, bias_regularizer, trainable,
               default_name, name, reuse, one_d):
    inputs = _ops.convert_to_tensor(inputs)
    in_ch, dtype = _in_channels(inputs), inputs.dtype.base_dtype
    with _layer_scope(name, default_name, reuse):
        depthwise = _weight("depthwise_kernel", [*ks, in_ch, depth_multiplier],
                            dtype=dtype, initializer=depthwise_initializer or _glorot(),
                            regularizer=depthwise_regularizer, trainable=trainable)
        pointwise = _weight("pointwise_kernel",
                            [1] * len(ks) + [in_ch * depth_multiplier, filters],
                            dtype=dtype, initializer=pointwise_initializer or _glorot(),
                            regularizer=pointwise_regularizer, trainable=trainable)
        x = inputs
        if one_d:  # a height-1 image, as Keras computes it
            x = array_ops.expand_dims(x, 1)
            depthwise = array_ops.expand_dims(depthwise, 0)
            pointwise = array_ops.expand_dims(pointwise, 0)
        out = conv_impl.separable_conv2d(x, depthwise, pointwise, strides, padding.upper(),
                                         rate=rate)
        if one_d:
            out = array_ops.squeeze(out, [1])
        return _bias_and_activation(out, filters, dtype, use_bias, bias_initializer,
                                    bias_regularizer, activation, trainable)


def separable_conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid",
                     data_format="channels_last", dilation_rate=(1, 1), depth_multiplier=1,
                     activation=None, use_bias=True, depthwise_initializer=None,
                     pointwise_initializer=None, bias_initializer=None,
                     depthwise_regularizer=None, pointwise_regularizer=None,
                     bias_regularizer=None, activity_regularizer=None,
                     depthwise_constraint=None, pointwise_constraint=None,
                     bias_constraint=None, trainable=True, name=None, reuse=None):
    """Depthwise then pointwise 2-D convolution layer (``depthwise_kernel``,
    ``pointwise_kernel``, ``bias``)."""
    _channels_last_only(data_format, "separable_conv2d")
    st = _ntuple(strides, 2)
    return _separable(inputs, filters, _ntuple(kernel_size, 2), [1, *st, 1], padding,
                      list(_ntuple(dilation_rate, 2)), depth_multiplier, activation, use_bias,
                      depthwise_initializer, pointwise_initializer, bias_initializer,
                      depthwise_regularizer, pointwise_regularizer, bias_regularizer,
                      trainable, "separable_conv2d", name, reuse, one_d=False)


def separable_conv1d(inputs, filters, kernel_size, strides=1, padding="valid",
                     data_format="channels_last", dilation_rate=1, depth_multiplier=1,
                     activation=None, use_bias=True, depthwise_initializer=None,
                     pointwise_initializer=None, bias_initializer=None,
                     depthwise_regularizer=None, pointwise_regularizer=None,
                     bias_regularizer=None, activity_regularizer=None,
                     depthwise_constraint=None, pointwise_constraint=None,
                     bias_constraint=None, trainable=True, name=None, reuse=None):
    """Depthwise then pointwise 1-D convolution layer, computed over a height-1 image."""
    _channels_last_only(data_format, "separable_conv1d")
    (s,) = _ntuple(strides, 1)
    (d,) = _ntuple(dilation_rate, 1)
    return _separable(inputs, filters, _ntuple(kernel_size, 1), [1, s, s, 1], padding,
                      [1, d], depth_multiplier, activation, use_bias, depthwise_initializer,
                      pointwise_initializer, bias_initializer, depthwise_regularizer,
                      pointwise_regularizer, bias_regularizer, trainable, "separable_conv1d",
                      name, reuse, one_d=True)


__all__ += ["average_pooling3d", "conv3d", "conv3d_transpose", "max_pooling3d",
            "separable_conv1d", "separable_conv2d"]


# --- batch normalization -------------------------------------------------------------------
def _bn_axes(ndims, axis):
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    axes = sorted(int(a) % ndims for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"Duplicate axis: {axis}")
    return axes


def _bn_uses_fused(fused, ndims, axes):
    """TF's Keras 2 rule: the fused kernel for 4-D (5-D) inputs normalised over the channel
    axis (first or last after the batch); ``fused=True`` elsewhere is an error."""
    usable = ndims in (4, 5) and axes in ([1], [ndims - 1])
    if fused and not usable:
        raise ValueError("Passing `fused=True` is only supported when the input is a 4D or 5D "
                         f"tensor and axis is the channel axis. Got axis={axes}")
    return usable if fused is None else bool(fused)


def _bn_moving_update(variable, value, momentum, name):
    """``variable -= (variable - value) * (1 - momentum)``, as Keras updates moving stats."""
    with _ops.name_scope(None, name, [variable, value]):
        decay = _ops.convert_to_tensor(1.0 - momentum, dtype=variable.dtype.base_dtype)
        delta = math_ops.multiply(math_ops.subtract(variable.read_value(), value), decay)
        return variable.assign_sub(delta)


def _bn_select(training, true_fn, false_fn):
    if isinstance(training, (bool, np.bool_)):
        return true_fn() if training else false_fn()
    return control_flow_ops.cond(training, true_fn, false_fn)


def _batch_norm(inputs, training, axis, momentum, epsilon, center, scale, beta_initializer,
                gamma_initializer, moving_mean_initializer, moving_variance_initializer,
                beta_regularizer, gamma_regularizer, trainable, fused, weights=None):
    """Normalises ``inputs`` with the variables of the current variable scope (or the given
    ``weights``, by name: a built layer's own); returns the output and the moving-statistics
    update ops (none when ``training`` is the constant False)."""
    ndims = inputs.shape.ndims
    if ndims is None:
        raise ValueError("Input has undefined rank.")
    axes = _bn_axes(ndims, axis)
    static = inputs.shape.as_list()
    if any(static[a] is None for a in axes):
        raise ValueError(f"Input has undefined `axis` dimension. Received input with shape "
                         f"{tuple(static)} and axis={axis}")
    use_fused = _bn_uses_fused(fused, ndims, axes)
    dtype = inputs.dtype.base_dtype
    param_shape = [static[a] for a in axes]
    # Parameters broadcast against the input unless they span exactly its last axis.
    bshape = None if axes == [ndims - 1] else [static[i] if i in axes else 1
                                               for i in range(ndims)]

    def var(name, init, reg, train):
        if weights is not None:
            return weights[name]
        return _weight(name, param_shape, dtype=dtype, initializer=init, regularizer=reg,
                       trainable=train and trainable)

    gamma = var("gamma", gamma_initializer or init_ops.ones_initializer(), gamma_regularizer,
                True) if scale else None
    beta = var("beta", beta_initializer or init_ops.zeros_initializer(), beta_regularizer,
               True) if center else None
    moving_mean = var("moving_mean", moving_mean_initializer or init_ops.zeros_initializer(),
                      None, False)
    moving_var = var("moving_variance",
                     moving_variance_initializer or init_ops.ones_initializer(), None, False)

    if use_fused and isinstance(training, (bool, np.bool_)) and training and \
            _ops.executing_eagerly():
        # TF's eager layer: the op itself averages, and the variables take the results.
        out, mean, variance = _fused_batch_norm(inputs, training, axes, gamma, beta,
                                                moving_mean, moving_var, epsilon, momentum)
        return out, [moving_mean.assign(mean), moving_var.assign(variance)]
    if use_fused:
        out, mean, variance = _fused_batch_norm(inputs, training, axes, gamma, beta,
                                                moving_mean, moving_var, epsilon)
    else:
        out, mean, variance = _composite_batch_norm(inputs, training, axes, bshape, gamma,
                                                    beta, moving_mean, moving_var, epsilon)
    if isinstance(training, (bool, np.bool_)) and not training:
        return out, []
    return out, [_bn_moving_update(moving_mean, mean, momentum, "AssignMovingAvg"),
                 _bn_moving_update(moving_var, variance, momentum, "AssignMovingAvg_1")]


def _fused_batch_norm(inputs, training, axes, gamma, beta, moving_mean, moving_var, epsilon,
                      momentum=None):
    """One ``FusedBatchNormV3`` op (two under a tensor ``training``: a ``cond`` between them).
    Returns the output and the statistics for the moving averages: the batch's (the variance
    unbiased, as TF's kernel returns it) when training, the moving ones otherwise; with a
    ``momentum``, training, the moving averages the op has updated with the batch's."""
    ndims = inputs.shape.ndims
    fmt = {(4, True): "NHWC", (5, True): "NDHWC", (4, False): "NCHW",
           (5, False): "NCDHW"}[ndims, axes == [ndims - 1]]
    shape, dtype = [inputs.shape.as_list()[axes[0]]], moving_mean.dtype.base_dtype
    # A float16 input's statistics are float32 in the op, as TF's (the variables keep the
    # input's type here).
    wide = _dt.float32 if dtype == _dt.float16 else dtype

    def param(v, fill):
        return fill(shape, wide) if v is None else math_ops.cast(v, wide)

    gamma, beta = param(gamma, array_ops.ones), param(beta, array_ops.zeros)

    def run(is_training):
        averaged = is_training and momentum is not None
        stats = (None, None) if is_training and not averaged else (
            math_ops.cast(moving_mean, wide), math_ops.cast(moving_var, wide))
        y, mean, variance = normalization_ops.fused_batch_norm(
            inputs, gamma, beta, *stats, epsilon=epsilon, data_format=fmt,
            is_training=is_training,
            exponential_avg_factor=1.0 - momentum if averaged else 1.0)
        return y, math_ops.cast(mean, dtype), math_ops.cast(variance, dtype)

    return _bn_select(training, lambda: run(True), lambda: run(False))


def _composite_batch_norm(inputs, training, axes, bshape, gamma, beta, moving_mean, moving_var,
                          epsilon):
    """Batch normalization from moments and elementwise ops, over any axes; returns the
    output and the statistics it used."""
    ndims = inputs.shape.ndims

    def bcast(t):
        return t if t is None or bshape is None else array_ops.reshape(t, bshape)

    reduce_axes = [i for i in range(ndims) if i not in axes]

    def moving_stats():
        return moving_mean.read_value(), moving_var.read_value()

    if isinstance(training, (bool, np.bool_)) and not training:
        mean, variance = moving_stats()
    else:
        mean, variance = _bn_select(
            training, lambda: tuple(nn_impl.moments(inputs, reduce_axes)), moving_stats)
    out = nn_impl.batch_normalization(inputs, bcast(mean), bcast(variance), bcast(beta),
                                      bcast(gamma), epsilon)
    return out, mean, variance


def batch_normalization(inputs, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                        beta_initializer=None, gamma_initializer=None,
                        moving_mean_initializer=None, moving_variance_initializer=None,
                        beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                        gamma_constraint=None, training=False, trainable=True, name=None,
                        reuse=None, renorm=False, renorm_clipping=None, renorm_momentum=0.99,
                        fused=None, virtual_batch_size=None, adjustment=None):
    """TF1's batch normalization layer: batch statistics when ``training`` (a Python bool or a
    boolean tensor) is true, the moving ones otherwise. Variables ``gamma``, ``beta`` and the
    non-trainable ``moving_mean``, ``moving_variance``; the moving averages' update ops go to
    ``tf.GraphKeys.UPDATE_OPS``, to be run with the training step."""
    if renorm or virtual_batch_size is not None or adjustment is not None:
        raise NotImplementedError("dflab's batch_normalization has no batch renormalization, "
                                  "virtual batches or adjustment")
    inputs = _ops.convert_to_tensor(inputs)
    with _layer_scope(name, "batch_normalization", reuse):
        out, updates = _batch_norm(
            inputs, training, axis, momentum, epsilon, center, scale, beta_initializer,
            gamma_initializer, moving_mean_initializer, moving_variance_initializer,
            beta_regularizer, gamma_regularizer, trainable, fused)
    for op in updates:
        _ops.add_to_collection(_ops.GraphKeys.UPDATE_OPS, op)
    return out


__all__ += ["batch_normalization"]


# --- 1-D convolution and pooling, transposed 2-D convolution -------------------------------
def conv1d(inputs, filters, kernel_size, strides=1, padding="valid",
           data_format="channels_last", dilation_rate=1, activation=None, use_bias=True,
           kernel_initializer=None, bias_initializer=None, kernel_regularizer=None,
           bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
           bias_constraint=None, trainable=True, name=None, reuse=None):
    """1-D convolution layer (``kernel`` [width, in, filters] and ``bias``)."""
    _channels_last_only(data_format, "conv1d")
    inputs = _ops.convert_to_tensor(inputs)
    in_ch, dtype = _in_channels(inputs), inputs.dtype.base_dtype
    (k,), (s,), (d,) = (_ntuple(kernel_size, 1), _ntuple(strides, 1),
                        _ntuple(dilation_rate, 1))
    with _layer_scope(name, "conv1d", reuse):
        kernel = _weight("kernel", [k, in_ch, filters], dtype=dtype,
                         initializer=kernel_initializer or _glorot(),
                         regularizer=kernel_regularizer, trainable=trainable)
        out = nn_impl.conv1d(inputs, kernel, s, padding.upper(), dilations=d)
        return _bias_and_activation(out, filters, dtype, use_bias, bias_initializer,
                                    bias_regularizer, activation, trainable)


def conv2d_transpose(inputs, filters, kernel_size, strides=(1, 1), padding="valid",
                     data_format="channels_last", activation=None, use_bias=True,
                     kernel_initializer=None, bias_initializer=None, kernel_regularizer=None,
                     bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                     bias_constraint=None, trainable=True, name=None, reuse=None):
    """Transposed 2-D convolution layer (``kernel`` [h, w, filters, in])."""
    return _conv_transpose(2, nn_ops.conv2d_transpose, "conv2d_transpose", inputs, filters,
                           kernel_size, strides, padding, data_format, activation, use_bias,
                           kernel_initializer, bias_initializer, kernel_regularizer,
                           bias_regularizer, trainable, name, reuse)


def _pool1d(fn, default_name, inputs, pool_size, strides, padding, data_format, name):
    _channels_last_only(data_format, default_name)
    with _ops.name_scope(name, default_name, [inputs]):
        return fn(inputs, _ntuple(pool_size, 1)[0], _ntuple(strides, 1)[0], padding.upper())


def max_pooling1d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                  name=None):
    return _pool1d(conv_impl.max_pool1d, "max_pooling1d", inputs, pool_size, strides,
                   padding, data_format, name)


def average_pooling1d(inputs, pool_size, strides, padding="valid",
                      data_format="channels_last", name=None):
    return _pool1d(conv_impl.avg_pool1d, "average_pooling1d", inputs, pool_size, strides,
                   padding, data_format, name)


__all__ += ["average_pooling1d", "conv1d", "conv2d_transpose", "max_pooling1d"]


# --- layer classes ---------------------------------------------------------------------------
def _snake(name):
    """Keras's class-name-to-layer-name rule (``Conv2DTranspose`` -> ``conv2d_transpose``)."""
    return re.sub("([a-z])([A-Z])", r"\1_\2",
                  re.sub("(.)([A-Z][a-z0-9]+)", r"\1_\2", name)).lower()


class Layer(Module):
    """TF1's layer base: ``build(input_shape)`` makes the variables (``add_weight``) in the
    layer's variable scope on the first call, ``call(inputs)`` computes; later calls reuse the
    same variables. Update ops the call adds go to ``tf.GraphKeys.UPDATE_OPS``. A layer is a
    ``tf.Module`` as TF's are (a module holding one lists its variables), named by its own
    rule: its variable scope, not the module's name scope.

    In a graph the variables are the graph's (its collections and variable store). Executing
    eagerly, or traced into a function, they outlive any graph: the layer keeps them in an
    ``EagerVariableStore`` of its own, as TF's layers, objects that own their variables, do."""

    def __init__(self, trainable: bool = True, name: str | None = None, dtype=None,
                 **kwargs) -> None:
        self.trainable = trainable
        self._name = name
        self._base_name = name or _snake(type(self).__name__)
        self.dtype = None if dtype is None else _dt.as_dtype(dtype)
        self.built = False
        self._scope = None
        self._updates: list = []
        # (``_dflab_``: what object checkpoints do not walk; they find the weights by the
        # attributes ``_expose_weights`` sets, under TF's keys: ``model/kernel``.)
        self._dflab_store = EagerVariableStore()

    @property
    def name(self) -> str:
        return self._scope.name if self._scope is not None else self._base_name

    def build(self, input_shape) -> None:
        self.built = True

    def call(self, inputs, **kwargs):
        return inputs

    def add_weight(self, name, shape, dtype=None, initializer=None, regularizer=None,
                   trainable=True, **kwargs):
        return get_variable(name, shape, dtype=dtype or self.dtype or _dt.float32,
                            initializer=initializer, regularizer=regularizer,
                            trainable=trainable and self.trainable)

    def add_update(self, updates, inputs=None) -> None:
        updates = updates if isinstance(updates, (list, tuple)) else [updates]
        for op in updates:
            _ops.add_to_collection(_ops.GraphKeys.UPDATE_OPS, op)

    # A built layer's call executing eagerly, where the class has one: its variables exist,
    # and the scopes a call opens would only name them (``Dense``'s: 55 against 12 us).
    _eager_call = None

    def __call__(self, inputs, *args, **kwargs):
        graph = _ops.get_default_graph()
        if graph.executes_eagerly and self.built:
            if self._eager_call is not None:
                return self._eager_call(inputs, *args, **kwargs)
            # The variables exist: the store would only find them again; the layer's
            # function takes its own (in its scope, which it still opens: what else it calls
            # names variables as before).
            with self._dflab_store.as_default(), _owning(self._scope, self._own_weights()):
                return self.call(inputs, *args, **kwargs)
        if graph.executes_eagerly or getattr(graph, "is_function_graph", False):
            with self._dflab_store.as_default():
                return self._call_in_scope(inputs, *args, **kwargs)
        return self._call_in_scope(inputs, *args, **kwargs)

    def _call_in_scope(self, inputs, *args, **kwargs):
        if self._scope is None:
            with variable_scope.variable_scope(self._name, default_name=self._base_name) as sc:
                self._scope = sc
        before = list(_ops.get_collection(_ops.GraphKeys.UPDATE_OPS))
        with variable_scope.variable_scope(self._scope, reuse=True if self.built else None), \
                self._restoring_weights():
            first = not self.built
            if first:
                self.build(_ops.convert_to_tensor(inputs).shape
                           if not isinstance(inputs, (list, tuple)) else
                           [_ops.convert_to_tensor(t).shape for t in inputs])
                self.built = True
            # A subclass's own ``call`` is converted by AutoGraph while a graph is built, as
            # TF's layers convert a subclassed layer's (dflab's layers are called as written).
            call = self.call if _ops.executing_eagerly() else converted_call(self.call)
            out = call(inputs, *args, **kwargs)
        if first:
            self._expose_weights()
        self._updates += [op for op in _ops.get_collection(_ops.GraphKeys.UPDATE_OPS)
                          if not any(op is b for b in before)]
        return out

    def _restoring_weights(self):
        """Where a checkpoint restored before the layer was built holds values for it, a
        scope that restores each weight as it is made (TF's deferred restoration)."""
        held = self.__dict__.get("_dflab_restorations")
        if not held or self.built:
            return contextlib.nullcontext()
        prefix = self._scope.name + "/"

        def restore(next_creator, **kwargs):
            v = next_creator(**kwargs)
            local = v.name.split(":")[0]
            if local.startswith(prefix) and local[len(prefix):].isidentifier():
                for restoration, path in list(held):
                    restoration.attach(path, local[len(prefix):], v)
            return v

        return variable_creator_scope(restore)

    def _local_names(self) -> dict:
        """The layer's variables by their names inside its scope (``kernel``, ``bias``)."""
        prefix = self._scope.name + "/"
        return {v.name.split(":")[0][len(prefix):]: v for v in self.variables
                if v.name.startswith(prefix)}

    def _expose_weights(self) -> None:
        """Each variable as an attribute named after its weight (``dense.kernel``,
        ``batch_norm.moving_mean``), as TF's layers have them, where the name is free."""
        for local, v in self._local_names().items():
            if local.isidentifier() and not hasattr(self, local):
                setattr(self, local, v)

    _weights_by_name = None

    def _own_weights(self) -> dict:
        """``_local_names()``, worked out on the first eager call after the build."""
        if self._weights_by_name is None:
            self._weights_by_name = self._local_names()
        return self._weights_by_name

    def _collected(self, key):
        own = self._dflab_store._store.variables()
        if own:  # made eagerly or in a trace: the layer's own
            return [v for v in own if v.trainable or key != _ops.GraphKeys.TRAINABLE_VARIABLES]
        if self._scope is None:
            return []
        return list(_ops.get_collection(key, scope=self._scope.name + "/"))

    @property
    def variables(self) -> list:
        return self._collected(_ops.GraphKeys.GLOBAL_VARIABLES)

    weights = variables

    @property
    def trainable_weights(self) -> list:
        return self._collected(_ops.GraphKeys.TRAINABLE_VARIABLES)

    trainable_variables = trainable_weights

    @property
    def non_trainable_weights(self) -> list:
        trainable = self.trainable_weights
        return [v for v in self.variables if not any(v is t for t in trainable)]

    non_trainable_variables = non_trainable_weights

    @property
    def updates(self) -> list:
        return list(self._updates)


class _FunctionLayer(Layer):
    """A class over one of the functions above: the constructor takes the function's
    arguments (less ``inputs`` and ``reuse``); calling it runs the function in the layer's
    scope, reusing the variables after the first call."""

    _fn = None
    _call_args: tuple = ()  # the function's arguments given per call (``training``)

    def __init__(self, *args, **kwargs):
        params = [p for p in inspect.signature(type(self)._fn).parameters
                  if p not in ("inputs", "reuse", "name") + self._call_args]
        bound = dict(zip(params, args))
        bound.update(kwargs)
        name = bound.pop("name", None)
        dtype = bound.pop("dtype", None)
        super().__init__(trainable=bound.get("trainable", True), name=name, dtype=dtype)
        unknown = set(bound) - set(params)
        if unknown:
            raise TypeError(f"{type(self).__name__}: unexpected arguments {sorted(unknown)}")
        self._kwargs = bound

    def call(self, inputs, **kwargs):
        fn = type(self)._fn
        extra = {"reuse": True} if self._takes_reuse and self._called else {}
        self._called = True
        if self._takes_reuse:
            extra["name"] = self._scope
        return fn(inputs, **self._kwargs, **kwargs, **extra)

    _called = False
    _takes_reuse = False  # whether the function takes ``reuse`` (read once, by ``_class``)


def _class(fn, class_name, call_args=()):
    return type(class_name, (_FunctionLayer,),
                {"_fn": staticmethod(fn), "_call_args": call_args,
                 "_takes_reuse": "reuse" in inspect.signature(fn).parameters,
                 "__doc__": f"The class form of ``tf.layers.{fn.__name__}``.",
                 "__module__": __name__})


class Dense(_class(dense, "Dense")):
    """The class form of ``tf.layers.dense``."""

    def _eager_call(self, inputs):
        inputs = _ops.convert_to_tensor(inputs)  # (an eager tensor: its array's shape is known)
        kernel = self.kernel
        dims = self.__dict__.get("_kernel_dims")
        if dims is None:  # a built layer's kernel keeps its shape: read once
            dims = self._kernel_dims = tuple(kernel.shape.as_list())
        in_dim, units = dims
        shape = inputs._value.shape
        if len(shape) < 2 or shape[-1] != in_dim:
            raise ValueError(f"Input 0 of layer {self.name} is incompatible with the layer: "
                             f"expected axis -1 of input shape to have value {in_dim}, but "
                             f"received input with shape {inputs.shape}")
        out = _dense_product(inputs, kernel, in_dim, units)
        if self._kwargs.get("use_bias", True):
            out = nn_ops.bias_add(out, self.bias)
        activation = self._kwargs.get("activation")
        return out if activation is None else activation(out)


Conv1D = _class(conv1d, "Conv1D")
Conv2D = _class(conv2d, "Conv2D")
Conv2DTranspose = _class(conv2d_transpose, "Conv2DTranspose")
Conv3D = _class(conv3d, "Conv3D")
Conv3DTranspose = _class(conv3d_transpose, "Conv3DTranspose")
SeparableConv1D = _class(separable_conv1d, "SeparableConv1D")
SeparableConv2D = _class(separable_conv2d, "SeparableConv2D")
MaxPooling1D = _class(max_pooling1d, "MaxPooling1D")
MaxPooling2D = _class(max_pooling2d, "MaxPooling2D")
MaxPooling3D = _class(max_pooling3d, "MaxPooling3D")
AveragePooling1D = _class(average_pooling1d, "AveragePooling1D")
AveragePooling2D = _class(average_pooling2d, "AveragePooling2D")
AveragePooling3D = _class(average_pooling3d, "AveragePooling3D")
Flatten = _class(flatten, "Flatten")
Dropout = _class(dropout, "Dropout", call_args=("training",))




class BatchNormalization(_class(batch_normalization, "BatchNormalization",
                                call_args=("training",))):
    """The class form of ``tf.layers.batch_normalization``."""

    _bn_args = None  # ``_batch_norm``'s arguments, from the constructor's (on first use)

    def _eager_call(self, inputs, training=False):
        if self._bn_args is None:
            defaults = inspect.signature(batch_normalization).parameters
            self._bn_args = {p: self._kwargs.get(p, defaults[p].default)
                             for p in inspect.signature(_batch_norm).parameters
                             if p not in ("inputs", "training", "weights")}
        out, _ = _batch_norm(_ops.convert_to_tensor(inputs), training, **self._bn_args,
                             weights=self._own_weights())
        return out

__all__ += ["AveragePooling1D", "AveragePooling2D", "AveragePooling3D", "BatchNormalization",
            "Conv1D", "Conv2D", "Conv2DTranspose", "Conv3D", "Conv3DTranspose", "Dense",
            "Dropout", "Flatten", "Layer", "MaxPooling1D", "MaxPooling2D", "MaxPooling3D",
            "SeparableConv1D", "SeparableConv2D"]
