"""NumPy kernels for array ops."""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels.registry import kernel, register_kernel


@kernel("Const")
def _const(op, ctx):
    value = op._attrs["value"]
    return lambda: value


@kernel("Placeholder")
def _placeholder(op, ctx):
    dt, shape = op._attrs["dtype"], op._attrs["shape"]

    def must_feed():
        raise errors.InvalidArgumentError(
            None, op, f"You must feed a value for placeholder tensor '{op.name}' with dtype "
            f"{dt.name}" + (f" and shape {shape.as_list()}" if shape.ndims is not None else "")
        )

    return must_feed


def _identity(x):
    return x


def _read_ref(ref):
    return ref.read()


_read_ref.accepts_refs = True


@kernel("Identity")
def _identity_k(op, ctx):
    return _read_ref if op.inputs[0].dtype.is_ref_dtype else _identity


register_kernel("PlaceholderWithDefault", fn=_identity)
register_kernel("StopGradient", fn=_identity)


@kernel("Shape")
def _shape(op, ctx):
    dt = op._attrs["out_type"]._np
    return lambda x: np.array(np.shape(x), dtype=dt)


def _reshape(x, shape):
    return np.reshape(x, shape)


register_kernel("Reshape", fn=_reshape)
register_kernel("ZerosLike", fn=np.zeros_like)
register_kernel("OnesLike", fn=np.ones_like)


def _fill(dims, value):
    return np.full(dims, value, dtype=np.asarray(value).dtype)


register_kernel("Fill", fn=_fill)


@kernel("Pack")
def _pack(op, ctx):
    axis = op._attrs["axis"]
    return lambda *xs: np.stack(xs, axis=axis)


@kernel("Unpack")
def _unpack(op, ctx):
    axis, num = op._attrs["axis"], op._attrs["num"]

    def unpack(x):
        if x.shape[axis] != num:
            raise ValueError(f"Input has {x.shape[axis]} slices along axis {axis}, expected {num}")
        return tuple(np.moveaxis(x, axis, 0))

    return unpack


def _no_op():
    return None


register_kernel("NoOp", fn=_no_op)
