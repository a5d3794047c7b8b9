"""The graph IR's public module: TF's ``ops`` — the default graph and the functions around it.

The IR itself is defined beside this module and re-exported here, where the rest of dflab (and
users) import it from: ``Tensor`` (``dflab.framework.tensor``), ``Operation``
(``dflab.framework.operation``) and ``Graph`` with its scopes, collections and staleness marks
(``dflab.framework.graph``; ops leave a graph through ``dflab.framework.graph_transaction``).
This module adds what TF 1.x keeps at module level: the default graph (``get_default_graph``,
``reset_default_graph``), the ``tf.*`` scope and collection functions that act on it,
``GraphKeys``, conversion of Python values to tensors (``convert_to_tensor``) and ``apply_op``,
the builders' one entry point (``apply_op_output`` is it for builders that return one output,
so that eager execution need not make the op's record). Invariant: the modules it re-exports
never import it at module level (``Tensor.eval``/``Operation.run`` reach
``_run_with_default_session`` here at call time), so the framework's import graph stays
acyclic.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors

# Defined beside this module, re-exported here: the rest of dflab reads them as ``ops.X``.
from dflab.framework.graph import (  # noqa: F401
    Graph,
    _default_graph_stack,
    _user_site,
    check_not_stale,
)
from dflab.framework.graph import _local as _thread_graphs
from dflab.framework.operation import Operation
from dflab.framework.tensor import Tensor


class GraphKeys:
    GLOBAL_VARIABLES = "variables"
    LOCAL_VARIABLES = "local_variables"
    METRIC_VARIABLES = "metric_variables"
    MODEL_VARIABLES = "model_variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    SUMMARIES = "summaries"
    QUEUE_RUNNERS = "queue_runners"
    TABLE_INITIALIZERS = "table_initializer"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    REGULARIZATION_LOSSES = "regularization_losses"
    LOSSES = "losses"
    SAVERS = "savers"
    SUMMARY_OP = "summary_op"
    GLOBAL_STEP = "global_step"
    TRAIN_OP = "train_op"
    UPDATE_OPS = "update_ops"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
    CONCATENATED_VARIABLES = "concatenated_variables"
    VARIABLES = GLOBAL_VARIABLES


# --------------------------------------------------------------------------------------------
# Default session (TF keeps its stack here too): sessions push themselves, so the graph layer
# finds the session of ``Tensor.eval`` without importing the runtime above it.
# --------------------------------------------------------------------------------------------
_default_session = threading.local()


def get_default_session():
    """The innermost session entered with ``as_default()``/``with`` on this thread, or None."""
    stack = getattr(_default_session, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def default_session(session):
    """Make ``session`` this thread's default session inside the block."""
    stack = _default_session.__dict__.setdefault("stack", [])
    stack.append(session)
    try:
        yield session
    finally:
        stack.remove(session)


def push_default_session(session) -> None:
    """Make ``session`` the default until ``pop_default_session`` (``InteractiveSession``)."""
    _default_session.__dict__.setdefault("stack", []).append(session)


def pop_default_session(session) -> None:
    stack = getattr(_default_session, "stack", [])
    if session in stack:
        stack.remove(session)


def _run_with_default_session(fetches, feed_dict, session):
    sess = session or get_default_session()
    if sess is None:
        raise ValueError(
            "Cannot evaluate tensor using `eval()`: No default session is registered. Use "
            "`with sess.as_default()` or pass an explicit session to `eval(session=sess)`"
        )
    if sess.graph is not _graph_of(fetches):
        raise ValueError("Cannot use the given session to evaluate tensor: the tensor's graph "
                         "is different from the session's graph.")
    return sess.run(fetches, feed_dict)


def _graph_of(x):
    return x.graph


# --------------------------------------------------------------------------------------------
# Default graph
# --------------------------------------------------------------------------------------------
_global_default_graph = Graph()


def get_default_graph() -> Graph:
    stack = _thread_graphs.stack  # what _default_graph_stack() returns, read inline: every op
    return stack[-1] if stack else _global_default_graph


def reset_default_graph() -> None:
    global _global_default_graph
    if _default_graph_stack():
        raise AssertionError(
            "Do not use tf.reset_default_graph() to clear nested graphs. If you need a cleared "
            "graph, exit the nesting and create a new graph."
        )
    if _global_default_graph.executes_eagerly:
        return  # eager execution stays on: there is no graph to clear
    _global_default_graph = Graph()


def get_global_default_graph() -> Graph:
    """The default graph of threads that entered none (the eager context when eager execution
    is on)."""
    return _global_default_graph


def set_global_default_graph(graph: Graph) -> Graph:
    """Make ``graph`` the default of threads that entered none; returns the previous one (how
    ``tf.enable_eager_execution`` installs the eager context)."""
    global _global_default_graph
    previous, _global_default_graph = _global_default_graph, graph
    return previous


# Module-level scope helpers (TF's tf.* functions) --------------------------------------------
def name_scope(name, default_name=None, values=None):
    """TF1 ``tf.name_scope(name, default_name=None, values=None)``; yields the scope string.
    Executing eagerly there is no graph to find from ``values``: the context's own scope,
    which names variables only (a third of the cost: every nn builder opens one)."""
    if name is None and default_name is None and values is not None:
        raise ValueError("At least one of name and default_name must be provided.")
    n = name if name is not None else default_name
    default = get_default_graph()
    if default.executes_eagerly:
        return default.name_scope("" if n is None else n)
    return _graph_name_scope(default, "" if n is None else n, values)


@contextlib.contextmanager
def _graph_name_scope(default, n, values):
    g = _graph_from_values(values, default) if values else default
    with g.as_default() if g is not default else contextlib.nullcontext():
        with g.name_scope(n) as scope:
            yield scope


def executing_eagerly() -> bool:
    """Whether ops run at once on this thread (eager execution, outside any graph)."""
    return get_default_graph().executes_eagerly


def _graph_from_values(values, default=None):
    if default is None:
        default = get_default_graph()
    if default.captures_foreign_tensors:
        return default  # a function body: outside values are captured, never built upon
    g = None
    for v in values or ():
        if isinstance(v, (Tensor, Operation)):
            if g is None:
                g = v.graph
            elif v.graph is not g:
                raise ValueError(f"{v!r} must be from the same graph as the other values.")
    return g or get_default_graph()


def control_dependencies(control_inputs):
    return get_default_graph().control_dependencies(control_inputs)


def device(device_name_or_function):
    return get_default_graph().device(device_name_or_function)


def colocate_with(op, ignore_existing=False):
    return get_default_graph().colocate_with(op, ignore_existing)


def container(container_name):
    """``Graph.container`` of the default graph."""
    return get_default_graph().container(container_name)


def add_to_collection(name, value):
    get_default_graph().add_to_collection(name, value)


def add_to_collections(names, value):
    get_default_graph().add_to_collections(names, value)


def get_collection(key, scope=None):
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key):
    return get_default_graph().get_collection_ref(key)


def get_all_collection_keys():
    return get_default_graph().get_all_collection_keys()


def get_name_scope():
    return get_default_graph().get_name_scope()


# --------------------------------------------------------------------------------------------
# Conversion to tensors
# --------------------------------------------------------------------------------------------
_constant_builder: Callable | None = None  # set by dflab.framework.constant_op
_PY_NUMBERS = frozenset({int, float, bool})
_autopack_builder: Callable | None = None  # set by dflab.ops.array_ops (a Pack op)


def _holds_tensor(value) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_holds_tensor(v) for v in value)
    return is_tensor_like(value)


# tf.register_tensor_conversion_function's table: (priority, order, base types, function).
_CONVERSIONS: list = []


def register_tensor_conversion_function(base_type, conversion_func, priority=100):
    """Make ``convert_to_tensor`` turn instances of ``base_type`` into tensors with
    ``conversion_func(value, dtype=None, name=None, as_ref=False)`` (lower ``priority``
    first); a function may return ``NotImplemented`` to pass. As TF's."""
    types = base_type if isinstance(base_type, tuple) else (base_type,)
    if not all(isinstance(t, type) for t in types):
        raise TypeError(f"Argument `base_type` must be a type or a tuple of types. Obtained: "
                        f"{base_type}")
    if any(issubclass(t, (int, float, complex, np.generic, np.ndarray)) for t in types):
        raise TypeError("Cannot register conversions for Python numeric types and NumPy "
                        "scalars and arrays.")
    if not callable(conversion_func):
        raise TypeError("conversion_func must be callable.")
    _CONVERSIONS.append((priority, len(_CONVERSIONS), types, conversion_func))
    _CONVERSIONS.sort(key=lambda entry: entry[:2])


def _registered_conversion(value, dtype, name):
    """The tensor a registered conversion function makes of ``value``; None where none
    applies (or every one that applies returns ``NotImplemented``)."""
    for _, _, types, func in _CONVERSIONS:
        if not isinstance(value, types):
            continue
        out = func(value, dtype=dtype, name=name, as_ref=False)
        if out is NotImplemented:
            continue
        if not isinstance(out, Tensor):
            raise RuntimeError(f"Conversion function {func!r} for type {type(value)} returned "
                               f"non-Tensor: {out!r}")
        if dtype is not None and not _dt.as_dtype(dtype).is_compatible_with(out.dtype):
            raise RuntimeError(f"Conversion function {func!r} for type {type(value)} returned "
                               f"incompatible dtype: requested = {_dt.as_dtype(dtype).name}, "
                               f"actual = {out.dtype.base_dtype.name}")
        return out
    return None


def convert_to_tensor(value, dtype=None, name=None, preferred_dtype=None, dtype_hint=None):
    """A Tensor for ``value``: tensors pass through (dtype checked), others become constants."""
    if type(value) in _PY_NUMBERS and preferred_dtype is None and dtype_hint is None:
        # A number, first: no conversion function may be registered for one.
        return _constant_builder(value, dtype=dtype, name=name or "Const")
    if isinstance(value, Tensor):
        if dtype is not None and not _dt.as_dtype(dtype).is_compatible_with(value.dtype):
            raise ValueError(
                f"Tensor conversion requested dtype {_dt.as_dtype(dtype).name} for Tensor with "
                f"dtype {value.dtype.base_dtype.name}: {value!r}"
            )
        return value
    conv = getattr(value, "_as_tensor", None)
    if conv is not None:
        return convert_to_tensor(conv(), dtype, name)
    if isinstance(value, Operation):
        raise TypeError(f"Can't convert Operation '{value.name}' to Tensor (target dtype={dtype})")
    if _CONVERSIONS:
        converted = _registered_conversion(value, dtype, name)
        if converted is not None:
            return converted
    if getattr(value, "_is_composite_tensor", False):  # a SparseTensor is no Tensor, as in TF
        raise TypeError(f"Failed to convert elements of {value} to Tensor. Consider casting "
                        "elements to a supported type.")
    if isinstance(value, (list, tuple)) and _holds_tensor(value):
        # TF packs a (nested) list mixing tensors and numbers into one tensor.
        return _autopack_builder(value, dtype, name)
    if dtype is None and (preferred_dtype or dtype_hint) is not None:
        try:
            return _constant_builder(value, dtype=preferred_dtype or dtype_hint, name=name)
        except (TypeError, ValueError):
            pass
    return _constant_builder(value, dtype=dtype, name=name or "Const")


def convert_n_to_tensor(values, dtype=None, name=None):
    return [convert_to_tensor(v, dtype) for v in values]


def is_tensor_like(x) -> bool:
    return isinstance(x, Tensor) or hasattr(x, "_as_tensor")


def graph_of(values) -> Graph:
    """The graph that all tensor-like ``values`` live in (default graph if none)."""
    return _graph_from_values(
        [v._as_tensor() if hasattr(v, "_as_tensor") else v for v in values]
    )


def np_value(x):
    return np.asarray(x)


__all__ = [
    "Graph", "Operation", "Tensor", "GraphKeys", "get_default_graph", "reset_default_graph",
    "name_scope", "control_dependencies", "device", "colocate_with", "add_to_collection",
    "add_to_collections", "get_collection", "get_collection_ref", "get_all_collection_keys",
    "convert_to_tensor", "get_name_scope",
]

# keep errors importable from here for kernels that only import framework.ops
OpError = errors.OpError


def apply_op(op_type: str, inputs, attrs: dict | None = None, name: str | None = None,
             dtype=None) -> Operation:
    """Create an op of ``op_type`` in the graph of its inputs (the builders' entry point).

    Inputs that are not tensors are converted to constants of ``dtype`` (or of the dtype of the
    first tensor input, so ``x + 1`` stays in ``x``'s dtype).
    """
    default = get_default_graph()
    if default.executes_eagerly:  # eager execution: the op runs now, no graph is built
        return default.apply_op(op_type, inputs, attrs, name, dtype)
    return _build_op(default, op_type, inputs, attrs, name, dtype)


def apply_op_output(op_type: str, inputs, attrs: dict | None = None, name: str | None = None,
                    dtype=None) -> Tensor:
    """``apply_op(...).outputs[0]``, what most builders return. Executing eagerly, the context
    hands back the output alone (``EagerContext.apply_op_output``): no op record is made where
    nothing will read it."""
    stack = _thread_graphs.stack  # get_default_graph(), inlined
    default = stack[-1] if stack else _global_default_graph
    if default.executes_eagerly:
        return default.apply_op_output(op_type, inputs, attrs, name, dtype)
    return _build_op(default, op_type, inputs, attrs, name, dtype).outputs[0]


def attr_key_value(value: float):
    """A float attribute as a cache key holds it: zeros and NaN by their text, since 0.0 and
    -0.0 are equal (and hash alike) but not the same attribute, and NaN equals nothing."""
    return value if value and value == value else ("float", repr(value))


_ATTR_TOKENS: dict = {}  # FrozenAttrs.key -> its token
_NEXT_TOKEN = itertools.count()  # next() is atomic: two threads never draw one token


class FrozenAttrs(dict):
    """A builder's constant attributes (``transpose_a=False, transpose_b=False``), made once
    at import: read-only, with their hashable ``key`` computed once, so an eager call keys its
    kernel without walking them. Graph ops copy them into attributes of their own."""

    __slots__ = ("key", "token")

    def __init__(self, **attrs):
        super().__init__(**attrs)
        self.key = tuple((k, attr_key_value(v) if type(v) is float else v)
                         for k, v in attrs.items())
        # A small int per distinct key, what the eager fast path keys kernels by: hashing the
        # key's nested tuples on every call would cost half a dict look-up more.
        self.token = _ATTR_TOKENS.setdefault(self.key, next(_NEXT_TOKEN))

    def _read_only(self, *args, **kwargs):
        raise TypeError("a builder's constant attributes are read-only")

    __setitem__ = __delitem__ = __ior__ = _read_only
    update = setdefault = pop = popitem = clear = _read_only

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):  # rebuilt from its items: a dict's pickling would set them one by one
        return _frozen_attrs, (self.key,)


def _frozen_attrs(items) -> FrozenAttrs:
    return FrozenAttrs(**dict(items))


def frozen_attrs(**attrs) -> FrozenAttrs:
    """The ``FrozenAttrs`` of ``attrs``, made once per distinct value: for builders whose
    attributes follow their arguments (concat's ``N``, unstack's ``num`` and ``axis``), so
    that their eager ops take the fast path. The values must be hashable and normalised
    (``int(axis)``): equal values share one object, as they share a token."""
    key = tuple(attrs.items())
    frozen = _FROZEN.get(key)
    if frozen is None:
        frozen = FrozenAttrs(**attrs)
        if len(_FROZEN) < 4096:
            _FROZEN[key] = frozen
    return frozen


_FROZEN: dict = {}  # tuple(attrs.items()) -> FrozenAttrs


def apply_binary(op_type: str, x, y, name: str | None = None,
                 attrs: FrozenAttrs | None = None) -> Tensor:
    """``apply_op_output(op_type, [x, y], attrs, name)`` for an op without attributes or with
    a builder's constant ones (most math builders): executing eagerly, the context's
    ``run_binary`` runs it with no list, key building or scope look-up where it can, TF's fast
    path for eager ops."""
    stack = _thread_graphs.stack
    default = stack[-1] if stack else _global_default_graph
    if default.executes_eagerly:
        return default.run_binary(op_type, x, y, name, attrs)
    return _build_op(default, op_type, [x, y], attrs, name, None).outputs[0]


def binary_operator(op_type: str, op_name: str | None):
    """``lambda a, b: apply_binary(op_type, a, b, op_name)`` with ``apply_binary`` written
    into it: the function behind ``a + b`` and the other operators of one op, one frame less
    on every eager ``a + b``."""
    def operator(a, b):
        stack = _thread_graphs.stack
        default = stack[-1] if stack else _global_default_graph
        if default.executes_eagerly:
            return default.run_binary(op_type, a, b, op_name)
        return _build_op(default, op_type, [a, b], None, op_name, None).outputs[0]

    return operator


def apply_unary(op_type: str, x, name: str | None = None,
                attrs: FrozenAttrs | None = None) -> Tensor:
    """``apply_binary`` for an op of one input (a resource handle too: a variable's read)."""
    stack = _thread_graphs.stack
    default = stack[-1] if stack else _global_default_graph
    if default.executes_eagerly:
        return default.run_unary(op_type, x, name, attrs)
    return _build_op(default, op_type, [x], attrs, name, None).outputs[0]


def sibling_dtype(value, dtype):
    """The dtype a builder's non-tensor input ``value`` takes from its first tensor input's
    ``dtype`` (``x + [1, 2]`` in ``x``'s dtype): None (its own) for a list of floating-point
    values beside an integer or bool tensor. TF converts a list by its own type attribute:
    beside an index (the shape of ``reshape([1.5, 2.5], [2])``) it keeps its float32, and
    where the op shares one type (``int_tensor + [1.5]``) the op's type check refuses the
    pair (a graph's ``TypeError``, an eager op's ``InvalidArgumentError``), as it does here.
    A NumPy array or scalar takes ``dtype``, as TF casts one to a shared type attribute;
    builders whose data argument sits beside an index convert it first."""
    if dtype is None or not (dtype.is_integer or dtype.is_bool) or \
            not isinstance(value, (list, tuple)):
        return dtype
    try:
        kind = np.asarray(value).dtype.kind
    except (TypeError, ValueError):  # ragged or odd: the conversion says what is wrong
        return dtype
    return None if kind in "fc" else dtype


def _build_op(default: Graph, op_type, inputs, attrs, name, dtype) -> Operation:
    inputs = list(inputs)
    g = _graph_from_values([v._as_tensor() if hasattr(v, "_as_tensor") else v
                            for v in inputs], default)
    with g.as_default() if g is not default else contextlib.nullcontext():
        # Tensors (and lists holding tensors, packed) first: their dtype is the one numbers take.
        converted = [convert_to_tensor(v) if _holds_tensor(v) else None for v in inputs]
        given = dtype is not None
        if not given:
            dtype = next((t.dtype.base_dtype for t in converted if t is not None), None)
        converted = [t if t is not None else convert_to_tensor(
            v, dtype=dtype if given else sibling_dtype(v, dtype))
            for t, v in zip(converted, inputs)]
        return g._create_op(op_type, converted, attrs or {}, name, site=_user_site())
