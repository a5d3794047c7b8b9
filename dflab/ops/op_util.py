"""Shared shape/dtype rules and small graph-building helpers for op definitions."""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant_value
from dflab.framework.op_kinds import BACK_EDGE_OPS, ENTER_OPS, EXIT_OPS, MERGE_OPS, SWITCH_OPS
from dflab.framework.tensor_shape import TensorShape

# Ops a resource handle passes through unchanged (loops, conds, identities): the control-flow
# primitives that forward their first input (LoopCond forwards a predicate).
_HANDLE_PASS_THROUGH = (SWITCH_OPS | MERGE_OPS | ENTER_OPS | EXIT_OPS | BACK_EDGE_OPS
                        | {"Identity"})


class _CapturedHandle:
    """A traced function's placeholder for a variable handle it captured, read as the
    ``VarHandleOp`` it stands for: its ``_handle_dtype`` and ``_handle_shape`` attributes are
    the variable's dtype and shape."""

    __slots__ = ("op",)

    def __init__(self, op):
        self.op = op

    def get_attr(self, name):
        return self.op.get_attr({"dtype": "_handle_dtype", "shape": "_handle_shape"}.get(
            name, name))


def handle_source(t):
    """The ``VarHandleOp`` behind resource handle ``t`` (through loop, cond and identity
    plumbing), or None."""
    for _ in range(64):
        try:
            op = t.op
        except AttributeError:  # an eager handle not a variable's (an iterator's)
            return None
        if op.type == "VarHandleOp":
            return op
        if op.type == "Placeholder" and "_handle_dtype" in op.attrs:
            return _CapturedHandle(op)
        if op.type not in _HANDLE_PASS_THROUGH or not op.inputs:
            return None
        t = op.inputs[0]
    return None


def variable_dtype_shape(handle):
    """(dtype, TensorShape) of the variable a resource handle names ((None, unknown) if the
    handle's source cannot be seen)."""
    src = handle_source(handle)
    if src is None:
        return None, TensorShape(None)
    return src.get_attr("dtype"), src.get_attr("shape")


def capture_placeholder_attrs(t) -> dict:
    """The attributes of the placeholder a traced function's graph stands in for ``t`` with:
    its dtype and shape, and for a resource handle the variable's dtype and shape (what a read
    of it inside the function infers)."""
    dtype = t.dtype.base_dtype
    attrs = {"dtype": dtype, "shape": t.shape}
    if dtype is _dt.resource:
        vdtype, vshape = variable_dtype_shape(t)
        if vdtype is not None:
            attrs["_handle_dtype"] = vdtype
            attrs["_handle_shape"] = vshape
    return attrs


def check_same_dtype(op, names=None) -> _dt.DType:
    """All inputs of ``op`` share a dtype (TF's type attr ``T``); returns it."""
    ins = op.inputs
    dt = ins[0].dtype.base_dtype
    for k, t in enumerate(ins[1:], 1):
        if t.dtype.base_dtype is not dt:
            nm = names[k] if names else f"#{k}"
            raise TypeError(
                f"Input '{nm}' of '{op.type}' Op has type {t.dtype.base_dtype.name} that does "
                f"not match type {dt.name} of argument '{names[0] if names else '#0'}'"
            )
    return dt


def unary_infer(op):
    t = op.inputs[0]
    return [(t.dtype.base_dtype, t.shape)]


def scalar_int(t, what="value"):
    v = constant_value(t)
    return None if v is None else int(np.asarray(v).reshape(()))


def axis_list(axis, rank):
    """Normalise a constant axis argument to a sorted list of non-negative axes (None: all)."""
    if axis is None:
        return None
    ax = np.asarray(axis).ravel().astype(int).tolist()
    if rank is None:
        return None if any(a < 0 for a in ax) else sorted(set(ax))
    out = []
    for a in ax:
        if not -rank <= a < max(rank, 1):
            raise ValueError(f"axis {a} is out of range for a tensor of rank {rank}")
        out.append(a % rank if rank else 0)
    return sorted(set(out))


def skipped_inputs(op) -> tuple:
    """The positions of ``op``'s inputs whose gradients nobody wants (a tape's
    ``skip_input_indices``; a graph op has none: pruning drops what is not fetched)."""
    return getattr(op, "skip_input_indices", None) or ()


def as_data(value, name: str = "input"):
    """A builder's data argument as a tensor of its own dtype, converted before the index
    arguments beside it (a shape, multiples, axes, sizes): given to ``apply_op`` as it is, a
    NumPy array would take the dtype of the op's first tensor input, here the index's int32
    (TF converts each input by its own type attribute)."""
    return value if isinstance(value, _ops.Tensor) else _ops.convert_to_tensor(value, name=name)
