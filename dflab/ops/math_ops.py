"""Math ops: elementwise arithmetic with broadcasting, comparisons, logic, matmul, reductions,
scans, sequences, segment sums, clipping and contractions (``einsum``/``tensordot``).

Each op: schema (shape and dtype rule), gradient and builder side by side; kernels live in
``dflab.kernels.math_kernels``. Binary ops follow TF1's dtype rule (both inputs share one dtype;
Python scalars take the tensor's dtype). Gradients of broadcasting binary ops sum the incoming
gradient over the broadcast axes (``_unbroadcast``), statically when shapes allow it, else with
``BroadcastGradientArgs`` at run time.

Several TF names (``abs``, ``pow``, ``round``, ``range``) shadow Python builtins in this module,
so module code reaches the builtins through ``_py``.
"""

from __future__ import annotations

import builtins as _py
import string as _string

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant, constant_value
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import Dimension, TensorShape, broadcast_shapes
from dflab.ops import array_ops
from dflab.ops.op_util import axis_list, check_same_dtype


# --- dtype classes and shape rules shared by the elementwise ops --------------------------------
def _is_float(dt):
    return dt.is_floating


def _is_float_or_complex(dt):
    return dt.is_floating or dt.is_complex


def _is_numeric(dt):
    return dt.is_numeric


def _is_real(dt):
    return dt.is_floating or dt.is_integer


def _is_bool(dt):
    return dt is _dt.bool


def _is_any(dt):
    return True


def _is_addable(dt):
    return dt.is_numeric or dt is _dt.string


def _is_pow(dt):
    return dt.is_floating or dt.is_complex or dt in (_dt.int32, _dt.int64)


_KIND_NAMES = {
    _is_float: "floating point", _is_float_or_complex: "floating point or complex",
    _is_numeric: "numeric", _is_real: "real (integer or floating point)", _is_bool: "bool",
    _is_any: "any", _is_addable: "numeric or string", _is_pow: "float, complex, int32, int64",
}


def _check_dtype(op, dt, allowed):
    if not allowed(dt):
        raise TypeError(f"Value passed to '{op.type}' has DataType {dt.name} not in the list of "
                        f"allowed types ({_KIND_NAMES[allowed]})")


def _register_unary(op_type, allowed, out_dtype=None):
    def infer(op):
        t = op.inputs[0]
        dt = t.dtype.base_dtype
        _check_dtype(op, dt, allowed)
        return [(out_dtype(dt) if out_dtype else dt, t.shape)]

    register_op(op_type, infer)


def _register_binary(op_type, allowed, out_dtype=None):
    def infer(op):
        dt = check_same_dtype(op, ["x", "y"])
        _check_dtype(op, dt, allowed)
        shape = broadcast_shapes(op.inputs[0].shape, op.inputs[1].shape)
        return [(out_dtype or dt, shape)]

    register_op(op_type, infer)


def _binary(op_type, x, y, name):
    return _ops.apply_op(op_type, [x, y], None, name).outputs[0]


def _unary(op_type, x, name):
    return _ops.apply_op(op_type, [x], None, name).outputs[0]


def _pair(x, y):
    """Both as tensors; a non-tensor takes the other's dtype (so ``truediv(x, 2)`` works)."""
    if _ops.is_tensor_like(x):
        x = _ops.convert_to_tensor(x)
        y = _ops.convert_to_tensor(y, dtype=x.dtype.base_dtype) if not _ops.is_tensor_like(
            y) else _ops.convert_to_tensor(y)
    elif _ops.is_tensor_like(y):
        y = _ops.convert_to_tensor(y)
        x = _ops.convert_to_tensor(x, dtype=y.dtype.base_dtype)
    else:
        x = _ops.convert_to_tensor(x)
        y = _ops.convert_to_tensor(y, dtype=x.dtype.base_dtype)
    if x.dtype.base_dtype is not y.dtype.base_dtype:
        raise TypeError(f"x and y must have the same dtype, got {x.dtype.base_dtype.name} != "
                        f"{y.dtype.base_dtype.name}")
    return x, y


def _scalar_like(value, t):
    return constant(value, dtype=t.dtype.base_dtype)


# --- broadcasting gradient support --------------------------------------------------------------
def _bga_infer(op):
    return [(_dt.int32, TensorShape([None])), (_dt.int32, TensorShape([None]))]


register_op("BroadcastGradientArgs", _bga_infer)
NotDifferentiable("BroadcastGradientArgs")


def _static_reduction_axes(from_shape, to_shape):
    """(leading, inner) axes to sum so a gradient of ``from_shape`` becomes ``to_shape``.

    None when the static shapes cannot tell (an unknown dim of ``to_shape`` may or may not have
    been broadcast). Summing over an axis that turns out to have size 1 is harmless, so a known
    1 in ``to_shape`` is always summed over.
    """
    f, t = from_shape.as_tuple(), to_shape.as_tuple()
    if f is None or t is None or len(f) < len(t):
        return None
    lead = len(f) - len(t)
    inner = []
    for i, d in enumerate(t):
        fd = f[lead + i]
        if d == 1:
            if fd != 1:
                inner.append(lead + i)
        elif d is None and fd != 1:
            return None
    return list(_py.range(lead)), inner


def _unbroadcast(grad, x):
    """Sum ``grad`` over the axes along which ``x`` was broadcast; result has x's shape."""
    if grad is None:
        return None
    axes = _static_reduction_axes(grad.shape, x.shape)
    if axes is not None:
        lead, inner = axes
        if inner:
            grad = reduce_sum(grad, inner, keepdims=True)
        if lead:
            grad = reduce_sum(grad, lead)
        return grad
    rx, _ = _ops.apply_op("BroadcastGradientArgs",
                          [array_ops.shape(x), array_ops.shape(grad)]).outputs
    return array_ops.reshape(reduce_sum(grad, rx), array_ops.shape(x))


def _mask(cond, like):
    """``cond`` (bool) as 0/1 in ``like``'s dtype, for selecting gradients by multiplication."""
    return cast(cond, like.dtype.base_dtype)


# --- elementwise binary arithmetic --------------------------------------------------------------
_register_binary("AddV2", _is_addable)
_register_binary("Sub", _is_numeric)
_register_binary("Mul", _is_numeric)
_register_binary("RealDiv", _is_float_or_complex)
_register_binary("FloorDiv", _is_real)
_register_binary("FloorMod", _is_real)
_register_binary("Pow", _is_pow)
_register_binary("Maximum", _is_real)
_register_binary("Minimum", _is_real)
_register_binary("SquaredDifference", _is_pow)


def add(x, y, name=None):
    return _binary("AddV2", x, y, name)


def subtract(x, y, name=None):
    return _binary("Sub", x, y, name)


def multiply(x, y, name=None):
    return _binary("Mul", x, y, name)


def realdiv(x, y, name=None):
    """Floating/complex division; integers must go through ``truediv`` (which casts)."""
    return _binary("RealDiv", x, y, name)


# TF's dtype table for ``/``: small ints go to float32, 32/64-bit ints to float64.
_TRUEDIV_DTYPE = {
    _dt.uint8: _dt.float32, _dt.int8: _dt.float32, _dt.uint16: _dt.float32,
    _dt.int16: _dt.float32, _dt.int32: _dt.float64, _dt.int64: _dt.float64,
}


def truediv(x, y, name=None):
    """Python 3 division: integers are cast to floating point first (int32 -> float64 as TF)."""
    x, y = _pair(x, y)
    dt = x.dtype.base_dtype
    if not (dt.is_floating or dt.is_complex or dt in _TRUEDIV_DTYPE):
        raise TypeError(f"Invalid dtype {dt.name} in __truediv__")
    if dt in _TRUEDIV_DTYPE:
        with _ops.name_scope(name, "truediv", [x, y]) as scope:
            return realdiv(cast(x, _TRUEDIV_DTYPE[dt]), cast(y, _TRUEDIV_DTYPE[dt]), name=scope)
    return realdiv(x, y, name=name or "truediv")


def divide(x, y, name=None):
    """``x / y`` (TF1 ``tf.divide``): true division."""
    return truediv(x, y, name=name)


def div(x, y, name=None):
    """TF1 ``tf.div``: Python 2 semantics, floor division for integers, else real division."""
    x, y = _pair(x, y)
    if x.dtype.base_dtype.is_floating or x.dtype.base_dtype.is_complex:
        return realdiv(x, y, name=name)
    return floordiv(x, y, name=name)


def floordiv(x, y, name=None):
    """Division rounded toward negative infinity (``floor(x / y)`` for floats)."""
    return _binary("FloorDiv", x, y, name)


def floormod(x, y, name=None):
    """Remainder of floor division: the result has the sign of ``y`` (Python's ``%``)."""
    return _binary("FloorMod", x, y, name)


mod = floormod


def pow(x, y, name=None):  # noqa: A001 - TF's public name
    return _binary("Pow", x, y, name)


def maximum(x, y, name=None):
    return _binary("Maximum", x, y, name)


def minimum(x, y, name=None):
    return _binary("Minimum", x, y, name)


def squared_difference(x, y, name=None):
    return _binary("SquaredDifference", x, y, name)


@RegisterGradient("AddV2")
def _add_grad(op, grad):
    x, y = op.inputs
    return [_unbroadcast(grad, x), _unbroadcast(grad, y)]


@RegisterGradient("Sub")
def _sub_grad(op, grad):
    x, y = op.inputs
    return [_unbroadcast(grad, x), _unbroadcast(negative(grad), y)]


@RegisterGradient("Mul")
def _mul_grad(op, grad):
    x, y = op.inputs
    return [_unbroadcast(multiply(grad, y), x), _unbroadcast(multiply(x, grad), y)]


@RegisterGradient("RealDiv")
def _realdiv_grad(op, grad):
    x, y = op.inputs
    gx = realdiv(grad, y)
    gy = multiply(grad, realdiv(realdiv(negative(x), y), y))
    return [_unbroadcast(gx, x), _unbroadcast(gy, y)]


NotDifferentiable("FloorDiv")


@RegisterGradient("FloorMod")
def _floormod_grad(op, grad):
    x, y = op.inputs
    gy = multiply(grad, negative(floordiv(x, y)))
    return [_unbroadcast(grad, x), _unbroadcast(gy, y)]


@RegisterGradient("Pow")
def _pow_grad(op, grad):
    x, y = op.inputs
    z = op.outputs[0]
    gx = multiply(grad, multiply(y, pow(x, subtract(y, _scalar_like(1, y)))))
    # d/dy x**y = x**y * log(x), taken as 0 where x <= 0 (TF's convention); log is applied to
    # 1 there so no NaN is multiplied by the zero mask.
    pos = _mask(greater(x, _scalar_like(0, x)), x)
    safe_x = add(multiply(x, pos), subtract(_scalar_like(1, x), pos))
    gy = multiply(grad, multiply(z, multiply(log(safe_x), pos)))
    return [_unbroadcast(gx, x), _unbroadcast(gy, y)]


def _min_max_grad(op, grad, x_wins):
    x, y = op.inputs
    m = _mask(x_wins(x, y), grad)
    gx = multiply(grad, m)
    gy = multiply(grad, subtract(_scalar_like(1, m), m))
    return [_unbroadcast(gx, x), _unbroadcast(gy, y)]


@RegisterGradient("Maximum")
def _maximum_grad(op, grad):
    return _min_max_grad(op, grad, greater_equal)  # ties go to x, as in TF


@RegisterGradient("Minimum")
def _minimum_grad(op, grad):
    return _min_max_grad(op, grad, less_equal)


@RegisterGradient("SquaredDifference")
def _squared_difference_grad(op, grad):
    x, y = op.inputs
    gx = multiply(multiply(_scalar_like(2, grad), grad), subtract(x, y))
    return [_unbroadcast(gx, x), _unbroadcast(negative(gx), y)]


# --- comparisons and logic (not differentiable) --------------------------------------------------
for _t, _allowed in (("Equal", _is_any), ("NotEqual", _is_any), ("Less", _is_real),
                     ("LessEqual", _is_real), ("Greater", _is_real),
                     ("GreaterEqual", _is_real), ("LogicalAnd", _is_bool),
                     ("LogicalOr", _is_bool)):
    _register_binary(_t, _allowed, out_dtype=_dt.bool)
    NotDifferentiable(_t)
_register_unary("LogicalNot", _is_bool)
NotDifferentiable("LogicalNot")


def equal(x, y, name=None):
    return _binary("Equal", x, y, name)


def not_equal(x, y, name=None):
    return _binary("NotEqual", x, y, name)


def less(x, y, name=None):
    return _binary("Less", x, y, name)


def less_equal(x, y, name=None):
    return _binary("LessEqual", x, y, name)


def greater(x, y, name=None):
    return _binary("Greater", x, y, name)


def greater_equal(x, y, name=None):
    return _binary("GreaterEqual", x, y, name)


def logical_and(x, y, name=None):
    return _binary("LogicalAnd", x, y, name)


def logical_or(x, y, name=None):
    return _binary("LogicalOr", x, y, name)


def logical_not(x, name=None):
    return _unary("LogicalNot", x, name)


def logical_xor(x, y, name="LogicalXor"):
    """``(x | y) & ~(x & y)``, built from the primitive ops as TF1 does."""
    with _ops.name_scope(name, "LogicalXor", [x, y]) as scope:
        return logical_and(logical_or(x, y), logical_not(logical_and(x, y)), name=scope)


# --- elementwise unary ---------------------------------------------------------------------------
def _abs_dtype(dt):
    return {_dt.complex64: _dt.float32, _dt.complex128: _dt.float64}.get(dt, dt)


_register_unary("Neg", _is_numeric)
_register_unary("Abs", _is_numeric, out_dtype=_abs_dtype)
_register_unary("Sign", _is_numeric)
_register_unary("Square", _is_numeric)
_register_unary("Reciprocal", _is_numeric)
_register_unary("Round", _is_numeric)
for _t in ("Sqrt", "Rsqrt", "Exp", "Log", "Log1p", "Sin", "Cos", "Tanh", "Sigmoid"):
    _register_unary(_t, _is_float_or_complex)
for _t in ("Floor", "Ceil"):
    _register_unary(_t, _is_float)
for _t in ("IsNan", "IsInf", "IsFinite"):
    _register_unary(_t, _is_float, out_dtype=lambda dt: _dt.bool)
for _t in ("Floor", "Ceil", "Round", "IsNan", "IsInf", "IsFinite"):
    NotDifferentiable(_t)


def negative(x, name=None):
    return _unary("Neg", x, name)


def abs(x, name=None):  # noqa: A001 - TF's public name
    return _unary("Abs", x, name)


def sign(x, name=None):
    return _unary("Sign", x, name)


def square(x, name=None):
    return _unary("Square", x, name)


def sqrt(x, name=None):
    return _unary("Sqrt", x, name)


def rsqrt(x, name=None):
    return _unary("Rsqrt", x, name)


def reciprocal(x, name=None):
    return _unary("Reciprocal", x, name)


def exp(x, name=None):
    return _unary("Exp", x, name)


def log(x, name=None):
    return _unary("Log", x, name)


def log1p(x, name=None):
    return _unary("Log1p", x, name)


def sin(x, name=None):
    return _unary("Sin", x, name)


def cos(x, name=None):
    return _unary("Cos", x, name)


def tanh(x, name=None):
    return _unary("Tanh", x, name)


def sigmoid(x, name=None):
    return _unary("Sigmoid", x, name)


def floor(x, name=None):
    return _unary("Floor", x, name)


def ceil(x, name=None):
    return _unary("Ceil", x, name)


def round(x, name=None):  # noqa: A001 - TF's public name
    """Rounds half to even (banker's rounding), as TF does; integers pass through."""
    return _unary("Round", x, name)


def is_nan(x, name=None):
    return _unary("IsNan", x, name)


def is_inf(x, name=None):
    return _unary("IsInf", x, name)


def is_finite(x, name=None):
    return _unary("IsFinite", x, name)


@RegisterGradient("Neg")
def _neg_grad(op, grad):
    return [negative(grad)]


@RegisterGradient("Abs")
def _abs_grad(op, grad):
    return [multiply(grad, sign(op.inputs[0]))]


@RegisterGradient("Sign")
def _sign_grad(op, grad):
    return [array_ops.zeros_like(op.inputs[0])]


@RegisterGradient("Square")
def _square_grad(op, grad):
    x = op.inputs[0]
    return [multiply(grad, multiply(x, _scalar_like(2, x)))]


@RegisterGradient("Sqrt")
def _sqrt_grad(op, grad):
    y = op.outputs[0]
    return [realdiv(multiply(grad, _scalar_like(0.5, y)), y)]


@RegisterGradient("Rsqrt")
def _rsqrt_grad(op, grad):
    y = op.outputs[0]
    return [multiply(multiply(_scalar_like(-0.5, y), multiply(grad, y)), multiply(y, y))]


@RegisterGradient("Reciprocal")
def _reciprocal_grad(op, grad):
    y = op.outputs[0]
    return [multiply(multiply(negative(grad), y), y)]


@RegisterGradient("Exp")
def _exp_grad(op, grad):
    return [multiply(grad, op.outputs[0])]


@RegisterGradient("Log")
def _log_grad(op, grad):
    return [multiply(grad, reciprocal(op.inputs[0]))]


@RegisterGradient("Log1p")
def _log1p_grad(op, grad):
    x = op.inputs[0]
    return [multiply(grad, reciprocal(add(_scalar_like(1, x), x)))]


@RegisterGradient("Sin")
def _sin_grad(op, grad):
    return [multiply(grad, cos(op.inputs[0]))]


@RegisterGradient("Cos")
def _cos_grad(op, grad):
    return [multiply(negative(grad), sin(op.inputs[0]))]


@RegisterGradient("Tanh")
def _tanh_grad(op, grad):
    y = op.outputs[0]
    return [multiply(grad, subtract(_scalar_like(1, y), multiply(y, y)))]


@RegisterGradient("Sigmoid")
def _sigmoid_grad(op, grad):
    y = op.outputs[0]
    return [multiply(grad, multiply(y, subtract(_scalar_like(1, y), y)))]


# --- AddN -----------------------------------------------------------------------------------------
def _addn_infer(op):
    dt = check_same_dtype(op)
    _check_dtype(op, dt, _is_numeric)
    shape = TensorShape(None)
    for t in op.inputs:
        shape = shape.merge_with(t.shape)
    return [(dt, shape)]


register_op("AddN", _addn_infer)


@RegisterGradient("AddN")
def _addn_grad(op, grad):
    return [grad] * len(op.inputs)


def add_n(inputs, name=None):
    """Sum of a list of tensors of one shape and dtype (no broadcasting)."""
    if isinstance(inputs, _ops.Tensor) or not isinstance(inputs, (list, tuple)):
        raise ValueError("inputs must be a list of at least one Tensor with the same dtype and "
                         "shape")
    inputs = list(inputs)
    if not inputs:
        raise ValueError("inputs must be a non-empty list of tensors")
    if len(inputs) == 1:
        return array_ops.identity(inputs[0], name=name)
    return _ops.apply_op("AddN", inputs, {"N": len(inputs)}, name).outputs[0]


# --- Cast -----------------------------------------------------------------------------------------
def _cast_infer(op):
    return [(op._attrs["DstT"], op.inputs[0].shape)]


register_op("Cast", _cast_infer)


@RegisterGradient("Cast")
def _cast_grad(op, grad):
    src = op.inputs[0].dtype.base_dtype
    if src.is_floating or src.is_complex:
        if not (op._attrs["DstT"].is_floating or op._attrs["DstT"].is_complex):
            return [None]
        return [cast(grad, src)]
    return [None]


def cast(x, dtype, name=None):
    x = _ops.convert_to_tensor(x)
    dtype = _dt.as_dtype(dtype).base_dtype
    if x.dtype.base_dtype is dtype:
        return x
    return _ops.apply_op("Cast", [x], {"DstT": dtype, "SrcT": x.dtype.base_dtype},
                         name).outputs[0]


def to_float(x, name="ToFloat"):
    return cast(x, _dt.float32, name)


def to_double(x, name="ToDouble"):
    return cast(x, _dt.float64, name)


def to_int32(x, name="ToInt32"):
    return cast(x, _dt.int32, name)


def to_int64(x, name="ToInt64"):
    return cast(x, _dt.int64, name)


# --- MatMul ---------------------------------------------------------------------------------------
def _matmul_infer(op):
    dt = check_same_dtype(op, ["a", "b"])
    _check_dtype(op, dt, _is_numeric)
    a, b = op.inputs
    ta, tb = op._attrs["transpose_a"], op._attrs["transpose_b"]
    sa, sb = a.shape.with_rank(2), b.shape.with_rank(2)
    m, k1 = (sa[1], sa[0]) if ta else (sa[0], sa[1])
    k2, n = (sb[1], sb[0]) if tb else (sb[0], sb[1])
    if not k1.is_compatible_with(k2):
        raise ValueError(f"Dimensions must be equal, but are {k1} and {k2}")
    return [(dt, TensorShape([m.value, n.value]))]


register_op("MatMul", _matmul_infer, expensive=True)


@RegisterGradient("MatMul")
def _matmul_grad(op, grad):
    a, b = op.inputs
    ta, tb = op._attrs["transpose_a"], op._attrs["transpose_b"]
    if not ta and not tb:
        return [matmul(grad, b, transpose_b=True), matmul(a, grad, transpose_a=True)]
    if not ta and tb:
        return [matmul(grad, b), matmul(grad, a, transpose_a=True)]
    if ta and not tb:
        return [matmul(b, grad, transpose_b=True), matmul(a, grad)]
    return [matmul(b, grad, transpose_a=True, transpose_b=True),
            matmul(grad, a, transpose_a=True, transpose_b=True)]


def _batch_matmul_infer(op):
    dt = check_same_dtype(op, ["x", "y"])
    _check_dtype(op, dt, _is_numeric)
    a, b = op.inputs
    if a.shape.ndims is None or b.shape.ndims is None:
        return [(dt, TensorShape(None))]
    sa, sb = a.shape.as_list(), b.shape.as_list()
    if len(sa) < 2 or len(sb) < 2:
        raise ValueError("batched matmul needs tensors of rank >= 2")
    adj_a, adj_b = op._attrs["adj_x"], op._attrs["adj_y"]
    m, k1 = (sa[-1], sa[-2]) if adj_a else (sa[-2], sa[-1])
    k2, n = (sb[-1], sb[-2]) if adj_b else (sb[-2], sb[-1])
    if k1 is not None and k2 is not None and k1 != k2:
        raise ValueError(f"Dimensions must be equal, but are {k1} and {k2}")
    batch = broadcast_shapes(TensorShape(sa[:-2]), TensorShape(sb[:-2]))
    return [(dt, batch.concatenate([m, n]))]


register_op("BatchMatMulV2", _batch_matmul_infer, expensive=True)


@RegisterGradient("BatchMatMulV2")
def _batch_matmul_grad(op, grad):
    a, b = op.inputs
    adj_a, adj_b = op._attrs["adj_x"], op._attrs["adj_y"]
    if not adj_a and not adj_b:
        ga, gb = matmul(grad, b, adjoint_b=True), matmul(a, grad, adjoint_a=True)
    elif not adj_a and adj_b:
        ga, gb = matmul(grad, b), matmul(grad, a, adjoint_a=True)
    elif adj_a and not adj_b:
        ga, gb = matmul(b, grad, adjoint_b=True), matmul(a, grad)
    else:
        ga = matmul(b, grad, adjoint_a=True, adjoint_b=True)
        gb = matmul(grad, a, adjoint_a=True, adjoint_b=True)
    # Only the batch dims can have been broadcast, so the generic helper is right here.
    return [_unbroadcast(ga, a), _unbroadcast(gb, b)]


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False,
           a_is_sparse=False, b_is_sparse=False, name=None):
    """``a @ b`` over the last two dims; rank-2 inputs give ``MatMul``, others a batched op."""
    if transpose_a and adjoint_a:
        raise ValueError("Only one of transpose_a and adjoint_a can be True.")
    if transpose_b and adjoint_b:
        raise ValueError("Only one of transpose_b and adjoint_b can be True.")
    a, b = _pair(a, b)
    ta, tb = transpose_a or adjoint_a, transpose_b or adjoint_b
    ra, rb = a.shape.ndims, b.shape.ndims
    if ra == 2 and rb == 2:
        return _ops.apply_op("MatMul", [a, b], {"transpose_a": bool(ta), "transpose_b": bool(tb)},
                             name).outputs[0]
    return _ops.apply_op("BatchMatMulV2", [a, b], {"adj_x": bool(ta), "adj_y": bool(tb)},
                         name).outputs[0]


# --- reductions -----------------------------------------------------------------------------------
def _reduction_infer(op):
    x, axes = op.inputs
    keep = op._attrs["keep_dims"]
    dt = x.dtype.base_dtype
    _check_dtype(op, dt, _is_bool if op.type in ("Any", "All") else _is_numeric)
    if axes.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"reduction axes must be int32 or int64, got {axes.dtype.name}")
    if axes.shape.ndims not in (None, 0, 1):
        raise ValueError(f"reduction axes must be a scalar or vector, got shape {axes.shape}")
    rank = x.shape.ndims
    av = constant_value(axes)
    if rank is None:
        return [(dt, TensorShape(None))]
    if av is None:
        return [(dt, TensorShape([None] * rank if keep else None))]
    ax = axis_list(av, rank)
    dims = x.shape.as_list()
    if keep:
        out = [1 if i in ax else d for i, d in enumerate(dims)]
    else:
        out = [d for i, d in enumerate(dims) if i not in ax]
    return [(dt, TensorShape(out))]


for _t in ("Sum", "Mean", "Max", "Min", "Prod", "Any", "All"):
    register_op(_t, _reduction_infer)
NotDifferentiable("Any")
NotDifferentiable("All")


def _keepdims_arg(keepdims, keep_dims):
    if keepdims is not None and keep_dims is not None:
        raise ValueError("Cannot specify both 'keepdims' and 'keep_dims'")
    return bool(keep_dims if keep_dims is not None else keepdims)


def _axis_arg(axis, reduction_indices):
    if axis is not None and reduction_indices is not None:
        raise ValueError("Cannot specify both 'axis' and 'reduction_indices'")
    return reduction_indices if axis is None else axis


def _axis_tensor(x, axis):
    """The reduction axes of ``x`` as an int tensor (all axes when ``axis`` is None)."""
    if isinstance(axis, _ops.Tensor):
        return axis
    if axis is None:
        if x.shape.ndims is not None:
            return constant(np.arange(x.shape.ndims, dtype=np.int32))
        # unknown rank: all axes, computed at run time
        return _ops.apply_op("Range", [0, array_ops.rank(x), 1], {"Tidx": _dt.int32}).outputs[0]
    if isinstance(axis, (list, tuple)) and any(isinstance(a, _ops.Tensor) for a in axis):
        return array_ops.stack_ints(axis)
    arr = np.asarray(axis)
    if arr.dtype.kind not in "iu" and arr.size:
        raise TypeError(f"reduction axis must be an integer or a list of integers, got {axis!r}")
    return constant(arr.astype(np.int32))


def _reduce(op_type, input_tensor, axis, keepdims, name, keep_dims=None, reduction_indices=None):
    x = _ops.convert_to_tensor(input_tensor)
    axis = _axis_arg(axis, reduction_indices)
    keep = _keepdims_arg(keepdims, keep_dims)
    return _ops.apply_op(op_type, [x, _axis_tensor(x, axis)], {"keep_dims": keep},
                         name).outputs[0]


def reduce_sum(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    return _reduce("Sum", input_tensor, axis, keepdims, name, keep_dims, reduction_indices)


def reduce_mean(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                keep_dims=None):
    """Mean over ``axis``; integer means truncate toward zero, as in TF."""
    return _reduce("Mean", input_tensor, axis, keepdims, name, keep_dims, reduction_indices)


def reduce_max(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    return _reduce("Max", input_tensor, axis, keepdims, name, keep_dims, reduction_indices)


def reduce_min(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    return _reduce("Min", input_tensor, axis, keepdims, name, keep_dims, reduction_indices)


def reduce_prod(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                keep_dims=None):
    return _reduce("Prod", input_tensor, axis, keepdims, name, keep_dims, reduction_indices)


def reduce_any(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    return _reduce("Any", input_tensor, axis, keepdims, name, keep_dims, reduction_indices)


def reduce_all(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    return _reduce("All", input_tensor, axis, keepdims, name, keep_dims, reduction_indices)


def reduce_logsumexp(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                     keep_dims=None):
    """``log(sum(exp(x)))`` computed stably by subtracting the (non-differentiated) max.

    A non-finite max is clamped into the finite range (TF replaces it by 0); both give the
    same result: the subtracted value is added back, and an infinite input dominates anyway.
    """
    keep = _keepdims_arg(keepdims, keep_dims)
    axis = _axis_arg(axis, reduction_indices)
    with _ops.name_scope(name, "ReduceLogSumExp", [input_tensor]) as scope:
        x = _ops.convert_to_tensor(input_tensor)
        raw_max = reduce_max(x, axis, keepdims=True)
        lo, hi = _scalar_like(x.dtype.min, x), _scalar_like(x.dtype.max, x)
        my_max = array_ops.stop_gradient(minimum(maximum(raw_max, lo), hi))
        result = log(reduce_sum(exp(subtract(x, my_max)), axis, keepdims=keep))
        if not keep:
            my_max = array_ops.reshape(my_max, array_ops.shape(result))
        return add(result, my_max, name=scope)


def count_nonzero(input_tensor, axis=None, keepdims=None, dtype=_dt.int64, name=None,
                  reduction_indices=None, keep_dims=None):
    keep = _keepdims_arg(keepdims, keep_dims)
    axis = _axis_arg(axis, reduction_indices)
    with _ops.name_scope(name, "count_nonzero", [input_tensor]):
        x = _ops.convert_to_tensor(input_tensor)
        zero = constant(np.zeros((), dtype=x.dtype._np), dtype=x.dtype.base_dtype)
        nonzero = cast(not_equal(x, zero), _dt.int64)
        return cast(reduce_sum(nonzero, axis, keepdims=keep), dtype)


def _reduced_shape_keepdims(op):
    """The input's shape with reduced axes set to 1 (list or tensor)."""
    x, axes = op.inputs
    av = constant_value(axes)
    if x.shape.is_fully_defined() and av is not None:
        ax = axis_list(av, x.shape.ndims)
        return [1 if i in ax else d for i, d in enumerate(x.shape.as_list())]
    return _ops.apply_op("ReducedShape", [array_ops.shape(x), axes]).outputs[0]


def _reduced_shape_infer(op):
    return [(_dt.int32, op.inputs[0].shape)]


register_op("ReducedShape", _reduced_shape_infer)
NotDifferentiable("ReducedShape")


def _keepdims_view(op, t):
    """``t`` (shaped like the op's output) reshaped as if the reduction had kept its dims."""
    if op._attrs["keep_dims"]:
        return t
    return array_ops.reshape(t, _reduced_shape_keepdims(op))


def _broadcast_to_like(grad, x):
    if x.shape.is_fully_defined() and grad.shape.is_fully_defined() and \
            grad.shape.as_list() == x.shape.as_list():
        return grad
    return multiply(grad, array_ops.ones_like(x))


@RegisterGradient("Sum")
def _sum_grad(op, grad):
    return [_broadcast_to_like(_keepdims_view(op, grad), op.inputs[0]), None]


@RegisterGradient("Mean")
def _mean_grad(op, grad):
    x, y = op.inputs[0], op.outputs[0]
    sum_grad = _sum_grad(op, grad)[0]
    n_in, n_out = x.shape.num_elements(), y.shape.num_elements()
    if n_in is not None and n_out is not None:
        factor = _scalar_like(n_in // _py.max(n_out, 1), sum_grad)
    else:
        size_in = reduce_prod(array_ops.shape(x))
        size_out = maximum(reduce_prod(array_ops.shape(y)), 1)
        factor = cast(floordiv(size_in, size_out), sum_grad.dtype)
    return [realdiv(sum_grad, factor), None]


def _min_or_max_grad(op, grad):
    """The gradient goes to the selected entries, split equally among ties (as in TF)."""
    x, axes = op.inputs
    y = _keepdims_view(op, op.outputs[0])
    grad = _keepdims_view(op, grad)
    indicators = cast(equal(y, x), grad.dtype)
    num_selected = reduce_sum(indicators, axes, keepdims=True)
    return [multiply(realdiv(indicators, num_selected), grad), None]


RegisterGradient("Max")(_min_or_max_grad)
RegisterGradient("Min")(_min_or_max_grad)


def _prod_of_others(x, axes):
    """For each entry of ``x``: the product of the other entries of its reduction block.

    Built from exclusive cumulative products, so zeros in ``x`` are handled exactly. Over
    several axes: (product along the first axis without self) times (the same quantity for the
    per-line totals over the remaining axes).
    """
    a, rest = axes[0], axes[1:]
    out = multiply(cumprod(x, a, exclusive=True), cumprod(x, a, exclusive=True, reverse=True))
    if rest:
        out = multiply(out, _prod_of_others(reduce_prod(x, a, keepdims=True), rest))
    return out


@RegisterGradient("Prod")
def _prod_grad(op, grad):
    x, axes = op.inputs
    grad = _broadcast_to_like(_keepdims_view(op, grad), x)
    av = constant_value(axes)
    try:
        ax = axis_list(av, x.shape.ndims) if av is not None else None
    except ValueError:
        ax = None
    if ax is None:  # axes unknown at build time: the simple formula (wrong where x == 0)
        return [realdiv(multiply(grad, _keepdims_view(op, op.outputs[0])), x), None]
    if not ax:
        return [grad, None]
    return [multiply(grad, _prod_of_others(x, ax)), None]


# --- ArgMax / ArgMin ----------------------------------------------------------------------------
def _arg_infer(op):
    x, axis = op.inputs
    _check_dtype(op, x.dtype.base_dtype, _is_real)
    out = op._attrs["output_type"]
    if axis.shape.ndims not in (None, 0):
        raise ValueError(f"dimension must be a scalar, got shape {axis.shape}")
    av = constant_value(axis)
    rank = x.shape.ndims
    if rank is None:
        return [(out, TensorShape(None))]
    if rank == 0:
        raise ValueError(f"{op.type} needs an input of rank >= 1")
    if av is None:
        return [(out, TensorShape([None] * (rank - 1)))]
    a = int(av)
    if not -rank <= a < rank:
        raise ValueError(f"axis {a} is out of range for a tensor of rank {rank}")
    dims = x.shape.as_list()
    del dims[a % rank]
    return [(out, TensorShape(dims))]


for _t in ("ArgMax", "ArgMin"):
    register_op(_t, _arg_infer)
    NotDifferentiable(_t)


def _arg_op(op_type, input, axis, name, dimension, output_type):  # noqa: A002
    if axis is not None and dimension is not None:
        raise ValueError("Cannot specify both 'axis' and 'dimension'")
    axis = dimension if axis is None else axis
    axis = 0 if axis is None else axis
    input = _ops.convert_to_tensor(input)  # noqa: A001
    out = _dt.as_dtype(output_type).base_dtype
    if out not in (_dt.int32, _dt.int64):
        raise TypeError(f"output_type must be int32 or int64, got {out.name}")
    if not isinstance(axis, _ops.Tensor):
        axis = constant(axis, dtype=_dt.int32)
    return _ops.apply_op(op_type, [input, axis], {"output_type": out}, name).outputs[0]


def argmax(input, axis=None, name=None, dimension=None, output_type=_dt.int64):  # noqa: A002
    return _arg_op("ArgMax", input, axis, name, dimension, output_type)


def argmin(input, axis=None, name=None, dimension=None, output_type=_dt.int64):  # noqa: A002
    return _arg_op("ArgMin", input, axis, name, dimension, output_type)


# --- scans ----------------------------------------------------------------------------------------
def _scan_infer(op):
    x, axis = op.inputs
    _check_dtype(op, x.dtype.base_dtype, _is_numeric)
    if axis.shape.ndims not in (None, 0):
        raise ValueError(f"axis must be a scalar, got shape {axis.shape}")
    av, rank = constant_value(axis), x.shape.ndims
    if av is not None and rank is not None:
        a = int(av)
        if not -rank <= a < rank:
            raise ValueError(f"axis {a} is out of range for a tensor of rank {rank}")
    return [(x.dtype.base_dtype, x.shape)]


register_op("Cumsum", _scan_infer)
register_op("Cumprod", _scan_infer)


def _scan(op_type, x, axis, exclusive, reverse, name):
    x = _ops.convert_to_tensor(x)
    if not isinstance(axis, _ops.Tensor):
        axis = constant(axis, dtype=_dt.int32)
    attrs = {"exclusive": bool(exclusive), "reverse": bool(reverse)}
    return _ops.apply_op(op_type, [x, axis], attrs, name).outputs[0]


def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):
    """Running sum along ``axis``; ``exclusive`` leaves out the current entry."""
    return _scan("Cumsum", x, axis, exclusive, reverse, name)


def cumprod(x, axis=0, exclusive=False, reverse=False, name=None):
    """Running product along ``axis``; ``exclusive`` leaves out the current entry."""
    return _scan("Cumprod", x, axis, exclusive, reverse, name)


@RegisterGradient("Cumsum")
def _cumsum_grad(op, grad):
    return [cumsum(grad, op.inputs[1], exclusive=op._attrs["exclusive"],
                   reverse=not op._attrs["reverse"]), None]


@RegisterGradient("Cumprod")
def _cumprod_grad(op, grad):
    # TF's formula: exact wherever x != 0.
    x, axis = op.inputs
    out = cumsum(multiply(op.outputs[0], grad), axis, exclusive=op._attrs["exclusive"],
                 reverse=not op._attrs["reverse"])
    return [realdiv(out, x), None]


# --- sequences: Range and LinSpace ---------------------------------------------------------------
def _scalar_infer_values(op):
    for t in op.inputs:
        if t.shape.ndims not in (None, 0):
            raise ValueError(f"{op.type} needs scalar inputs, got shape {t.shape}")
    return [constant_value(t) for t in op.inputs]


def _range_size(start, limit, delta, dt):
    """Number of elements of ``range(start, limit, delta)``, computed as TF's kernel does."""
    if delta == 0:
        raise ValueError("Requires delta != 0")
    if delta > 0 and start > limit:
        raise ValueError(f"Requires start <= limit when delta > 0: {start}/{limit}")
    if delta < 0 and start < limit:
        raise ValueError(f"Requires start >= limit when delta < 0: {start}/{limit}")
    if dt.is_integer:
        return int((_py.abs(int(limit) - int(start)) + _py.abs(int(delta)) - 1)
                   // _py.abs(int(delta)))
    t = dt._np.type
    return int(np.ceil(np.abs((t(limit) - t(start)) / t(delta))))


def _range_infer(op):
    dt = check_same_dtype(op, ["start", "limit", "delta"])
    if dt not in (_dt.int32, _dt.int64, _dt.float32, _dt.float64):
        raise TypeError(f"Range does not support dtype {dt.name}")
    vals = _scalar_infer_values(op)
    if any(v is None for v in vals):
        return [(dt, TensorShape([None]))]
    return [(dt, TensorShape([_range_size(*(np.asarray(v).reshape(()) for v in vals), dt)]))]


register_op("Range", _range_infer)
NotDifferentiable("Range")

_RANGE_DTYPES = (_dt.int32, _dt.int64, _dt.float32, _dt.float64)


def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001
    """TF's ``range``: ``range(n)`` or ``range(start, limit, delta)``; the dtype is the widest of
    the arguments' (int32 < int64 < float32 < float64) unless ``dtype`` is given."""
    if limit is None:
        start, limit = 0, start
    with _ops.name_scope(name, "Range", [start, limit, delta]) as scope:
        args = [a if _ops.is_tensor_like(a) else _ops.convert_to_tensor(a, dtype=dtype)
                for a in (start, limit, delta)]
        args = [_ops.convert_to_tensor(a) for a in args]
        if dtype is None:
            for a in args:
                if a.dtype.base_dtype not in _RANGE_DTYPES:
                    raise TypeError(f"range does not support dtype {a.dtype.base_dtype.name}")
            inferred = _py.max((a.dtype.base_dtype for a in args), key=_RANGE_DTYPES.index)
        else:
            inferred = _dt.as_dtype(dtype).base_dtype
        args = [cast(a, inferred) for a in args]
        return _ops.apply_op("Range", args, {"Tidx": inferred}, scope).outputs[0]


def _linspace_infer(op):
    start, stop, num = op.inputs
    dt = start.dtype.base_dtype
    if dt not in (_dt.float32, _dt.float64):
        raise TypeError(f"LinSpace needs float32 or float64 start/stop, got {dt.name}")
    if stop.dtype.base_dtype is not dt:
        raise TypeError(f"stop has dtype {stop.dtype.base_dtype.name}, expected {dt.name}")
    if num.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"num must be int32 or int64, got {num.dtype.base_dtype.name}")
    n = _scalar_infer_values(op)[2]
    if n is None:
        return [(dt, TensorShape([None]))]
    if int(n) <= 0:
        raise ValueError(f"Requires num > 0: {int(n)}")
    return [(dt, TensorShape([int(n)]))]


register_op("LinSpace", _linspace_infer)
NotDifferentiable("LinSpace")


def linspace(start, stop, num, name=None):
    """``num`` evenly spaced values from ``start`` to ``stop`` inclusive."""
    start = _ops.convert_to_tensor(start)
    stop = _ops.convert_to_tensor(stop, dtype=start.dtype.base_dtype) \
        if not _ops.is_tensor_like(stop) else stop
    if not _ops.is_tensor_like(num):
        num = constant(num, dtype=_dt.int32)
    return _ops.apply_op("LinSpace", [start, stop, num], None, name).outputs[0]


lin_space = linspace


# --- segment sums -------------------------------------------------------------------------------
def _segment_ids_check(op, data, ids):
    if ids.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"segment_ids must be int32 or int64, got {ids.dtype.base_dtype.name}")
    _check_dtype(op, data.dtype.base_dtype, _is_numeric)
    if data.shape.ndims is None or ids.shape.ndims is None:
        return None
    prefix = data.shape.as_list()[:ids.shape.ndims]
    if len(prefix) < ids.shape.ndims or not TensorShape(prefix).is_compatible_with(ids.shape):
        raise ValueError(f"segment_ids shape {ids.shape} must be a prefix of data shape "
                         f"{data.shape}")
    return data.shape.as_list()[ids.shape.ndims:]


def _unsorted_segment_sum_infer(op):
    data, ids, num = op.inputs
    if num.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"num_segments must be int32 or int64, got {num.dtype.base_dtype.name}")
    rest = _segment_ids_check(op, data, ids)
    n = constant_value(num)
    n = None if n is None else int(n)
    if n is not None and n < 0:
        raise ValueError(f"num_segments must be >= 0, got {n}")
    if rest is None:
        return [(data.dtype.base_dtype, TensorShape(None))]
    return [(data.dtype.base_dtype, TensorShape([n] + rest))]


register_op("UnsortedSegmentSum", _unsorted_segment_sum_infer)


def _gather_drop_negatives(params, ids):
    """``params[ids]`` with rows for negative ids zeroed (those entries were dropped)."""
    gathered = array_ops.gather(params, maximum(ids, _scalar_like(0, ids)))
    keep = cast(greater_equal(ids, _scalar_like(0, ids)), gathered.dtype)
    extra = (gathered.shape.ndims or 0) - (ids.shape.ndims or 0)
    if ids.shape.ndims is None or gathered.shape.ndims is None:
        return gathered  # cannot line the mask up statically; negative ids are rare
    for _ in _py.range(extra):
        keep = array_ops.expand_dims(keep, -1)
    return multiply(gathered, keep)


@RegisterGradient("UnsortedSegmentSum")
def _unsorted_segment_sum_grad(op, grad):
    return [_gather_drop_negatives(grad, op.inputs[1]), None, None]


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    """``out[i] = sum(data[j] for j where segment_ids[j] == i)``; negative ids are dropped."""
    data = _ops.convert_to_tensor(data)
    ids = _ops.convert_to_tensor(segment_ids) if _ops.is_tensor_like(segment_ids) else \
        constant(segment_ids, dtype=_dt.int32)
    if isinstance(num_segments, Dimension):
        num_segments = num_segments.value
    if not _ops.is_tensor_like(num_segments):
        num_segments = constant(int(num_segments), dtype=_dt.int32)
    return _ops.apply_op("UnsortedSegmentSum", [data, ids, num_segments], None,
                         name).outputs[0]


def _segment_sum_infer(op):
    data, ids = op.inputs
    if ids.shape.ndims not in (None, 1):
        raise ValueError(f"segment_ids must be a vector, got shape {ids.shape}")
    rest = _segment_ids_check(op, data, ids)
    if rest is None:
        return [(data.dtype.base_dtype, TensorShape(None))]
    return [(data.dtype.base_dtype, TensorShape([None] + rest))]


register_op("SegmentSum", _segment_sum_infer)


@RegisterGradient("SegmentSum")
def _segment_sum_grad(op, grad):
    return [array_ops.gather(grad, op.inputs[1]), None]


def segment_sum(data, segment_ids, name=None):
    """Sums of rows of ``data`` over sorted ``segment_ids``; the output has max(id)+1 rows."""
    ids = _ops.convert_to_tensor(segment_ids) if _ops.is_tensor_like(segment_ids) else \
        constant(segment_ids, dtype=_dt.int32)
    return _ops.apply_op("SegmentSum", [data, ids], None, name).outputs[0]


# --- clipping -------------------------------------------------------------------------------------
def _indexed_slices_type():
    from dflab.ops.gradients import IndexedSlices  # gradients imports this module

    return IndexedSlices


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    """Elementwise clamp into [min, max]; the gradient passes where ``t`` is not clipped."""
    slices = _indexed_slices_type()
    with _ops.name_scope(name, "clip_by_value", [t, clip_value_min, clip_value_max]) as scope:
        values = _ops.convert_to_tensor(t.values if isinstance(t, slices) else t)
        t_min = minimum(values, clip_value_max)
        values.shape.merge_with(t_min.shape)  # clipping must not broadcast t
        t_max = maximum(t_min, clip_value_min, name=scope)
        values.shape.merge_with(t_max.shape)
    if isinstance(t, slices):
        return slices(t_max, t.indices, t.dense_shape)
    return t_max


def global_norm(t_list, name=None):
    """``sqrt(sum(||t||^2 for t in t_list))``; None entries are skipped."""
    if not isinstance(t_list, (list, tuple)):
        raise TypeError("t_list should be a sequence")
    slices = _indexed_slices_type()
    values = [None if t is None else _ops.convert_to_tensor(t.values if isinstance(t, slices)
                                                             else t) for t in t_list]
    with _ops.name_scope(name, "global_norm", [v for v in values if v is not None]) as scope:
        squares = []
        for v in values:
            if v is not None:
                with _ops.colocate_with(v):
                    squares.append(reduce_sum(square(v)))
        if not squares:
            raise ValueError("global_norm needs at least one tensor that is not None")
        total = reduce_sum(array_ops.stack(squares))
        return sqrt(total, name=scope)


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """Scale every tensor by ``clip_norm / max(global_norm, clip_norm)``.

    Returns ``(list_clipped, global_norm)``; None entries stay None and ``IndexedSlices`` stay
    sparse. A non-finite norm makes every clipped value NaN, as in TF.
    """
    if not isinstance(t_list, (list, tuple)):
        raise TypeError("t_list should be a sequence")
    t_list = list(t_list)
    if use_norm is None:
        use_norm = global_norm(t_list, name)
    slices = _indexed_slices_type()
    with _ops.name_scope(name, "clip_by_global_norm", [use_norm]) as scope:
        one = _scalar_like(1.0, use_norm)
        clip = _ops.convert_to_tensor(clip_norm, dtype=use_norm.dtype.base_dtype)
        scale = multiply(clip, minimum(realdiv(one, use_norm), realdiv(one, clip)))
        scale = add(scale, subtract(use_norm, use_norm))  # NaN unless the norm is finite
        clipped = []
        for i, t in enumerate(t_list):
            if t is None:
                clipped.append(None)
                continue
            v = _ops.convert_to_tensor(t.values if isinstance(t, slices) else t)
            with _ops.colocate_with(v):
                c = array_ops.identity(multiply(v, scale), name=f"{scope[:-1]}_{i}")
            clipped.append(slices(c, t.indices, t.dense_shape) if isinstance(t, slices) else c)
    return clipped, use_norm


# --- contractions: einsum and tensordot ---------------------------------------------------------
def _parse_einsum(equation, ranks):
    """Explicit subscripts for an equation: ('ij', 'jk'), 'ik'. Ellipses need known ranks
    and are spelled out with fresh upper-case letters, right-aligned as NumPy broadcasts them."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(ranks):
        raise ValueError(f"einsum equation {equation!r} names {len(ins)} inputs, got "
                         f"{len(ranks)}")
    used = set(eq) - set(".,->")
    for c in used:
        if c not in _string.ascii_letters:
            raise ValueError(f"invalid character {c!r} in einsum equation {equation!r}")
    n_ell = 0
    if "..." in eq:
        for s, r in zip(ins, ranks):
            if "..." in s:
                if r is None:
                    raise ValueError("einsum with '...' needs inputs of known rank")
                n_ell = _py.max(n_ell, r - (len(s) - 3))
    fresh = [c for c in _string.ascii_uppercase if c not in used][:n_ell]
    ell = "".join(fresh)

    def expand(s, r):
        if "..." not in s:
            return s
        k = r - (len(s) - 3)
        return s.replace("...", ell[n_ell - k:] if k else "")

    ins = [expand(s, r) for s, r in zip(ins, ranks)]
    if arrow:
        out = out.replace("...", ell)
    else:  # implicit output: broadcast dims, then the letters seen once, sorted
        counts = {}
        for s in ins:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    for s, r in zip(ins, ranks):
        if r is not None and len(s) != r:
            raise ValueError(f"einsum subscripts {s!r} do not match an input of rank {r}")
    for c in out:
        if not any(c in s for s in ins):
            raise ValueError(f"einsum output letter {c!r} appears in no input")
    if len(set(out)) != len(out):
        raise ValueError(f"einsum output subscripts {out!r} repeat a letter")
    return ins, out


def _einsum_infer(op):
    dt = check_same_dtype(op)
    _check_dtype(op, dt, _is_numeric)
    ins, out = _parse_einsum(op._attrs["equation"], [t.shape.ndims for t in op.inputs])
    sizes = {}
    for s, t in zip(ins, op.inputs):
        if t.shape.ndims is None:
            continue
        for c, d in zip(s, t.shape.as_list()):
            prev = sizes.get(c)
            if d is None or d == 1:
                sizes.setdefault(c, d)
            elif prev is None or prev == 1:
                sizes[c] = d
            elif prev != d:
                raise ValueError(f"einsum dimension {c!r} has sizes {prev} and {d}")
    if any(t.shape.ndims is None for t in op.inputs):
        return [(dt, TensorShape(None))]
    return [(dt, TensorShape([sizes.get(c) for c in out]))]


register_op("Einsum", _einsum_infer, expensive=True)


@RegisterGradient("Einsum")
def _einsum_grad(op, grad):
    ins, out = _parse_einsum(op._attrs["equation"], [t.shape.ndims for t in op.inputs])
    used = set("".join(ins) + out)
    fresh = iter(c for c in _string.ascii_letters if c not in used)
    grads = []
    for i, (s, x) in enumerate(zip(ins, op.inputs)):
        if len(set(s)) != len(s):
            raise ValueError(f"einsum gradient for repeated subscripts {s!r} is not supported")
        # A dim of size 1 in x may have been broadcast against the other inputs: give it its
        # own letter so the gradient sums over the broadcast (a no-op if it was not).
        dims = x.shape.as_tuple()
        sx = s if dims is None else "".join(next(fresh) if d == 1 else c
                                            for c, d in zip(s, dims))
        subs = [out] + [ins[j] for j in _py.range(len(ins)) if j != i]
        operands = [grad] + [op.inputs[j] for j in _py.range(len(ins)) if j != i]
        # Letters of x seen nowhere else were summed away, and dims of x may have been
        # broadcast against size-1 dims of other inputs: both make the gradient a broadcast,
        # which a ones operand shaped like x provides.
        if any(c not in "".join(subs) for c in sx) or _size_one_elsewhere(sx, subs[1:],
                                                                         operands[1:]):
            subs.append(sx)
            operands.append(array_ops.ones_like(x))
        grads.append(einsum(",".join(subs) + "->" + sx, *operands))
    return grads


def _size_one_elsewhere(sx, subs, tensors):
    for sub, t in zip(subs, tensors):
        dims = t.shape.as_tuple()
        for k, c in enumerate(sub):
            if c in sx and (dims is None or dims[k] in (1, None)):
                return True
    return False


def einsum(equation, *inputs, **kwargs):
    """Einstein summation (``np.einsum`` subscripts, ``...`` allowed when ranks are known)."""
    name = kwargs.pop("name", None)
    if kwargs:
        raise TypeError(f"Unknown keyword arguments for einsum: {sorted(kwargs)}")
    if not inputs:
        raise ValueError("einsum needs at least one input")
    tensors = [_ops.convert_to_tensor(t) for t in inputs if _ops.is_tensor_like(t)]
    dt = tensors[0].dtype.base_dtype if tensors else None
    inputs = [_ops.convert_to_tensor(t, dtype=dt) for t in inputs]
    ins, out = _parse_einsum(equation, [t.shape.ndims for t in inputs])
    explicit = ",".join(ins) + "->" + out
    return _ops.apply_op("Einsum", inputs, {"equation": explicit, "N": len(inputs)},
                         name).outputs[0]


def tensordot(a, b, axes, name=None):
    """Contract ``axes`` of ``a`` with ``axes`` of ``b`` (an int N: a's last N with b's first
    N; or a pair of axis lists). Built as an ``Einsum``; needs inputs of known rank."""
    a, b = _pair(a, b)
    ra, rb = a.shape.ndims, b.shape.ndims
    if ra is None or rb is None:
        raise ValueError("tensordot needs inputs of known rank")
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > ra or n > rb:
            raise ValueError(f"'axes' must be in [0, min(rank)], got {n}")
        ax_a, ax_b = list(_py.range(ra - n, ra)), list(_py.range(n))
    else:
        if len(axes) != 2:
            raise ValueError("'axes' must be an int or a pair of axis lists")
        ax_a, ax_b = ([int(v) for v in np.ravel(x)] for x in axes)
        if len(ax_a) != len(ax_b):
            raise ValueError(f"Different number of contraction axes: {ax_a} vs {ax_b}")
        ax_a = [axis_list(v, ra)[0] for v in ax_a]
        ax_b = [axis_list(v, rb)[0] for v in ax_b]
    letters = iter(_string.ascii_letters)
    sa = [next(letters) for _ in _py.range(ra)]
    sb = [next(letters) for _ in _py.range(rb)]
    for i, j in zip(ax_a, ax_b):
        sb[j] = sa[i]
    out = [c for k, c in enumerate(sa) if k not in ax_a] + \
        [c for k, c in enumerate(sb) if k not in ax_b]
    eq = "".join(sa) + "," + "".join(sb) + "->" + "".join(out)
    return einsum(eq, a, b, name=name or "Tensordot")


# --- Tensor operator overloads (TF1: == and != stay identity comparisons) -----------------------
def _overload(dunder, builder_name, op_name, reverse=False):
    def binary(a, b):
        fn = globals()[builder_name]
        if reverse:
            b = _ops.convert_to_tensor(b, dtype=a.dtype.base_dtype)
            return fn(b, a, name=op_name)
        return fn(a, b, name=op_name)

    binary.__name__ = dunder
    _ops.Tensor._override_operator(dunder, binary)


def _install_operators():
    # (dunder stem, builder, op name TF1 gives the result)
    table = [
        ("add", "add", "add"), ("sub", "subtract", "sub"), ("mul", "multiply", "mul"),
        ("truediv", "truediv", "truediv"), ("floordiv", "floordiv", "floordiv"),
        ("mod", "floormod", "mod"), ("pow", "pow", "pow"), ("matmul", "matmul", "matmul"),
        ("and", "logical_and", "and"), ("or", "logical_or", "or"),
        ("xor", "logical_xor", "xor"), ("div", "div", "div"),
    ]
    for stem, builder, op_name in table:
        _overload(f"__{stem}__", builder, op_name)
        _overload(f"__r{stem}__", builder, op_name, reverse=True)
    for stem, builder in {"lt": "less", "le": "less_equal", "gt": "greater",
                          "ge": "greater_equal"}.items():
        _overload(f"__{stem}__", builder, None)
    _ops.Tensor._override_operator("__neg__", lambda a: negative(a))
    _ops.Tensor._override_operator("__abs__", lambda a: globals()["abs"](a))
    _ops.Tensor._override_operator("__invert__", lambda a: globals()["logical_not"](a))
    _ops.Tensor._override_operator(
        "__getitem__", lambda a, key: array_ops._slice_helper(a, key))


__all__ = [
    "add", "subtract", "multiply", "negative", "add_n", "cast", "to_float", "to_double",
    "to_int32", "to_int64", "matmul", "realdiv", "truediv", "divide", "div", "floordiv",
    "floormod", "mod", "pow", "maximum", "minimum", "squared_difference", "equal", "not_equal",
    "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_not",
    "logical_xor", "abs", "sign", "square", "sqrt", "rsqrt", "reciprocal", "exp", "log",
    "log1p", "sin", "cos", "tanh", "sigmoid", "floor", "ceil", "round", "is_nan", "is_inf",
    "is_finite", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod",
    "reduce_any", "reduce_all", "reduce_logsumexp", "count_nonzero", "argmax", "argmin",
    "cumsum", "cumprod", "range", "linspace", "lin_space", "unsorted_segment_sum",
    "segment_sum", "clip_by_value", "clip_by_global_norm", "global_norm", "einsum", "tensordot",
]
