"""Elementwise math beyond the basics: inverse and hyperbolic trigonometry, the gamma and error
function families, zeta, Bessel functions, complex parts, and the "no NaN" divisions.

Each op: schema (shape and dtype rule), gradient and builder side by side, as in
``math_ops``; kernels in ``dflab.kernels.special_math_kernels`` (the special functions
themselves in ``dflab.kernels.special_functions``). Gradients follow TF's (``math_grad.py``):
the same formulas, the same inputs without a gradient (zeta's and polygamma's first,
betainc's ``a`` and ``b``).
"""

from __future__ import annotations

import math as _pymath

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import broadcast_shapes
from dflab.ops import array_ops
from dflab.ops import math_ops as _m
from dflab.ops.math_ops import _check_dtype, _is_float, _is_float_or_complex, _pair, _unbroadcast


def _is_complex(dt):
    return dt.is_complex


def _float_or_complex_unary(op_type):
    def infer(op):
        t = op.inputs[0]
        _check_dtype(op, t.dtype.base_dtype, _is_float_or_complex)
        return [(t.dtype.base_dtype, t.shape)]

    register_op(op_type, infer)


def _float_unary(op_type):
    def infer(op):
        t = op.inputs[0]
        _check_dtype(op, t.dtype.base_dtype, _is_float)
        return [(t.dtype.base_dtype, t.shape)]

    register_op(op_type, infer)


def _broadcasting(op_type, allowed, n=2):
    def infer(op):
        dt = op.inputs[0].dtype.base_dtype
        for t in op.inputs[1:]:
            if t.dtype.base_dtype is not dt:
                raise TypeError(f"Input of '{op.type}' Op has type {t.dtype.base_dtype.name} "
                                f"that does not match type {dt.name} of its first input")
        _check_dtype(op, dt, allowed)
        shape = op.inputs[0].shape
        for t in op.inputs[1:]:
            shape = broadcast_shapes(shape, t.shape)
        return [(dt, shape)]

    register_op(op_type, infer)


def _unary(op_type, x, name):
    x = _ops.convert_to_tensor(x)
    return _ops.apply_op_output(op_type, [x], None, name)


def _binary(op_type, x, y, name):
    x, y = _pair(x, y)
    return _ops.apply_op_output(op_type, [x, y], None, name)


def _one(t):
    return constant(1, dtype=t.dtype.base_dtype)


def _c(value, t):
    return constant(value, dtype=t.dtype.base_dtype)


# --- trigonometric and hyperbolic ---------------------------------------------------------------
for _t in ("Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Expm1"):
    _float_or_complex_unary(_t)
_float_unary("Rint")
NotDifferentiable("Rint")
_broadcasting("Atan2", _is_float)


def tan(x, name=None):
    return _unary("Tan", x, name)


def asin(x, name=None):
    return _unary("Asin", x, name)


def acos(x, name=None):
    return _unary("Acos", x, name)


def atan(x, name=None):
    return _unary("Atan", x, name)


def atan2(y, x, name=None):
    """The angle of the point (x, y): ``arctan(y / x)`` in the right quadrant."""
    return _binary("Atan2", y, x, name)


def sinh(x, name=None):
    return _unary("Sinh", x, name)


def cosh(x, name=None):
    return _unary("Cosh", x, name)


def asinh(x, name=None):
    return _unary("Asinh", x, name)


def acosh(x, name=None):
    return _unary("Acosh", x, name)


def atanh(x, name=None):
    return _unary("Atanh", x, name)


def expm1(x, name=None):
    """``exp(x) - 1``, accurate for small x."""
    return _unary("Expm1", x, name)


def rint(x, name=None):
    """The nearest integer, halves to even."""
    return _unary("Rint", x, name)


@RegisterGradient("Tan")
def _tan_grad(op, grad):
    c = _m.cos(op.inputs[0])
    return [_m.realdiv(grad, _m.square(c))]


@RegisterGradient("Asin")
def _asin_grad(op, grad):
    x = op.inputs[0]
    return [_m.multiply(grad, _m.rsqrt(_m.subtract(_one(x), _m.square(x))))]


@RegisterGradient("Acos")
def _acos_grad(op, grad):
    x = op.inputs[0]
    return [_m.negative(_m.multiply(grad, _m.rsqrt(_m.subtract(_one(x), _m.square(x)))))]


@RegisterGradient("Atan")
def _atan_grad(op, grad):
    x = op.inputs[0]
    return [_m.multiply(grad, _m.reciprocal(_m.add(_one(x), _m.square(x))))]


@RegisterGradient("Atan2")
def _atan2_grad(op, grad):
    y, x = op.inputs
    inv = _m.realdiv(grad, _m.add(_m.square(x), _m.square(y)))
    return [_unbroadcast(_m.multiply(x, inv), y), _unbroadcast(_m.multiply(_m.negative(y), inv),
                                                               x)]


@RegisterGradient("Sinh")
def _sinh_grad(op, grad):
    return [_m.multiply(grad, cosh(op.inputs[0]))]


@RegisterGradient("Cosh")
def _cosh_grad(op, grad):
    return [_m.multiply(grad, sinh(op.inputs[0]))]


@RegisterGradient("Asinh")
def _asinh_grad(op, grad):
    return [_m.realdiv(grad, cosh(op.outputs[0]))]


@RegisterGradient("Acosh")
def _acosh_grad(op, grad):
    return [_m.realdiv(grad, sinh(op.outputs[0]))]


@RegisterGradient("Atanh")
def _atanh_grad(op, grad):
    x = op.inputs[0]
    return [_m.multiply(grad, _m.reciprocal(_m.subtract(_one(x), _m.square(x))))]


@RegisterGradient("Expm1")
def _expm1_grad(op, grad):
    return [_m.multiply(grad, _m.exp(op.inputs[0]))]


# --- the gamma and error function families ------------------------------------------------------
for _t in ("Erf", "Erfc", "Erfinv", "Ndtri", "Lgamma", "Digamma", "BesselI0", "BesselI0e",
           "BesselI1", "BesselI1e"):
    _float_unary(_t)
for _t in ("Igamma", "Igammac", "Zeta", "Polygamma", "IgammaGradA"):
    _broadcasting(_t, _is_float)
_broadcasting("Betainc", _is_float, 3)
NotDifferentiable("IgammaGradA")


def erf(x, name=None):
    return _unary("Erf", x, name)


def erfc(x, name=None):
    return _unary("Erfc", x, name)


def erfinv(x, name=None):
    return _unary("Erfinv", x, name)


def ndtri(x, name=None):
    """The quantile function of the standard normal distribution."""
    return _unary("Ndtri", x, name)


def erfcinv(x, name=None):
    """The inverse of ``erfc``, as TF builds it: ``-ndtri(x / 2) / sqrt(2)``."""
    with _ops.name_scope(name, "erfcinv", [x]):
        x = _ops.convert_to_tensor(x)
        return _m.multiply(_m.negative(ndtri(_m.multiply(x, _c(0.5, x)))),
                           _c(_pymath.sqrt(0.5), x))


def lgamma(x, name=None):
    """``log(|Gamma(x)|)``."""
    return _unary("Lgamma", x, name)


def digamma(x, name=None):
    return _unary("Digamma", x, name)


def igamma(a, x, name=None):
    """The regularized lower incomplete gamma function P(a, x)."""
    return _binary("Igamma", a, x, name)


def igammac(a, x, name=None):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return _binary("Igammac", a, x, name)


def zeta(x, q, name=None):
    """The Hurwitz zeta function: ``sum_n (q + n) ** -x``."""
    return _binary("Zeta", x, q, name)


def polygamma(a, x, name=None):
    """The ``a``-th derivative of digamma."""
    return _binary("Polygamma", a, x, name)


def betainc(a, b, x, name=None):
    """The regularized incomplete beta function I_x(a, b)."""
    a = _ops.convert_to_tensor(a)
    b = _ops.convert_to_tensor(b, dtype=a.dtype.base_dtype)
    x = _ops.convert_to_tensor(x, dtype=a.dtype.base_dtype)
    return _ops.apply_op("Betainc", [a, b, x], None, name).outputs[0]


def bessel_i0(x, name=None):
    return _unary("BesselI0", x, name)


def bessel_i0e(x, name=None):
    return _unary("BesselI0e", x, name)


def bessel_i1(x, name=None):
    return _unary("BesselI1", x, name)


def bessel_i1e(x, name=None):
    return _unary("BesselI1e", x, name)


def lbeta(x, name=None):
    """``log(|Beta(x)|)`` over the last axis: ``sum(lgamma(x)) - lgamma(sum(x))``."""
    with _ops.name_scope(name, "lbeta", [x]):
        x = _ops.convert_to_tensor(x)
        log_prod_gamma = _m.reduce_sum(lgamma(x), axis=[-1])
        log_gamma_sum = lgamma(_m.reduce_sum(x, axis=[-1]))
        return _m.subtract(log_prod_gamma, log_gamma_sum)


@RegisterGradient("Erf")
def _erf_grad(op, grad):
    x = op.inputs[0]
    two_over_root_pi = _c(2.0 / _pymath.sqrt(_pymath.pi), x)
    return [_m.multiply(grad, _m.multiply(two_over_root_pi, _m.exp(_m.negative(_m.square(x)))))]


@RegisterGradient("Erfc")
def _erfc_grad(op, grad):
    x = op.inputs[0]
    minus = _c(-2.0 / _pymath.sqrt(_pymath.pi), x)
    return [_m.multiply(grad, _m.multiply(minus, _m.exp(_m.negative(_m.square(x)))))]


@RegisterGradient("Erfinv")
def _erfinv_grad(op, grad):
    y = op.outputs[0]
    root_pi_over_two = _c(_pymath.sqrt(_pymath.pi) / 2, y)
    return [_m.multiply(grad, _m.multiply(root_pi_over_two, _m.exp(_m.square(y))))]


@RegisterGradient("Ndtri")
def _ndtri_grad(op, grad):
    y = op.outputs[0]
    root_two_pi = _c(_pymath.sqrt(2 * _pymath.pi), y)
    return [_m.multiply(grad, _m.multiply(root_two_pi,
                                          _m.exp(_m.multiply(_m.square(y), _c(0.5, y)))))]


@RegisterGradient("Lgamma")
def _lgamma_grad(op, grad):
    return [_m.multiply(grad, digamma(op.inputs[0]))]


@RegisterGradient("Digamma")
def _digamma_grad(op, grad):
    x = op.inputs[0]
    return [_m.multiply(grad, polygamma(_one(x), x))]


@RegisterGradient("Polygamma")
def _polygamma_grad(op, grad):
    n, x = op.inputs
    return [None, _unbroadcast(_m.multiply(grad, polygamma(_m.add(n, _one(n)), x)), x)]


@RegisterGradient("Zeta")
def _zeta_grad(op, grad):
    x, q = op.inputs
    partial_q = _m.multiply(_m.negative(x), zeta(_m.add(x, _one(x)), q))
    return [None, _unbroadcast(_m.multiply(grad, partial_q), q)]


def _igamma_partial_x(a, x):
    # d/dx P(a, x) = exp(-x) x^(a-1) / Gamma(a)
    return _m.exp(_m.subtract(_m.subtract(_m.multiply(_m.subtract(a, _one(a)), _m.log(x)), x),
                              lgamma(a)))


@RegisterGradient("Igamma")
def _igamma_grad(op, grad):
    a, x = op.inputs
    partial_a = _ops.apply_op("IgammaGradA", [a, x]).outputs[0]
    partial_x = _igamma_partial_x(a, x)
    return [_unbroadcast(_m.multiply(grad, partial_a), a),
            _unbroadcast(_m.multiply(grad, partial_x), x)]


@RegisterGradient("Igammac")
def _igammac_grad(op, grad):
    a, x = op.inputs
    partial_a = _ops.apply_op("IgammaGradA", [a, x]).outputs[0]
    partial_x = _igamma_partial_x(a, x)
    return [_unbroadcast(_m.negative(_m.multiply(grad, partial_a)), a),
            _unbroadcast(_m.negative(_m.multiply(grad, partial_x)), x)]


@RegisterGradient("Betainc")
def _betainc_grad(op, grad):
    a, b, x = op.inputs
    log_beta = _m.subtract(_m.add(lgamma(a), lgamma(b)), lgamma(_m.add(a, b)))
    partial_x = _m.exp(_m.subtract(
        _m.add(_m.multiply(_m.subtract(b, _one(b)), _m.log1p(_m.negative(x))),
               _m.multiply(_m.subtract(a, _one(a)), _m.log(x))), log_beta))
    return [None, None, _unbroadcast(_m.multiply(grad, partial_x), x)]


@RegisterGradient("BesselI0")
def _bessel_i0_grad(op, grad):
    return [_m.multiply(grad, bessel_i1(op.inputs[0]))]


@RegisterGradient("BesselI0e")
def _bessel_i0e_grad(op, grad):
    x, y = op.inputs[0], op.outputs[0]
    return [_m.multiply(grad, _m.subtract(bessel_i1e(x), _m.multiply(_m.sign(x), y)))]


def _safe_over_x(y, x):
    # I1(x) / x, with its limit 1/2 at x = 0 (where I1 is 0 too).
    zero = _m.equal(x, _c(0, x))
    safe = array_ops.where(zero, array_ops.ones_like(x), x)
    return array_ops.where(zero, array_ops.fill(array_ops.shape(x), _c(0.5, x)),
                           _m.realdiv(y, safe))


@RegisterGradient("BesselI1")
def _bessel_i1_grad(op, grad):
    x, y = op.inputs[0], op.outputs[0]
    # I1'(x) = I0(x) - I1(x) / x; at x = 0 TF imputes 1 (the limit is 1/2): kept as TF has it.
    zero = _m.equal(x, _c(0, x))
    safe = array_ops.where(zero, array_ops.ones_like(x), x)
    dy_dx = array_ops.where(zero, array_ops.ones_like(x),
                            _m.subtract(bessel_i0(x), _m.realdiv(y, safe)))
    return [_m.multiply(grad, dy_dx)]


@RegisterGradient("BesselI1e")
def _bessel_i1e_grad(op, grad):
    x, y = op.inputs[0], op.outputs[0]
    # d/dx [exp(-|x|) I1(x)] = I0e(x) - y (sign(x) + 1/x)
    return [_m.multiply(grad, _m.subtract(_m.subtract(bessel_i0e(x), _m.multiply(_m.sign(x), y)),
                                          _safe_over_x(y, x)))]


# --- divisions that give 0 instead of NaN, and x * log(y) ---------------------------------------
for _t in ("Xlogy", "Xdivy", "Xlog1py", "DivNoNan", "MulNoNan"):
    _broadcasting(_t, _is_float_or_complex)
_broadcasting("NextAfter", _is_float)
NotDifferentiable("NextAfter")


def xlogy(x, y, name=None):
    """``x * log(y)``, 0 where x is 0."""
    return _binary("Xlogy", x, y, name)


def xdivy(x, y, name=None):
    """``x / y``, 0 where x is 0."""
    return _binary("Xdivy", x, y, name)


def xlog1py(x, y, name=None):
    """``x * log1p(y)``, 0 where x is 0."""
    return _binary("Xlog1py", x, y, name)


def div_no_nan(x, y, name=None):
    """``x / y``, 0 where y is 0."""
    return _binary("DivNoNan", x, y, name)


def multiply_no_nan(x, y, name=None):
    """``x * y``, 0 where y is 0 (even if x is inf or NaN)."""
    return _binary("MulNoNan", x, y, name)


def reciprocal_no_nan(x, name=None):
    """``1 / x``, 0 where x is 0."""
    with _ops.name_scope(name, "reciprocal_no_nan", [x]) as scope:
        x = _ops.convert_to_tensor(x)
        return div_no_nan(_one(x), x, name=scope)


def nextafter(x1, x2, name=None):
    """The next representable value after ``x1`` towards ``x2``."""
    return _binary("NextAfter", x1, x2, name)


def _nonzero(x):
    return _m.cast(_m.not_equal(x, _c(0, x)), x.dtype.base_dtype)


@RegisterGradient("Xlogy")
def _xlogy_grad(op, grad):
    x, y = op.inputs
    return [_unbroadcast(_m.multiply(xlogy(_nonzero(x), y), grad), x),
            _unbroadcast(_m.multiply(xdivy(x, y), grad), y)]


@RegisterGradient("Xlog1py")
def _xlog1py_grad(op, grad):
    x, y = op.inputs
    return [_unbroadcast(_m.multiply(xlog1py(_nonzero(x), y), grad), x),
            _unbroadcast(_m.multiply(xdivy(x, _m.add(y, _one(y))), grad), y)]


@RegisterGradient("Xdivy")
def _xdivy_grad(op, grad):
    x, y = op.inputs
    return [_unbroadcast(_m.multiply(xdivy(_nonzero(x), y), grad), x),
            _unbroadcast(_m.multiply(xdivy(_m.negative(x), _m.square(y)), grad), y)]


@RegisterGradient("DivNoNan")
def _div_no_nan_grad(op, grad):
    x, y = op.inputs
    return [_unbroadcast(div_no_nan(grad, y), x),
            _unbroadcast(_m.multiply(grad, div_no_nan(div_no_nan(_m.negative(x), y), y)), y)]


@RegisterGradient("MulNoNan")
def _mul_no_nan_grad(op, grad):
    x, y = op.inputs
    return [_unbroadcast(multiply_no_nan(grad, y), x), _unbroadcast(multiply_no_nan(x, grad), y)]


# --- complex numbers ----------------------------------------------------------------------------
_REAL_OF = {_dt.complex64: _dt.float32, _dt.complex128: _dt.float64}
_COMPLEX_OF = {_dt.float32: _dt.complex64, _dt.float64: _dt.complex128}


def _complex_infer(op):
    re, im = op.inputs
    dt = re.dtype.base_dtype
    if im.dtype.base_dtype is not dt or dt not in _COMPLEX_OF:
        raise TypeError(f"complex needs two float32 or two float64 tensors, got {dt.name} and "
                        f"{im.dtype.base_dtype.name}")
    return [(op.get_attr("Tout"), broadcast_shapes(re.shape, im.shape))]


def _part_infer(op):
    t = op.inputs[0]
    _check_dtype(op, t.dtype.base_dtype, _is_complex)
    return [(op.get_attr("Tout"), t.shape)]


register_op("Complex", _complex_infer)
for _t in ("Real", "Imag", "Angle"):
    register_op(_t, _part_infer)


def _conj_infer(op):
    t = op.inputs[0]
    _check_dtype(op, t.dtype.base_dtype, _is_complex)
    return [(t.dtype.base_dtype, t.shape)]


register_op("Conj", _conj_infer)


def complex(real, imag, name=None):  # noqa: A001 - TF's public name
    """``real + 1j * imag`` (float32 gives complex64, float64 complex128)."""
    real, imag = _pair(real, imag)
    tout = _COMPLEX_OF.get(real.dtype.base_dtype)
    if tout is None:
        raise TypeError(f"real must be float32 or float64, got {real.dtype.base_dtype.name}")
    return _ops.apply_op("Complex", [real, imag], {"Tout": tout}, name).outputs[0]


def _part(op_type, x, name, real_value):
    x = _ops.convert_to_tensor(x)
    dt = x.dtype.base_dtype
    if not dt.is_complex:
        return real_value(x)
    return _ops.apply_op(op_type, [x], {"Tout": _REAL_OF[dt]}, name).outputs[0]


def real(input, name=None):  # noqa: A002 - TF's argument name
    """The real part; a real tensor is returned as it is."""
    return _part("Real", input, name, lambda x: x)


def imag(input, name=None):  # noqa: A002
    """The imaginary part; zeros for a real tensor."""
    return _part("Imag", input, name, lambda x: array_ops.zeros_like(x))


def angle(input, name=None):  # noqa: A002
    """The argument of each complex number; ``pi`` where a real number is negative, else 0."""
    def real_angle(x):
        with _ops.name_scope(name, "Angle", [x]):
            pi = array_ops.fill(array_ops.shape(x), _c(_pymath.pi, x))
            return array_ops.where(_m.less(x, _c(0, x)), pi, array_ops.zeros_like(x))

    return _part("Angle", input, name, real_angle)


def conj(x, name=None):
    """The complex conjugate; a real tensor is returned as it is."""
    x = _ops.convert_to_tensor(x)
    if not x.dtype.base_dtype.is_complex:
        return x
    return _ops.apply_op("Conj", [x], None, name).outputs[0]


@RegisterGradient("Complex")
def _complex_grad(op, grad):
    re, im = op.inputs
    return [_unbroadcast(real(grad), re), _unbroadcast(imag(grad), im)]


@RegisterGradient("Real")
def _real_grad(op, grad):
    return [complex(grad, array_ops.zeros_like(grad))]


@RegisterGradient("Imag")
def _imag_grad(op, grad):
    return [complex(array_ops.zeros_like(grad), grad)]


@RegisterGradient("Conj")
def _conj_grad(op, grad):
    return [conj(grad)]


@RegisterGradient("Angle")
def _angle_grad(op, grad):
    x = op.inputs[0]
    z = _m.reciprocal(complex(imag(x), real(x)))
    return [_m.negative(_m.multiply(complex(grad, array_ops.zeros_like(grad)), z))]


# --- composites -----------------------------------------------------------------------------------
def log_sigmoid(x, name=None):
    """``log(sigmoid(x))`` computed as ``-softplus(-x)``."""
    from dflab.ops.nn_ops import softplus

    with _ops.name_scope(name, "LogSigmoid", [x]) as scope:
        x = _ops.convert_to_tensor(x)
        return _m.negative(softplus(_m.negative(x)), name=scope)


def polyval(coeffs, x, name=None):
    """``coeffs[0] * x**(n-1) + ... + coeffs[n-1]`` by Horner's rule (``coeffs``: a list)."""
    if not isinstance(coeffs, (list, tuple)):
        raise ValueError(f"Argument coeffs must be list type found {type(coeffs)}.")
    with _ops.name_scope(name, "polyval", [x]):
        x = _ops.convert_to_tensor(x)
        if not coeffs:
            return array_ops.zeros_like(x)
        coeffs = [_ops.convert_to_tensor(c) for c in coeffs]  # as TF: floats become float32
        p = coeffs[0]
        for c in coeffs[1:]:
            p = _m.add(c, _m.multiply(p, x))
        return p


__all__ = [
    "acos", "acosh", "angle", "asin", "asinh", "atan", "atan2", "atanh", "betainc", "complex",
    "conj", "cosh", "digamma", "div_no_nan", "erf", "erfc", "expm1", "igamma", "igammac",
    "imag", "lbeta", "lgamma", "log_sigmoid", "polygamma", "real", "rint", "sinh", "tan",
    "zeta",
]
# Only in tf.math (dflab.namespaces puts them there): bessel_i0, bessel_i0e, bessel_i1,
# bessel_i1e, erfinv, erfcinv, ndtri, xlogy, xdivy, xlog1py, multiply_no_nan,
# reciprocal_no_nan, nextafter, polyval.
