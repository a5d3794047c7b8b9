"""Window ops that pick one cell per window: ``MaxPoolWithArgmax`` (max pooling that also
returns where each maximum was) and the grayscale morphology ops ``Dilation2D`` (with
``Dilation2DBackpropInput``/``Dilation2DBackpropFilter``) behind ``tf.nn.dilation2d`` and
``tf.nn.erosion2d``.

Schemas, gradients and builders side by side (kernels in ``dflab.kernels.conv_nd_kernels``);
NHWC only, as TF's kernels. Geometry from ``conv_ops.conv_output_size``.
"""

from __future__ import annotations

import collections

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import manip_ops, math_ops
from dflab.ops.conv_nd_ops import get_sequence
from dflab.ops.conv_ops import _check_padding, _check_real, conv_output_size
from dflab.ops.op_util import check_same_dtype


def _nhwc_attr(op, name):
    vals = list(op.get_attr(name))
    if len(vals) != 4:
        raise ValueError(f"{name} must have 4 elements, got {len(vals)}")
    if vals[0] != 1 or vals[3] != 1:
        raise ValueError(f"Current implementation does not yet support {name} in the batch "
                         f"and depth dimensions (got {vals})")
    if any(v < 1 for v in vals):
        raise ValueError(f"{name} must be positive, got {vals}")
    return vals[1], vals[2]


def _rank4(shape, what):
    try:
        return shape.with_rank(4).as_list()
    except ValueError:
        raise ValueError(f"{what} must be rank 4, got shape {shape}") from None


# --- MaxPoolWithArgmax ------------------------------------------------------------------------
def _argmax_pool_shape(op, in_shape):
    n, h, w, c = _rank4(in_shape, "input")
    kh, kw = _nhwc_attr(op, "ksize")
    sh, sw = _nhwc_attr(op, "strides")
    padding = _check_padding(op.get_attr("padding"))
    oh = conv_output_size(h, kh, sh, 1, padding)[0]
    ow = conv_output_size(w, kw, sw, 1, padding)[0]
    return TensorShape([n, oh, ow, c])


def _max_pool_with_argmax_infer(op):
    x = op.inputs[0]
    _check_real(op, x, "input")
    out = _argmax_pool_shape(op, x.shape)
    targmax = _dt.as_dtype(op.get_attr("Targmax"))
    if targmax not in (_dt.int32, _dt.int64):
        raise TypeError(f"Targmax must be int32 or int64, got {targmax.name}")
    return [(x.dtype.base_dtype, out), (targmax, out)]


def _max_pool_grad_with_argmax_infer(op):
    x, g, argmax = op.inputs
    if g.dtype.base_dtype is not x.dtype.base_dtype:
        raise TypeError(f"Input 'grad' of '{op.type}' Op has type {g.dtype.base_dtype.name} "
                        f"that does not match type {x.dtype.base_dtype.name} of argument "
                        "'input'")
    dt = g.dtype.base_dtype
    out = _argmax_pool_shape(op, x.shape)
    for t, nm in ((g, "grad"), (argmax, "argmax")):
        if not out.is_compatible_with(t.shape):
            raise ValueError(f"{nm} shape {t.shape} does not match the pooling output "
                             f"shape {out}")
    return [(dt, x.shape)]


register_op("MaxPoolWithArgmax", _max_pool_with_argmax_infer, expensive=True)
register_op("MaxPoolGradWithArgmax", _max_pool_grad_with_argmax_infer, expensive=True)


def _argmax_attrs(op):
    a = op.attrs
    return {"ksize": a["ksize"], "strides": a["strides"], "padding": a["padding"],
            "include_batch_in_index": a["include_batch_in_index"]}


@RegisterGradient("MaxPoolWithArgmax")
def _max_pool_with_argmax_grad(op, grad, unused_argmax_grad):
    return [_ops.apply_op_output("MaxPoolGradWithArgmax",
                                 [op.inputs[0], grad, op.outputs[1]], _argmax_attrs(op))]


# TF's result type: a named tuple (``.output``, ``.argmax``).
MaxPoolWithArgmaxOutput = collections.namedtuple("MaxPoolWithArgmax", ["output", "argmax"])


def max_pool_with_argmax(input, ksize, strides, padding, data_format="NHWC",  # noqa: A002
                         Targmax=None, name=None, output_dtype=None,  # noqa: N803
                         include_batch_in_index=False):
    """Max pooling that also returns each maximum's flattened index
    ``((b * height + y) * width + x) * channels + c`` (``b`` only with
    ``include_batch_in_index``); the first maximum of a window wins."""
    if data_format != "NHWC":
        raise ValueError("`data_format` values other than 'NHWC' are not supported. "
                         f"Received: data_format={data_format}")
    if Targmax is not None and output_dtype is not None and Targmax != output_dtype:
        raise ValueError("Cannot specify both 'Targmax' and 'output_dtype'")
    targmax = _dt.as_dtype(Targmax or output_dtype or _dt.int64)
    for arg, value in (("ksize", ksize), ("strides", strides)):
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"Expected list for '{arg}' argument to 'max_pool_with_argmax' "
                            f"Op, not {value!r}.")
    attrs = {"ksize": get_sequence(ksize, "ksize", "NHWC", 4),
             "strides": get_sequence(strides, "strides", "NHWC", 4),
             "padding": _check_padding(padding), "Targmax": targmax,
             "include_batch_in_index": bool(include_batch_in_index)}
    op = _ops.apply_op("MaxPoolWithArgmax", [input], attrs, name)
    return MaxPoolWithArgmaxOutput(op.outputs[0], op.outputs[1])


# --- Dilation2D -------------------------------------------------------------------------------
def _dilation_shape(op, in_shape, f_shape):
    n, h, w, c = _rank4(in_shape, "input")
    try:
        fh, fw, fc = f_shape.with_rank(3).as_list()
    except ValueError:
        raise ValueError(f"filter must be rank 3, got shape {f_shape}") from None
    if c is not None and fc is not None and c != fc:
        raise ValueError(f"Dimensions must be equal, but are {c} and {fc} for input depth "
                         f"and filter depth of '{op.type}'")
    sh, sw = _nhwc_attr(op, "strides")
    rh, rw = _nhwc_attr(op, "rates")
    padding = _check_padding(op.get_attr("padding"))
    oh = conv_output_size(h, fh, sh, rh, padding)[0]
    ow = conv_output_size(w, fw, sw, rw, padding)[0]
    return TensorShape([n, oh, ow, c])


def _dilation_infer(op):
    x, f = op.inputs
    dt = check_same_dtype(op, ["input", "filter"])
    _check_real(op, x, "input")
    return [(dt, _dilation_shape(op, x.shape, f.shape))]


def _dilation_backprop_infer(op, which):
    x, f, dy = op.inputs
    dt = check_same_dtype(op, ["input", "filter", "out_backprop"])
    out = _dilation_shape(op, x.shape, f.shape)
    if not out.is_compatible_with(dy.shape):
        raise ValueError(f"out_backprop shape {dy.shape} does not match the output shape "
                         f"{out}")
    return [(dt, op.inputs[which].shape)]


register_op("Dilation2D", _dilation_infer, expensive=True)
register_op("Dilation2DBackpropInput", lambda op: _dilation_backprop_infer(op, 0),
            expensive=True)
register_op("Dilation2DBackpropFilter", lambda op: _dilation_backprop_infer(op, 1),
            expensive=True)
NotDifferentiable("Dilation2DBackpropInput")
NotDifferentiable("Dilation2DBackpropFilter")


@RegisterGradient("Dilation2D")
def _dilation2d_grad(op, grad):
    x, f = op.inputs
    a = {k: op.attrs[k] for k in ("strides", "rates", "padding")}
    return [_ops.apply_op_output("Dilation2DBackpropInput", [x, f, grad], a),
            _ops.apply_op_output("Dilation2DBackpropFilter", [x, f, grad], a)]


def dilation2d(input=None, filter=None, strides=None, rates=None,  # noqa: A002
               padding=None, name=None, filters=None, dilations=None):
    """Grayscale dilation of a 4-D NHWC ``input`` by the 3-D structuring function ``filter``
    [h, w, channels]: the maximum over each window of ``input + filter``."""
    filter = filters if filter is None else filter  # noqa: A001
    rates = dilations if rates is None else rates
    attrs = {"strides": get_sequence(strides, "strides", "NHWC", 4),
             "rates": get_sequence(rates, "rates", "NHWC", 4),
             "padding": _check_padding(padding)}
    return _ops.apply_op_output("Dilation2D", [input, filter], attrs, name)


def erosion2d(value, kernel, strides, rates, padding, name=None):
    """Grayscale erosion: the minimum over each window of ``value - kernel``, i.e.
    ``-dilation2d(-value, reversed kernel)``."""
    with _ops.name_scope(name, "erosion2d", [t for t in (value, kernel)
                                             if _ops.is_tensor_like(t)]) as scope:
        flipped = manip_ops.reverse(kernel, [0, 1])
        d = dilation2d(math_ops.negative(value), flipped, strides, rates, padding,
                       name="dilation2d")
        return math_ops.negative(d, name=scope)


__all__: list[str] = []
