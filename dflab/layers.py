"""``tf.layers``: the TF1 functional layers (dense, 2-D and 3-D convolutions and pooling,
transposed 3-D and separable convolutions, flatten, dropout).

Each layer is a ``variable_scope`` holding its variables (``kernel``, ``bias``) made with
``get_variable``, so reuse and naming follow TF1 (``dense/kernel``, ``dense_1/kernel`` …).
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.ops import (
    array_ops,
    conv_impl,
    conv_nd_ops,
    init_ops,
    math_ops,
    nn_ops,
    variable_scope,
)
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
        bias = get_variable("bias", [filters], dtype=dtype,
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
        kernel = get_variable("kernel", [*ks, in_ch, filters], dtype=dtype,
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


def conv3d_transpose(inputs, filters, kernel_size, strides=(1, 1, 1), padding="valid",
                     data_format="channels_last", activation=None, use_bias=True,
                     kernel_initializer=None, bias_initializer=None, kernel_regularizer=None,
                     bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                     bias_constraint=None, trainable=True, name=None, reuse=None):
    """Transposed 3-D convolution layer (``kernel`` [d, h, w, filters, in])."""
    _channels_last_only(data_format, "conv3d_transpose")
    inputs = _ops.convert_to_tensor(inputs)
    in_ch, dtype = _in_channels(inputs), inputs.dtype.base_dtype
    ks, st = _ntuple(kernel_size, 3), _ntuple(strides, 3)
    with _layer_scope(name, "conv3d_transpose", reuse):
        kernel = get_variable("kernel", [*ks, filters, in_ch], dtype=dtype,
                              initializer=kernel_initializer or _glorot(),
                              regularizer=kernel_regularizer, trainable=trainable)
        dyn = array_ops.shape(inputs)
        static = inputs.shape.as_list()
        sizes = [_deconv_length(static[i + 1], ks[i], st[i], padding) for i in range(3)]
        out_shape = array_ops.stack_ints(
            [static[0] if static[0] is not None else dyn[0]]
            + [s if s is not None else _deconv_length(dyn[i + 1], ks[i], st[i], padding)
               for i, s in enumerate(sizes)] + [filters])
        out = conv_nd_ops.conv3d_transpose(inputs, kernel, out_shape, [1, *st, 1],
                                           padding.upper())
        out.set_shape([static[0], *sizes, filters])
        return _bias_and_activation(out, filters, dtype, use_bias, bias_initializer,
                                    bias_regularizer, activation, trainable)


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
        depthwise = get_variable("depthwise_kernel", [*ks, in_ch, depth_multiplier],
                                 dtype=dtype, initializer=depthwise_initializer or _glorot(),
                                 regularizer=depthwise_regularizer, trainable=trainable)
        pointwise = get_variable("pointwise_kernel",
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
