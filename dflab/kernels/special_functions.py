"""Special functions written against an array namespace ``xp`` (NumPy or CuPy), elementwise:
the log-gamma family, incomplete gamma and beta functions, the error function and its
inverses, Hurwitz zeta, modified Bessel functions of order 0 and 1.

NumPy has none of these, and a GPU must compute them where its data is, so each is built from
``xp``'s ufuncs by a classical method: Lanczos' approximation for log-gamma, recurrence plus
the asymptotic series for digamma, Euler-Maclaurin summation for zeta, the power series and
Legendre's continued fraction for the incomplete gamma function (the error function is one:
``erf(x) = P(1/2, x^2)``), the continued fraction for the incomplete beta function, Newton's
method for the inverses, the power series and the asymptotic expansion for the Bessel
functions. Every branch is computed for all elements with safe arguments and the results
selected with ``where``, so loops have a fixed number of rounds and no element-dependent
control flow (what a GPU needs).

Invariant: inputs are float64 arrays (the kernels cast and cast back); results are float64,
with TF's values at the edges of each domain (poles give inf, arguments outside it NaN).
"""

from __future__ import annotations

import math

import numpy as np

_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028,
            771.32342877765313, -176.61502916214059, 12.507343278686905,
            -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
# Bernoulli numbers B_2k, k = 1..10, for the asymptotic series of digamma and zeta.
_B2K = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
        43867 / 798, -174611 / 330)


def _lgamma_positive(xp, x):
    """log Gamma(x) for x >= 0.5 (Lanczos, g = 7, nine terms: about 1e-15 relative)."""
    z = x - 1.0
    a = xp.full_like(z, _LANCZOS[0])
    for i, c in enumerate(_LANCZOS[1:], 1):
        a = a + c / (z + i)
    t = z + _LANCZOS_G + 0.5
    return _HALF_LOG_2PI + (z + 0.5) * xp.log(t) - t + xp.log(a)


def lgamma(xp, x):
    """log |Gamma(x)|: inf at the poles (0, -1, -2, ...)."""
    with np.errstate(all="ignore"):
        small = x < 0.5
        right = _lgamma_positive(xp, xp.where(small, 1.0 - x, x))
        # Reflection: Gamma(x) Gamma(1 - x) = pi / sin(pi x).
        sin_pi = xp.abs(_sin_pi(xp, x))
        left = math.log(math.pi) - xp.log(sin_pi) - right
        out = xp.where(small, left, right)
        pole = (x <= 0) & (x == xp.floor(x))
        return xp.where(pole, xp.inf, out)


def _sin_pi(xp, x):
    """sin(pi x), exactly 0 at integers (reduced so large arguments keep their accuracy)."""
    r = x - 2.0 * xp.floor(x / 2.0)  # in [0, 2)
    return xp.where(r == xp.floor(r), 0.0, xp.sin(math.pi * r))


def digamma(xp, x):
    """psi(x) = d/dx log Gamma(x): NaN at the poles, as TF."""
    with np.errstate(all="ignore"):
        neg = x < 0.5
        y = xp.where(neg, 1.0 - x, x)
        acc = xp.zeros_like(y)
        for _ in range(10):  # psi(y) = psi(y + 1) - 1 / y, until y >= 10
            lift = y < 10.0
            acc = acc - xp.where(lift, 1.0 / y, 0.0)
            y = xp.where(lift, y + 1.0, y)
        inv2 = 1.0 / (y * y)
        series = xp.zeros_like(y)
        for k in range(len(_B2K), 0, -1):  # sum_k B_2k / (2k) * y ** -2k, by Horner
            series = (series + _B2K[k - 1] / (2 * k)) * inv2
        right = acc + xp.log(y) - 0.5 / y - series
        # Reflection: psi(1 - x) - psi(x) = pi / tan(pi x).
        left = right - math.pi * _cos_pi(xp, x) / _sin_pi(xp, x)
        out = xp.where(neg, left, right)
        pole = (x <= 0) & (x == xp.floor(x))
        return xp.where(pole, xp.nan, out)


def _cos_pi(xp, x):
    r = x - 2.0 * xp.floor(x / 2.0)
    return xp.where(r == 0.5, 0.0, xp.where(r == 1.5, 0.0, xp.cos(math.pi * r)))


def zeta(xp, s, q):
    """The Hurwitz zeta function sum_k (q + k) ** -s (Euler-Maclaurin, ten terms summed)."""
    with np.errstate(all="ignore"):
        n_direct = 10
        total = xp.zeros_like(s + q)
        for k in range(n_direct):
            total = total + (q + k) ** (-s)
        a = q + n_direct
        total = total + a ** (1.0 - s) / (s - 1.0) + 0.5 * a ** (-s)
        # Tail: B_2j / (2j)! * s (s+1) ... (s+2j-2) * a ** (-s-2j+1).
        rising = s.copy() if hasattr(s, "copy") else s
        fact = 2.0
        term_pow = a ** (-s - 1.0)
        for j in range(1, len(_B2K) + 1):
            total = total + _B2K[j - 1] / fact * rising * term_pow
            rising = rising * (s + 2 * j - 1) * (s + 2 * j)
            fact = fact * (2 * j + 1) * (2 * j + 2)
            term_pow = term_pow / (a * a)
        bad = s < 1.0
        pole_q = (q <= 0) & (q == xp.floor(q))
        nan_q = (q <= 0) & (q != xp.floor(q)) & (s != xp.floor(s))
        out = xp.where(s == 1.0, xp.inf, total)
        out = xp.where(pole_q, xp.inf, out)
        return xp.where(bad | nan_q, xp.nan, out)


def polygamma(xp, n, x):
    """psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x); n = 0 is digamma; NaN for a non-integer or
    negative n."""
    with np.errstate(all="ignore"):
        nn = xp.where(n >= 1, n, 1.0)
        sign = xp.where(xp.fmod(nn, 2.0) == 0, -1.0, 1.0)
        fact = xp.exp(lgamma(xp, nn + 1.0))
        higher = sign * fact * zeta(xp, nn + 1.0, x)
        out = xp.where(n == 0, digamma(xp, x), higher)
        return xp.where((n < 0) | (n != xp.floor(n)), xp.nan, out)


_GAMMA_ROUNDS = 2000
# Loops stop once every element has converged, checked every few rounds (each check reads
# one flag on the host: a GPU synchronizes there, so not every round).
_CHECK_EVERY = 8
_EPS = 1e-17


def _converged(xp, *pairs, eps=_EPS) -> bool:
    """Whether |delta| <= eps |total| everywhere, for each (delta, total) in ``pairs``."""
    for delta, total in zip(pairs[::2], pairs[1::2]):
        if bool(xp.any(xp.abs(delta) > eps * xp.abs(total))):
            return False
    return True


def _gamma_series(xp, a, x):
    """P(a, x) by its power series (x < a + 1), with d/da P alongside."""
    term = 1.0 / a
    total = term
    dterm = -1.0 / (a * a)
    dtotal = dterm
    ap = a
    for k in range(_GAMMA_ROUNDS):
        ap = ap + 1.0
        ratio = x / ap
        dterm = dterm * ratio - term * x / (ap * ap)
        term = term * ratio
        total = total + term
        dtotal = dtotal + dterm
        if k % _CHECK_EVERY == 0 and _converged(xp, term, total, dterm, dtotal):
            break
    log_pre = a * xp.log(x) - x - lgamma(xp, a)
    pre = xp.exp(log_pre)
    p = pre * total
    dp = p * (xp.log(x) - digamma(xp, a)) + pre * dtotal
    return p, dp


def _gamma_fraction(xp, a, x):
    """Q(a, x) by Legendre's continued fraction (x >= a + 1; modified Lentz)."""
    tiny = 1e-300
    b = x + 1.0 - a
    c = xp.full_like(b, 1.0 / tiny)
    d = 1.0 / b
    h = d
    for i in range(1, _GAMMA_ROUNDS):
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = xp.where(xp.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = xp.where(xp.abs(c) < tiny, tiny, c)
        d = 1.0 / d
        step = d * c
        h = h * step
        if i % _CHECK_EVERY == 0 and _converged(xp, step - 1.0, 1.0, eps=1e-15):
            break
    return xp.exp(a * xp.log(x) - x - lgamma(xp, a)) * h


def igamma(xp, a, x, upper=False):
    """The regularized incomplete gamma function P(a, x) (Q(a, x) when ``upper``)."""
    with np.errstate(all="ignore"):
        series = x < a + 1.0
        xs = xp.where(series, x, 1.0)
        as_ = xp.where(series, a, 1.0)
        as_ = xp.where(as_ > 0, as_, 1.0)
        xs = xp.where(xs > 0, xs, 1.0)
        p_series, _ = _gamma_series(xp, as_, xs)
        xf = xp.where(series, a + 2.0, x)
        af = xp.where(series, 1.0, a)
        af = xp.where(af > 0, af, 1.0)
        q_frac = _gamma_fraction(xp, af, xf)
        p = xp.where(series, p_series, 1.0 - q_frac)
        q = xp.where(series, 1.0 - p_series, q_frac)
        out = q if upper else p
        out = xp.where(x == 0, 1.0 if upper else 0.0, out)
        out = xp.where(xp.isinf(x) & (x > 0), 0.0 if upper else 1.0, out)
        return xp.where((a <= 0) | (x < 0) | xp.isnan(a) | xp.isnan(x), xp.nan, out)


def igamma_grad_a(xp, a, x):
    """d/da P(a, x), from the power series differentiated term by term."""
    with np.errstate(all="ignore"):
        ok = (a > 0) & (x > 0)
        _, dp = _gamma_series(xp, xp.where(ok, a, 1.0), xp.where(ok, x, 1.0))
        out = xp.where(x == 0, 0.0, dp)
        return xp.where((a <= 0) | (x < 0), xp.nan, out)


def betainc(xp, a, b, x):
    """The regularized incomplete beta function I_x(a, b) (continued fraction)."""
    with np.errstate(all="ignore"):
        swap = x > (a + 1.0) / (a + b + 2.0)
        aa, bb = xp.where(swap, b, a), xp.where(swap, a, b)
        xx = xp.where(swap, 1.0 - x, x)
        ok = (a > 0) & (b > 0) & (x > 0) & (x < 1)
        aa, bb = xp.where(ok, aa, 1.0), xp.where(ok, bb, 1.0)
        xx = xp.where(ok, xx, 0.5)
        frac = _beta_fraction(xp, aa, bb, xx)
        log_pre = (lgamma(xp, aa + bb) - lgamma(xp, aa) - lgamma(xp, bb) + aa * xp.log(xx)
                   + bb * xp.log1p(-xx))
        val = xp.exp(log_pre) * frac / aa
        out = xp.where(swap, 1.0 - val, val)
        out = xp.where(x == 0, 0.0, xp.where(x == 1, 1.0, out))
        bad = (a <= 0) | (b <= 0) | (x < 0) | (x > 1) | xp.isnan(a + b + x)
        return xp.where(bad, xp.nan, out)


def _beta_fraction(xp, a, b, x, rounds=1000):
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = xp.ones_like(x)
    d = 1.0 - qab * x / qap
    d = 1.0 / xp.where(xp.abs(d) < tiny, tiny, d)
    h = d
    for m in range(1, rounds):
        m2 = 2.0 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                   -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / xp.where(xp.abs(d) < tiny, tiny, d)
            c = 1.0 + aa / c
            c = xp.where(xp.abs(c) < tiny, tiny, c)
            step = d * c
            h = h * step
        if m % _CHECK_EVERY == 0 and _converged(xp, step - 1.0, 1.0, eps=1e-15):
            break
    return h


def erf(xp, x):
    with np.errstate(all="ignore"):
        p = igamma(xp, xp.full_like(x, 0.5), x * x)
        return xp.where(xp.isnan(x), xp.nan, xp.sign(x) * p)


def erfc(xp, x):
    with np.errstate(all="ignore"):
        q = igamma(xp, xp.full_like(x, 0.5), x * x, upper=True)
        out = xp.where(x < 0, 2.0 - q, q)
        return xp.where(xp.isnan(x), xp.nan, out)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _erfinv_guess(xp, y):
    """Winitzki's closed-form approximation (about 2e-3 relative), Newton's starting point."""
    a = 0.147
    ln = xp.log1p(-y * y)
    t = 2.0 / (math.pi * a) + 0.5 * ln
    return xp.sign(y) * xp.sqrt(xp.sqrt(t * t - ln / a) - t)


def erfcinv(xp, z):
    """x with erfc(x) = z, for z in [0, 2]."""
    with np.errstate(all="ignore"):
        lower = z > 1.0
        zz = xp.where(lower, 2.0 - z, z)  # in (0, 1]: x >= 0
        zs = xp.where((zz > 0) & (zz <= 1), zz, 0.5)
        guess = xp.where(zs < 1e-2, xp.sqrt(-xp.log(zs)), _erfinv_guess(xp, 1.0 - zs))
        x = guess
        log_z = xp.log(zs)
        for _ in range(20):  # Newton on log(erfc(x)) - log(z): stable for tiny z
            e = erfc(xp, x)
            slope = -_TWO_OVER_SQRT_PI * xp.exp(-x * x) / e
            step = (xp.log(e) - log_z) / slope
            x = x - step
            if _converged(xp, step, x + 1e-300, eps=1e-15):
                break
        out = xp.where(lower, -x, x)
        out = xp.where(z == 0, xp.inf, xp.where(z == 2, -xp.inf, out))
        out = xp.where(z == 1, 0.0, out)
        return xp.where((z < 0) | (z > 2) | xp.isnan(z), xp.nan, out)


def erfinv(xp, y):
    with np.errstate(all="ignore"):
        mid = xp.abs(y) <= 0.9
        ys = xp.where(mid, y, 0.0)
        x = _erfinv_guess(xp, ys)
        for _ in range(10):
            step = (erf(xp, x) - ys) / (_TWO_OVER_SQRT_PI * xp.exp(-x * x))
            x = x - step
            if _converged(xp, step, x + 1e-300, eps=1e-15):
                break
        tail = xp.sign(y) * erfcinv(xp, 1.0 - xp.abs(y))
        out = xp.where(mid, x, tail)
        return xp.where((xp.abs(y) > 1) | xp.isnan(y), xp.nan, out)


def ndtri(xp, p):
    """The inverse of the standard normal CDF."""
    with np.errstate(all="ignore"):
        return -math.sqrt(2.0) * erfcinv(xp, 2.0 * p)


def _bessel_series(xp, x, order, terms=80):
    """I_order(x) for order 0 or 1 by its power series (all terms positive)."""
    q = x * x / 4.0
    term = xp.ones_like(x) if order == 0 else x / 2.0
    total = term
    for k in range(1, terms):
        term = term * q / (k * (k + order))
        total = total + term
    return total


def _bessel_asymptotic_scaled(xp, ax, order, terms=18):
    """exp(-x) I_order(x) for large x > 0 by Hankel's asymptotic expansion."""
    mu = 4.0 * order * order
    term = xp.ones_like(ax)
    total = term
    for k in range(1, terms):
        term = -term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * ax)
        total = total + term
    return total / xp.sqrt(2.0 * math.pi * ax)


_BESSEL_SWITCH = 30.0


def bessel_ie(xp, x, order):
    """exp(-|x|) I_order(x), order 0 or 1."""
    with np.errstate(all="ignore"):
        ax = xp.abs(x)
        near = ax <= _BESSEL_SWITCH
        xs = xp.where(near, x, 0.0)
        small = _bessel_series(xp, xs, order) * xp.exp(-xp.abs(xs))
        axl = xp.where(near, _BESSEL_SWITCH + 1.0, ax)
        large = _bessel_asymptotic_scaled(xp, axl, order)
        if order == 1:
            large = xp.sign(x) * large
        out = xp.where(near, small, large)
        return xp.where(xp.isnan(x), xp.nan, out)


def bessel_i(xp, x, order):
    with np.errstate(all="ignore"):
        ax = xp.abs(x)
        return bessel_ie(xp, x, order) * xp.exp(ax)
