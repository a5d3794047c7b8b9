"""Convolutions and pools beyond ``Conv2D``/``MaxPool``/``AvgPool``: the 3-D ones (``Conv3D``
with ``Conv3DBackpropInputV2``/``Conv3DBackpropFilterV2``, ``MaxPool3D``/``AvgPool3D`` with
their gradients), the depthwise 2-D convolution (``DepthwiseConv2dNative`` and its two
backprops) and TF's generic ``Conv`` (``tf.conv``: extra batch dimensions, EXPLICIT padding,
groups; no gradient, as in TF).

Schemas, gradients and builders side by side (kernels in ``dflab.kernels.conv_nd_kernels``).
The geometry is ``conv_ops.conv_output_size`` per spatial dimension, as in the 2-D ops, so the
static shapes here and the kernels' run-time shapes agree by construction. Every op is
``expensive`` (the executor runs it on its inter-op pool).
"""

from __future__ import annotations

import numbers

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant_value_as_shape
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops
from dflab.ops.conv_ops import (
    _check_float,
    _check_padding,
    _same_dtype,
    _shape_of,
    check_pooled_shapes,
    conv_output_size,
    register_pool_gradients,
)
from dflab.ops.op_util import check_same_dtype

_FORMATS = {4: ("NHWC", "NCHW"), 5: ("NDHWC", "NCDHW")}


def _apply(op_type, inputs, attrs=None, name=None):
    return _ops.apply_op_output(op_type, inputs, attrs, name)


# --- layout helpers (any rank) ----------------------------------------------------------------
def _check_format(fmt, rank):
    if isinstance(fmt, bytes):
        fmt = fmt.decode()
    if fmt not in _FORMATS[rank]:
        raise ValueError(f"data_format must be one of {list(_FORMATS[rank])}, got {fmt!r}")
    return fmt


def _channels_last(fmt) -> bool:
    return fmt.endswith("C")


def split_dims(dims, fmt):
    """(batch, [spatial...], channels) of a full-rank list in ``fmt`` order."""
    if _channels_last(fmt):
        return dims[0], list(dims[1:-1]), dims[-1]
    return dims[0], list(dims[2:]), dims[1]


def join_dims(n, spatial, c, fmt):
    return [n, *spatial, c] if _channels_last(fmt) else [n, c, *spatial]


def _window_attr(op, name, rank):
    """The spatial entries of the rank-long attr ``name`` (batch and channel must be 1)."""
    vals = list(op.get_attr(name))
    fmt = op.get_attr("data_format")
    if len(vals) != rank:
        raise ValueError(f"{name} must have {rank} elements, got {len(vals)}")
    n, spatial, c = split_dims(vals, fmt)
    if n != 1 or c != 1:
        raise ValueError(f"Current implementation does not yet support {name} in the batch "
                         f"and depth dimensions (got {vals} with data_format {fmt})")
    if any(v < 1 for v in vals):
        raise ValueError(f"{name} must be positive, got {vals}")
    return spatial


def _full_rank(shape, rank, what):
    try:
        return shape.with_rank(rank).as_list()
    except ValueError:
        raise ValueError(f"{what} must be rank {rank}, got shape {shape}") from None


def _out_spatial(spatial, ksizes, strides, dilations, padding):
    return [conv_output_size(s, k, st, d, padding)[0]
            for s, k, st, d in zip(spatial, ksizes, strides, dilations)]


def get_sequence(value, name, fmt, rank, default=1):
    """An int or a list of 1, rank - 2 or rank ints -> the full list in ``fmt`` order."""
    if value is None:
        value = default
    if isinstance(value, numbers.Integral):
        value = [value]
    value = [int(v) for v in value]
    nsp = rank - 2
    if len(value) == 1:
        value = value * nsp
    if len(value) == nsp:
        value = join_dims(1, value, 1, fmt)
    if len(value) != rank:
        raise ValueError(f"{name} should be of length 1, {nsp} or {rank} but was {len(value)}")
    return value


# --- convolution geometry ---------------------------------------------------------------------
def _conv_out(op, rank, in_dims, filt_dims, depthwise=False):
    """Static output dims (full rank, ``fmt`` order) of a conv or depthwise conv."""
    fmt = _check_format(op.get_attr("data_format"), rank)
    padding = _check_padding(op.get_attr("padding"))
    strides = _window_attr(op, "strides", rank)
    dilations = _window_attr(op, "dilations", rank)
    n, spatial, c = split_dims(in_dims, fmt)
    ks, ci, co = filt_dims[:-2], filt_dims[-2], filt_dims[-1]
    if c is not None and ci is not None and c != ci:
        raise ValueError(f"Depth of input ({c}) does not match the input depth of the "
                         f"filter ({ci})")
    if depthwise:
        cin = c if c is not None else ci
        co = None if cin is None or co is None else cin * co
    return join_dims(n, _out_spatial(spatial, ks, strides, dilations, padding), co, fmt)


def _forward_infer(op, rank, depthwise=False):
    x, f = op.inputs
    dt = check_same_dtype(op, ["input", "filter"])
    _check_float(op, x)
    in_dims = _full_rank(x.shape, rank, "input")
    filt_dims = _full_rank(f.shape, 4 if depthwise else rank, "filter")
    return [(dt, TensorShape(_conv_out(op, rank, in_dims, filt_dims, depthwise)))]


def _check_out_backprop(out, dy):
    if not TensorShape(out).is_compatible_with(dy.shape):
        raise ValueError(f"out_backprop shape {dy.shape} does not match the convolution's "
                         f"output shape {TensorShape(out)}")


def _backprop_input_infer(op, rank, depthwise=False):
    sizes, f, dy = op.inputs
    dt = f.dtype.base_dtype
    if dy.dtype.base_dtype is not dt:
        raise TypeError(f"filter and out_backprop must have the same dtype, got {dt.name} and "
                        f"{dy.dtype.base_dtype.name}")
    _check_float(op, f, "filter")
    in_dims = _full_rank(constant_value_as_shape(sizes), rank, "input_sizes")
    _full_rank(dy.shape, rank, "out_backprop")
    filt_dims = _full_rank(f.shape, 4 if depthwise else rank, "filter")
    _check_out_backprop(_conv_out(op, rank, in_dims, filt_dims, depthwise), dy)
    return [(dt, TensorShape(in_dims))]


def _backprop_filter_infer(op, rank, depthwise=False):
    x, sizes, dy = op.inputs
    dt = x.dtype.base_dtype
    if dy.dtype.base_dtype is not dt:
        raise TypeError(f"input and out_backprop must have the same dtype, got {dt.name} and "
                        f"{dy.dtype.base_dtype.name}")
    _check_float(op, x)
    in_dims = _full_rank(x.shape, rank, "input")
    filt_dims = _full_rank(constant_value_as_shape(sizes), 4 if depthwise else rank,
                           "filter_sizes")
    _full_rank(dy.shape, rank, "out_backprop")
    _check_out_backprop(_conv_out(op, rank, in_dims, filt_dims, depthwise), dy)
    return [(dt, TensorShape(filt_dims))]


register_op("Conv3D", lambda op: _forward_infer(op, 5), expensive=True)
register_op("Conv3DBackpropInputV2", lambda op: _backprop_input_infer(op, 5), expensive=True)
register_op("Conv3DBackpropFilterV2", lambda op: _backprop_filter_infer(op, 5), expensive=True)
register_op("DepthwiseConv2dNative", lambda op: _forward_infer(op, 4, True), expensive=True)
register_op("DepthwiseConv2dNativeBackpropInput",
            lambda op: _backprop_input_infer(op, 4, True), expensive=True)
register_op("DepthwiseConv2dNativeBackpropFilter",
            lambda op: _backprop_filter_infer(op, 4, True), expensive=True)


def _conv_kwargs(op):
    a = op.attrs
    return {"strides": a["strides"], "padding": a["padding"], "data_format": a["data_format"],
            "dilations": a["dilations"]}


def _register_conv_grads(forward, backprop_input, backprop_filter):
    """The gradients of a convolution family: the two backprops are the forward op's adjoints
    and, being linear in (filter, out_backprop) and (input, out_backprop), each other's."""

    @RegisterGradient(forward)
    def _forward_grad(op, grad):
        x, f = op.inputs
        kw = _conv_kwargs(op)
        return [_apply(backprop_input, [_shape_of(x), f, grad], kw),
                _apply(backprop_filter, [x, _shape_of(f), grad], kw)]

    @RegisterGradient(backprop_input)
    def _backprop_input_grad(op, grad):
        _, f, dy = op.inputs
        kw = _conv_kwargs(op)
        return [None, _apply(backprop_filter, [grad, _shape_of(f), dy], kw),
                _apply(forward, [grad, f], kw)]

    @RegisterGradient(backprop_filter)
    def _backprop_filter_grad(op, grad):
        x, _, dy = op.inputs
        kw = _conv_kwargs(op)
        return [_apply(backprop_input, [_shape_of(x), grad, dy], kw), None,
                _apply(forward, [x, grad], kw)]


_register_conv_grads("Conv3D", "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2")
_register_conv_grads("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
                     "DepthwiseConv2dNativeBackpropFilter")


def _conv_attrs(strides, padding, data_format, dilations, rank):
    fmt = _check_format(data_format or _FORMATS[rank][0], rank)
    if strides is None:
        raise ValueError("strides must be given")
    return {"strides": get_sequence(strides, "strides", fmt, rank),
            "padding": _check_padding(padding), "data_format": fmt,
            "dilations": get_sequence(dilations, "dilations", fmt, rank)}


def _pick(a, b, what):
    if a is not None and b is not None:
        raise ValueError(f"Cannot specify both '{what}' and '{what}s'")
    return a if a is not None else b


def conv3d(input, filter=None, strides=None, padding=None, data_format="NDHWC",  # noqa: A002
           dilations=(1, 1, 1, 1, 1), name=None, filters=None):
    """3-D convolution (cross-correlation) of a 5-D ``input`` with ``filter`` of shape
    [depth, height, width, in_channels, out_channels]."""
    filter = _pick(filter, filters, "filter")  # noqa: A001
    attrs = _conv_attrs(strides, padding, data_format, dilations, 5)
    return _apply("Conv3D", [input, filter], attrs, name)


def conv3d_backprop_input_v2(input_sizes, filter, out_backprop, strides, padding,  # noqa: A002
                             data_format="NDHWC", dilations=(1, 1, 1, 1, 1), name=None):
    """Gradient of ``conv3d`` with respect to its input, of shape ``input_sizes``."""
    attrs = _conv_attrs(strides, padding, data_format, dilations, 5)
    filter, out_backprop = _same_dtype(filter, out_backprop)  # noqa: A001
    sizes = array_ops._as_int_tensor(input_sizes)
    return _apply("Conv3DBackpropInputV2", [sizes, filter, out_backprop], attrs, name)


def conv3d_backprop_filter_v2(input, filter_sizes, out_backprop, strides, padding,  # noqa: A002
                              data_format="NDHWC", dilations=(1, 1, 1, 1, 1), name=None):
    """Gradient of ``conv3d`` with respect to its filter, of shape ``filter_sizes``."""
    attrs = _conv_attrs(strides, padding, data_format, dilations, 5)
    input, out_backprop = _same_dtype(input, out_backprop)  # noqa: A001
    sizes = array_ops._as_int_tensor(filter_sizes)
    return _apply("Conv3DBackpropFilterV2", [input, sizes, out_backprop], attrs, name)


conv3d_backprop_filter = conv3d_backprop_filter_v2  # TF1 names the V2 op both ways


def conv3d_transpose(value, filter=None, output_shape=None, strides=None,  # noqa: A002
                     padding="SAME", data_format="NDHWC", name=None, input=None,  # noqa: A002
                     filters=None, dilations=None):
    """The transpose of ``conv3d``: ``filter`` is [d, h, w, out_channels, in_channels]."""
    value = _pick(value, input, "value") if input is not None else value
    filter = _pick(filter, filters, "filter")  # noqa: A001
    with _ops.name_scope(name, "conv3d_transpose",
                         [v for v in (value, filter) if _ops.is_tensor_like(v)]) as scope:
        return conv3d_backprop_input_v2(output_shape, filter, value, strides, padding,
                                        data_format, dilations or 1, name=scope)


def depthwise_conv2d_native(input, filter, strides, padding, data_format="NHWC",  # noqa: A002
                            dilations=(1, 1, 1, 1), name=None):
    """Depthwise 2-D convolution: ``filter`` [h, w, in_channels, multiplier] convolves each
    input channel on its own, giving ``in_channels * multiplier`` channels."""
    attrs = _conv_attrs(strides, padding, data_format, dilations, 4)
    return _apply("DepthwiseConv2dNative", [input, filter], attrs, name)


def depthwise_conv2d_native_backprop_input(input_sizes, filter, out_backprop,  # noqa: A002
                                           strides, padding, data_format="NHWC",
                                           dilations=(1, 1, 1, 1), name=None):
    """Gradient of ``depthwise_conv2d_native`` with respect to its input."""
    attrs = _conv_attrs(strides, padding, data_format, dilations, 4)
    filter, out_backprop = _same_dtype(filter, out_backprop)  # noqa: A001
    sizes = array_ops._as_int_tensor(input_sizes)
    return _apply("DepthwiseConv2dNativeBackpropInput", [sizes, filter, out_backprop], attrs,
                  name)


def depthwise_conv2d_native_backprop_filter(input, filter_sizes, out_backprop,  # noqa: A002
                                            strides, padding, data_format="NHWC",
                                            dilations=(1, 1, 1, 1), name=None):
    """Gradient of ``depthwise_conv2d_native`` with respect to its filter."""
    attrs = _conv_attrs(strides, padding, data_format, dilations, 4)
    input, out_backprop = _same_dtype(input, out_backprop)  # noqa: A001
    sizes = array_ops._as_int_tensor(filter_sizes)
    return _apply("DepthwiseConv2dNativeBackpropFilter", [input, sizes, out_backprop], attrs,
                  name)


# --- 3-D pooling ------------------------------------------------------------------------------
def _pool_out(op, in_dims):
    fmt = _check_format(op.get_attr("data_format"), 5)
    padding = _check_padding(op.get_attr("padding"))
    ks = _window_attr(op, "ksize", 5)
    st = _window_attr(op, "strides", 5)
    n, spatial, c = split_dims(in_dims, fmt)
    return TensorShape(join_dims(n, _out_spatial(spatial, ks, st, [1] * 3, padding), c, fmt))


def _pool3d_infer(op):
    x = op.inputs[0]
    _check_float(op, x)
    if op.type == "MaxPool3D" and x.dtype.base_dtype not in (_dt.float16, _dt.float32):
        # TF registers MaxPool3D for half and float only (AvgPool3D also takes double).
        raise TypeError(f"Value passed to parameter 'input' has DataType "
                        f"{x.dtype.base_dtype.name} not in list of allowed values: float16, "
                        "bfloat16, float32")
    return [(x.dtype.base_dtype, _pool_out(op, _full_rank(x.shape, 5, "input")))]


def _max_pool3d_grad_infer(op):
    x, y, g = op.inputs
    dt = g.dtype.base_dtype
    if x.dtype.base_dtype is not y.dtype.base_dtype:
        raise TypeError("orig_input and orig_output must have the same dtype")
    out = _pool_out(op, _full_rank(x.shape, 5, "orig_input"))
    check_pooled_shapes(out, (y, "orig_output"), (g, "grad"))
    return [(dt, x.shape)]


def _avg_pool3d_grad_infer(op):
    sizes, g = op.inputs
    in_dims = _full_rank(constant_value_as_shape(sizes), 5, "orig_input_shape")
    out = _pool_out(op, in_dims)
    check_pooled_shapes(out, (g, "grad"))
    _check_float(op, g, "grad")
    return [(g.dtype.base_dtype, TensorShape(in_dims))]


register_op("MaxPool3D", _pool3d_infer, expensive=True)
register_op("AvgPool3D", _pool3d_infer, expensive=True)
register_op("MaxPool3DGrad", _max_pool3d_grad_infer, expensive=True)
register_op("AvgPool3DGrad", _avg_pool3d_grad_infer, expensive=True)
NotDifferentiable("MaxPool3DGrad")  # TF's MaxPool3DGradGrad is not implemented here


register_pool_gradients("MaxPool3D", "AvgPool3D")


def _pool3d_attrs(ksize, strides, padding, data_format):
    fmt = _check_format(data_format or "NDHWC", 5)
    return {"ksize": get_sequence(ksize, "ksize", fmt, 5),
            "strides": get_sequence(strides, "strides", fmt, 5),
            "padding": _check_padding(padding), "data_format": fmt}


def max_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None):  # noqa: A002
    """Maximum over each ``ksize`` window of a 5-D tensor."""
    return _apply("MaxPool3D", [input], _pool3d_attrs(ksize, strides, padding, data_format),
                  name)


def avg_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None):  # noqa: A002
    """Mean over each ``ksize`` window of a 5-D tensor; SAME windows count only the cells
    inside the input."""
    return _apply("AvgPool3D", [input], _pool3d_attrs(ksize, strides, padding, data_format),
                  name)


# --- Conv: the generic convolution op behind tf.conv -----------------------------------------
def conv_geometry(in_dims, k, strides, dilations, padding, explicit):
    """Per spatial dimension (output size, pad before, pad after); ``explicit`` holds the
    (before, after) pairs of EXPLICIT padding."""
    if padding != "EXPLICIT":
        return [conv_output_size(n, kk, s, d, padding)
                for n, kk, s, d in zip(in_dims, k, strides, dilations)]
    out = []
    for n, kk, s, d, (lo, hi) in zip(in_dims, k, strides, dilations, explicit):
        if n is None or kk is None:
            out.append((None, lo, hi))
            continue
        size = (n + lo + hi - ((kk - 1) * d + 1)) // s + 1
        if size < 0:
            raise ValueError(f"Computed output size would be negative: {size}")
        out.append((size, lo, hi))
    return out


def generic_conv_layout(op, rank):
    """(spatial dims, extra batch dims, channels-last?, strides, dilations, explicit pads) of
    a ``Conv`` op on an input of ``rank`` dimensions, checked as TF's shape function does."""
    batch_dims = op.get_attr("batch_dims")
    nsp = rank - batch_dims - 1
    if nsp not in (2, 3):
        raise ValueError(f"Input tensor must be rank 4 or 5, excluding extra batch dimensions, "
                         f"but got: {rank - batch_dims + 1}")
    last = op.get_attr("data_format") == "CHANNELS_LAST"
    strides = list(op.get_attr("strides"))
    if len(strides) != nsp + 2:
        raise ValueError(f"Stride attribute should contain {nsp + 2} values, but got: "
                         f"{len(strides)}")
    dilations = list(op.get_attr("dilations")) or [1] * (nsp + 2)
    if len(dilations) != nsp + 2:
        raise ValueError(f"Dilations attribute should contain {nsp + 2} values, but got: "
                         f"{len(dilations)}")
    pads = list(op.get_attr("explicit_paddings"))
    if op.get_attr("padding") == "EXPLICIT":
        if len(pads) != 2 * (nsp + 2):
            raise ValueError(f"explicit_paddings should contain {2 * (nsp + 2)} values, but "
                             f"got: {len(pads)}")
        pairs = [(pads[2 * i], pads[2 * i + 1]) for i in range(nsp + 2)]
        pairs = pairs[1:-1] if last else pairs[2:]
    elif pads:
        raise ValueError("explicit_paddings must be empty unless padding is EXPLICIT")
    else:
        pairs = None

    def spatial(v):
        return v[1:-1] if last else v[2:]

    return nsp, batch_dims, last, spatial(strides), spatial(dilations), pairs


def _generic_conv_infer(op):
    x, f = op.inputs
    dt = check_same_dtype(op, ["input", "filter"])
    _check_float(op, x)
    if x.shape.ndims is None:
        return [(dt, TensorShape(None))]
    dims = x.shape.as_list()
    nsp, bd, last, st, dil, pairs = generic_conv_layout(op, len(dims))
    if op.get_attr("groups") < 1:
        raise ValueError("groups must be positive")
    fdims = _full_rank(f.shape, nsp + 2, "filter")
    lead, rest = dims[:bd], dims[bd:]
    spatial, c = (rest[:-1], rest[-1]) if last else (rest[1:], rest[0])
    groups = op.get_attr("groups")
    if c is not None and fdims[-2] is not None and c != fdims[-2] * groups:
        raise ValueError(f"Depth of input ({c}) is not a multiple of input depth of filter "
                         f"({fdims[-2]})")
    out = [g[0] for g in conv_geometry(spatial, fdims[:-2], st, dil, op.get_attr("padding"),
                                       pairs)]
    co = fdims[-1]
    return [(dt, TensorShape(lead + (out + [co] if last else [co] + out)))]


register_op("Conv", _generic_conv_infer, expensive=True)


def conv(input, filter, strides, padding, explicit_paddings=(),  # noqa: A002
         data_format="CHANNELS_LAST", dilations=(), batch_dims=1, groups=1, name=None):
    """TF's generic convolution op (``Conv``): 2 or 3 spatial dimensions after ``batch_dims``
    batch dimensions, SAME, VALID or EXPLICIT padding. TF gives it no gradient."""
    if isinstance(padding, bytes):
        padding = padding.decode()
    if padding not in ("SAME", "VALID", "EXPLICIT"):
        raise ValueError(f"padding must be 'SAME', 'VALID' or 'EXPLICIT', got {padding!r}")
    if data_format not in ("CHANNELS_LAST", "CHANNELS_FIRST"):
        raise ValueError(f"data_format must be 'CHANNELS_LAST' or 'CHANNELS_FIRST', got "
                         f"{data_format!r}")
    attrs = {"strides": [int(v) for v in strides], "padding": padding,
             "explicit_paddings": [int(v) for v in explicit_paddings],
             "data_format": data_format, "dilations": [int(v) for v in dilations],
             "batch_dims": int(batch_dims), "groups": int(groups)}
    return _apply("Conv", [input, filter], attrs, name)


__all__: list[str] = ["conv"]
