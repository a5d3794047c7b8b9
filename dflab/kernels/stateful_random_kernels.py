"""Kernels of ``tf.random.Generator``'s ops: TF's Philox stream kept in a resource variable.

The state variable holds three int64 words: the 128-bit counter (low word first) and the 64-bit
key. Each op reads it, advances the counter by 256 blocks per output (TF's reservation, so that
a call's numbers never overlap the next call's), writes it back under the variable's lock, and
draws with TF's distributions (``dflab.kernels.philox``) from the counter it read: the numbers
TF's ``Generator`` draws from the same state.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels import philox
from dflab.kernels.context import host
from dflab.kernels.random_kernels import _shape
from dflab.kernels.registry import kernel
from dflab.kernels.state_kernels import write_variable

_MASK = 0xFFFFFFFF


def _read_and_skip(node, ctx, var, alg, n_outputs: int):
    """The key and counter in ``var`` (a Philox state), the counter then advanced by
    ``n_outputs * 256`` blocks."""
    if int(host(alg)) not in (1, 3):
        raise errors.InvalidArgumentError(
            None, node, f"Unsupported algorithm id {int(host(alg))}: only Philox (1) is "
            "offered")
    with var.lock:
        words = np.asarray(host(var.read()), np.int64)
        if words.shape != (3,):
            raise errors.InvalidArgumentError(
                None, node, f"The size of the state must be 3 for Philox, got "
                f"{list(words.shape)}")
        c_lo, c_hi, k = (int(w) & (2**64 - 1) for w in words)
        counter = [c_lo & _MASK, c_lo >> 32, c_hi & _MASK, c_hi >> 32]
        key = [k & _MASK, k >> 32]
        new = philox.skip_counter(counter, 256 * n_outputs)
        state = np.array([new[0] | new[1] << 32, new[2] | new[3] << 32, k],
                         np.uint64).view(np.int64)
        write_variable(ctx.xp, var, ctx.xp.asarray(state))
    return key, counter, words


def _fill_kernel(op_type, draw):
    @kernel(op_type, host_memory_inputs=(1, 2))
    def factory(node, ctx):
        dt = node.attr["dtype"]._np
        to_device = ctx.xp.asarray

        def fill(var, alg, shape):
            dims = _shape(node, shape)
            n = int(np.prod(dims, dtype=np.int64))
            key, counter, _ = _read_and_skip(node, ctx, var, alg, n)
            return to_device(draw(key, counter, n, dt).reshape(dims))

        return fill

    return factory


_fill_kernel("StatefulUniform", philox.uniform)
_fill_kernel("StatefulStandardNormalV2", philox.normal)
_fill_kernel("StatefulTruncatedNormal", philox.truncated_normal)
_fill_kernel("StatefulUniformFullInt", philox.uniform_full_int)


@kernel("StatefulUniformInt", host_memory_inputs=(1, 2, 3, 4))
def _uniform_int(node, ctx):
    to_device = ctx.xp.asarray

    def uniform_int(var, alg, shape, lo, hi):
        lo_v, hi_v = host(lo).item(), host(hi).item()
        if not lo_v < hi_v:
            raise errors.InvalidArgumentError(
                None, node, f"Need minval < maxval, got {lo_v} >= {hi_v}")
        dims = _shape(node, shape)
        n = int(np.prod(dims, dtype=np.int64))
        key, counter, _ = _read_and_skip(node, ctx, var, alg, n)
        return to_device(philox.uniform_int(key, counter, n, lo_v, hi_v,
                                            host(lo).dtype).reshape(dims))

    return uniform_int


@kernel("RngReadAndSkip", host_memory_inputs=(1, 2))
def _read_and_skip_kernel(node, ctx):
    def read_and_skip(var, alg, delta):
        *_, old = _read_and_skip(node, ctx, var, alg, int(host(delta)))
        return ctx.xp.asarray(old)

    return read_and_skip
