"""Kernels of the stateless random ops: TF's Philox stream for a seed pair, on the host.

Each call derives the Philox key and counter from the ``seed`` input (TF's ``GenerateKey``)
and draws with TF's distributions (``dflab.kernels.philox``); nothing is kept between calls,
so a run gives the same numbers as every other run with the same seed. The seed, the shape and
integer bounds are host-memory inputs, as in TF; the draw reaches the device through
``xp.asarray``.
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
