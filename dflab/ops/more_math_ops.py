"""More of ``tf.math`` built from existing ops as TF builds them: ``saturate_cast``, variance,
standard deviation and Euclidean norm reductions.

No new op types: each is a composite, so it runs wherever its ops do and differentiates
through them.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.ops import math_ops as _m
from dflab.ops.special_math_ops import conj, real


def _limits(in_dtype, out_dtype):
    """(min, max) of ``out_dtype`` as values of ``in_dtype`` that cast into range (a float
    bound that rounds past the integer range is moved one step towards zero, as TF does)."""
    np_in = in_dtype.as_numpy_dtype
    out_min, out_max = out_dtype.min, out_dtype.max
    promoted_type = np.promote_types(np_in, out_dtype.as_numpy_dtype)
    lo = np_in(np.maximum(in_dtype.min, out_min))
    if np.array([lo, out_min], dtype=promoted_type)[0] < np.array(
            [lo, out_min], dtype=promoted_type)[1]:
        lo = np.nextafter(lo, np_in(0), dtype=np_in)
    hi = np_in(np.minimum(float(in_dtype.max), float(out_max)))
    if np.array([hi, out_max], dtype=promoted_type)[0] > np.array(
            [hi, out_max], dtype=promoted_type)[1]:
        hi = np.nextafter(hi, np_in(0), dtype=np_in)
    return lo, hi


def saturate_cast(value, dtype, name=None):
    """Cast ``value`` to ``dtype``, clamping it into ``dtype``'s range first (no
    wrap-around)."""
    with _ops.name_scope(name, "saturate_cast", [value]) as scope:
        value = _ops.convert_to_tensor(value, name="value")
        dtype = _dt.as_dtype(dtype).base_dtype
        in_dtype = value.dtype.base_dtype
        if in_dtype.is_complex:
            if dtype.is_complex:
                return _m.cast(value, dtype, name=scope)
            value = real(value)
            in_dtype = value.dtype.base_dtype
        out_dtype = {_dt.complex64: _dt.float32, _dt.complex128: _dt.float64}.get(dtype, dtype)
        if in_dtype is not _dt.bool and out_dtype is not _dt.bool:
            lo, hi = _limits(in_dtype, out_dtype)
            value = _m.clip_by_value(value, _ops.convert_to_tensor(lo, dtype=in_dtype),
                                     _ops.convert_to_tensor(hi, dtype=in_dtype), name="clamp")
        return _m.cast(value, dtype, name=scope)


def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """The variance over ``axis`` (the mean of squared deviations; real for complex input)."""
    with _ops.name_scope(name or "reduce_variance"):
        x = _ops.convert_to_tensor(input_tensor)
        means = _m.reduce_mean(x, axis=axis, keepdims=True)
        if means.dtype.base_dtype.is_integer:
            raise TypeError(f"Input must be either real or complex. Received integer type "
                            f"{means.dtype.base_dtype.name}.")
        diff = _m.subtract(x, means)
        if diff.dtype.base_dtype.is_complex:
            squared = real(_m.multiply(conj(diff), diff))
        else:
            squared = _m.square(diff)
        return _m.reduce_mean(squared, axis=axis, keepdims=keepdims)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    """The standard deviation over ``axis``."""
    with _ops.name_scope(name or "reduce_std"):
        return _m.sqrt(reduce_variance(input_tensor, axis=axis, keepdims=keepdims))


def reduce_euclidean_norm(input_tensor, axis=None, keepdims=False, name=None):
    """``sqrt(sum(x ** 2))`` over ``axis``."""
    with _ops.name_scope(name, "EuclideanNorm", [input_tensor]):
        x = _ops.convert_to_tensor(input_tensor)
        return _m.sqrt(_m.reduce_sum(_m.square(x), axis=axis, keepdims=keepdims))


__all__ = ["saturate_cast"]
