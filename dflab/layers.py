"""``tf.layers``: the TF1 functional layers (dense, conv2d, pooling, flatten, dropout).

Each layer is a ``variable_scope`` holding its variables (``kernel``, ``bias``) made with
``get_variable``, so reuse and naming follow TF1 (``dense/kernel``, ``dense_1/kernel`` …).
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.ops import array_ops, init_ops, math_ops, nn_ops, variable_scope
from dflab.ops.variable_scope import get_variable


def _glorot():
    return init_ops.glorot_uniform_initializer()


def _layer_scope(name, default_name, reuse):
    return variable_scope.variable_scope(name, default_name=default_name, reuse=reuse)


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
        kernel = get_variable("kernel", [in_dim, units], dtype=dtype,
                              initializer=kernel_initializer or _glorot(),
                              regularizer=kernel_regularizer, trainable=trainable)
        rank = inputs.shape.ndims
        if rank is not None and rank > 2:
            flat = array_ops.reshape(inputs, [-1, in_dim])
            out = math_ops.matmul(flat, kernel)
            out_shape = array_ops.concat([array_ops.shape(inputs)[:-1], [units]], 0)
            out = array_ops.reshape(out, out_shape)
        else:
            out = math_ops.matmul(inputs, kernel)
        if use_bias:
            bias = get_variable("bias", [units], dtype=dtype,
                                initializer=bias_initializer or init_ops.zeros_initializer(),
                                regularizer=bias_regularizer, trainable=trainable)
            out = nn_ops.bias_add(out, bias)
        if activation is not None:
            out = activation(out)
        return out


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
        kernel = get_variable("kernel", [kh, kw, in_ch, filters], dtype=dtype,
                              initializer=kernel_initializer or _glorot(),
                              regularizer=kernel_regularizer, trainable=trainable)
        out = nn_ops.conv2d(inputs, kernel, strides=[1, sh, sw, 1], padding=padding.upper(),
                            dilations=[1, dh, dw, 1])
        if use_bias:
            bias = get_variable("bias", [filters], dtype=dtype,
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
