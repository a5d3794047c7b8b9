"""Stateful ops on variables: ``VariableV2`` and the ops that update it through a reference.

``VariableV2`` outputs a *reference* (dtype ``float32_ref`` …): at run time the kernel hands out
the variable's ``VarState`` from the device's resource manager. Update ops take that reference in
input 0 (``ref_inputs=(0,)``); any other consumer gets the value (the executor dereferences), and
reading an uninitialized variable raises ``FailedPreconditionError`` naming it.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape, as_shape


def _variable_infer(op):
    return [(op.get_attr("dtype")._as_ref(), op.get_attr("shape"))]


register_op("VariableV2", _variable_infer, stateful=True)
NotDifferentiable("VariableV2")


def variable_op_v2(shape, dtype, name="Variable", container="", shared_name=""):
    attrs = {"shape": as_shape(shape), "dtype": _dt.as_dtype(dtype).base_dtype,
             "container": container, "shared_name": shared_name}
    return _ops.apply_op("VariableV2", [], attrs, name).outputs[0]


def _check_ref(op):
    ref = op.inputs[0]
    if not ref.dtype.is_ref_dtype:
        raise TypeError(f"'{op.type}' Op requires that input 'ref' be a mutable tensor "
                        f"(e.g. a tf.Variable), got {ref.dtype.name}")
    return ref


def _assign_infer(op):
    ref = _check_ref(op)
    value = op.inputs[1]
    if value.dtype.base_dtype is not ref.dtype.base_dtype:
        raise TypeError(f"Input 'value' of '{op.type}' Op has type {value.dtype.name} that does "
                        f"not match type {ref.dtype.base_dtype.name} of argument 'ref'.")
    shape = ref.shape
    if op.attrs.get("validate_shape", True):
        if not ref.shape.is_compatible_with(value.shape):
            raise ValueError(f"Shapes {ref.shape} and {value.shape} are incompatible")
        shape = ref.shape.merge_with(value.shape)
    else:
        shape = value.shape
    return [(ref.dtype, shape)]


def _scatter_infer(op):
    ref = _check_ref(op)
    _, indices, updates = op.inputs
    if not indices.dtype.is_integer:
        raise TypeError(f"indices must be int32 or int64, got {indices.dtype.name}")
    if updates.dtype.base_dtype is not ref.dtype.base_dtype:
        raise TypeError(f"updates dtype {updates.dtype.name} does not match {ref.dtype.name}")
    if ref.shape.ndims is not None and indices.shape.ndims is not None:
        want = indices.shape.concatenate(ref.shape[1:])
        if not updates.shape.is_compatible_with(want) and updates.shape.ndims != 0:
            raise ValueError(f"updates shape {updates.shape} must be {want}")
    return [(ref.dtype, ref.shape)]


for _t in ("Assign", "AssignAdd", "AssignSub"):
    register_op(_t, _assign_infer, stateful=True, ref_inputs=(0,))
    NotDifferentiable(_t)
for _t in ("ScatterUpdate", "ScatterAdd", "ScatterSub", "ScatterMul", "ScatterDiv"):
    register_op(_t, _scatter_infer, stateful=True, ref_inputs=(0,))
    NotDifferentiable(_t)


def _ref_of(ref):
    """The reference tensor behind a Variable (or a ref tensor passed directly)."""
    r = getattr(ref, "_ref", None)
    return r() if callable(r) else ref


def _is_resource(ref) -> bool:
    return getattr(ref, "_is_resource", False)


def assign(ref, value, validate_shape=None, use_locking=None, name=None):
    if _is_resource(ref):  # TF's rule: the resource variable's own assign (returns its value)
        return ref.assign(value, name=name)
    r = _ref_of(ref)
    value = _ops.convert_to_tensor(value, dtype=r.dtype.base_dtype)
    attrs = {"validate_shape": True if validate_shape is None else bool(validate_shape),
             "use_locking": True if use_locking is None else bool(use_locking)}
    return _ops.apply_op("Assign", [r, value], attrs, name).outputs[0]


def assign_add(ref, value, use_locking=None, name=None):
    if _is_resource(ref):
        return ref.assign_add(value, name=name)
    r = _ref_of(ref)
    value = _ops.convert_to_tensor(value, dtype=r.dtype.base_dtype)
    return _ops.apply_op("AssignAdd", [r, value], {"use_locking": bool(use_locking)},
                         name).outputs[0]


def assign_sub(ref, value, use_locking=None, name=None):
    if _is_resource(ref):
        return ref.assign_sub(value, name=name)
    r = _ref_of(ref)
    value = _ops.convert_to_tensor(value, dtype=r.dtype.base_dtype)
    return _ops.apply_op("AssignSub", [r, value], {"use_locking": bool(use_locking)},
                         name).outputs[0]


def _scatter(op_type, ref, indices, updates, use_locking, name):
    if _is_resource(ref):
        return ref._scatter("Resource" + op_type, indices, updates, name)
    r = _ref_of(ref)
    indices = _ops.convert_to_tensor(indices)
    updates = _ops.convert_to_tensor(updates, dtype=r.dtype.base_dtype)
    return _ops.apply_op(op_type, [r, indices, updates], {"use_locking": bool(use_locking)},
                         name).outputs[0]


def scatter_update(ref, indices, updates, use_locking=True, name=None):
    return _scatter("ScatterUpdate", ref, indices, updates, use_locking, name)


def scatter_add(ref, indices, updates, use_locking=False, name=None):
    return _scatter("ScatterAdd", ref, indices, updates, use_locking, name)


def scatter_sub(ref, indices, updates, use_locking=False, name=None):
    return _scatter("ScatterSub", ref, indices, updates, use_locking, name)


def scatter_mul(ref, indices, updates, use_locking=False, name=None):
    return _scatter("ScatterMul", ref, indices, updates, use_locking, name)


def scatter_div(ref, indices, updates, use_locking=False, name=None):
    return _scatter("ScatterDiv", ref, indices, updates, use_locking, name)


# --- CountUpTo: the epoch counter of tf.train.limit_epochs ---------------------------------------
def _count_up_to_infer(op):
    ref = _check_ref(op)
    if ref.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"Input 'ref' of 'CountUpTo' Op has type {ref.dtype.name} that is not "
                        "in the list of allowed values: int32_ref, int64_ref")
    if ref.shape.ndims not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {ref.shape.ndims} for "
                         f"'{op.name}' (op: 'CountUpTo') with input shapes: {ref.shape}.")
    return [(ref.dtype.base_dtype, TensorShape([]))]


register_op("CountUpTo", _count_up_to_infer, stateful=True, ref_inputs=(0,))
NotDifferentiable("CountUpTo")


def count_up_to(ref, limit, name=None):
    """Increment the scalar int variable ``ref`` and output its value *before* the increment;
    once ``ref`` has reached ``limit`` the op fails with ``OutOfRangeError`` and leaves it."""
    if _is_resource(ref):
        return ref.count_up_to(limit)
    return _ops.apply_op("CountUpTo", [_ref_of(ref)], {"limit": int(limit)}, name).outputs[0]


# --- initialization queries ----------------------------------------------------------------------
def _is_init_infer(op):
    _check_ref(op)
    return [(_dt.bool, TensorShape([]))]


register_op("IsVariableInitialized", _is_init_infer, stateful=True, ref_inputs=(0,))
NotDifferentiable("IsVariableInitialized")


def is_variable_initialized(ref, name=None):
    if _is_resource(ref):
        return ref.is_initialized(name=name)
    return _ops.apply_op("IsVariableInitialized", [_ref_of(ref)], None, name).outputs[0]


def _report_infer(op):
    return [(_dt.string, TensorShape([None]))]


register_op("ReportUninitializedVariables", _report_infer, stateful=True)
NotDifferentiable("ReportUninitializedVariables")


def report_uninitialized(refs, name=None):
    refs = [_ref_of(r) for r in refs]
    return _ops.apply_op("ReportUninitializedVariables", refs,
                         {"names": [r.op.name for r in refs]}, name).outputs[0]


__all__ = [
    "assign", "assign_add", "assign_sub", "scatter_update", "scatter_add", "scatter_sub",
    "scatter_mul", "scatter_div", "is_variable_initialized", "count_up_to",
]
