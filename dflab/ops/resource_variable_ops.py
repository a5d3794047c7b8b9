"""Resource variables: the paper's model of state, and TF 2.x ``compat.v1``'s default.

A resource variable is a *handle* (``VarHandleOp``, dtype ``resource``) that names the
variable's state on its device; the value is read by ``ReadVariableOp`` and changed by
``AssignVariableOp`` / ``AssignAddVariableOp`` / ``ResourceScatter*`` / ``ResourceApply*``.
Every use of the variable as a tensor builds a fresh read in the current control context, so a
read placed under ``control_dependencies([update])`` sees the update. (A reference variable's
ordinary uses share one ``read`` snapshot made when the variable was built, which the update
does not order.)

At run time the handle is the variable's ``VarState`` (``dflab.runtime.resources``), the same
object a reference variable hands out; the ops that take a handle are colocated with it by the
placer, as TF's are, so a handle never crosses devices.

``use_resource=`` on ``Variable``/``get_variable`` picks the kind per variable;
``enable_resource_variables()`` / ``disable_resource_variables()`` set the default, which
follows TF 2.x's ``compat.v1`` (resource); ``tf.compat.v1.disable_v2_behavior()`` switches to
reference variables as TF does.
"""

from __future__ import annotations

import threading

from dflab.framework import dtypes as _dt
from dflab.framework import object_identity
from dflab.framework import ops as _ops
from dflab.framework.eager_tensor import numpy_text
from dflab.framework.registry import (
    NotDifferentiable,
    RegisterGradient,
    get_op_def,
    register_op,
)
from dflab.framework.tensor_shape import TensorShape, as_shape
from dflab.ops import array_ops, slicing_ops
from dflab.ops import variables as variables_module
from dflab.ops.op_util import variable_dtype_shape
from dflab.ops.variables import Variable

# --- the default kind ----------------------------------------------------------------------------
_DEFAULT_USE_RESOURCE = [True]  # process-wide, as TF's switch is

# ``scatter_ops.batch_scatter_update`` (that module imports this one): TF's composition of a
# batch's row updates into one ``scatter_nd_update``, set when it loads.
_BATCH_SCATTER_UPDATE: list = [None]


def enable_resource_variables() -> None:
    """New variables are resource variables unless ``use_resource=False`` is passed."""
    _DEFAULT_USE_RESOURCE[0] = True


def disable_resource_variables() -> None:
    """New variables are reference variables (TF1's) unless ``use_resource=True`` is passed."""
    _DEFAULT_USE_RESOURCE[0] = False


def resource_variables_enabled() -> bool:
    return _DEFAULT_USE_RESOURCE[0]


def uses_resource(use_resource) -> bool:
    return _DEFAULT_USE_RESOURCE[0] if use_resource is None else bool(use_resource)


# --- the ops -------------------------------------------------------------------------------------
def _check_handle(op):
    h = op.inputs[0]
    if h.dtype.base_dtype is not _dt.resource:
        raise TypeError(f"'{op.type}' Op requires that input 'resource' be a resource handle "
                        f"(a resource variable), got {h.dtype.name}")
    dtype, shape = variable_dtype_shape(h)
    want = op.attrs.get("dtype")
    if dtype is not None and want is not None and want is not dtype:
        raise TypeError(f"'{op.type}' Op reads {want.name} from a {dtype.name} variable")
    return dtype or want, shape


def _handle_infer(op):
    return [(_dt.resource, TensorShape([]))]


def _read_infer(op):
    _, shape = _check_handle(op)
    return [(op.get_attr("dtype"), shape)]


def _assign_infer(op):
    _, shape = _check_handle(op)
    value = op.inputs[1]
    if value.dtype.base_dtype is not op.get_attr("dtype"):
        raise TypeError(f"Input 'value' of '{op.type}' Op has type {value.dtype.name} that does "
                        f"not match type {op.get_attr('dtype').name} of the variable.")
    if not shape.is_compatible_with(value.shape):
        raise ValueError(f"Shapes {shape} and {value.shape} are incompatible in {op.type} "
                         f"'{op.name}'")
    return []


def _is_init_infer(op):
    _check_handle(op)
    return [(_dt.bool, TensorShape([]))]


def _gather_infer(op):
    _, shape = _check_handle(op)
    indices = op.inputs[1]
    if not indices.dtype.is_integer:
        raise TypeError(f"indices of '{op.type}' must be int32 or int64, got "
                        f"{indices.dtype.name}")
    if shape.ndims is None or indices.shape.ndims is None:
        return [(op.get_attr("dtype"), TensorShape(None))]
    return [(op.get_attr("dtype"), indices.shape.concatenate(shape[1:]))]


def _scatter_infer(op):
    dtype, shape = _check_handle(op)
    _, indices, updates = op.inputs
    if not indices.dtype.is_integer:
        raise TypeError(f"indices must be int32 or int64, got {indices.dtype.name}")
    if dtype is not None and updates.dtype.base_dtype is not dtype:
        raise TypeError(f"updates dtype {updates.dtype.name} does not match the variable's "
                        f"{dtype.name}")
    if shape.ndims is not None and indices.shape.ndims is not None:
        want = indices.shape.concatenate(shape[1:])
        if not updates.shape.is_compatible_with(want) and updates.shape.ndims != 0:
            raise ValueError(f"updates shape {updates.shape} must be {want}")
    return []


def _count_up_to_infer(op):
    dtype, shape = _check_handle(op)
    if dtype not in (_dt.int32, _dt.int64, None):
        raise TypeError(f"'ResourceCountUpTo' counts in an int32 or int64 variable: its "
                        f"DataType {dtype.name} is not in list of allowed values: int32, int64")
    if shape.ndims not in (None, 0):
        raise ValueError(f"ResourceCountUpTo '{op.name}' needs a scalar variable: shape must "
                         f"be rank 0 but is rank {shape.ndims}")
    return [(op.get_attr("T"), TensorShape([]))]


register_op("VarHandleOp", _handle_infer, stateful=True)
register_op("ReadVariableOp", _read_infer, stateful=True)
for _t in ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"):
    register_op(_t, _assign_infer, stateful=True)
register_op("VarIsInitializedOp", _is_init_infer, stateful=True)
register_op("ResourceGather", _gather_infer, stateful=True)
SCATTER_OPS = ("ResourceScatterUpdate", "ResourceScatterAdd", "ResourceScatterSub",
               "ResourceScatterMul", "ResourceScatterDiv", "ResourceScatterMin",
               "ResourceScatterMax")
for _t in SCATTER_OPS:
    register_op(_t, _scatter_infer, stateful=True)
register_op("ResourceCountUpTo", _count_up_to_infer, stateful=True)
for _t in ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp", "ResourceCountUpTo",
           *SCATTER_OPS):
    get_op_def(_t).writes_handle = True
for _t in ("VarHandleOp", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
           "VarIsInitializedOp", "ResourceCountUpTo", *SCATTER_OPS):
    NotDifferentiable(_t)


@RegisterGradient("ReadVariableOp")
def _read_grad(op, grad):
    # The gradient of a read is the gradient for the variable (its handle): the walk sums the
    # contributions of every read of the same variable.
    return [grad]


@RegisterGradient("ResourceGather")
def _gather_grad(op, grad):
    from dflab.ops.gradients import IndexedSlices

    handle, indices = op.inputs
    _, shape = variable_dtype_shape(handle)
    if shape.is_fully_defined():
        dense_shape = _ops.convert_to_tensor(shape.as_list(), dtype=_dt.int32)
    else:
        dense_shape = array_ops.shape(read_variable_op(handle, op.get_attr("dtype")))
    size = array_ops.expand_dims(array_ops.size(indices), 0)
    values_shape = array_ops.concat([size, dense_shape[1:]], 0)
    values = array_ops.reshape(grad, values_shape)
    return [IndexedSlices(values, array_ops.reshape(indices, size), dense_shape), None]


def var_handle_op(dtype, shape, name="Variable", shared_name=""):
    attrs = {"dtype": _dt.as_dtype(dtype).base_dtype, "shape": as_shape(shape),
             "container": "", "shared_name": shared_name}
    return _ops.apply_op("VarHandleOp", [], attrs, name).outputs[0]


# A read's attributes per dtype, made once: every eager read of a variable keys its kernel.
_READ_ATTRS: dict = {}


def read_variable_op(handle, dtype, name=None):
    attrs = _READ_ATTRS.get(dtype)
    if attrs is None:
        attrs = _READ_ATTRS[dtype] = _ops.FrozenAttrs(dtype=_dt.as_dtype(dtype))
    return _ops.apply_unary("ReadVariableOp", handle, name or "ReadVariableOp", attrs)


def _write(op_type, handle, dtype, inputs, name, **attrs):
    return _ops.apply_op(op_type, [handle, *inputs], {"dtype": dtype, **attrs}, name)


# Called with each trainable variable read while anyone listens, as TF's ``variable_accessed``:
# a recording gradient tape (``dflab.eager.backprop``) watches the variable, a trace
# (``dflab.eager.function``) notes it, so that each call of the traced function announces it
# again. Set only while there are listeners: a read without them pays one list lookup.
_ACCESS_HOOK: list = [None]
_LISTENERS: list = []
_listeners_lock = threading.Lock()  # a trace ending on one thread, a tape starting on another


def add_access_listener(listener) -> None:
    """Call ``listener(variable)`` with each trainable variable read from now on."""
    with _listeners_lock:
        if listener not in _LISTENERS:
            _LISTENERS.append(listener)
        _ACCESS_HOOK[0] = _notify


def remove_access_listener(listener) -> None:
    with _listeners_lock:
        if listener in _LISTENERS:
            _LISTENERS.remove(listener)
        if not _LISTENERS:
            _ACCESS_HOOK[0] = None


def _notify(variable) -> None:
    for listener in tuple(_LISTENERS):
        listener(variable)


def _accessed(variable) -> None:
    hook = _ACCESS_HOOK[0]
    if hook is not None and variable._trainable:
        hook(variable)


# --- the variable --------------------------------------------------------------------------------
class ResourceVariable(Variable):
    """A variable whose state is reached through a handle (see the module docstring)."""

    _is_resource = True

    def __init__(self, initial_value=None, trainable=None, collections=None, validate_shape=True,
                 caching_device=None, name=None, variable_def=None, dtype=None,
                 expected_shape=None, import_scope=None, constraint=None, use_resource=None,
                 synchronization=None, aggregation=None, shape=None):
        if variable_def is not None:
            self._init_from_existing(variable_def)
            return
        self._synchronization, self._aggregation, trainable = \
            variables_module.validate_synchronization_aggregation_trainable(
                synchronization, aggregation, trainable, name)
        trainable, collections = variables_module._check_new_variable(
            initial_value, trainable, collections, name)
        init_from_fn = callable(initial_value)
        with _ops.control_dependencies(None), \
                _ops.name_scope(name, "Variable", None if init_from_fn else [initial_value]) \
                as scope:
            handle_name = scope[:-1] if scope else "Variable"
            with _ops.name_scope("Initializer"):
                value = initial_value() if init_from_fn else initial_value
                self._initial_value = _ops.convert_to_tensor(value, dtype=dtype,
                                                             name="initial_value")
            # The initial value's shape, as TF 2.21 gives it, known or not (validate_shape=False
            # only lifts the need for a fully known one, and lets assignments change it).
            var_shape = self._initial_value.shape
            if validate_shape and not var_shape.is_fully_defined():
                raise ValueError(
                    f"initial_value must have a shape specified: {self._initial_value}")
            self._dtype = self._initial_value.dtype.base_dtype
            self._validate_shape = validate_shape
            # The scope ("v/") names the handle op exactly "v", as the variable itself.
            self._handle = var_handle_op(self._dtype, var_shape, name=scope or handle_name,
                                         shared_name=handle_name)
            # What Variable's name/op/graph/device read: here the handle.
            self._variable = self._handle
            with _ops.colocate_with(self._handle.op):
                with _ops.name_scope("IsInitialized"):
                    self._is_initialized = _ops.apply_op(
                        "VarIsInitializedOp", [self._handle], None,
                        "VarIsInitializedOp").outputs[0]
                self._initializer_op = _write("AssignVariableOp", self._handle, self._dtype,
                                              [self._initial_value], "Assign")
                with _ops.name_scope("Read"):
                    self._graph_element = read_variable_op(self._handle, self._dtype)
        self._trainable = trainable
        self._constraint = constraint
        self._save_slice_info = None
        _ops.get_default_graph().add_to_collections(collections, self)

    def _init_from_existing(self, d):
        g = _ops.get_default_graph()
        self._handle = self._variable = g.get_tensor_by_name(d["variable_name"])
        self._dtype = self._handle.op.get_attr("dtype")
        self._initializer_op = g.get_operation_by_name(d["initializer_name"])
        self._graph_element = g.get_tensor_by_name(d["snapshot_name"])
        self._initial_value = g.get_tensor_by_name(d["initial_value_name"]) \
            if d.get("initial_value_name") else None
        self._is_initialized = None
        self._trainable = d.get("trainable", True)
        self._constraint = None
        self._save_slice_info = None

    def to_proto(self, export_scope=None) -> dict:
        return {"variable_name": self._handle.name, "initializer_name": self._initializer_op.name,
                "snapshot_name": self._graph_element.name,
                "initial_value_name": self._initial_value.name
                if self._initial_value is not None else "",
                "trainable": self._trainable, "is_resource": True}

    # --- what differs from a reference variable ------------------------------------------
    @property
    def handle(self):
        return self._handle

    @property
    def dtype(self):
        return self._dtype

    @property
    def shape(self):
        if self._set_shape is not None:
            return self._set_shape
        return self._handle.op.get_attr("shape")

    _set_shape = None  # what set_shape() merged in, if it was called

    def set_shape(self, shape) -> None:
        """Merge ``shape`` into the variable's static shape (TF's: ``ValueError`` when they
        are not compatible)."""
        self._set_shape = self.shape.merge_with(shape)

    def get_shape(self):
        return self.shape

    def value(self):
        """A fresh read, colocated with the variable, in the caller's control context."""
        if _ACCESS_HOOK[0] is not None:
            _accessed(self)
        if _ops.get_default_graph().executes_eagerly:
            # Ops run where their resource input lives: colocating is a graph's concern.
            return read_variable_op(self._handle, self._dtype)
        with _ops.colocate_with(self._handle.op):
            return read_variable_op(self._handle, self._dtype)

    def read_value(self):
        if _ops.get_default_graph().executes_eagerly:
            # Eager ops are not named after their scope: the "Read" scope would change nothing.
            return array_ops.identity(self.value())
        with _ops.name_scope("Read"):
            value = self.value()
        return array_ops.identity(value)

    def _ref(self):
        # Builders that take "a variable or its reference" (state_ops, training_ops, Saver)
        # recognise the resource variable itself and build the resource form of their op.
        return self

    def _as_tensor(self):
        return self.value()

    def _as_graph_element(self):
        return self._graph_element

    def initialized_value(self):
        return array_ops.identity(self._initial_value)

    def eval(self, session=None):
        return self._graph_element.eval(session=session)

    def is_initialized(self, name=None):
        with _ops.colocate_with(self._handle.op):
            return _ops.apply_op("VarIsInitializedOp", [self._handle], None,
                                 name or "VarIsInitializedOp").outputs[0]

    def sparse_read(self, indices, name=None):
        if _ACCESS_HOOK[0] is not None:
            _accessed(self)
        with _ops.colocate_with(self._handle.op):
            indices = _ops.convert_to_tensor(indices)
            return _ops.apply_op("ResourceGather", [self._handle, indices],
                                 {"dtype": self._dtype}, name or "ResourceGather").outputs[0]

    gather = sparse_read

    def gather_nd(self, indices, name=None):
        """``tf.gather_nd`` of the variable's value."""
        return array_ops.gather_nd(self.value(), indices, name=name)

    # --- updates -------------------------------------------------------------------------
    def _update(self, op_type, value, name, read_value):
        value = _ops.convert_to_tensor(value, dtype=self._dtype)
        attrs = {}
        if op_type == "AssignVariableOp":
            # As TF: a variable of a fully known shape keeps it; the kernel checks each value
            # (a value of unknown static shape can still be the wrong size at run time).
            validate = bool(getattr(self, "_validate_shape", True)
                            and self.shape.is_fully_defined())
            if validate and not self.shape.is_compatible_with(value.shape):
                # (TF's text, its space before the name included.)
                raise ValueError(f"Cannot assign value to variable ' {self.name}': Shape "
                                 f"mismatch.The variable shape {self.shape}, and the assigned "
                                 f"value shape {value.shape} are incompatible.")
            attrs["validate_shape"] = validate
        with _ops.colocate_with(self._handle.op):
            op = _write(op_type, self._handle, self._dtype, [value], name or op_type, **attrs)
        if not read_value:
            # A graph's caller gets the op to run; eagerly it has run (TF's None).
            return None if self._handle.is_eager else op
        with _ops.control_dependencies([op]):
            return self.read_value()

    def assign(self, value, use_locking=None, name=None, read_value=True):
        return self._update("AssignVariableOp", value, name, read_value)

    def assign_add(self, delta, use_locking=None, name=None, read_value=True):
        return self._update("AssignAddVariableOp", delta, name, read_value)

    def assign_sub(self, delta, use_locking=None, name=None, read_value=True):
        return self._update("AssignSubVariableOp", delta, name, read_value)

    def _scatter(self, op_type, indices, updates, name):
        indices = _ops.convert_to_tensor(indices)
        updates = _ops.convert_to_tensor(updates, dtype=self._dtype)
        with _ops.colocate_with(self._handle.op):
            op = _write(op_type, self._handle, self._dtype, [indices, updates], name or op_type)
        with _ops.control_dependencies([op]):
            return self.read_value()

    def scatter_update(self, sparse_delta, use_locking=False, name=None):
        return self._scatter("ResourceScatterUpdate", sparse_delta.indices,
                             sparse_delta.values, name)

    def scatter_add(self, sparse_delta, use_locking=False, name=None):
        return self._scatter("ResourceScatterAdd", sparse_delta.indices, sparse_delta.values,
                             name)

    def scatter_sub(self, sparse_delta, use_locking=False, name=None):
        return self._scatter("ResourceScatterSub", sparse_delta.indices, sparse_delta.values,
                             name)

    def scatter_mul(self, sparse_delta, use_locking=False, name=None):
        return self._scatter("ResourceScatterMul", sparse_delta.indices, sparse_delta.values,
                             name)

    def scatter_div(self, sparse_delta, use_locking=False, name=None):
        return self._scatter("ResourceScatterDiv", sparse_delta.indices, sparse_delta.values,
                             name)

    def __getitem__(self, slice_spec):
        """The slice of the variable's value, with TF's ``assign`` (``v[1:3].assign(x)``)."""
        return slicing_ops._slice_helper(self.value(), slice_spec, var=self)

    def _strided_slice_assign(self, begin, end, strides, value, name, **masks):
        value = _ops.convert_to_tensor(value, dtype=self._dtype)
        with _ops.colocate_with(self._handle.op):
            op = slicing_ops.strided_slice_assign(self._handle, begin, end, strides, value,
                                                  name=name, **masks)
        with _ops.control_dependencies([op]):
            return self.read_value()

    def scatter_max(self, sparse_delta, use_locking=False, name=None):
        return self._scatter("ResourceScatterMax", sparse_delta.indices, sparse_delta.values,
                             name)

    def scatter_min(self, sparse_delta, use_locking=False, name=None):
        return self._scatter("ResourceScatterMin", sparse_delta.indices, sparse_delta.values,
                             name)

    def batch_scatter_update(self, sparse_delta, use_locking=False, name=None):
        return _BATCH_SCATTER_UPDATE[0](self, sparse_delta.indices, sparse_delta.values,
                                        use_locking=use_locking, name=name)

    def _scatter_nd(self, kind, indices, updates, name):
        op_type = "ResourceScatterNd" + kind
        indices = array_ops._as_int_tensor(indices)
        updates = _ops.convert_to_tensor(updates, dtype=self._dtype)
        with _ops.colocate_with(self._handle.op):
            op = _write(op_type, self._handle, self._dtype, [indices, updates],
                        name or op_type, use_locking=True)
        with _ops.control_dependencies([op]):
            return self.read_value()

    def scatter_nd_update(self, indices, updates, name=None):
        return self._scatter_nd("Update", indices, updates, name)

    def scatter_nd_add(self, indices, updates, name=None):
        return self._scatter_nd("Add", indices, updates, name)

    def scatter_nd_sub(self, indices, updates, name=None):
        return self._scatter_nd("Sub", indices, updates, name)

    def scatter_nd_max(self, indices, updates, name=None):
        return self._scatter_nd("Max", indices, updates, name)

    def scatter_nd_min(self, indices, updates, name=None):
        return self._scatter_nd("Min", indices, updates, name)

    def ref(self):
        """A hashable reference to the variable (TF's ``Variable.ref()``; ``deref()``)."""
        return object_identity.Reference(self)

    experimental_ref = ref

    def count_up_to(self, limit):
        with _ops.colocate_with(self._handle.op):
            return _ops.apply_op("ResourceCountUpTo", [self._handle],
                                 {"limit": int(limit), "T": self._dtype},
                                 "ResourceCountUpTo").outputs[0]

    # --- in-place operators: TF's refusal (Python would rebind the name to a new tensor, and
    # the variable would silently keep its value). A reference variable keeps TF 1.x's rebind.
    def __iadd__(self, other):
        raise RuntimeError(_in_place_refusal("variable", "+=", "variable.assign_add(value)",
                                             "variable + value"))

    def __isub__(self, other):
        # (TF's text suggests ``*`` for a new tensor here: kept as TF writes it.)
        raise RuntimeError(_in_place_refusal("variable", "-=", "variable.assign_sub(value)",
                                             "variable * value"))

    def __imul__(self, other):
        raise RuntimeError(_in_place_refusal("var", "*=", "var.assign(var * value)",
                                             "var * value"))

    def __itruediv__(self, other):
        raise RuntimeError(_in_place_refusal("var", "/=", "var.assign(var / value)",
                                             "var / value"))

    def __ipow__(self, other):
        raise RuntimeError(_in_place_refusal("var", "**=", "var.assign(var ** value)",
                                             "var ** value"))

    # --- eager variables (``dflab.eager``): the handle holds the state -------------------------
    @property
    def _in_eager(self) -> bool:
        return self._handle.is_eager

    def numpy(self):
        """The variable's value on the host (eager variables only, as in TF)."""
        if not self._handle.is_eager:
            raise NotImplementedError("numpy() is only available when eager execution is "
                                      "enabled.")
        import numpy as np

        state = self._handle.value_in_memory()
        with state.lock:
            value = self._handle.device_object.to_host(state.read())
        value = np.array(value)
        return value[()] if value.ndim == 0 else value

    def __array__(self, dtype=None, copy=None):
        import numpy as np

        return np.asarray(self.numpy(), dtype=dtype)

    # Python conversions of an eager variable's value, as TF's (``int(ckpt.save_counter)``,
    # ``for row in v``); a graph's variable has no value to give (the graph tensor refuses).
    def __int__(self):
        return int(self.value())

    def __float__(self):
        return float(self.value())

    def __complex__(self):
        return complex(self.value())

    def __bool__(self):
        if self._handle.is_eager:
            return bool(self.value())
        return super().__bool__()

    def __iter__(self):
        if self._handle.is_eager:
            return iter(self.value())
        return super().__iter__()

    def __repr__(self):
        if self._handle.is_eager:
            return (f"<tf.Variable '{self.name}' shape={self.shape} dtype={self.dtype.name}, "
                    f"numpy={numpy_text(self.numpy())}>")
        return (f"<tf.Variable '{self.name}' shape={self.shape} "
                f"dtype={self.dtype.name}>")


def _in_place_refusal(var, symbol, update, new) -> str:
    return (f"`{var} {symbol} value` with `tf.Variable`s is not supported. Use `{update}` to "
            f"modify the variable, or `out = {new}` if you need to get a new output Tensor.")


variables_module._RESOURCE_VARIABLE[0] = ResourceVariable
variables_module._USES_RESOURCE[0] = uses_resource


def is_resource_variable(v) -> bool:
    return getattr(v, "_is_resource", False)


def scatter_op(kind: str, ref, indices, updates, name=None):
    """``state_ops.scatter_<kind>`` on a resource variable: the op, then the new value."""
    return ref._scatter("ResourceScatter" + kind, indices, updates, name)


__all__ = ["enable_resource_variables", "disable_resource_variables",
           "resource_variables_enabled"]
