"""Kernels of ``dflab.ops.special_math_ops``, written against the device's ``xp``.

Where ``xp`` has the function (trigonometry, ``expm1``, ``rint``, ``nextafter``) it is bound
directly; the special functions come from ``special_functions`` and compute in float64 (half
and single precision inputs are cast up and the result cast back, so they agree with TF's
float32 kernels to float32 precision).
"""

from __future__ import annotations

import numpy as np

from dflab.kernels import special_functions as sf
from dflab.kernels.registry import kernel, register_kernel

for _t, _f in (("Tan", "tan"), ("Asin", "arcsin"), ("Acos", "arccos"), ("Atan", "arctan"),
               ("Sinh", "sinh"), ("Cosh", "cosh"), ("Asinh", "arcsinh"), ("Acosh", "arccosh"),
               ("Atanh", "arctanh"), ("Expm1", "expm1"), ("Rint", "rint"),
               ("Atan2", "arctan2"), ("NextAfter", "nextafter")):
    register_kernel(_t, xp=_f, quiet_fp=True, elementwise=True)


def _in_float64(fn):
    """``fn(xp, *float64 arrays)`` applied to inputs of any float dtype, result in theirs."""

    def run(xp, *args):
        dtype = args[0].dtype
        wide = [xp.asarray(a, dtype=np.float64) for a in args]
        if len(wide) > 1:
            wide = list(xp.broadcast_arrays(*wide))
        return xp.asarray(fn(xp, *wide)).astype(dtype, copy=False)

    return run


_SPECIAL = {
    "Erf": sf.erf, "Erfc": sf.erfc, "Erfinv": sf.erfinv, "Ndtri": sf.ndtri,
    "Lgamma": sf.lgamma, "Digamma": sf.digamma,
    "BesselI0": lambda xp, x: sf.bessel_i(xp, x, 0),
    "BesselI0e": lambda xp, x: sf.bessel_ie(xp, x, 0),
    "BesselI1": lambda xp, x: sf.bessel_i(xp, x, 1),
    "BesselI1e": lambda xp, x: sf.bessel_ie(xp, x, 1),
    "Igamma": sf.igamma,
    "Igammac": lambda xp, a, x: sf.igamma(xp, a, x, upper=True),
    "IgammaGradA": sf.igamma_grad_a,
    "Zeta": sf.zeta, "Polygamma": sf.polygamma, "Betainc": sf.betainc,
}
for _t, _f in _SPECIAL.items():
    register_kernel(_t, xp=_in_float64(_f), quiet_fp=True)


def _xlogy(xp, x, y):
    return xp.where(x == 0, xp.zeros_like(x * y), x * xp.log(y))


def _xlog1py(xp, x, y):
    return xp.where(x == 0, xp.zeros_like(x * y), x * xp.log1p(y))


def _xdivy(xp, x, y):
    return xp.where(x == 0, xp.zeros_like(x * y), x / y)


def _div_no_nan(xp, x, y):
    return xp.where(y == 0, xp.zeros_like(x * y), x / y)


def _mul_no_nan(xp, x, y):
    return xp.where(y == 0, xp.zeros_like(x * y), x * y)


for _t, _f in (("Xlogy", _xlogy), ("Xlog1py", _xlog1py), ("Xdivy", _xdivy),
               ("DivNoNan", _div_no_nan), ("MulNoNan", _mul_no_nan)):
    register_kernel(_t, xp=_f, quiet_fp=True)


@kernel("Complex")
def _complex(node, ctx):
    xp, dt = ctx.xp, node.attr["Tout"]._np

    def make(re, im):
        # Real and imaginary parts side by side, viewed as complex: inf and NaN parts stay
        # where they are (``re + 1j * im`` would turn 1j * inf into NaN + inf j).
        re, im = xp.broadcast_arrays(re, im)
        pairs = xp.ascontiguousarray(xp.stack([re, im], axis=-1))
        return pairs.view(dt)[..., 0]

    return make


register_kernel("Real", xp=lambda xp, x: xp.real(x).copy())
register_kernel("Imag", xp=lambda xp, x: xp.imag(x).copy())
register_kernel("Conj", xp="conj")
register_kernel("Angle", xp="angle")
