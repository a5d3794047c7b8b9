"""Bit-level and truncating integer arithmetic: the ``tf.bitwise`` module (``bitwise_and``,
``bitwise_or``, ``bitwise_xor``, ``invert``, ``left_shift``, ``right_shift``),
``truncatediv``/``truncatemod`` (C's rounding toward zero), the raw ``floor_div`` op and
``bitcast``.

Schemas and builders side by side; kernels in ``dflab.kernels.bitwise_kernels``. As in TF,
the bitwise ops and ``Bitcast`` are not differentiable, ``TruncateDiv``'s gradient is None
for both inputs and ``TruncateMod`` has none.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape, broadcast_shapes
from dflab.ops.math_ops import _binary, _is_real, _pair, _register_binary
from dflab.ops.op_util import check_same_dtype


def _check_integer(op, dt):
    if not dt.is_integer:
        raise TypeError(f"Value passed to '{op.type}' has DataType {dt.name} not in the list of "
                        f"allowed types (integer)")


def _integer_binary_infer(op):
    dt = check_same_dtype(op, ["x", "y"])
    _check_integer(op, dt)
    return [(dt, broadcast_shapes(op.inputs[0].shape, op.inputs[1].shape))]


for _t in ("BitwiseAnd", "BitwiseOr", "BitwiseXor", "LeftShift", "RightShift"):
    register_op(_t, _integer_binary_infer)
    NotDifferentiable(_t)
_register_binary("TruncateDiv", _is_real)
_register_binary("TruncateMod", _is_real)
# TF's TruncateDiv has a gradient of None for both inputs; TruncateMod has none registered,
# so differentiating through it is an error (LookupError), as in TF.
NotDifferentiable("TruncateDiv")


def _invert_infer(op):
    x = op.inputs[0]
    _check_integer(op, x.dtype.base_dtype)
    return [(x.dtype.base_dtype, x.shape)]


register_op("Invert", _invert_infer)
NotDifferentiable("Invert")


def _bits(op_type, x, y, name):
    x, y = _pair(x, y)
    return _binary(op_type, x, y, name)


def bitwise_and(x, y, name=None):
    """Elementwise ``x & y`` of integers."""
    return _bits("BitwiseAnd", x, y, name)


def bitwise_or(x, y, name=None):
    """Elementwise ``x | y`` of integers."""
    return _bits("BitwiseOr", x, y, name)


def bitwise_xor(x, y, name=None):
    """Elementwise ``x ^ y`` of integers."""
    return _bits("BitwiseXor", x, y, name)


def left_shift(x, y, name=None):
    """Elementwise ``x << y``; shifts outside ``[0, bits)`` are clamped into it (TF's)."""
    return _bits("LeftShift", x, y, name)


def right_shift(x, y, name=None):
    """Elementwise ``x >> y`` (arithmetic for signed types); shifts clamped as in
    ``left_shift``."""
    return _bits("RightShift", x, y, name)


def invert(x, name=None):
    """Elementwise ``~x`` of integers."""
    return _ops.apply_op_output("Invert", [_ops.convert_to_tensor(x)], None, name)


def truncatediv(x, y, name=None):
    """Division rounded toward zero (C's integer division); integer division by zero is an
    error."""
    return _bits("TruncateDiv", x, y, name)


def truncatemod(x, y, name=None):
    """Remainder of division rounded toward zero: the sign of ``x`` (C's ``fmod``)."""
    return _bits("TruncateMod", x, y, name)


def floor_div(x, y, name=None):
    """The ``FloorDiv`` op itself (``floordiv`` without its name scope)."""
    return _bits("FloorDiv", x, y, name)


def _bitcast_infer(op):
    x = op.inputs[0]
    src, dst = x.dtype.base_dtype, op.get_attr("type")
    shape = x.shape
    if src.size == dst.size or shape.ndims is None:
        return [(dst, shape if src.size == dst.size else TensorShape(None))]
    dims = shape.as_list()
    if src.size > dst.size:
        return [(dst, TensorShape(dims + [src.size // dst.size]))]
    if not dims or dims[-1] not in (None, dst.size // src.size):
        raise ValueError(f"Cannot bitcast from {src.name} to {dst.name}: the last dimension "
                         f"of shape {shape} must be {dst.size // src.size}")
    return [(dst, TensorShape(dims[:-1]))]


register_op("Bitcast", _bitcast_infer)
NotDifferentiable("Bitcast")


def bitcast(input, type, name=None):  # noqa: A002 - TF's argument names
    """The bytes of ``input`` read as ``type``: a wider type takes the last dimension's
    entries together, a narrower one adds a last dimension."""
    x = _ops.convert_to_tensor(input)
    dst = _dt.as_dtype(type).base_dtype
    return _ops.apply_op("Bitcast", [x], {"type": dst}, name).outputs[0]


__all__ = ["truncatediv", "truncatemod", "floor_div", "bitcast"]
# Only in tf.bitwise (dflab.namespaces makes it): bitwise_and, bitwise_or, bitwise_xor, invert,
# left_shift, right_shift.
