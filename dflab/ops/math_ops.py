"""Math ops: elementwise arithmetic with broadcasting, comparisons, logic, casts and matmul,
plus the ``Tensor`` operator overloads; the rest of the math family is re-exported, so that
every math op is reachable from here (``math_ops.reduce_sum``, ``import *``).

Each op: schema (shape and dtype rule), gradient and builder side by side; kernels live in
``dflab.kernels.math_kernels``. Binary ops follow TF1's dtype rule (both inputs share one dtype;
Python scalars take the tensor's dtype). Gradients of broadcasting binary ops sum the incoming
gradient over the broadcast axes (``_unbroadcast``), statically when shapes allow it, else with
``BroadcastGradientArgs`` at run time.

The rest of the family, by concern: ``reduction_ops`` (AddN, reductions, ArgMax/ArgMin, scans,
segment sums), ``sequence_ops`` (Range, LinSpace), ``clip_ops`` (clipping, global norm) and
``linalg_ops`` (einsum, tensordot). They import the helpers and ops defined here, so this module
imports them only at its end, once everything they need is defined; ``_unbroadcast`` calls
``reduce_sum`` through that re-export at run time. Other modules import math ops from here,
never from those modules: one imported before this module would be a circular import.

Several TF names (``abs``, ``pow``, ``round``, ``range``) shadow Python builtins in this module,
so module code reaches the builtins through ``_py``.
"""

from __future__ import annotations

import builtins as _py

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import builder_constant
from dflab.framework.eager_tensor import EagerTensor
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor import override_operator
from dflab.framework.tensor_shape import TensorShape, broadcast_shapes
from dflab.ops import array_ops
from dflab.ops.op_util import check_same_dtype, skipped_inputs


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


# Builders of attribute-free ops go straight to the entry points (no frame of their own).
_binary = _ops.apply_binary
_unary = _ops.apply_unary


def _pair(x, y):
    """Both as tensors; a non-tensor takes the other's dtype (so ``truediv(x, 2)`` works)."""
    if isinstance(x, _ops.Tensor) and isinstance(y, _ops.Tensor) and x.dtype is y.dtype:
        return x, y  # nothing to convert or check: every eager matmul comes this way
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
    return builder_constant(value, dtype=t.dtype.base_dtype)


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


def _pairwise_reduction_axes(x_shape, other_shape):
    """(leading, inner) axes to sum a gradient of ``x op other`` over so that it becomes x's,
    from the two inputs' static shapes (TF's ``_InferGradientReductionAxes``): an axis of the
    broadcast shape is summed for x where x's dim is 1 and the other's is not (an unknown
    other dim may turn out 1, and summing a size-1 axis changes nothing) and never where the
    other's dim is 1; where neither is 1 and either is unknown the shapes cannot tell (None).
    The axes x lacks (leading) are always summed, so the sum has x's rank: a dense layer's
    ``x @ w + b`` (batch unknown) sums b's gradient over the batch and passes x's on as it is,
    with no shape arithmetic at run time."""
    xs, ys = x_shape.as_tuple(), other_shape.as_tuple()
    if xs is None or ys is None:
        return None
    n = max(len(xs), len(ys))
    px, py = (1,) * (n - len(xs)) + xs, (1,) * (n - len(ys)) + ys
    inner = []
    for i in _py.range(n):
        if px[i] == 1 and py[i] != 1:
            inner.append(i)
        elif py[i] == 1:  # the other was broadcast here, or neither
            continue
        elif px[i] is None or py[i] is None:
            return None
    lead = n - len(xs)
    return list(_py.range(lead)), [i for i in inner if i >= lead]


def _unbroadcast(grad, x, other=None):
    """Sum ``grad`` over the axes along which ``x`` was broadcast; result has x's shape.
    ``other``: the binary op's other input, whose static shape can tell where the gradient's
    alone cannot (see ``_pairwise_reduction_axes``)."""
    if grad is None:
        return None
    axes = None
    if other is not None:
        axes = _pairwise_reduction_axes(x.shape, other.shape)
    if axes is None:
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
    # TF names the op after the builder's old op type ("Add") though it builds an AddV2.
    return _binary("AddV2", x, y, name or "Add")


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
        return realdiv(x, y, name=name or "div")
    return floordiv(x, y, name=name or "div")


def floordiv(x, y, name=None):
    """Division rounded toward negative infinity (``floor(x / y)`` for floats)."""
    return _binary("FloorDiv", x, y, name or "floordiv")


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
    return [_unbroadcast(grad, x, y), _unbroadcast(grad, y, x)]


@RegisterGradient("Sub")
def _sub_grad(op, grad):
    x, y = op.inputs
    return [_unbroadcast(grad, x, y), _unbroadcast(negative(grad), y, x)]


def _conj_if_complex(t):
    """``conj(t)`` for a complex ``t`` (TF's gradients of complex products use the conjugate),
    ``t`` itself otherwise."""
    if not t.dtype.base_dtype.is_complex:
        return t
    return _ops.apply_op("Conj", [t], None, None).outputs[0]


@RegisterGradient("Mul")
def _mul_grad(op, grad):
    x, y = (_conj_if_complex(t) for t in op.inputs)
    a, b = op.inputs
    return [_unbroadcast(multiply(grad, y), a, b), _unbroadcast(multiply(x, grad), b, a)]


@RegisterGradient("RealDiv")
def _realdiv_grad(op, grad):
    x, y = (_conj_if_complex(t) for t in op.inputs)
    gx = realdiv(grad, y)
    gy = multiply(grad, realdiv(realdiv(negative(x), y), y))
    a, b = op.inputs
    return [_unbroadcast(gx, a, b), _unbroadcast(gy, b, a)]


NotDifferentiable("FloorDiv")


@RegisterGradient("FloorMod")
def _floormod_grad(op, grad):
    x, y = op.inputs
    gy = multiply(grad, negative(floordiv(x, y)))
    return [_unbroadcast(grad, x, y), _unbroadcast(gy, y, x)]


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
    return [_unbroadcast(gx, x, y), _unbroadcast(gy, y, x)]


def _min_max_grad(op, grad, x_wins):
    x, y = op.inputs
    m = _mask(x_wins(x, y), grad)
    gx = multiply(grad, m)
    gy = multiply(grad, subtract(_scalar_like(1, m), m))
    return [_unbroadcast(gx, x, y), _unbroadcast(gy, y, x)]


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
    return [_unbroadcast(gx, x, y), _unbroadcast(negative(gx), y, x)]


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
    x = op.inputs[0]
    if x.dtype.base_dtype.is_complex:  # TF's ComplexAbs gradient: grad * x / |x|
        # Complex and DivNoNan are special_math_ops' (which imports this module).
        def as_complex(t):
            zeros = array_ops.zeros_like(t)
            return _ops.apply_op("Complex", [t, zeros], {"Tout": x.dtype.base_dtype}).outputs[0]

        return [_ops.apply_op("DivNoNan", [multiply(as_complex(grad), x),
                                           as_complex(op.outputs[0])]).outputs[0]]
    return [multiply(grad, sign(x))]


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


# The derivatives of Tanh and Sigmoid from their outputs, each one op as in TF (an LSTM cell's
# gradient would otherwise be a dozen small nodes more): TanhGrad(y, dy) = dy * (1 - y * y),
# SigmoidGrad(y, dy) = dy * y * (1 - y), with y conjugated for complex types.
def _output_grad_infer(op):
    y, dy = op.inputs
    if y.dtype.base_dtype is not dy.dtype.base_dtype:
        raise TypeError(f"{op.type}: y and dy must have the same dtype, got "
                        f"{y.dtype.base_dtype.name} and {dy.dtype.base_dtype.name}")
    return [(y.dtype.base_dtype, y.shape.merge_with(dy.shape))]


register_op("TanhGrad", _output_grad_infer)
register_op("SigmoidGrad", _output_grad_infer)


@RegisterGradient("Tanh")
def _tanh_grad(op, grad):
    y = _conj_if_complex(op.outputs[0])
    return [_ops.apply_op("TanhGrad", [y, grad]).outputs[0]]


@RegisterGradient("Sigmoid")
def _sigmoid_grad(op, grad):
    y = _conj_if_complex(op.outputs[0])
    return [_ops.apply_op("SigmoidGrad", [y, grad]).outputs[0]]


@RegisterGradient("TanhGrad")
def _tanh_grad_grad(op, grad):
    y, dy = (_conj_if_complex(t) for t in op.inputs)
    return [multiply(multiply(grad, _scalar_like(-2, y)), multiply(dy, y)),
            _ops.apply_op("TanhGrad", [y, grad]).outputs[0]]


@RegisterGradient("SigmoidGrad")
def _sigmoid_grad_grad(op, grad):
    y, dy = (_conj_if_complex(t) for t in op.inputs)
    g_dy = multiply(grad, dy)
    return [subtract(g_dy, multiply(multiply(_scalar_like(2, y), g_dy), y)),
            _ops.apply_op("SigmoidGrad", [y, grad]).outputs[0]]


# --- Cast -----------------------------------------------------------------------------------------
def _cast_infer(op):
    return [(op.get_attr("DstT"), op.inputs[0].shape)]


register_op("Cast", _cast_infer)


@RegisterGradient("Cast")
def _cast_grad(op, grad):
    src = op.inputs[0].dtype.base_dtype
    if src.is_floating or src.is_complex:
        if not (op.get_attr("DstT").is_floating or op.get_attr("DstT").is_complex):
            return [None]
        return [cast(grad, src)]
    return [None]


def cast(x, dtype, name=None):
    x = _ops.convert_to_tensor(x)
    dtype = _dt.as_dtype(dtype).base_dtype
    if x.dtype.base_dtype is dtype:
        return x
    return _ops.apply_unary("Cast", x, name, _ops.frozen_attrs(DstT=dtype,
                                                               SrcT=x.dtype.base_dtype))


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
    ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    sa, sb = a.shape.with_rank(2), b.shape.with_rank(2)
    m, k1 = (sa[1], sa[0]) if ta else (sa[0], sa[1])
    k2, n = (sb[1], sb[0]) if tb else (sb[0], sb[1])
    if not k1.is_compatible_with(k2):
        raise ValueError(f"Dimensions must be equal, but are {k1} and {k2}")
    return [(dt, TensorShape([m.value, n.value]))]


register_op("MatMul", _matmul_infer, expensive=True)


# Each input's gradient of a product, by (transpose_a, transpose_b): the factors (a, b or the
# output's gradient g) and whether each is transposed (adjoint for a batched product).
_PRODUCT_GRADS = {
    (False, False): (("g", "b", False, True), ("a", "g", True, False)),
    (False, True): (("g", "b", False, False), ("g", "a", True, False)),
    (True, False): (("b", "g", False, True), ("a", "g", False, False)),
    (True, True): (("b", "g", True, True), ("g", "a", True, True)),
}


def _product_grads(op, grad, flags, product) -> list:
    """The gradients of a product ``op`` for the inputs a tape wants (``product(x, y, tx,
    ty)`` multiplies)."""
    a, b = op.inputs
    factors = {"a": a, "b": b, "g": grad}
    skip = skipped_inputs(op)
    return [None if k in skip else product(factors[x], factors[y], tx, ty)
            for k, (x, y, tx, ty) in enumerate(_PRODUCT_GRADS[flags])]


@RegisterGradient("MatMul")
def _matmul_grad(op, grad):
    flags = (op.get_attr("transpose_a"), op.get_attr("transpose_b"))
    return _product_grads(op, grad, flags, lambda x, y, tx, ty: matmul(
        x, y, transpose_a=tx, transpose_b=ty))


def _batch_matmul_infer(op):
    dt = check_same_dtype(op, ["x", "y"])
    _check_dtype(op, dt, _is_numeric)
    a, b = op.inputs
    if a.shape.ndims is None or b.shape.ndims is None:
        return [(dt, TensorShape(None))]
    sa, sb = a.shape.as_list(), b.shape.as_list()
    if len(sa) < 2 or len(sb) < 2:
        raise ValueError("batched matmul needs tensors of rank >= 2")
    adj_a, adj_b = op.get_attr("adj_x"), op.get_attr("adj_y")
    m, k1 = (sa[-1], sa[-2]) if adj_a else (sa[-2], sa[-1])
    k2, n = (sb[-1], sb[-2]) if adj_b else (sb[-2], sb[-1])
    if k1 is not None and k2 is not None and k1 != k2:
        raise ValueError(f"Dimensions must be equal, but are {k1} and {k2}")
    batch = broadcast_shapes(TensorShape(sa[:-2]), TensorShape(sb[:-2]))
    return [(dt, batch.concatenate([m, n]))]


register_op("BatchMatMulV2", _batch_matmul_infer, expensive=True)


@RegisterGradient("BatchMatMulV2")
def _batch_matmul_grad(op, grad):
    flags = (op.get_attr("adj_x"), op.get_attr("adj_y"))
    ga, gb = _product_grads(op, grad, flags, lambda x, y, tx, ty: matmul(
        x, y, adjoint_a=tx, adjoint_b=ty))
    # Only the batch dims can have been broadcast, so the generic helper is right here.
    a, b = op.inputs
    return [None if ga is None else _unbroadcast(ga, a), None if gb is None else
            _unbroadcast(gb, b)]


def _rank(t):
    """A tensor's static rank; an eager one's from its array (no ``TensorShape`` to make)."""
    return t._value.ndim if type(t) is EagerTensor else t.shape.ndims


_MATMUL_ATTRS = {(ta, tb): _ops.FrozenAttrs(transpose_a=ta, transpose_b=tb)
                 for ta in (False, True) for tb in (False, True)}
_MATMUL_PLAIN = _MATMUL_ATTRS[False, False]


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False,
           a_is_sparse=False, b_is_sparse=False, name=None):
    """``a @ b`` over the last two dims; rank-2 inputs give ``MatMul``, others a batched op."""
    if type(b) is not EagerTensor and hasattr(b, "_as_tensor"):  # a variable: read it first
        b = b._as_tensor()
    if type(a) is not EagerTensor and hasattr(a, "_as_tensor"):
        a = a._as_tensor()
    if type(a) is EagerTensor and type(b) is EagerTensor and a.dtype is b.dtype and \
            a._value.ndim == 2 and b._value.ndim == 2 and \
            not (transpose_a or transpose_b or adjoint_a or adjoint_b):
        # The common eager product, first: nothing to convert, and the arrays know their ranks.
        return _ops.apply_binary("MatMul", a, b, name, _MATMUL_PLAIN)
    if transpose_a and adjoint_a:
        raise ValueError("Only one of transpose_a and adjoint_a can be True.")
    if transpose_b and adjoint_b:
        raise ValueError("Only one of transpose_b and adjoint_b can be True.")
    ta, tb = transpose_a or adjoint_a, transpose_b or adjoint_b
    a, b = _pair(a, b)
    if _rank(a) == 2 and _rank(b) == 2:
        return _ops.apply_binary("MatMul", a, b, name, _MATMUL_ATTRS[bool(ta), bool(tb)])
    return _ops.apply_op_output("BatchMatMulV2", [a, b], {"adj_x": bool(ta), "adj_y": bool(tb)},
                                name)


# --- Tensor operator overloads (TF1: == and != stay identity comparisons) -----------------------
def _overload_direct(dunder, op_type, op_name):
    """``a <op> b`` applying ``op_type`` itself, for builders that only apply it (no frame of
    the builder's)."""
    binary = _ops.binary_operator(op_type, op_name)
    binary.__name__ = dunder
    override_operator(dunder, binary)


def _overload(dunder, builder_name, op_name, reverse=False):
    fn = globals()[builder_name]  # every builder is defined before the operators install

    def binary(a, b):
        if reverse:
            b = _ops.convert_to_tensor(b, dtype=a.dtype.base_dtype)
            return fn(b, a, name=op_name)
        return fn(a, b, name=op_name)

    binary.__name__ = dunder
    override_operator(dunder, binary)


def _install_operators():
    # (dunder stem, builder, op name TF1 gives the result)
    table = [
        ("add", "add", "add"), ("sub", "subtract", "sub"), ("mul", "multiply", "mul"),
        ("truediv", "truediv", "truediv"), ("floordiv", "floordiv", "floordiv"),
        ("mod", "floormod", "mod"), ("pow", "pow", "pow"), ("matmul", "matmul", "matmul"),
        ("and", "logical_and", "and"), ("or", "logical_or", "or"),
        ("xor", "logical_xor", "xor"), ("div", "div", "div"),
    ]
    # Builders that only apply one op: the operator skips them.
    direct = {"add": "AddV2", "sub": "Sub", "mul": "Mul", "mod": "FloorMod",
              "and": "LogicalAnd", "or": "LogicalOr"}
    for stem, builder, op_name in table:
        if stem in direct:
            _overload_direct(f"__{stem}__", direct[stem], op_name)
        else:
            _overload(f"__{stem}__", builder, op_name)
        _overload(f"__r{stem}__", builder, op_name, reverse=True)
    for stem, op_type in {"lt": "Less", "le": "LessEqual", "gt": "Greater",
                          "ge": "GreaterEqual"}.items():
        _overload_direct(f"__{stem}__", op_type, None)
    override_operator("__neg__", lambda a: negative(a))
    override_operator("__abs__", lambda a: globals()["abs"](a))
    override_operator("__invert__", lambda a: globals()["logical_not"](a))
    override_operator(
        "__getitem__", lambda a, key: array_ops._slice_helper(a, key))


def scalar_mul(scalar, x, name=None):
    """``scalar * x`` for a scalar ``scalar`` (TF1's helper; keeps ``IndexedSlices`` sparse)."""
    values = getattr(x, "values", None)
    if values is not None and hasattr(x, "indices"):
        return type(x)(multiply(scalar, values, name=name), x.indices, x.dense_shape)
    return multiply(scalar, x, name=name)


def is_tensor(x) -> bool:
    """Whether ``x`` is a graph tensor (or converts to one without a copy: a variable)."""
    return _ops.is_tensor_like(x)


# --- the rest of the family (see the module docstring), imported last: they import this module --
from dflab.ops.clip_ops import (  # noqa: E402
    clip_by_global_norm,
    clip_by_norm,
    clip_by_value,
    global_norm,
)
from dflab.ops.linalg_ops import einsum, tensordot  # noqa: E402
from dflab.ops.reduction_ops import (  # noqa: E402
    add_n,
    arg_max,
    arg_min,
    argmax,
    argmin,
    count_nonzero,
    cumprod,
    cumsum,
    reduce_all,
    reduce_any,
    reduce_logsumexp,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_prod,
    reduce_sum,
    segment_sum,
    unsorted_segment_sum,
)
from dflab.ops.sequence_ops import lin_space, linspace, range  # noqa: E402, A004

__all__ = [
    "add", "subtract", "multiply", "negative", "add_n", "cast", "to_float", "to_double",
    "to_int32", "to_int64", "matmul", "realdiv", "truediv", "divide", "div", "floordiv",
    "floormod", "mod", "pow", "maximum", "minimum", "squared_difference", "equal", "not_equal",
    "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_not",
    "logical_xor", "abs", "sign", "square", "sqrt", "rsqrt", "reciprocal", "exp", "log",
    "log1p", "sin", "cos", "tanh", "sigmoid", "floor", "ceil", "round", "is_nan", "is_inf",
    "is_finite", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod",
    "reduce_any", "reduce_all", "reduce_logsumexp", "count_nonzero", "argmax", "argmin",
    "arg_max", "arg_min",
    "cumsum", "cumprod", "range", "linspace", "lin_space", "unsorted_segment_sum",
    "segment_sum", "clip_by_value", "clip_by_global_norm", "clip_by_norm", "global_norm",
    "einsum", "tensordot", "scalar_mul", "is_tensor",
]
