"""Sequence ops: ``Range`` and ``LinSpace``, evenly spaced values.

Part of the math family: schema, gradient and builder side by side; kernels in
``dflab.kernels.math_kernels``. ``math_ops`` re-exports the builders (it stays the one module to
import math ops from) and imports this module only at its end, after defining what this module
imports from it. ``range`` shadows the Python builtin in this module, so module code reaches the
builtins through ``_py``.
"""

from __future__ import annotations

import builtins as _py

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant, constant_value
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops.math_ops import cast
from dflab.ops.op_util import check_same_dtype


# --- sequences: Range and LinSpace ---------------------------------------------------------------
def _scalar_infer_values(op):
    for t in op.inputs:
        if t.shape.ndims not in (None, 0):
            raise ValueError(f"{op.type} needs scalar inputs, got shape {t.shape}")
    return [constant_value(t) for t in op.inputs]


def range_size(start, limit, delta, np_dtype) -> int:
    """Number of elements of ``range(start, limit, delta)`` in ``np_dtype``, computed as TF's
    kernel does: the shape rule (constant inputs) and the kernel both use it."""
    if delta == 0:
        raise ValueError("Requires delta != 0")
    if delta > 0 and start > limit:
        raise ValueError(f"Requires start <= limit when delta > 0: {start}/{limit}")
    if delta < 0 and start < limit:
        raise ValueError(f"Requires start >= limit when delta < 0: {start}/{limit}")
    kind = np.dtype(np_dtype)
    if kind.kind in "iu":
        return int((_py.abs(int(limit) - int(start)) + _py.abs(int(delta)) - 1)
                   // _py.abs(int(delta)))
    t = kind.type
    with np.errstate(all="ignore"):
        size = np.ceil(np.abs((t(limit) - t(start)) / t(delta)))
    # An infinite or NaN bound would make a size no shape can hold (TF's check and message).
    if not np.isfinite(size) or size > _INT64_MAX:
        raise ValueError(f"Requires ((limit - start) / delta) <= {_INT64_MAX}: "
                         f"start={start}, limit={limit}, delta={delta}")
    return int(size)


_INT64_MAX = 2**63 - 1


def _range_infer(op):
    dt = check_same_dtype(op, ["start", "limit", "delta"])
    if dt not in (_dt.int32, _dt.int64, _dt.float32, _dt.float64):
        raise TypeError(f"Range does not support dtype {dt.name}")
    vals = _scalar_infer_values(op)
    if any(v is None for v in vals):
        return [(dt, TensorShape([None]))]
    return [(dt, TensorShape([range_size(*(np.asarray(v).reshape(()) for v in vals), dt._np)]))]


register_op("Range", _range_infer)
NotDifferentiable("Range")

_RANGE_DTYPES = (_dt.int32, _dt.int64, _dt.float32, _dt.float64)


def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001
    """TF's ``range``: ``range(n)`` or ``range(start, limit, delta)``; the dtype is the widest of
    the arguments' (int32 < int64 < float32 < float64) unless ``dtype`` is given."""
    if limit is None:
        start, limit = 0, start
    if dtype is None and type(start) is int and type(limit) is int and type(delta) is int:
        g = _ops.get_default_graph()
        if g.executes_eagerly:  # ``range(n)`` in a Python loop: no scope, no conversions
            dt = _dt.int32 if _py.all(-(2**31) <= v < 2**31 for v in (start, limit, delta)) \
                else _dt.int64
            return _ops.apply_op_output("Range", [g.scalar(v, dt) for v in (start, limit, delta)],
                                        _ops.frozen_attrs(Tidx=dt), name)
    with _ops.name_scope(name, "Range", [start, limit, delta]) as scope:
        args = [a if _ops.is_tensor_like(a) else _ops.convert_to_tensor(a, dtype=dtype)
                for a in (start, limit, delta)]
        args = [_ops.convert_to_tensor(a) for a in args]
        if dtype is None:
            for a in args:
                if a.dtype.base_dtype not in _RANGE_DTYPES:
                    raise TypeError(f"range does not support dtype {a.dtype.base_dtype.name}")
            inferred = _py.max((a.dtype.base_dtype for a in args), key=_RANGE_DTYPES.index)
        else:
            inferred = _dt.as_dtype(dtype).base_dtype
        args = [cast(a, inferred) for a in args]
        return _ops.apply_op_output("Range", args, _ops.frozen_attrs(Tidx=inferred), scope)


def _linspace_infer(op):
    start, stop, num = op.inputs
    dt = start.dtype.base_dtype
    if dt not in (_dt.float32, _dt.float64):
        raise TypeError(f"LinSpace needs float32 or float64 start/stop, got {dt.name}")
    if stop.dtype.base_dtype is not dt:
        raise TypeError(f"stop has dtype {stop.dtype.base_dtype.name}, expected {dt.name}")
    if num.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"num must be int32 or int64, got {num.dtype.base_dtype.name}")
    n = _scalar_infer_values(op)[2]
    if n is None:
        return [(dt, TensorShape([None]))]
    if int(n) <= 0:
        raise ValueError(f"Requires num > 0: {int(n)}")
    return [(dt, TensorShape([int(n)]))]


register_op("LinSpace", _linspace_infer)
NotDifferentiable("LinSpace")


def linspace(start, stop, num, name=None):
    """``num`` evenly spaced values from ``start`` to ``stop`` inclusive."""
    start = _ops.convert_to_tensor(start)
    stop = _ops.convert_to_tensor(stop, dtype=start.dtype.base_dtype) \
        if not _ops.is_tensor_like(stop) else stop
    if not _ops.is_tensor_like(num):
        num = constant(num, dtype=_dt.int32)
    return _ops.apply_op("LinSpace", [start, stop, num], None, name).outputs[0]


lin_space = linspace


__all__ = ["range", "linspace", "lin_space"]
