"""Kernels for resource variables (``dflab.ops.resource_variable_ops``).

A handle is the variable's ``VarState``: these kernels read and write it as the reference
kernels do, so both kinds of variable share one state model — on the host dense writes install
a new array (a value read earlier keeps its snapshot); on a GPU they write into the variable's
buffer and a read is a copy of it, so the buffer stays the variable's alone (what a captured
step's replays need). The scatter and optimizer kernels of the resource
forms live beside their reference forms (``state_kernels``, ``training_kernels``).

Every kernel here holds the variable's lock while it reads or writes the value, as TF's
resource kernels hold the variable's mutex: updates of a resource variable never interleave,
and a read (a gather too) never sees a scatter's write half done.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels.registry import kernel
from dflab.kernels.state_kernels import (
    _check_indices,
    _count_up_to,
    _device_buffer,
    _install,
    _owned,
    _write_in_place,
    write_variable,
)


@kernel("VarHandleOp")
def _var_handle(node, ctx):
    state = ctx.resources.variable(node.attr.get("shared_name") or node.name,
                                   node.attr.get("container", ""))
    return lambda: state


@kernel("ReadVariableOp")
def _read(node, ctx):
    xp = ctx.xp
    if xp is np:
        return _host_read

    def read(state):
        with state.lock:
            value = state.read()
            if _device_buffer(xp, value):
                # A GPU's updates write into the variable's buffer: the read is a copy, so the
                # buffer stays the variable's alone (updates never have to move the variable
                # to a new buffer, which a captured step's replays would not follow). A
                # device-to-device copy, recorded when the step is captured.
                return value.copy()
            return value

    return read


def _host_read(state):
    """A host variable's read: the array it holds (frozen while held: no copy to make)."""
    with state.lock:
        return state.read()


@kernel("VarIsInitializedOp")
def _is_initialized(node, ctx):
    return lambda state: np.bool_(state.initialized)


@kernel("AssignVariableOp")
def _assign(node, ctx):
    xp = ctx.xp

    validate_shape = bool(node.attr.get("validate_shape", False))

    def assign(state, value):
        v = xp.asarray(value)
        with state.lock:
            if validate_shape and state.initialized and state.read().shape != v.shape:
                raise errors.InvalidArgumentError(
                    None, None, f"Trying to assign to variable with tensor with wrong shape. "
                    f"Expected {list(state.read().shape)} got {list(v.shape)}")
            # Into the variable's own buffer on a GPU, as the reference Assign writes;
            # elsewhere a private copy becomes the value.
            if not _write_in_place(xp, state, v):
                _install(xp, state, _owned(xp, v))

    return assign


def _dense_update(fn_name):
    def factory(node, ctx):
        fn = getattr(ctx.xp, fn_name)

        def update(state, delta):
            with state.lock:
                old = state.read()
                new = fn(old, delta)
                if new.shape != old.shape:
                    raise errors.InvalidArgumentError(
                        None, None, f"Cannot update variable with shape {list(old.shape)} "
                        f"using a Tensor with shape {list(np.shape(delta))}, shapes must be "
                        "equal.")
                write_variable(ctx.xp, state, new)

        return update

    return factory


kernel("AssignAddVariableOp")(_dense_update("add"))
kernel("AssignSubVariableOp")(_dense_update("subtract"))


@kernel("ResourceGather")
def _gather(node, ctx):
    xp = ctx.xp

    def gather(state, indices):
        # Under the lock: scatters write rows into the variable's buffer in place.
        with state.lock:
            var = state.read()
            idx = _check_indices(xp, indices, var.shape[0], node.op)
            return xp.take(var, idx, axis=0)

    return gather


kernel("ResourceCountUpTo", host_only=True)(_count_up_to)
