"""Kernels for random ops: drawn on the host, delivered in the device's memory.

Each op instance owns one ``numpy.random.Generator`` (Philox keyed by the op's ``(seed, seed2)``
attributes) per session, kept in the device's resource manager under the op's name. The
generator therefore survives across ``Session.run`` calls and plan rebuilds (successive runs
continue the sequence), and a fresh session over an identically built graph starts the same
sequence again. ``seed == seed2 == 0`` means no seed was given: the generator is seeded from OS
entropy. Kernels never touch their inputs; every result is a new array.

Numbers are drawn by the host's generator on every device, so a seeded op gives the same
numbers wherever it is placed, and reach the device's memory through ``ctx.xp.asarray``.
Kernels whose result is the draw itself register with ``_random_kernel`` (which moves it);
data inputs they hand to the generator (gamma's alpha, poisson's rate) come to the host first
(``_host_reader``). ``RandomShuffle`` and ``Multinomial`` compute on the device's data with
``xp`` and move only their draws (a permutation, uniform variates). Small host-side arguments
(shapes, bounds, sample counts: what TF keeps in host memory) are read with NumPy.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host, host_ints
from dflab.kernels.registry import kernel, register_kernel


def _random_kernel(op_type: str, **declared):
    """Register the decorated factory for ``op_type`` (``declared``: ``register_kernel``'s
    host-memory arguments); its results (host arrays drawn by the generator) go to the
    device's memory through ``xp.asarray``."""

    def deco(factory):
        def on_device(node, ctx):
            draw = factory(node, ctx)
            if ctx.xp is np:  # the host's memory already: no per-call wrapper on CPUs
                return draw
            to_device = ctx.xp.asarray
            return lambda *args: to_device(draw(*args))

        register_kernel(op_type, factory=on_device, **declared)
        return factory

    return deco


def _host_reader(xp):
    """``np.asarray`` for the device's arrays: those of a namespace other than NumPy are
    copied to the host first (its ``asnumpy``, as ``Device.to_host`` does), for the host's
    generator to read."""
    asnumpy = getattr(xp, "asnumpy", None)
    if asnumpy is None:
        return np.asarray
    return lambda value, dtype=None: np.asarray(asnumpy(value), dtype=dtype)


def op_generator(node, ctx) -> np.random.Generator:
    """The random stream of a stateful random op ``node``: one per op name and seeds, kept in
    its device's resources across steps (Philox, seeded by the op's seed pair)."""
    seed, seed2 = int(node.attr.get("seed", 0)), int(node.attr.get("seed2", 0))

    def create():
        if seed == 0 and seed2 == 0:
            return np.random.Generator(np.random.Philox())
        return np.random.Generator(np.random.Philox(key=[seed, seed2]))

    # Keyed by name *and* seeds: an op rebuilt under the same name with other seeds (a notebook
    # cell re-run) must not inherit the old op's stream.
    return ctx.resources.lookup_or_create("rng", f"{node.name}:{seed}:{seed2}", create)


def _shape(node, shape):
    dims = host_ints(shape)
    if dims and min(dims) < 0:
        raise errors.InvalidArgumentError(None, node, f"Shape {list(dims)} has a negative "
                                          "dimension")
    return dims


def _work_dtype(np_dt):
    """Generators draw float32 or float64; half precision is drawn in float32 and rounded."""
    return np.float64 if np_dt == np.float64 else np.float32


@_random_kernel("RandomStandardNormal", host_memory_inputs=(0,))
def _standard_normal(node, ctx):
    gen, dt = op_generator(node, ctx), node.attr["dtype"]._np

    def standard_normal(shape):
        return gen.standard_normal(_shape(node, shape), dtype=_work_dtype(dt)).astype(dt,
                                                                                    copy=False)

    return standard_normal


@_random_kernel("TruncatedNormal", host_memory_inputs=(0,))
def _truncated_normal(node, ctx):
    gen, dt = op_generator(node, ctx), node.attr["dtype"]._np
    work = _work_dtype(dt)

    def truncated_normal(shape):
        x = gen.standard_normal(_shape(node, shape), dtype=work)
        # Re-draw only the rejected entries; about 4.6% per round, so few rounds are needed.
        bad = np.abs(x) > 2
        while bad.any():
            x[bad] = gen.standard_normal(int(bad.sum()), dtype=work)
            bad = np.abs(x) > 2
        return x.astype(dt, copy=False)

    return truncated_normal


@_random_kernel("RandomUniform", host_memory_inputs=(0,))
def _uniform(node, ctx):
    gen, dt = op_generator(node, ctx), node.attr["dtype"]._np

    if dt == np.float16:
        # Rounding a float32 draw to half precision can produce 1.0; draw the 10-bit mantissa
        # grid directly so the result stays in [0, 1).
        def uniform_half(shape):
            bits = gen.integers(0, 1 << 10, size=_shape(node, shape))
            return (bits * (1.0 / (1 << 10))).astype(np.float16)

        return uniform_half

    def uniform(shape):
        return gen.random(_shape(node, shape), dtype=dt)

    return uniform


@_random_kernel("RandomUniformInt", host_memory_inputs=(0, 1, 2))
def _uniform_int(node, ctx):
    gen = op_generator(node, ctx)

    def uniform_int(shape, lo, hi):  # the bounds are host-side, as TF keeps them
        lo_v, hi_v = host(lo).item(), host(hi).item()
        if not lo_v < hi_v:
            raise errors.InvalidArgumentError(
                None, node, f"Need minval < maxval: {lo_v} >= {hi_v}")
        dt = host(lo).dtype
        return gen.integers(lo_v, hi_v, size=_shape(node, shape), dtype=dt)

    return uniform_int


@kernel("RandomShuffle", host_only=True)
def _shuffle(node, ctx):
    gen, xp = op_generator(node, ctx), ctx.xp

    def shuffle(x):
        x = xp.asarray(x)
        if x.ndim == 0 or x.shape[0] <= 1:
            return x
        # The permutation is drawn on the host; the rows are gathered on the device.
        return x[xp.asarray(gen.permutation(x.shape[0]))]

    return shuffle


@kernel("Multinomial")
def _multinomial(node, ctx):
    gen, out_dt = op_generator(node, ctx), node.attr["output_dtype"]._np
    xp = ctx.xp

    def multinomial(logits, num_samples):
        logits = xp.asarray(logits, dtype=np.float64)
        n = int(num_samples)  # host-side
        if logits.ndim != 2:
            raise errors.InvalidArgumentError(None, node, "logits should be a matrix, got shape "
                                              f"{list(logits.shape)}")
        if n < 0:
            raise errors.InvalidArgumentError(None, node, "num_samples should be nonnegative")
        batch, classes = logits.shape
        if classes == 0 and n > 0:
            raise errors.InvalidArgumentError(None, node, "num_classes should be positive")
        if batch == 0 or n == 0:
            return xp.zeros((batch, n), dtype=out_dt)
        with np.errstate(invalid="ignore", over="ignore"):
            p = xp.exp(logits - xp.max(logits, axis=1, keepdims=True))
            cdf = xp.cumsum(p, axis=1)
            cdf /= cdf[:, -1:]
        # Inverse-CDF sampling for all rows in one search: shifting row r's CDF and draws by r
        # makes the concatenated CDFs one increasing sequence. Only the uniform variates are
        # drawn on the host.
        rows = xp.arange(batch, dtype=np.float64)[:, None]
        u = xp.asarray(gen.random((batch, n))) + rows
        flat = xp.searchsorted((cdf + rows).ravel(), u.ravel(), side="right")
        idx = flat.reshape(batch, n) - (xp.arange(batch) * classes)[:, None]
        return xp.clip(idx, 0, classes - 1).astype(out_dt)

    return multinomial


@_random_kernel("RandomGamma", host_only=True)
def _gamma(node, ctx):
    gen, host = op_generator(node, ctx), _host_reader(ctx.xp)

    def gamma(shape, alpha):
        alpha = host(alpha)  # the generator reads it on the host
        dims = _shape(node, shape)
        work = _work_dtype(alpha.dtype)
        out = gen.standard_gamma(np.broadcast_to(alpha, dims + alpha.shape).astype(work),
                                 dtype=work)
        return out.astype(alpha.dtype, copy=False)

    return gamma


@_random_kernel("RandomPoissonV2", host_only=True)
def _poisson(node, ctx):
    gen, dt = op_generator(node, ctx), node.attr["dtype"]._np
    host = _host_reader(ctx.xp)

    def poisson(shape, rate):
        rate = host(rate, dtype=np.float64)  # the generator reads it on the host
        dims = _shape(node, shape)
        if np.any(rate < 0):
            raise errors.InvalidArgumentError(None, node, "lam must be non-negative")
        return gen.poisson(np.broadcast_to(rate, dims + rate.shape)).astype(dt)

    return poisson
