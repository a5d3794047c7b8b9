"""``tf.Variable`` (TF1 reference variables) and the variable collections' helpers.

A Variable is three ops under one name scope, as in TF1: ``name`` (``VariableV2``, the state),
``name/Assign`` (its initializer) and ``name/read`` (an ``Identity`` snapshot every ordinary use
reads). The initializer and the read are colocated with the variable.
"""

from __future__ import annotations

import contextlib
import inspect
import threading

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.ops import GraphKeys
from dflab.ops import array_ops, control_flow_ops, state_ops
from dflab.ops.variable_enums import (
    VariableAggregation,
    VariableSynchronization,
    validate_synchronization_aggregation_trainable,
)


def _check_new_variable(initial_value, trainable, collections, name):
    """What both kinds of variable check and decide first: an initial value outside control
    flow, and (trainable, the collections it joins)."""
    if initial_value is None:
        raise ValueError("initial_value must be specified.")
    if isinstance(initial_value, _ops.Tensor) and not initial_value.is_eager and \
            initial_value.op.control_flow_context is not None:
        raise ValueError(
            f"Initializer for variable {name or 'Variable'} is from inside a control-flow "
            "construct, such as a loop or conditional. When creating a variable inside a "
            "loop or conditional, use a lambda as the initializer.")
    trainable = True if trainable is None else bool(trainable)
    collections = list(collections if collections is not None
                       else [GraphKeys.GLOBAL_VARIABLES])
    if trainable and GraphKeys.TRAINABLE_VARIABLES not in collections:
        collections.append(GraphKeys.TRAINABLE_VARIABLES)
    return trainable, collections


# Set by dflab.ops.resource_variable_ops (which builds on this module): the class that
# ``Variable(...)`` makes when resource variables are asked for, and the default switch.
_RESOURCE_VARIABLE: list = [None]
_USES_RESOURCE: list = [lambda use_resource: bool(use_resource)]


# --- variable creator scopes ----------------------------------------------------------------------
_creators = threading.local()


@contextlib.contextmanager
def variable_creator_scope(variable_creator):
    """TF's ``tf.variable_creator_scope``: inside the block, ``tf.Variable(...)`` calls
    ``variable_creator(next_creator, **kwargs)``, which may change the arguments, make the
    variable elsewhere (a traced function lifts its variables out of its graph) or refuse."""
    stack = _creators.__dict__.setdefault("stack", [])
    stack.append(variable_creator)
    try:
        yield
    finally:
        stack.pop()


class _VariableMeta(type):
    """Routes ``Variable(...)`` through the creators of the enclosing creator scopes."""

    def __call__(cls, *args, **kwargs):
        stack = getattr(_creators, "stack", None)
        if not stack or kwargs.get("variable_def") is not None:
            return super().__call__(*args, **kwargs)
        bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
        bound.arguments.pop("self", None)
        base = super().__call__

        def make(next_creator, creator):
            return lambda **kw: creator(next_creator, **kw)

        fn = lambda **kw: base(**kw)  # noqa: E731
        for creator in stack:  # the innermost scope's creator is called first
            fn = make(fn, creator)
        return fn(**bound.arguments)


class Variable(metaclass=_VariableMeta):
    """``tf.Variable``: a ``ResourceVariable`` by default (TF 2.x ``compat.v1``), or a
    reference variable when ``use_resource=False`` (or the default switched by
    ``disable_resource_variables`` / ``disable_v2_behavior``) asks for one, as TF's constructor
    does."""

    # NumPy defers to our operators (``np_array * variable`` reads the variable).
    __array_priority__ = 100
    _is_resource = False

    def __new__(cls, *args, use_resource=None, variable_def=None, **kwargs):
        if cls is Variable:
            if variable_def is not None:
                resource = bool(variable_def.get("is_resource"))
            else:
                resource = _USES_RESOURCE[0](use_resource)
            if resource:
                cls = _RESOURCE_VARIABLE[0]
        return super().__new__(cls)

    def __init__(self, initial_value=None, trainable=None, collections=None, validate_shape=True,
                 caching_device=None, name=None, variable_def=None, dtype=None,
                 expected_shape=None, import_scope=None, constraint=None, use_resource=None,
                 synchronization=None, aggregation=None, shape=None):
        if variable_def is not None:
            self._init_from_existing(variable_def)
            return
        self._synchronization, self._aggregation, trainable = \
            validate_synchronization_aggregation_trainable(synchronization, aggregation,
                                                           trainable, name)
        trainable, collections = _check_new_variable(initial_value, trainable, collections,
                                                     name)
        init_from_fn = callable(initial_value)
        values = None if init_from_fn else [initial_value]
        # Like TF's init_scope: a variable built inside a cond branch or loop body lives
        # outside it, with no control dependencies.
        with _ops.control_dependencies(None), \
                _ops.name_scope(name, "Variable", values) as scope:
            if init_from_fn:
                with _ops.name_scope("Initializer"):
                    self._initial_value = _ops.convert_to_tensor(
                        initial_value(), dtype=dtype, name="initial_value")
            else:
                self._initial_value = _ops.convert_to_tensor(initial_value, dtype=dtype,
                                                             name="initial_value")
            shape = self._initial_value.shape if validate_shape else None
            if shape is not None and not shape.is_fully_defined():
                raise ValueError(
                    f"initial_value must have a shape specified: {self._initial_value}")
            # validate_shape=False: the variable's shape attr is unknown, as TF has it.
            self._variable = state_ops.variable_op_v2(
                shape, self._initial_value.dtype.base_dtype,
                name=scope[:-1] + "/" if scope else "Variable")
            with _ops.colocate_with(self._variable.op):
                self._initializer_op = state_ops.assign(
                    self._variable, self._initial_value, validate_shape=validate_shape,
                    name="Assign").op
                self._snapshot = array_ops.identity(self._variable, name="read")
        self._trainable = trainable
        self._constraint = constraint
        self._save_slice_info = None
        _ops.get_default_graph().add_to_collections(collections, self)

    def _init_from_existing(self, d):
        g = _ops.get_default_graph()
        self._variable = g.get_tensor_by_name(d["variable_name"])
        self._initializer_op = g.get_operation_by_name(d["initializer_name"])
        self._snapshot = g.get_tensor_by_name(d["snapshot_name"])
        self._initial_value = g.get_tensor_by_name(d["initial_value_name"]) \
            if d.get("initial_value_name") else None
        self._trainable = d.get("trainable", True)
        self._constraint = None
        self._save_slice_info = None

    def to_proto(self, export_scope=None) -> dict:
        return {"variable_name": self._variable.name, "initializer_name": self._initializer_op.name,
                "snapshot_name": self._snapshot.name,
                "initial_value_name": self._initial_value.name if self._initial_value is not None
                else "", "trainable": self._trainable}

    @staticmethod
    def from_proto(variable_def, import_scope=None):
        return Variable(variable_def=variable_def)

    # --- TF1 properties ------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._variable.name

    @property
    def op(self):
        return self._variable.op

    @property
    def graph(self):
        return self._variable.graph

    @property
    def dtype(self):
        return self._variable.dtype

    @property
    def device(self):
        return self._variable.device

    @property
    def shape(self):
        return self._variable.shape

    def get_shape(self):
        return self._variable.shape

    @property
    def initializer(self):
        return self._initializer_op

    @property
    def initial_value(self):
        return self._initial_value

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def synchronization(self) -> VariableSynchronization:
        return getattr(self, "_synchronization", VariableSynchronization.AUTO)

    @property
    def aggregation(self) -> VariableAggregation:
        return getattr(self, "_aggregation", VariableAggregation.NONE)

    @property
    def constraint(self):
        return self._constraint

    def value(self):
        return self._snapshot

    def read_value(self):
        return array_ops.identity(self._variable, name="read")

    def _ref(self):
        return self._variable

    def _as_tensor(self):
        return self._snapshot

    def _as_graph_element(self):
        return self._variable

    def initialized_value(self):
        """The value to initialize another variable from (TF1 helper).

        TF1 builds ``cond(is_initialized, read, initial_value)``; dflab returns the initial
        value, which is what that cond yields inside an initializer run.
        """
        return array_ops.identity(self._initial_value)

    def eval(self, session=None):
        return self._snapshot.eval(session=session)

    def load(self, value, session=None):
        """Put ``value`` in the variable: assigned at once executing eagerly, else by running
        its initializer with the value fed (TF's)."""
        if _ops.executing_eagerly():
            self.assign(value)
            return None
        session = session or _ops.get_default_session()
        if session is None:
            raise ValueError("Either session argument should be provided or default session "
                             "should be established")
        session.run(self._initializer_op, {self._initial_value: value})

    # --- updates -------------------------------------------------------------------------
    def assign(self, value, use_locking=False, name=None, read_value=True):
        out = state_ops.assign(self._variable, value, use_locking=use_locking, name=name)
        return out if read_value else out.op

    def assign_add(self, delta, use_locking=False, name=None, read_value=True):
        out = state_ops.assign_add(self._variable, delta, use_locking=use_locking, name=name)
        return out if read_value else out.op

    def assign_sub(self, delta, use_locking=False, name=None, read_value=True):
        out = state_ops.assign_sub(self._variable, delta, use_locking=use_locking, name=name)
        return out if read_value else out.op

    def scatter_update(self, sparse_delta, use_locking=False, name=None):
        return state_ops.scatter_update(self._variable, sparse_delta.indices,
                                        sparse_delta.values, use_locking, name)

    def scatter_add(self, sparse_delta, use_locking=False, name=None):
        return state_ops.scatter_add(self._variable, sparse_delta.indices,
                                     sparse_delta.values, use_locking, name)

    def scatter_sub(self, sparse_delta, use_locking=False, name=None):
        return state_ops.scatter_sub(self._variable, sparse_delta.indices,
                                     sparse_delta.values, use_locking, name)

    def count_up_to(self, limit):
        return state_ops.count_up_to(self._variable, limit)

    def __repr__(self):
        return (f"<tf.Variable '{self.name}' shape={self.shape} "
                f"dtype={self.dtype.base_dtype.name}_ref>")

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other

    def __bool__(self):
        raise TypeError("Using a `tf.Variable` as a Python `bool` is not allowed.")

    def __iter__(self):
        raise TypeError("'Variable' object is not iterable.")

    @classmethod
    def _overload_operator(cls, operator):
        tensor_oper = getattr(_ops.Tensor, operator)

        def _run_op(a, *args, **kwargs):
            return tensor_oper(a._as_tensor(), *args, **kwargs)

        _run_op.__name__ = operator
        setattr(cls, operator, _run_op)


VariableV1 = Variable


class RefVariable(Variable):
    """A reference variable (TF1's), whatever the default kind."""


def _variable_getitem(self, slice_spec):
    """``v[spec]``: a slice of the variable's value with TF's ``assign`` (a reference
    variable's through ``StridedSliceAssign`` on its reference)."""
    from dflab.ops import slicing_ops

    return slicing_ops._slice_helper(self._as_tensor(), slice_spec, var=self)


def _overload_variable_operators():
    """Give Variable every operator Tensor has (reads the snapshot, like TF1)."""
    for op in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
               "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
               "__rmod__", "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__neg__",
               "__abs__", "__lt__", "__le__", "__gt__", "__ge__", "__and__",
               "__rand__", "__or__", "__ror__", "__xor__", "__rxor__", "__invert__", "__div__",
               "__rdiv__"):
        if hasattr(_ops.Tensor, op):
            Variable._overload_operator(op)
    if "__getitem__" not in vars(Variable):
        Variable.__getitem__ = _variable_getitem


# --- collections and initializers ----------------------------------------------------------
def global_variables(scope=None):
    return _ops.get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


all_variables = global_variables


def local_variables(scope=None):
    return _ops.get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def model_variables(scope=None):
    return _ops.get_collection(GraphKeys.MODEL_VARIABLES, scope)


def trainable_variables(scope=None):
    return _ops.get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def variables_initializer(var_list, name="init"):
    var_list = list(var_list)
    if var_list:
        return control_flow_ops.group(*[v.initializer for v in var_list], name=name)
    return control_flow_ops.no_op(name=name)


initialize_variables = variables_initializer


def global_variables_initializer():
    return variables_initializer(global_variables())


initialize_all_variables = global_variables_initializer


def local_variables_initializer():
    return variables_initializer(local_variables(), name="init")


initialize_local_variables = local_variables_initializer


def is_variable_initialized(variable):
    return state_ops.is_variable_initialized(variable)


def _initialized_where_it_lives(v):
    # Colocated with the variable, whatever device scope (a replica_device_setter's worker
    # side) is active: the check reads its state through a reference edge.
    with _ops.colocate_with(v.op):
        return state_ops.is_variable_initialized(v)


def report_uninitialized_variables(var_list=None, name="report_uninitialized_variables"):
    if var_list is None:
        var_list = global_variables() + local_variables()
    from dflab.framework.constant_op import constant
    from dflab.ops import array_ops, indexing_ops, math_ops

    with _ops.name_scope(name) as scope:
        # One check per variable, each where its variable lives (a ps task, a worker): only
        # booleans cross devices. The names are gathered on the local CPU, as TF does.
        initialized = [_initialized_where_it_lives(v) for v in var_list]
        with _ops.device("/cpu:0"):
            if not var_list:
                return constant([], dtype=_dt.string, name=scope)
            mask = math_ops.logical_not(array_ops.stack(initialized))
            names = constant([v.op.name for v in var_list])
            return indexing_ops.boolean_mask(names, mask, name=scope)


def assert_variables_initialized(var_list=None):
    """A tensor whose evaluation fails with ``FailedPreconditionError`` while a variable of
    ``var_list`` (default: the global and local variables) is uninitialized: the rank of each,
    read where it lives (TF's own check). None when there are no variables."""
    from dflab.ops import array_ops

    if var_list is None:
        var_list = global_variables() + local_variables()
    if not var_list:
        return None
    ranks = []
    for v in var_list:
        with _ops.colocate_with(v.op):
            # Not folded to a constant from the static shape: the Rank op reads the variable.
            ranks.append(_ops.apply_op_output("Rank", [v]))
    return ranks[0] if len(ranks) == 1 else array_ops.stack(ranks)


__all__ = [
    "Variable", "VariableV1", "global_variables", "all_variables", "local_variables",
    "model_variables", "trainable_variables", "variables_initializer", "initialize_variables",
    "global_variables_initializer", "initialize_all_variables", "local_variables_initializer",
    "initialize_local_variables",
    "is_variable_initialized", "report_uninitialized_variables", "variable_creator_scope",
    "assert_variables_initialized",
]
