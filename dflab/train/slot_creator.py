"""Slot variables: per-variable optimizer state (momentum accumulators, Adam moments …).

A slot for variable ``w`` is a non-trainable variable created by ``get_variable`` in a fresh
variable scope named after ``w`` and the optimizer (``w/Momentum``; a second one becomes
``w/Momentum_1``), colocated with ``w`` so its update op can run on ``w``'s device — TF1's
``slot_creator``.
"""

from __future__ import annotations

from dflab.framework import ops as _ops
from dflab.ops import array_ops, init_ops
from dflab.ops import variable_scope as _vs


def _create_slot_var(primary, val, scope, validate_shape, shape, dtype):
    current = _vs.get_variable_scope()
    partitioner = current.partitioner
    current.set_partitioner(None)
    try:
        # A value initializer carries its own shape; only a callable needs one.
        shape = shape if callable(val) else None
        # A slot is of its primary's kind (resource or reference), as TF makes it.
        return _vs.get_variable(scope, initializer=val, trainable=False, shape=shape,
                                dtype=dtype, validate_shape=validate_shape,
                                use_resource=getattr(primary, "_is_resource", False))
    finally:
        current.set_partitioner(partitioner)


def _in_slot_scope(primary, name, colocate_with_primary, make):
    # default_name, not name: a second slot of the same name gets a fresh "<name>_1" scope.
    with _vs.variable_scope(None, primary.op.name + "/" + name):
        if colocate_with_primary:
            with _ops.colocate_with(primary.op):
                return make()
        return make()


def create_slot(primary, val, name, colocate_with_primary=True):
    """A slot for ``primary`` initialized to the tensor ``val``."""
    validate_shape = val.get_shape().is_fully_defined()
    return _in_slot_scope(primary, name, colocate_with_primary,
                          lambda: _create_slot_var(primary, val, "", validate_shape, None, None))


def create_slot_with_initializer(primary, initializer, shape, dtype, name,
                                 colocate_with_primary=True):
    """A slot for ``primary`` made by ``initializer(shape, dtype)``."""
    validate_shape = shape.is_fully_defined()
    return _in_slot_scope(
        primary, name, colocate_with_primary,
        lambda: _create_slot_var(primary, initializer, "", validate_shape, shape, dtype))


def create_zeros_slot(primary, name, dtype=None, colocate_with_primary=True):
    """A slot of zeros shaped like ``primary``."""
    if dtype is None:
        dtype = primary.dtype.base_dtype
    slot_shape = primary.get_shape()
    if slot_shape.is_fully_defined():
        return create_slot_with_initializer(primary, init_ops.zeros_initializer(), slot_shape,
                                            dtype, name, colocate_with_primary)
    val = array_ops.zeros_like(primary.initialized_value(), dtype=dtype)
    return create_slot(primary, val, name, colocate_with_primary)
