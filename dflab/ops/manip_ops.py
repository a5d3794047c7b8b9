"""Manipulation ops that repeat or reorder a tensor's elements: ``Tile``, ``BroadcastTo``
and ``ReverseV2``.

Part of the array family: schema, shape rule, gradient and builder side by side; kernels in
``dflab.kernels.array_kernels``. ``array_ops`` re-exports the builders (it stays the one module
to import array ops from) and imports this module only at its end, after defining the helpers
and basic ops that this module imports from it.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant, constant_value, constant_value_as_shape
from dflab.framework.registry import RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops.array_ops import (
    _apply,
    _as_int_tensor,
    _check_index_dtype,
    _dense,
    _normalize_axis,
    _partial_ints,
    _shape_of,
    reshape,
    size,
    stack,
    transpose,
)
from dflab.ops.op_util import as_data


# --- Tile / BroadcastTo / ReverseV2 ----------------------------------------------------------
def _tile_infer(op):
    x, multiples = op.inputs
    _check_index_dtype(multiples, "multiples")
    dt = x.dtype.base_dtype
    m = _partial_ints(multiples)
    rank_x = x.shape.ndims
    if m is not None and rank_x is not None and len(m) != rank_x:
        raise ValueError(f"Shape must be rank {rank_x} but is rank {len(m)} for multiples")
    if m is None:
        return [(dt, TensorShape(None if rank_x is None else [None] * rank_x))]
    if any(v is not None and v < 0 for v in m):
        raise ValueError(f"multiples must be non-negative, got {m}")
    dims = x.shape.as_list() if rank_x is not None else [None] * len(m)
    out = [0 if v == 0 else (None if d is None or v is None else d * v)
           for d, v in zip(dims, m)]
    return [(dt, TensorShape(out))]


register_op("Tile", _tile_infer)


@RegisterGradient("Tile")
def _tile_grad(op, grad):
    """Each input element was copied to every tile: view the gradient as
    [m0, d0, m1, d1, ...] and sum over the tile axes."""
    from dflab.ops import math_ops

    x, multiples = op.inputs
    grad = _dense(grad)
    mv = constant_value(multiples)
    if mv is not None and x.shape.is_fully_defined():
        split_shape = [int(v) for pair in zip(np.ravel(mv), x.shape.as_list()) for v in pair]
    else:
        input_shape = _shape_of(x, out_type=multiples.dtype.base_dtype)
        split_shape = reshape(transpose(stack([multiples, input_shape])), [-1])
    if x.shape.ndims is not None:
        axes = list(range(0, 2 * x.shape.ndims, 2))
    else:
        axes = _apply("Range", [constant(0), size(split_shape), constant(2)])
    out = math_ops.reduce_sum(reshape(grad, split_shape), axes)
    return [out, None]


def tile(input, multiples, name=None):  # noqa: A002
    """Repeat ``input`` ``multiples[i]`` times along each axis i."""
    return _apply("Tile", [as_data(input), _as_int_tensor(multiples)], None, name)


def _broadcast_to_infer(op):
    x, shape_t = op.inputs
    _check_index_dtype(shape_t, "shape")
    target = constant_value_as_shape(shape_t)
    dt = x.dtype.base_dtype
    if target.ndims is None or x.shape.ndims is None:
        return [(dt, target)]
    xd, td = x.shape.as_list(), target.as_list()
    if len(xd) > len(td):
        raise ValueError(f"Rank of input ({len(xd)}) must be no greater than rank of output "
                         f"shape ({len(td)})")
    out = list(td)
    lead = len(td) - len(xd)
    for i, d in enumerate(xd):
        t = td[lead + i]
        if d is not None and d != 1 and t is not None and d != t:
            raise ValueError(f"Incompatible shapes for broadcasting: {x.shape} and {target}")
        if t is None and d is not None and d != 1:
            out[lead + i] = d
    return [(dt, TensorShape(out))]


register_op("BroadcastTo", _broadcast_to_infer)


def _sum_to(grad, x):
    """Sum ``grad`` over the axes along which ``x`` was broadcast; the result has x's shape."""
    from dflab.ops import math_ops

    gd, xd = grad.shape.as_tuple(), x.shape.as_tuple()
    if gd is not None and xd is not None and None not in gd and None not in xd:
        lead = len(gd) - len(xd)
        axes = list(range(lead)) + [lead + i for i, d in enumerate(xd)
                                    if d == 1 and gd[lead + i] != 1]
        out = math_ops.reduce_sum(grad, axes) if axes else grad
        if tuple(out.shape.as_list()) != xd:
            out = reshape(out, list(xd))
        return out
    rx = _ops.apply_op("BroadcastGradientArgs", [_shape_of(x), _shape_of(grad)]).outputs[0]
    return reshape(math_ops.reduce_sum(grad, rx), _shape_of(x))


@RegisterGradient("BroadcastTo")
def _broadcast_to_grad(op, grad):
    return [_sum_to(_dense(grad), op.inputs[0]), None]


def broadcast_to(input, shape, name=None):  # noqa: A002
    """``input`` broadcast (NumPy rules) to ``shape``."""
    return _apply("BroadcastTo", [as_data(input), _as_int_tensor(shape)], None, name)


def _reverse_infer(op):
    x, axis_t = op.inputs
    _check_index_dtype(axis_t, "axis")
    ax = _partial_ints(axis_t)
    rank_x = x.shape.ndims
    if ax is not None and rank_x is not None:
        known = [_normalize_axis(a, rank_x) for a in ax if a is not None]
        if len(set(known)) != len(known):
            raise ValueError(f"axis {ax} specifies the same dimension more than once")
    return [(x.dtype.base_dtype, x.shape)]


register_op("ReverseV2", _reverse_infer)


@RegisterGradient("ReverseV2")
def _reverse_grad(op, grad):
    return [reverse(_dense(grad), op.inputs[1]), None]


def reverse(tensor, axis, name=None):
    """``tensor`` with the order of elements reversed along each axis in ``axis``."""
    return _apply("ReverseV2", [as_data(tensor, "tensor"), _as_int_tensor(axis)], None, name)


reverse_v2 = reverse


__all__ = ["tile", "broadcast_to", "reverse", "reverse_v2"]
