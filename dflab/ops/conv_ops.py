"""2-D convolution and pooling: ``Conv2D`` with its two backprops (``Conv2DBackpropInput``,
``Conv2DBackpropFilter``), ``MaxPool``/``AvgPool`` with ``MaxPoolGrad``/``AvgPoolGrad``.

Schemas, gradients and builders side by side (kernels in ``dflab.kernels.conv_kernels``). The
window geometry (``conv_output_size``: TF's output sizes and SAME padding split) is shared with
the kernels, so static and run-time shapes agree by construction. These are ``tf.nn`` names,
re-exported by ``dflab.ops.nn_ops`` (as in TF, where they live in ``nn_ops``) and ``dflab.nn``.
All ops here are registered ``expensive`` so the executor runs them on its inter-op pool.
"""

from __future__ import annotations

import numbers

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant, constant_value_as_shape
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops
from dflab.ops.op_util import check_same_dtype, skipped_inputs


def _apply(op_type, inputs, attrs=None, name=None):
    return _ops.apply_op_output(op_type, inputs, attrs, name)


def _check_float(op, t, what="input"):
    if not t.dtype.base_dtype.is_floating:
        raise TypeError(f"Value passed to parameter '{what}' of '{op.type}' has DataType "
                        f"{t.dtype.base_dtype.name} not in the list of allowed types "
                        "(float16, float32, float64)")


def _check_real(op, t, what="features"):
    dt = t.dtype.base_dtype
    if not (dt.is_floating or dt.is_integer):
        raise TypeError(f"Value passed to parameter '{what}' of '{op.type}' has DataType "
                        f"{dt.name} not in the list of allowed types (real numbers)")


def _check_data_format(fmt, allowed=("NHWC", "NCHW")):
    if isinstance(fmt, bytes):
        fmt = fmt.decode()
    if fmt not in allowed:
        raise ValueError(f"data_format must be one of {list(allowed)}, got {fmt!r}")
    return fmt


# ==============================================================================================
# Window geometry shared by convolution and pooling
# ==============================================================================================
def conv_output_size(in_size, k, stride, dilation, padding):
    """(output size, pad before, pad after) along one spatial dimension, TF's rules.

    VALID: ``ceil((in - eff + 1) / stride)`` with ``eff = (k - 1) * dilation + 1``.
    SAME: ``ceil(in / stride)``, padding split with the extra row/column at the end.
    """
    if in_size is None or k is None:
        return None, None, None
    eff = (k - 1) * dilation + 1
    if padding == "VALID":
        num = in_size - eff + stride
        out = int(num / stride)  # C++ truncation, as TF computes it
        if out < 0:
            raise ValueError(f"Computed output size would be negative: {out} [input_size: "
                             f"{in_size}, effective_filter_size: {eff}, stride: {stride}]")
        return out, 0, 0
    out = -(-in_size // stride)
    total = max((out - 1) * stride + eff - in_size, 0)
    return out, total // 2, total - total // 2


def _check_padding(padding):
    if isinstance(padding, bytes):
        padding = padding.decode()
    if not isinstance(padding, str) or padding.upper() not in ("SAME", "VALID"):
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    return padding.upper()


def _spatial_axes(fmt):
    return (1, 2) if fmt == "NHWC" else (2, 3)


def _channel_axis(fmt):
    return 3 if fmt == "NHWC" else 1


def _get_sequence(value, name, fmt, default=1):
    """An int or a list of 1, 2 or 4 ints -> the full 4-list in ``fmt`` order (TF1.15)."""
    if value is None:
        value = default
    if isinstance(value, numbers.Integral):
        value = [value]
    value = [int(v) for v in value]
    if len(value) == 1:
        value = value * 2
    if len(value) == 2:
        full = [1, 1, 1, 1]
        h, w = _spatial_axes(fmt)
        full[h], full[w] = value
        value = full
    if len(value) != 4:
        raise ValueError(f"{name} should be of length 1, 2 or 4 but was {len(value)}")
    return value


def _check_window_attr(op, name):
    vals = op.get_attr(name)
    fmt = op.get_attr("data_format")
    if len(vals) != 4:
        raise ValueError(f"{name} must have 4 elements, got {len(vals)}")
    if vals[0] != 1 or vals[_channel_axis(fmt)] != 1:
        raise ValueError(f"Current implementation does not yet support {name} in the batch "
                         f"and depth dimensions (got {vals} with data_format {fmt})")
    if any(v < 1 for v in vals):
        raise ValueError(f"{name} must be positive, got {vals}")
    h, w = _spatial_axes(fmt)
    return vals[h], vals[w]


def _nhwc_dims(shape, fmt):
    """(N, H, W, C) of a rank-4 shape in ``fmt`` order (entries may be None)."""
    d = shape.with_rank(4).as_list()
    return (d[0], d[1], d[2], d[3]) if fmt == "NHWC" else (d[0], d[2], d[3], d[1])


def _from_nhwc(n, h, w, c, fmt):
    return TensorShape([n, h, w, c] if fmt == "NHWC" else [n, c, h, w])


def _conv_geometry(op, in_shape, filt_shape):
    """Static (N, OH, OW, O) of a conv given (partial) input and filter shapes."""
    fmt = op.get_attr("data_format")
    padding = op.get_attr("padding")
    sh, sw = _check_window_attr(op, "strides")
    dh, dw = _check_window_attr(op, "dilations")
    n, h, w, c = _nhwc_dims(in_shape, fmt)
    try:
        kh, kw, ci, co = filt_shape.with_rank(4).as_list()
    except ValueError:
        raise ValueError(f"filter must be rank 4, got shape {filt_shape}") from None
    if c is not None and ci is not None and c != ci:
        raise ValueError(f"Depth of input ({c}) does not match the input depth of the "
                         f"filter ({ci})")
    oh = conv_output_size(h, kh, sh, dh, padding)[0]
    ow = conv_output_size(w, kw, sw, dw, padding)[0]
    return n, oh, ow, co


# ==============================================================================================
# Conv2D and its backprops
# ==============================================================================================
def _conv_attrs(op):
    _check_data_format(op.get_attr("data_format"))
    _check_padding(op.get_attr("padding"))


def _conv2d_infer(op):
    x, f = op.inputs
    dt = check_same_dtype(op, ["input", "filter"])
    _check_float(op, x)
    _conv_attrs(op)
    try:
        x.shape.with_rank(4)
    except ValueError:
        raise ValueError(f"input must be rank 4, got shape {x.shape}") from None
    n, oh, ow, co = _conv_geometry(op, x.shape, f.shape)
    return [(dt, _from_nhwc(n, oh, ow, co, op.get_attr("data_format")))]


def _conv2d_backprop_input_infer(op):
    sizes, f, dy = op.inputs
    dt = f.dtype.base_dtype
    if dy.dtype.base_dtype is not dt:
        raise TypeError(f"filter and out_backprop must have the same dtype, got {dt.name} and "
                        f"{dy.dtype.base_dtype.name}")
    _check_float(op, f, "filter")
    _conv_attrs(op)
    if not sizes.dtype.base_dtype.is_integer:
        raise TypeError("input_sizes must be an integer tensor")
    in_shape = constant_value_as_shape(sizes)
    try:
        in_shape = in_shape.with_rank(4)
        dy.shape.with_rank(4)
    except ValueError as e:
        raise ValueError(f"input_sizes and out_backprop must be rank 4: {e}") from None
    n, oh, ow, co = _conv_geometry(op, in_shape, f.shape)
    fmt = op.get_attr("data_format")
    expect = _from_nhwc(n, oh, ow, co, fmt)
    if not expect.is_compatible_with(dy.shape):
        raise ValueError(f"out_backprop shape {dy.shape} does not match the convolution's "
                         f"output shape {expect}")
    return [(dt, in_shape)]


def _conv2d_backprop_filter_infer(op):
    x, sizes, dy = op.inputs
    dt = x.dtype.base_dtype
    if dy.dtype.base_dtype is not dt:
        raise TypeError(f"input and out_backprop must have the same dtype, got {dt.name} and "
                        f"{dy.dtype.base_dtype.name}")
    _check_float(op, x)
    _conv_attrs(op)
    if not sizes.dtype.base_dtype.is_integer:
        raise TypeError("filter_sizes must be an integer tensor")
    f_shape = constant_value_as_shape(sizes)
    try:
        x.shape.with_rank(4)
        dy.shape.with_rank(4)
        f_shape = f_shape.with_rank(4)
    except ValueError as e:
        raise ValueError(f"input, filter_sizes and out_backprop must be rank 4: {e}") from None
    n, oh, ow, co = _conv_geometry(op, x.shape, f_shape)
    expect = _from_nhwc(n, oh, ow, co, op.get_attr("data_format"))
    if not expect.is_compatible_with(dy.shape):
        raise ValueError(f"out_backprop shape {dy.shape} does not match the convolution's "
                         f"output shape {expect}")
    return [(dt, f_shape)]


register_op("Conv2D", _conv2d_infer, expensive=True)
register_op("Conv2DBackpropInput", _conv2d_backprop_input_infer, expensive=True)
register_op("Conv2DBackpropFilter", _conv2d_backprop_filter_infer, expensive=True)


def _conv_attr_kwargs(op):
    a = op.attrs
    return {"strides": a["strides"], "padding": a["padding"], "data_format": a["data_format"],
            "dilations": a["dilations"]}


def _shape_of(t):
    """Static shape as a constant where fully known (keeps static inference exact)."""
    if t.shape.is_fully_defined():
        return constant(t.shape.as_list(), dtype=_dt.int32)
    return array_ops.shape(t)


@RegisterGradient("Conv2D")
def _conv2d_grad(op, grad):
    x, f = op.inputs
    kw = _conv_attr_kwargs(op)
    skip = skipped_inputs(op)  # (a first layer's image: its gradient is wanted by no one)
    return [None if 0 in skip else conv2d_backprop_input(_shape_of(x), f, grad, **kw),
            None if 1 in skip else conv2d_backprop_filter(x, _shape_of(f), grad, **kw)]


@RegisterGradient("Conv2DBackpropInput")
def _conv2d_backprop_input_grad(op, grad):
    # The op is linear in (filter, out_backprop): its adjoints are the other conv ops.
    _, f, dy = op.inputs
    kw = _conv_attr_kwargs(op)
    return [None, conv2d_backprop_filter(grad, _shape_of(f), dy, **kw), conv2d(grad, f, **kw)]


@RegisterGradient("Conv2DBackpropFilter")
def _conv2d_backprop_filter_grad(op, grad):
    x, _, dy = op.inputs
    kw = _conv_attr_kwargs(op)
    return [conv2d_backprop_input(_shape_of(x), grad, dy, **kw), None, conv2d(x, grad, **kw)]


def _conv_builder_attrs(strides, padding, data_format, dilations):
    fmt = _check_data_format(data_format or "NHWC")
    if strides is None:
        raise ValueError("strides must be given")
    return {"strides": _get_sequence(strides, "strides", fmt),
            "padding": _check_padding(padding),
            "data_format": fmt,
            "dilations": _get_sequence(dilations, "dilations", fmt)}


def conv2d(input, filter=None, strides=None, padding=None, use_cudnn_on_gpu=True,  # noqa: A002
           data_format="NHWC", dilations=(1, 1, 1, 1), name=None, filters=None):
    """2-D convolution (cross-correlation) of a 4-D ``input`` with ``filter`` of shape
    [height, width, in_channels, out_channels]."""
    if filter is None:
        filter = filters  # noqa: A001
    elif filters is not None:
        raise ValueError("Cannot specify both 'filter' and 'filters'")
    if filter is None:
        raise ValueError("conv2d needs a filter")
    attrs = _conv_builder_attrs(strides, padding, data_format, dilations)
    return _apply("Conv2D", [input, filter], attrs, name)


def conv2d_backprop_input(input_sizes, filter=None, out_backprop=None, strides=None,  # noqa: A002
                          padding=None, use_cudnn_on_gpu=True, data_format="NHWC",
                          dilations=(1, 1, 1, 1), name=None, filters=None):
    """Gradient of ``conv2d`` with respect to its input, of shape ``input_sizes``."""
    if filter is None:
        filter = filters  # noqa: A001
    attrs = _conv_builder_attrs(strides, padding, data_format, dilations)
    filter, out_backprop = _same_dtype(filter, out_backprop)  # noqa: A001
    sizes = array_ops._as_int_tensor(input_sizes)
    return _apply("Conv2DBackpropInput", [sizes, filter, out_backprop], attrs, name)


def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides, padding,  # noqa: A002
                           use_cudnn_on_gpu=True, data_format="NHWC", dilations=(1, 1, 1, 1),
                           name=None):
    """Gradient of ``conv2d`` with respect to its filter, of shape ``filter_sizes``."""
    attrs = _conv_builder_attrs(strides, padding, data_format, dilations)
    input, out_backprop = _same_dtype(input, out_backprop)  # noqa: A001
    sizes = array_ops._as_int_tensor(filter_sizes)
    return _apply("Conv2DBackpropFilter", [input, sizes, out_backprop], attrs, name)


def _same_dtype(a, b):
    """Two float operands as tensors; a non-tensor takes the other's dtype."""
    if _ops.is_tensor_like(a):
        a = _ops.convert_to_tensor(a)
        return a, _ops.convert_to_tensor(b, dtype=None if _ops.is_tensor_like(b)
                                         else a.dtype.base_dtype)
    b = _ops.convert_to_tensor(b)
    return _ops.convert_to_tensor(a, dtype=b.dtype.base_dtype), b


def conv2d_transpose(value=None, filter=None, output_shape=None, strides=None,  # noqa: A002
                     padding="SAME", data_format="NHWC", name=None, input=None,  # noqa: A002
                     filters=None, dilations=None):
    """The transpose (adjoint) of ``conv2d``: ``filter`` is [h, w, out_channels, in_channels]."""
    value = input if value is None else value
    filter = filters if filter is None else filter  # noqa: A001
    with _ops.name_scope(name, "conv2d_transpose",
                         [v for v in (value, filter) if _ops.is_tensor_like(v)]) as scope:
        return conv2d_backprop_input(output_shape, filter, value, strides=strides,
                                     padding=padding, data_format=data_format,
                                     dilations=dilations or 1, name=scope)


# ==============================================================================================
# Pooling
# ==============================================================================================
def _pool_geometry(op, in_shape):
    fmt = _check_data_format(op.get_attr("data_format"))
    padding = _check_padding(op.get_attr("padding"))
    kh, kw = _check_window_attr(op, "ksize")
    sh, sw = _check_window_attr(op, "strides")
    try:
        n, h, w, c = _nhwc_dims(in_shape, fmt)
    except ValueError:
        raise ValueError(f"input must be rank 4, got shape {in_shape}") from None
    oh = conv_output_size(h, kh, sh, 1, padding)[0]
    ow = conv_output_size(w, kw, sw, 1, padding)[0]
    return _from_nhwc(n, oh, ow, c, fmt)


def _pool_infer(op):
    x = op.inputs[0]
    _check_real(op, x, "input")
    return [(x.dtype.base_dtype, _pool_geometry(op, x.shape))]


def _avg_pool_infer(op):
    x = op.inputs[0]
    _check_float(op, x, "value")
    return [(x.dtype.base_dtype, _pool_geometry(op, x.shape))]


def check_pooled_shapes(out, *named) -> None:
    """Raises the ValueError of a pool's backprop op whose ``(tensor, name)`` inputs, the
    original output or the incoming gradient, do not have the pooling output shape ``out``."""
    for t, nm in named:
        if not out.is_compatible_with(t.shape):
            raise ValueError(f"{nm} shape {t.shape} does not match the pooling output "
                             f"shape {out}")


def _max_pool_grad_infer(op):
    x, y, g = op.inputs
    dt = check_same_dtype(op, ["orig_input", "orig_output", "grad"])
    out = _pool_geometry(op, x.shape)
    check_pooled_shapes(out, (y, "orig_output"), (g, "grad"))
    return [(dt, x.shape)]


def _avg_pool_grad_infer(op):
    sizes, g = op.inputs
    in_shape = constant_value_as_shape(sizes)
    try:
        in_shape = in_shape.with_rank(4)
    except ValueError:
        raise ValueError(f"orig_input_shape must have 4 elements, got {in_shape}") from None
    out = _pool_geometry(op, in_shape)
    check_pooled_shapes(out, (g, "grad"))
    _check_float(op, g, "grad")
    return [(g.dtype.base_dtype, in_shape)]


register_op("MaxPool", _pool_infer, expensive=True)
register_op("AvgPool", _avg_pool_infer, expensive=True)
register_op("MaxPoolGrad", _max_pool_grad_infer, expensive=True)
register_op("AvgPoolGrad", _avg_pool_grad_infer, expensive=True)
NotDifferentiable("MaxPoolGrad")  # TF's MaxPoolGradGrad is not implemented here


def _pool_attr_kwargs(op):
    a = op.attrs
    return {"ksize": a["ksize"], "strides": a["strides"], "padding": a["padding"],
            "data_format": a["data_format"]}


def register_pool_gradients(max_pool: str, avg_pool: str) -> None:
    """Registers the gradients of a max and an average pool op (``MaxPool``/``AvgPool`` or
    their 3-D forms), whose backprops are the ``...Grad`` ops taking the same attrs."""

    @RegisterGradient(max_pool)
    def _max_pool_grad(op, grad):
        return [_apply(max_pool + "Grad", [op.inputs[0], op.outputs[0], grad], op.attrs)]

    @RegisterGradient(avg_pool)
    def _avg_pool_grad(op, grad):
        return [_apply(avg_pool + "Grad", [_shape_of(op.inputs[0]), grad], op.attrs)]

    @RegisterGradient(avg_pool + "Grad")
    def _avg_pool_grad_grad(op, grad):
        # The average pool's backprop is the adjoint of the (linear) pool, so its adjoint is
        # the pool again.
        return [None, _apply(avg_pool, [grad], op.attrs)]


register_pool_gradients("MaxPool", "AvgPool")


def _pool_builder_attrs(ksize, strides, padding, data_format):
    fmt = _check_data_format(data_format or "NHWC")
    return {"ksize": _get_sequence(ksize, "ksize", fmt),
            "strides": _get_sequence(strides, "strides", fmt),
            "padding": _check_padding(padding), "data_format": fmt}


def max_pool(value, ksize, strides, padding, data_format="NHWC", name=None,
             input=None):  # noqa: A002
    """Maximum over each ``ksize`` window of a 4-D tensor."""
    value = input if value is None else value
    return _apply("MaxPool", [value], _pool_builder_attrs(ksize, strides, padding,
                                                          data_format), name)


def avg_pool(value, ksize, strides, padding, data_format="NHWC", name=None,
             input=None):  # noqa: A002
    """Mean over each ``ksize`` window; SAME padding does not count padded cells."""
    value = input if value is None else value
    return _apply("AvgPool", [value], _pool_builder_attrs(ksize, strides, padding,
                                                          data_format), name)


__all__: list[str] = []
