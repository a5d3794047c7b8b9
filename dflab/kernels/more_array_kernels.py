"""Kernels of ``dflab.ops.more_array_ops``: ``IdentityN``, ``EnsureShape``,
``GuaranteeConst``, ``ParallelConcat`` and ``BroadcastArgs``.

The identities hand their inputs on unchanged (as ``Identity`` does); ``BroadcastArgs``
computes a shape, so it reads and leaves its values in host memory, as TF's.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.framework.tensor_shape import as_shape
from dflab.kernels.context import host, outputs
from dflab.kernels.registry import kernel, register_kernel


def _identity_n(*xs):
    return outputs(xs)


def _identity(x):
    return x


register_kernel("IdentityN", fn=_identity_n, routes_only=True)
register_kernel("GuaranteeConst", fn=_identity, routes_only=True)


@kernel("EnsureShape")
def _ensure_shape(node, ctx):
    want = as_shape(node.attr["shape"])

    def ensure_shape(x):
        got = tuple(np.shape(x))
        if not want.is_compatible_with(got):
            dims = ",".join("?" if d is None else str(d) for d in want.as_list())
            raise errors.InvalidArgumentError(
                None, node, f"Shape of tensor {node.input[0]} {list(got)} is not compatible "
                            f"with expected shape [{dims}].")
        return x

    return ensure_shape


@kernel("ParallelConcat")
def _parallel_concat(node, ctx):
    xp = ctx.xp

    def parallel_concat(*pieces):
        return xp.concatenate([xp.asarray(p) for p in pieces], axis=0)

    return parallel_concat


@kernel("BroadcastArgs", host_memory_inputs=(0, 1), host_memory_outputs=(0,))
def _broadcast_args(node, ctx):
    def broadcast_args(s0, s1):
        a, b = host(s0), host(s1)
        try:
            out = np.broadcast_shapes(tuple(int(v) for v in a), tuple(int(v) for v in b))
        except ValueError:
            raise errors.InvalidArgumentError(
                None, node, f"Incompatible shapes: [{','.join(map(str, a))}] vs. "
                            f"[{','.join(map(str, b))}]") from None
        return np.asarray(out, dtype=a.dtype)

    return broadcast_args
