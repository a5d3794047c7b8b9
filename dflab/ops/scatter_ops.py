"""N-d scatters: into a tensor (``tensor_scatter_nd_update/add/sub/max/min``, which output a
new tensor and have TF's gradients) and into a variable (``scatter_nd_update/add/sub``
through a reference or a resource handle), plus ``scatter_max``/``scatter_min`` and
``batch_scatter_update`` on variables.

Schemas, gradients and builders side by side; kernels in ``dflab.kernels.scatter_kernels``
(the row scatters ``ScatterMax``/``ScatterMin`` in ``state_kernels``). As in TF, a variable
scatter returns the variable's reference (reference variables) or its new value (resource
variables).
"""

from __future__ import annotations

from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, RegisterGradient, get_op_def, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops, state_ops
from dflab.ops import math_ops as _m
from dflab.ops import resource_variable_ops as _rv
from dflab.ops.array_ops import _as_int_tensor, _check_index_dtype, _dense
from dflab.ops.resource_variable_ops import _check_handle, _write


def _check_nd_updates(op_type, shape, indices, updates):
    """TF's shape rule of an N-d scatter into ``shape``: updates are
    ``indices.shape[:-1] + shape[indices.shape[-1]:]``."""
    idims = indices.shape.as_tuple()
    if idims is not None and len(idims) == 0:
        raise ValueError(f"{op_type}: indices must be at least a vector")
    if idims is None or idims[-1] is None or shape.ndims is None:
        return
    k = idims[-1]
    if k > shape.ndims:
        raise ValueError(f"{op_type}: the inner {k} dimensions of indices exceed the rank "
                         f"{shape.ndims} of the output")
    want = TensorShape(list(idims[:-1]) + shape.as_list()[k:])
    if not updates.shape.is_compatible_with(want):
        raise ValueError(f"{op_type}: updates has shape {updates.shape}, expected {want} "
                         f"(indices.shape[:-1] + shape[{k}:])")


def _check_types(op, want, indices, updates):
    _check_index_dtype(indices, "indices")
    if want is not None and updates.dtype.base_dtype is not want:
        raise TypeError(f"Input 'updates' of '{op.type}' Op has type "
                        f"{updates.dtype.base_dtype.name} that does not match type "
                        f"{want.name} of the target")


# --- into a tensor ------------------------------------------------------------------------------
def _tensor_scatter_infer(op):
    tensor, indices, updates = op.inputs
    dt = tensor.dtype.base_dtype
    _check_types(op, dt, indices, updates)
    if op.type in ("TensorScatterMax", "TensorScatterMin") and not (dt.is_integer or
                                                                    dt.is_floating):
        raise TypeError(f"'{op.type}' Op does not take {dt.name}")
    _check_nd_updates(op.type, tensor.shape, indices, updates)
    return [(dt, tensor.shape)]


for _kind in ("Update", "Add", "Sub", "Max", "Min"):
    register_op("TensorScatter" + _kind, _tensor_scatter_infer)


def _tensor_scatter(op_type, tensor, indices, updates, name):
    tensor = _ops.convert_to_tensor(tensor)
    indices = _as_int_tensor(indices)
    updates = _ops.convert_to_tensor(updates, dtype=tensor.dtype.base_dtype)
    return _ops.apply_op(op_type, [tensor, indices, updates], None, name).outputs[0]


def tensor_scatter_nd_update(tensor, indices, updates, name=None):
    """A copy of ``tensor`` with the slices at ``indices`` replaced by ``updates``."""
    return _tensor_scatter("TensorScatterUpdate", tensor, indices, updates, name)


def tensor_scatter_nd_add(tensor, indices, updates, name=None):
    """A copy of ``tensor`` with ``updates`` added at ``indices`` (repeats accumulate)."""
    return _tensor_scatter("TensorScatterAdd", tensor, indices, updates, name)


def tensor_scatter_nd_sub(tensor, indices, updates, name=None):
    """A copy of ``tensor`` with ``updates`` subtracted at ``indices``."""
    return _tensor_scatter("TensorScatterSub", tensor, indices, updates, name)


def tensor_scatter_nd_max(tensor, indices, updates, name=None):
    """A copy of ``tensor`` holding ``max(tensor, updates)`` at ``indices``."""
    return _tensor_scatter("TensorScatterMax", tensor, indices, updates, name)


def tensor_scatter_nd_min(tensor, indices, updates, name=None):
    """A copy of ``tensor`` holding ``min(tensor, updates)`` at ``indices``."""
    return _tensor_scatter("TensorScatterMin", tensor, indices, updates, name)


tensor_scatter_update = tensor_scatter_nd_update
tensor_scatter_add = tensor_scatter_nd_add
tensor_scatter_sub = tensor_scatter_nd_sub


@RegisterGradient("TensorScatterUpdate")
def _tensor_scatter_update_grad(op, grad):
    grad = _dense(grad)
    indices, updates = op.inputs[1], op.inputs[2]
    tensor_grad = tensor_scatter_nd_update(array_ops.identity(grad), indices,
                                           array_ops.zeros_like(updates))
    return [tensor_grad, None, array_ops.gather_nd(grad, indices)]


@RegisterGradient("TensorScatterAdd")
def _tensor_scatter_add_grad(op, grad):
    grad = _dense(grad)
    return [grad, None, array_ops.gather_nd(grad, op.inputs[1])]


@RegisterGradient("TensorScatterSub")
def _tensor_scatter_sub_grad(op, grad):
    grad = _dense(grad)
    return [grad, None, _m.negative(array_ops.gather_nd(grad, op.inputs[1]))]


def _tensor_scatter_min_or_max_grad(op, grad):
    # TF's rule: the gradient is shared evenly between the tensor's entry and the updates
    # that equal the output there.
    grad = _dense(grad)
    x, indices, y = op.inputs
    out = op.outputs[0]
    x_ind = _m.cast(_m.equal(x, out), grad.dtype)
    y_ind = _m.cast(_m.equal(y, array_ops.gather_nd(out, indices)), grad.dtype)
    ys_ind = array_ops.scatter_nd(indices, y_ind,
                                  array_ops.shape(x, out_type=indices.dtype))
    ind = _m.add(x_ind, ys_ind)
    return [_m.truediv(_m.multiply(grad, x_ind), ind), None,
            _m.multiply(array_ops.gather_nd(_m.truediv(grad, ind), indices), y_ind)]


RegisterGradient("TensorScatterMax")(_tensor_scatter_min_or_max_grad)
RegisterGradient("TensorScatterMin")(_tensor_scatter_min_or_max_grad)


# --- into a variable ----------------------------------------------------------------------------
def _ref_scatter_nd_infer(op):
    ref = state_ops._check_ref(op)
    _, indices, updates = op.inputs
    _check_types(op, ref.dtype.base_dtype, indices, updates)
    _check_nd_updates(op.type, ref.shape, indices, updates)
    return [(ref.dtype, ref.shape)]


def _resource_scatter_nd_infer(op):
    dtype, shape = _check_handle(op)
    _, indices, updates = op.inputs
    _check_types(op, dtype, indices, updates)
    _check_nd_updates(op.type, shape, indices, updates)
    return []


for _kind in ("Update", "Add", "Sub"):
    register_op("ScatterNd" + _kind, _ref_scatter_nd_infer, stateful=True, ref_inputs=(0,))
    NotDifferentiable("ScatterNd" + _kind)
for _kind in ("Update", "Add", "Sub", "Max", "Min"):  # (Max, Min: Variable.scatter_nd_max...)
    register_op("ResourceScatterNd" + _kind, _resource_scatter_nd_infer, stateful=True)
    get_op_def("ResourceScatterNd" + _kind).writes_handle = True
    NotDifferentiable("ResourceScatterNd" + _kind)
for _kind in ("Max", "Min"):  # the row scatters' reference forms (their kernels: state_kernels)
    register_op("Scatter" + _kind, state_ops._scatter_infer, stateful=True, ref_inputs=(0,))
    NotDifferentiable("Scatter" + _kind)


def _scatter_nd(kind, ref, indices, updates, use_locking, name):
    indices = _as_int_tensor(indices)
    if state_ops._is_resource(ref):
        updates = _ops.convert_to_tensor(updates, dtype=ref.dtype.base_dtype)
        op_type = "ResourceScatterNd" + kind
        with _ops.colocate_with(ref._handle.op):
            op = _write(op_type, ref._handle, ref.dtype.base_dtype, [indices, updates],
                        name or op_type, use_locking=bool(use_locking))
        with _ops.control_dependencies([op]):
            return ref.read_value()
    r = state_ops._ref_of(ref)
    updates = _ops.convert_to_tensor(updates, dtype=r.dtype.base_dtype)
    return _ops.apply_op("ScatterNd" + kind, [r, indices, updates],
                         {"use_locking": bool(use_locking)}, name).outputs[0]


def scatter_nd_update(ref, indices, updates, use_locking=True, name=None):
    """Replace the slices of variable ``ref`` at ``indices`` by ``updates``."""
    return _scatter_nd("Update", ref, indices, updates, use_locking, name)


def scatter_nd_add(ref, indices, updates, use_locking=False, name=None):
    """Add ``updates`` to the slices of variable ``ref`` at ``indices``."""
    return _scatter_nd("Add", ref, indices, updates, use_locking, name)


def scatter_nd_sub(ref, indices, updates, use_locking=False, name=None):
    """Subtract ``updates`` from the slices of variable ``ref`` at ``indices``."""
    return _scatter_nd("Sub", ref, indices, updates, use_locking, name)


def scatter_max(ref, indices, updates, use_locking=False, name=None):
    """``ref[indices] = max(ref[indices], updates)`` on a variable's rows."""
    return state_ops._scatter("ScatterMax", ref, indices, updates, use_locking, name)


def scatter_min(ref, indices, updates, use_locking=False, name=None):
    """``ref[indices] = min(ref[indices], updates)`` on a variable's rows."""
    return state_ops._scatter("ScatterMin", ref, indices, updates, use_locking, name)


def batch_scatter_update(ref, indices, updates, use_locking=True, name=None):
    """``ref[i..., indices[i..., j], ...] = updates[i..., j, ...]``: a row update per batch
    entry (TF's composition: the batch positions joined to ``indices`` for
    ``scatter_nd_update``)."""
    with _ops.name_scope(name, "BatchScatterUpdate", [ref, indices, updates]):
        indices = _as_int_tensor(indices)
        updates = _ops.convert_to_tensor(updates, dtype=ref.dtype.base_dtype)
        ndims = indices.shape.ndims
        if ndims is None:
            raise ValueError("batch_scatter_update: the rank of indices must be known "
                             "statically")
        if ndims == 1:
            return scatter_nd_update(ref, array_ops.expand_dims(indices, -1), updates,
                                     use_locking=use_locking)
        shape = array_ops.shape(indices, out_type=indices.dtype)
        positions = []
        for d in range(ndims - 1):
            pos = _m.range(shape[d], dtype=indices.dtype)
            view = [1] * ndims
            view[d] = -1
            positions.append(array_ops.reshape(pos, view) + array_ops.zeros_like(indices))
        nd = array_ops.stack(positions + [indices], axis=-1)
        return scatter_nd_update(ref, nd, updates, use_locking=use_locking)


_rv._BATCH_SCATTER_UPDATE[0] = batch_scatter_update  # Variable.batch_scatter_update


__all__ = [
    "tensor_scatter_nd_update", "tensor_scatter_nd_add", "tensor_scatter_nd_sub",
    "tensor_scatter_nd_max", "tensor_scatter_nd_min", "tensor_scatter_update",
    "tensor_scatter_add", "tensor_scatter_sub", "scatter_nd_update", "scatter_nd_add",
    "scatter_nd_sub", "scatter_max", "scatter_min", "batch_scatter_update",
]
