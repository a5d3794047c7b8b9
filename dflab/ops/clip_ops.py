"""Clipping: ``clip_by_value``, ``global_norm`` and ``clip_by_global_norm``, composites of
elementwise ops and reductions (no ops of their own). Gradients may arrive as
``IndexedSlices``; clipping keeps them sparse.

Part of the math family: ``math_ops`` re-exports the builders (it stays the one module to
import math ops from) and imports this module only at its end, after defining what this module
imports from it.
"""

from __future__ import annotations

from dflab.framework import ops as _ops
from dflab.framework.eager_tensor import EagerTensor
from dflab.ops import array_ops
from dflab.ops.math_ops import (
    _scalar_like,
    add,
    greater,
    maximum,
    minimum,
    multiply,
    realdiv,
    sqrt,
    square,
    subtract,
)
from dflab.ops.reduction_ops import reduce_sum


# --- clipping -------------------------------------------------------------------------------------
def _indexed_slices_type():
    from dflab.ops.gradients import IndexedSlices  # gradients imports this module

    return IndexedSlices


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    """Elementwise clamp into [min, max]; the gradient passes where ``t`` is not clipped."""
    if type(t) is EagerTensor:  # nothing to convert or name; the shapes are the arrays'
        clipped = maximum(minimum(t, clip_value_max), clip_value_min)
        if clipped._value.shape != t._value.shape:  # clipping must not broadcast t
            raise ValueError(f"Shapes {t.shape} and {clipped.shape} are not compatible")
        return clipped
    slices = _indexed_slices_type()
    with _ops.name_scope(name, "clip_by_value", [t, clip_value_min, clip_value_max]) as scope:
        values = _ops.convert_to_tensor(t.values if isinstance(t, slices) else t)
        t_min = minimum(values, clip_value_max)
        values.shape.merge_with(t_min.shape)  # clipping must not broadcast t
        t_max = maximum(t_min, clip_value_min, name=scope)
        values.shape.merge_with(t_max.shape)
    if isinstance(t, slices):
        return slices(t_max, t.indices, t.dense_shape)
    return t_max


def global_norm(t_list, name=None):
    """``sqrt(sum(||t||^2 for t in t_list))``; None entries are skipped."""
    if not isinstance(t_list, (list, tuple)):
        raise TypeError("t_list should be a sequence")
    slices = _indexed_slices_type()
    values = [None if t is None else _ops.convert_to_tensor(t.values if isinstance(t, slices)
                                                             else t) for t in t_list]
    with _ops.name_scope(name, "global_norm", [v for v in values if v is not None]) as scope:
        squares = []
        for v in values:
            if v is not None:
                with _ops.colocate_with(v):
                    squares.append(reduce_sum(square(v)))
        if not squares:
            raise ValueError("global_norm needs at least one tensor that is not None")
        total = reduce_sum(array_ops.stack(squares))
        return sqrt(total, name=scope)


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """Scale every tensor by ``clip_norm / max(global_norm, clip_norm)``.

    Returns ``(list_clipped, global_norm)``; None entries stay None and ``IndexedSlices`` stay
    sparse. A non-finite norm makes every clipped value NaN, as in TF.
    """
    if not isinstance(t_list, (list, tuple)):
        raise TypeError("t_list should be a sequence")
    t_list = list(t_list)
    if use_norm is None:
        use_norm = global_norm(t_list, name)
    slices = _indexed_slices_type()
    with _ops.name_scope(name, "clip_by_global_norm", [use_norm]) as scope:
        one = _scalar_like(1.0, use_norm)
        clip = _ops.convert_to_tensor(clip_norm, dtype=use_norm.dtype.base_dtype)
        scale = multiply(clip, minimum(realdiv(one, use_norm), realdiv(one, clip)))
        scale = add(scale, subtract(use_norm, use_norm))  # NaN unless the norm is finite
        clipped = []
        for i, t in enumerate(t_list):
            if t is None:
                clipped.append(None)
                continue
            v = _ops.convert_to_tensor(t.values if isinstance(t, slices) else t)
            with _ops.colocate_with(v):
                c = array_ops.identity(multiply(v, scale), name=f"{scope[:-1]}_{i}")
            clipped.append(slices(c, t.indices, t.dense_shape) if isinstance(t, slices) else c)
    return clipped, use_norm


def clip_by_norm(t, clip_norm, axes=None, name=None):
    """``t * clip_norm / max(l2norm(t, axes), clip_norm)``: ``t`` unchanged when its L2 norm
    (over ``axes``, all by default) is at most ``clip_norm``; ``IndexedSlices`` stay sparse."""
    slices = _indexed_slices_type()
    values = t.values if isinstance(t, slices) else t
    with _ops.name_scope(name, "clip_by_norm", [values, clip_norm]) as scope:
        v = _ops.convert_to_tensor(values)
        l2sum = reduce_sum(square(v), axes, keepdims=True)
        positive = greater(l2sum, _scalar_like(0.0, l2sum))
        # The norm of an all-zero tensor is 0: keep its gradient finite (TF's safe sqrt).
        safe = array_ops.where(positive, l2sum, array_ops.ones_like(l2sum))
        norm = array_ops.where(positive, sqrt(safe), l2sum)
        clip = _ops.convert_to_tensor(clip_norm, dtype=v.dtype.base_dtype)
        clipped = array_ops.identity(realdiv(multiply(v, clip), maximum(norm, clip)),
                                     name=scope)
    return slices(clipped, t.indices, t.dense_shape) if isinstance(t, slices) else clipped


__all__ = ["clip_by_value", "clip_by_global_norm", "clip_by_norm", "global_norm"]
