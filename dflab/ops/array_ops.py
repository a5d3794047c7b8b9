"""Array ops: placeholders, identity, shapes and reshaping, filling, slicing, gathering…

Each op: schema (``register_op`` with its shape rule), gradient, and public builder, side by
side. Kernels are in ``dflab.kernels.array_kernels``.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant, constant_value_as_shape
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape, as_shape
from dflab.ops.op_util import unary_infer

newaxis = None


# --- Placeholder ---------------------------------------------------------------------------------
def _placeholder_infer(op):
    return [(op._attrs["dtype"], op._attrs["shape"])]


register_op("Placeholder", _placeholder_infer)
NotDifferentiable("Placeholder")


def placeholder(dtype, shape=None, name=None) -> _ops.Tensor:
    """A tensor that must be fed; ``shape=None`` accepts any shape."""
    attrs = {"dtype": _dt.as_dtype(dtype).base_dtype, "shape": as_shape(shape)}
    return _ops.get_default_graph()._create_op(
        "Placeholder", [], attrs, name, site=_ops._user_site()).outputs[0]


def _pwd_infer(op):
    t = op.inputs[0]
    shape = op._attrs["shape"]
    if not shape.is_compatible_with(t.shape):
        raise ValueError(f"default value shape {t.shape} is not compatible with {shape}")
    return [(t.dtype.base_dtype, shape)]


register_op("PlaceholderWithDefault", _pwd_infer)
NotDifferentiable("PlaceholderWithDefault")


def placeholder_with_default(input, shape, name=None):  # noqa: A002 - TF's argument name
    return _ops.apply_op("PlaceholderWithDefault", [input], {"shape": as_shape(shape)},
                         name).outputs[0]


# --- Identity / StopGradient -------------------------------------------------------------------
def _identity_infer(op):
    t = op.inputs[0]
    return [(t.dtype.base_dtype, t.shape)]


register_op("Identity", _identity_infer)


@RegisterGradient("Identity")
def _identity_grad(op, grad):
    return [grad]


def identity(input, name=None):  # noqa: A002
    return _ops.apply_op("Identity", [input], None, name).outputs[0]


register_op("StopGradient", unary_infer)
NotDifferentiable("StopGradient")


def stop_gradient(input, name=None):  # noqa: A002
    return _ops.apply_op("StopGradient", [input], None, name).outputs[0]


# --- Shape / Reshape ---------------------------------------------------------------------------
def _shape_infer(op):
    rank = op.inputs[0].shape.ndims
    return [(op._attrs["out_type"], TensorShape([rank]))]


register_op("Shape", _shape_infer)
NotDifferentiable("Shape")


def shape(input, name=None, out_type=_dt.int32):  # noqa: A002
    return _ops.apply_op("Shape", [input], {"out_type": _dt.as_dtype(out_type)}, name).outputs[0]


def _reshape_infer(op):
    x, s = op.inputs
    if not s.dtype.is_integer:
        raise TypeError(f"shape must be an integer tensor, got {s.dtype.name}")
    target = constant_value_as_shape(s)
    if target.ndims is None:
        return [(x.dtype.base_dtype, target)]
    dims = target.as_list()
    from dflab.framework.constant_op import constant_value

    cv = constant_value(s)
    n_in = x.shape.num_elements()
    if cv is not None:
        cv = [int(d) for d in np.ravel(cv)]
        if cv.count(-1) > 1:
            raise ValueError("Cannot infer multiple unknown dimensions in reshape")
        known = int(np.prod([d for d in cv if d != -1])) if cv else 1
        if -1 in cv:
            if n_in is not None:
                if known == 0 or n_in % known:
                    raise ValueError(f"Cannot reshape a tensor with {n_in} elements to shape "
                                     f"{cv}")
                dims = [n_in // known if d == -1 else d for d in cv]
        elif n_in is not None and n_in != known:
            raise ValueError(f"Cannot reshape a tensor with {n_in} elements to shape {cv} "
                             f"({known} elements)")
    return [(x.dtype.base_dtype, TensorShape(dims))]


register_op("Reshape", _reshape_infer)


@RegisterGradient("Reshape")
def _reshape_grad(op, grad):
    return [reshape(grad, shape(op.inputs[0])), None]


def reshape(tensor, shape, name=None):  # noqa: F811 - TF's argument name shadows shape()
    return _ops.apply_op("Reshape", [tensor, _as_int_tensor(shape)], None, name).outputs[0]


def _as_int_tensor(v):
    if isinstance(v, _ops.Tensor) or hasattr(v, "_as_tensor"):
        return v
    if isinstance(v, TensorShape):
        v = v.as_list()
    if isinstance(v, (list, tuple)) and any(isinstance(e, _ops.Tensor) for e in v):
        return stack_ints(v)
    return constant(v, dtype=_dt.int32)


def stack_ints(values):
    """Pack a list mixing Python ints and scalar int tensors into a 1-D int32 tensor."""
    return stack([v if isinstance(v, _ops.Tensor) else constant(v, _dt.int32) for v in values])


# --- Pack / Unpack (stack / unstack) ------------------------------------------------------------
def _pack_infer(op):
    from dflab.ops.op_util import check_same_dtype

    dt = check_same_dtype(op)
    n = len(op.inputs)
    shape = TensorShape(None)
    for t in op.inputs:
        shape = shape.merge_with(t.shape)
    axis = op._attrs["axis"]
    if shape.ndims is None:
        return [(dt, TensorShape(None))]
    rank = shape.ndims + 1
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of range for stacking rank-{rank - 1} tensors")
    dims = shape.as_list()
    dims.insert(axis % rank, n)
    return [(dt, TensorShape(dims))]


register_op("Pack", _pack_infer)


@RegisterGradient("Pack")
def _pack_grad(op, grad):
    return unstack(grad, num=len(op.inputs), axis=op._attrs["axis"])


def stack(values, axis=0, name="stack"):
    values = list(values)
    if not values:
        raise ValueError("stack needs at least one value")
    return _ops.apply_op("Pack", values, {"axis": int(axis), "N": len(values)}, name).outputs[0]


def _unpack_infer(op):
    x = op.inputs[0]
    axis, num = op._attrs["axis"], op._attrs["num"]
    if x.shape.ndims is None:
        return [(x.dtype.base_dtype, TensorShape(None))] * num
    dims = x.shape.as_list()
    rank = len(dims)
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of range for a rank-{rank} tensor")
    if dims[axis % rank] is not None and dims[axis % rank] != num:
        raise ValueError(f"cannot unstack {dims[axis % rank]} slices into {num} outputs")
    del dims[axis % rank]
    return [(x.dtype.base_dtype, TensorShape(dims))] * num


register_op("Unpack", _unpack_infer)


@RegisterGradient("Unpack")
def _unpack_grad(op, *grads):
    grads = [g if g is not None else zeros_like(t) for g, t in zip(grads, op.outputs)]
    return [stack(grads, axis=op._attrs["axis"])]


def unstack(value, num=None, axis=0, name="unstack"):
    value = _ops.convert_to_tensor(value)
    if num is None:
        if value.shape.ndims is None or value.shape.as_list()[axis] is None:
            raise ValueError(f"Cannot infer num from shape {value.shape}")
        num = value.shape.as_list()[axis]
    return _ops.apply_op("Unpack", [value], {"axis": int(axis), "num": int(num)}, name).outputs


# --- ZerosLike / OnesLike / Fill ---------------------------------------------------------------
register_op("ZerosLike", unary_infer)
register_op("OnesLike", unary_infer)
NotDifferentiable("ZerosLike")
NotDifferentiable("OnesLike")


def zeros_like(tensor, dtype=None, name=None, optimize=True):
    t = _ops.convert_to_tensor(tensor)
    if dtype is not None and _dt.as_dtype(dtype) is not t.dtype.base_dtype:
        from dflab.ops import math_ops

        return math_ops.cast(_ops.apply_op("ZerosLike", [t], None, name).outputs[0], dtype)
    return _ops.apply_op("ZerosLike", [t], None, name).outputs[0]


def ones_like(tensor, dtype=None, name=None, optimize=True):
    t = _ops.convert_to_tensor(tensor)
    if dtype is not None and _dt.as_dtype(dtype) is not t.dtype.base_dtype:
        from dflab.ops import math_ops

        return math_ops.cast(_ops.apply_op("OnesLike", [t], None, name).outputs[0], dtype)
    return _ops.apply_op("OnesLike", [t], None, name).outputs[0]


def _fill_infer(op):
    dims, value = op.inputs
    if value.shape.ndims not in (None, 0):
        raise ValueError(f"value must be a scalar, got shape {value.shape}")
    return [(value.dtype.base_dtype, constant_value_as_shape(dims))]


register_op("Fill", _fill_infer)


@RegisterGradient("Fill")
def _fill_grad(op, grad):
    from dflab.ops import math_ops

    return [None, math_ops.reduce_sum(grad)]


def fill(dims, value, name=None):
    return _ops.apply_op("Fill", [_as_int_tensor(dims), value], None, name).outputs[0]


def zeros(shape, dtype=_dt.float32, name=None):
    dtype = _dt.as_dtype(dtype)
    if isinstance(shape, _ops.Tensor) or (isinstance(shape, (list, tuple)) and any(
            isinstance(e, _ops.Tensor) for e in shape)):
        with _ops.name_scope(name, "zeros") as scope:
            return fill(shape, constant(0, dtype=dtype), name=scope[:-1] + "/")
    return constant(np.zeros(as_shape(shape).as_list(), dtype=dtype._np), dtype=dtype,
                    name=name or "zeros")


def ones(shape, dtype=_dt.float32, name=None):
    dtype = _dt.as_dtype(dtype)
    if isinstance(shape, _ops.Tensor) or (isinstance(shape, (list, tuple)) and any(
            isinstance(e, _ops.Tensor) for e in shape)):
        with _ops.name_scope(name, "ones") as scope:
            return fill(shape, constant(1, dtype=dtype), name=scope[:-1] + "/")
    return constant(np.ones(as_shape(shape).as_list(), dtype=dtype._np), dtype=dtype,
                    name=name or "ones")


__all__ = [
    "placeholder", "placeholder_with_default", "identity", "stop_gradient", "shape", "reshape",
    "zeros_like", "ones_like", "fill", "zeros", "ones", "stack", "unstack", "newaxis",
]
