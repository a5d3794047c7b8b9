"""Kernels of the stateless random ops: TF's Philox stream for a seed pair, on the host.

Each call derives the Philox key and counter from the ``seed`` input (TF's ``GenerateKey``)
and draws with TF's distributions (``dflab.kernels.philox``); nothing is kept between calls,
so a run gives the same numbers as every other run with the same seed. The seed, the shape and
integer bounds are host-memory inputs, as in TF; the draw reaches the device through
``xp.asarray``. The Poisson, binomial and parameterized truncated normal samplers run on
host devices only, as TF's.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels import philox
from dflab.kernels.context import host
from dflab.kernels.random_kernels import _host_reader, _random_kernel, _shape


def _key_counter(node, seed):
    seed = host(seed)
    if seed.shape != (2,):
        raise errors.InvalidArgumentError(
            None, node, f"seed must have shape [2], not {list(seed.shape)}")
    if int(node.attr.get("alg", 3)) == 2:
        raise errors.InvalidArgumentError(
            None, node, "The ThreeFry algorithm is not offered: use philox or auto_select")
    return philox.seed_key_counter(int(seed[0]), int(seed[1]))


def _sample_kernel(op_type, draw):
    @_random_kernel(op_type, host_memory_inputs=(0, 1))
    def factory(node, ctx):
        dt = node.attr["dtype"]._np

        def sample(shape, seed):
            dims = _shape(node, shape)
            key, counter = _key_counter(node, seed)
            return draw(key, counter, int(np.prod(dims, dtype=np.int64)), dt).reshape(dims)

        return sample

    return factory


_sample_kernel("StatelessRandomUniform", philox.uniform)
_sample_kernel("StatelessRandomNormal", philox.normal)
_sample_kernel("StatelessTruncatedNormal", philox.truncated_normal)
_sample_kernel("StatelessRandomUniformFullInt", philox.uniform_full_int)


@_random_kernel("StatelessRandomUniformInt", host_memory_inputs=(0, 1, 2, 3))
def _uniform_int(node, ctx):
    def uniform_int(shape, seed, lo, hi):
        lo_v, hi_v = host(lo).item(), host(hi).item()
        if not lo_v < hi_v:
            raise errors.InvalidArgumentError(
                None, node, f"Need minval < maxval, got {lo_v} >= {hi_v}")
        dims = _shape(node, shape)
        key, counter = _key_counter(node, seed)
        size = int(np.prod(dims, dtype=np.int64))
        return philox.uniform_int(key, counter, size, lo_v, hi_v, host(lo).dtype).reshape(dims)

    return uniform_int


@_random_kernel("StatelessMultinomial", host_memory_inputs=(1, 2))
def _multinomial(node, ctx):
    out_dt, read = node.attr["output_dtype"]._np, _host_reader(ctx.xp)

    def multinomial(logits, num_samples, seed):
        logits, n = read(logits), int(host(num_samples))
        if logits.ndim != 2:
            raise errors.InvalidArgumentError(
                None, node, f"logits should be a matrix, got shape {list(logits.shape)}")
        if n < 0:
            raise errors.InvalidArgumentError(None, node, "num_samples should be nonnegative")
        batch, classes = logits.shape
        if classes == 0 and n > 0:
            raise errors.InvalidArgumentError(None, node, "num_classes should be positive")
        key, counter = _key_counter(node, seed)
        if batch == 0 or n == 0:
            return np.zeros((batch, n), out_dt)
        return philox.multinomial(key, counter, logits, n, out_dt)

    return multinomial


def _samples_per_batch(node, dims, batch_shape):
    """How many samples each batch element gets: ``dims`` must end with ``batch_shape``."""
    k = len(batch_shape)
    if len(dims) < k or tuple(dims[len(dims) - k:]) != tuple(batch_shape):
        raise errors.InvalidArgumentError(
            None, node, f"Shape passed in must end with broadcasted shape: shape {list(dims)}, "
            f"broadcast shape {list(batch_shape)}")
    return int(np.prod(dims[:len(dims) - k], dtype=np.int64))


@_random_kernel("StatelessRandomGammaV2", host_memory_inputs=(0, 1))
def _gamma(node, ctx):
    dt, read = node.attr["dtype"]._np, _host_reader(ctx.xp)

    def gamma(shape, seed, alpha):
        alpha, dims = read(alpha), _shape(node, shape)
        n = _samples_per_batch(node, dims, alpha.shape)
        key, counter = _key_counter(node, seed)
        if alpha.size == 0 or n == 0:
            return np.zeros(dims, dt)
        return philox.gamma(key, counter, alpha, n, dt).reshape(dims)

    return gamma


@_random_kernel("StatelessRandomPoisson", host_only=True)
def _poisson(node, ctx):
    dt = node.attr["dtype"]._np

    def poisson(shape, seed, lam):
        lam, dims = host(lam), _shape(node, shape)
        n = _samples_per_batch(node, dims, lam.shape)
        key, counter = _key_counter(node, seed)
        if lam.size == 0 or n == 0:
            return np.zeros(dims, dt)
        return philox.poisson(key, counter, lam, n, dt).reshape(dims)

    return poisson


@_random_kernel("StatelessRandomBinomial", host_only=True)
def _binomial(node, ctx):
    dt = node.attr["dtype"]._np

    def binomial(shape, seed, counts, probs):
        counts, probs, dims = host(counts), host(probs), _shape(node, shape)
        try:
            counts, probs = np.broadcast_arrays(counts, probs)
        except ValueError:
            raise errors.InvalidArgumentError(
                None, node, f"counts {list(counts.shape)} and probs {list(probs.shape)} "
                "do not broadcast") from None
        n = _samples_per_batch(node, dims, counts.shape)
        key, counter = _key_counter(node, seed)
        if counts.size == 0 or n == 0:
            return np.zeros(dims, dt)
        return philox.binomial(key, counter, counts, probs, n, dt).reshape(dims)

    return binomial


@_random_kernel("StatelessParameterizedTruncatedNormal", host_only=True)
def _parameterized_truncated_normal(node, ctx):
    dt = node.attr["dtype"]._np

    def truncated(shape, seed, means, stddevs, minvals, maxvals):
        dims = _shape(node, shape)
        try:
            params = np.broadcast_arrays(*(host(v) for v in (means, stddevs, minvals,
                                                             maxvals)))
        except ValueError:
            raise errors.InvalidArgumentError(
                None, node, "means, stddevs, minvals and maxvals do not broadcast") from None
        n = _samples_per_batch(node, dims, params[0].shape)
        key, counter = _key_counter(node, seed)
        if params[0].size == 0 or n == 0:
            return np.zeros(dims, dt)
        try:
            out = philox.parameterized_truncated_normal(key, counter, *params, n, dt)
        except ValueError as e:
            raise errors.InvalidArgumentError(None, node, str(e)) from None
        return out.reshape(dims)

    return truncated
