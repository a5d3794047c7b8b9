"""``tf.variable_scope`` and ``tf.get_variable``: variables shared by name, TF1 style.

Each graph keeps two stores, in graph collections as TF1 does:

* the *variable store* maps a full variable name (``"foo/bar/w"``) to the ``tf.Variable`` that
  ``get_variable`` made, so a second ``get_variable`` under ``reuse`` finds it (and, without
  reuse, is refused);
* the *variable scope store* holds the current ``VariableScope`` (name, reuse flag, default
  initializer, regularizer, dtype …) and how often each scope name was opened, which is how
  ``variable_scope(None, default_name="x")`` picks ``x``, ``x_1`` …

Variable names depend only on variable scopes; op names on name scopes. ``variable_scope("foo")``
opens both, so ops built inside are named ``foo/...``; entering "foo" again opens a fresh name
scope ``foo_1/`` for ops while ``get_variable`` still names variables ``foo/...``.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import logging
import threading

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.ops import GraphKeys
from dflab.framework.tensor_shape import as_shape
from dflab.ops import init_ops
from dflab.ops import variables as _variables

# tf.logging's logger (dflab/platform/tf_logging.py writes to the same one).
_logger = logging.getLogger("dflab")


class _ReuseMode(enum.Enum):
    """Reuse modes beyond True/None: AUTO_REUSE creates a variable if absent, else reuses it."""

    AUTO_REUSE = 1


AUTO_REUSE = _ReuseMode.AUTO_REUSE

_VARSTORE_KEY = ("__variable_store",)
_VARSCOPESTORE_KEY = ("__varscope",)


# --------------------------------------------------------------------------------------------
# The variable store: full name -> Variable
# --------------------------------------------------------------------------------------------
class _VariableStore:
    """``keeps_eager_variables``: an ``EagerVariableStore``'s, where every ``get_variable``
    executing eagerly reuses what it finds (TF's ``AUTO_REUSE``). Executing eagerly with any
    other store, TF's rule: reuse does not apply, each call makes a new variable."""

    def __init__(self, keeps_eager_variables: bool = False):
        self._vars: dict[str, _variables.Variable] = {}
        self._partitioned: dict = {}  # name -> PartitionedVariable
        self.keeps_eager_variables = keeps_eager_variables

    def variables(self) -> list:
        """The variables made here, in the order they were made."""
        return list(self._vars.values())

    def _lookup(self, name):
        """The stored variable, forgetting one whose ops were removed from the graph (a
        notebook cell that built it was re-run)."""
        v = self._vars.get(name)
        if v is not None:
            g = v.op.graph
            if g is not None and not g.executes_eagerly and \
                    g.find_operation(v.op.name) is not v.op:
                del self._vars[name]
                return None
        return v

    def get_variable(self, name, shape=None, dtype=_dt.float32, initializer=None,
                     regularizer=None, reuse=None, trainable=None, collections=None,
                     caching_device=None, partitioner=None, validate_shape=True,
                     use_resource=None, custom_getter=None, constraint=None,
                     synchronization=None, aggregation=None, **kwargs):
        if _ops.executing_eagerly():
            reuse = AUTO_REUSE if self.keeps_eager_variables else False
        synchronization, aggregation, trainable = \
            _variables.validate_synchronization_aggregation_trainable(
                synchronization, aggregation, trainable, name)
        if custom_getter is not None:
            if not callable(custom_getter):
                raise ValueError(f"Passed a custom_getter which is not callable: {custom_getter}")

            def true_getter(name, shape=None, dtype=_dt.float32, initializer=None,
                            regularizer=None, reuse=None, trainable=None, collections=None,
                            caching_device=None, partitioner=None, validate_shape=True,
                            use_resource=None, constraint=None, synchronization=None,
                            aggregation=None, **kw):
                return self._get_single_variable(
                    name, shape, dtype, initializer, regularizer, reuse, trainable,
                    collections, caching_device, partitioner, validate_shape, constraint,
                    use_resource, synchronization, aggregation)

            return custom_getter(
                getter=true_getter, name=name, shape=shape, dtype=dtype, initializer=initializer,
                regularizer=regularizer, reuse=reuse, trainable=trainable,
                collections=collections, caching_device=caching_device,
                partitioner=partitioner, validate_shape=validate_shape,
                use_resource=use_resource, constraint=constraint,
                synchronization=synchronization, aggregation=aggregation, **kwargs)
        if partitioner is not None and not (shape is not None and len(as_shape(shape)) == 0):
            return self._get_partitioned_variable(
                name, shape, dtype, initializer, regularizer, reuse, trainable, collections,
                caching_device, partitioner, validate_shape, constraint, use_resource,
                synchronization, aggregation)
        return self._get_single_variable(name, shape, dtype, initializer, regularizer, reuse,
                                         trainable, collections, caching_device, partitioner,
                                         validate_shape, constraint, use_resource,
                                         synchronization, aggregation)

    def _get_partitioned_variable(self, name, shape, dtype, initializer, regularizer, reuse,
                                  trainable, collections, caching_device, partitioner,
                                  validate_shape, constraint, use_resource=None,
                                  synchronization=None, aggregation=None):
        """Shards ``name/part_i`` (``dflab.ops.partitioned_variables``); a second call with
        ``reuse`` finds the same shards."""
        from dflab.ops.partitioned_variables import create_partitioned_variable

        value = None
        if initializer is not None and not callable(initializer):
            # A value: each shard is initialized with its own slice of it, as in TF.
            value = _ops.convert_to_tensor(initializer, dtype=dtype)
            dtype = value.dtype.base_dtype
            shape = value.shape if shape is None else shape
        found = self._partitioned.get(name)
        if found is not None:
            if reuse is False or reuse is None:
                raise ValueError(f"Partitioned variable {name} already exists, disallowed. "
                                 "Did you mean to set reuse=True or reuse=tf.AUTO_REUSE?")
            if not as_shape(shape).is_compatible_with(found.get_shape()):
                raise ValueError(f"Trying to reuse partitioned variable {name}, but specified "
                                 f"shape {as_shape(shape)} and found shape "
                                 f"{found.get_shape()}.")
            return found
        if reuse is True:
            raise ValueError(f"PartitionedVariable {name} does not exist, or was not created "
                             "with tf.get_variable(). Did you mean to set "
                             "reuse=tf.AUTO_REUSE in VarScope?")

        def make_shard(shard_name, shard_shape, offset):
            if value is not None:
                from dflab.ops.array_ops import slice as _slice

                with _ops.name_scope(None):
                    part = _slice(value, offset, shard_shape)
                return self._get_single_variable(
                    shard_name, None, dtype, part, regularizer, reuse, trainable,
                    collections, caching_device, None, validate_shape, constraint, use_resource,
                    synchronization, aggregation)
            return self._get_single_variable(
                shard_name, shard_shape, dtype, initializer, regularizer, reuse, trainable,
                collections, caching_device, None, validate_shape, constraint, use_resource,
                synchronization, aggregation)

        pv = create_partitioned_variable(make_shard, name, shape,
                                         dtype if dtype is not None else _dt.float32,
                                         partitioner)
        self._partitioned[name] = pv
        return pv

    def _get_single_variable(self, name, shape, dtype, initializer, regularizer, reuse,
                             trainable, collections, caching_device, partitioner,
                             validate_shape, constraint, use_resource=None,
                             synchronization=None, aggregation=None):
        initializing_from_value = initializer is not None and not callable(initializer)
        if shape is not None and initializing_from_value:
            raise ValueError("If initializer is a constant, do not specify shape.")
        if partitioner is not None and not (shape is not None and len(as_shape(shape)) == 0):
            raise NotImplementedError("Partitioned variables are not supported by dflab.")
        if initializing_from_value and dtype is None:
            dtype = _value_dtype(initializer)
        dtype = _dt.as_dtype(dtype if dtype is not None else _dt.float32).base_dtype
        shape = as_shape(shape)

        found = self._lookup(name)
        if found is not None:
            if reuse is False or reuse is None:
                raise ValueError(
                    f"Variable {name} already exists, disallowed. Did you mean to set "
                    f"reuse=True or reuse=tf.AUTO_REUSE in VarScope? Originally defined at:"
                    f"\n\n  {found.op.creation_site}")
            if not shape.is_compatible_with(found.get_shape()):
                raise ValueError(f"Trying to share variable {name}, but specified shape {shape} "
                                 f"and found shape {found.get_shape()}.")
            if not dtype.is_compatible_with(found.dtype.base_dtype):
                raise ValueError(f"Trying to share variable {name}, but specified dtype "
                                 f"{dtype.name} and found dtype {found.dtype.base_dtype.name}.")
            return found

        if reuse is True:
            raise ValueError(
                f"Variable {name} does not exist, or was not created with tf.get_variable(). "
                "Did you mean to set reuse=tf.AUTO_REUSE in VarScope?")

        if initializer is None:
            initializer, initializing_from_value = _default_initializer(name, dtype)
        if initializing_from_value:
            init_val, variable_dtype = initializer, None
        else:
            if isinstance(initializer, type):
                initializer = initializer()
            if shape.is_fully_defined():
                init_val = _bind_initializer(initializer, shape.as_list(), dtype)
                variable_dtype = dtype
            elif _takes_no_arguments(initializer):
                init_val, variable_dtype = initializer, None
            else:
                raise ValueError(
                    "The initializer passed is not valid. It should be a callable with no "
                    "arguments and the shape should not be provided or an instance of "
                    "`tf.keras.initializers.*' and `shape` should be fully defined.")

        # Variables ignore the control dependencies around them (TF1's init_scope).
        with _ops.control_dependencies(None):
            v = _variables.Variable(initial_value=init_val, name=name, trainable=trainable,
                                    collections=collections, caching_device=caching_device,
                                    dtype=variable_dtype, validate_shape=validate_shape,
                                    constraint=constraint, use_resource=use_resource,
                                    synchronization=synchronization, aggregation=aggregation)
        self._vars[name] = v

        if regularizer:
            with _ops.colocate_with(v.op), _ops.name_scope(name + "/Regularizer/"):
                loss = regularizer(v)
            if loss is not None:
                _ops.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
        return v

    def saved_state(self) -> tuple[dict, dict]:
        """What the store knows (its variables and partitioned variables, by name), for
        ``restore_state``: a notebook cell that fails is undone with the graph."""
        return dict(self._vars), dict(self._partitioned)

    def restore_state(self, state: tuple[dict, dict]) -> None:
        variables, partitioned = state
        self._vars.clear()
        self._vars.update(variables)
        self._partitioned.clear()
        self._partitioned.update(partitioned)


def _bind_initializer(initializer, dims, dtype):
    """A no-argument callable the Variable calls inside its ``Initializer`` name scope."""
    return lambda: initializer(dims, dtype=dtype, partition_info=None)


def _value_dtype(value):
    """The dtype a value initializer gives its variable (without adding ops to the graph)."""
    if hasattr(value, "_as_tensor"):
        value = value._as_tensor()
    if isinstance(value, _ops.Tensor):
        return value.dtype.base_dtype
    return _dt.dtype_of_value(value).base_dtype


def _takes_no_arguments(fn) -> bool:
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in sig.parameters.values())


def _default_initializer(name, dtype):
    """Glorot uniform for floats, zeros for integers, bools and strings (TF1's defaults)."""
    if dtype.is_floating:
        return init_ops.glorot_uniform_initializer(), False
    if dtype.is_integer or dtype.is_unsigned or dtype.is_bool or dtype is _dt.string:
        return init_ops.zeros_initializer(), False
    raise ValueError(f"An initializer for variable {name} of {dtype.name} is required")


def _get_default_variable_store() -> _VariableStore:
    g = _ops.get_default_graph()
    pushed = getattr(_THREAD, "stores", None)
    if pushed and pushed[-1][0] is g:  # an ``EagerVariableStore.as_default()`` for this graph
        return pushed[-1][1]
    with g.lock:
        store = g.get_collection(_VARSTORE_KEY)
        if store:
            return store[0]
        store = _VariableStore()
        g.add_to_collection(_VARSTORE_KEY, store)
        return store


# The thread's ``EagerVariableStore.as_default()`` blocks, as (default graph, store), and its
# eager variable scopes.
_THREAD = threading.local()


class EagerVariableStore:
    """TF 1.x's ``tfe.EagerVariableStore``: executing eagerly, ``get_variable`` keeps no
    variables (each call makes a new one, and a variable lives while Python holds it); inside
    ``as_default()`` this store keeps them, and every ``get_variable`` finds the one of its
    name again (TF's ``AUTO_REUSE``), so graph-style code that shares variables by name runs
    eagerly. ``tf.layers`` objects keep theirs in one (``dflab.layers.Layer``)."""

    def __init__(self, store: _VariableStore | None = None):
        if store is not None and not store.keeps_eager_variables:
            raise ValueError("Cannot construct EagerVariableStore from a store that does not "
                             "keep eager variables.")
        self._store = store if store is not None else _VariableStore(keeps_eager_variables=True)

    @contextlib.contextmanager
    def as_default(self):
        """This store as the default graph's variable store within the block (a graph made
        inside the block keeps its own)."""
        stack = getattr(_THREAD, "stores", None)
        if stack is None:
            stack = _THREAD.stores = []
        stack.append((_ops.get_default_graph(), self._store))
        try:
            yield self
        finally:
            stack.pop()

    def variables(self) -> list:
        """The store's variables, sorted by name (TF's order)."""
        return sorted(self._store.variables(), key=lambda v: v.name)

    def trainable_variables(self) -> list:
        return [v for v in self.variables() if v.trainable]

    def non_trainable_variables(self) -> list:
        return [v for v in self.variables() if not v.trainable]

    def copy(self) -> EagerVariableStore:
        """A store of new variables holding this one's current values, under the same names
        and trainability: changing one store's variables leaves the other's alone."""
        from dflab.ops.resource_variable_ops import ResourceVariable

        other = EagerVariableStore()
        for key, v in self._store._vars.items():
            other._store._vars[key] = ResourceVariable(
                v.read_value(), name=v.name.split(":")[0], trainable=v.trainable)
        return other


# --------------------------------------------------------------------------------------------
# Variable scopes
# --------------------------------------------------------------------------------------------
class VariableScope:
    """What a ``variable_scope`` carries: its name and the defaults ``get_variable`` uses."""

    def __init__(self, reuse, name="", initializer=None, regularizer=None, caching_device=None,
                 partitioner=None, custom_getter=None, name_scope="", dtype=_dt.float32,
                 use_resource=None, constraint=None):
        self._name = name
        self._initializer = initializer
        self._regularizer = regularizer
        self._reuse = reuse
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._name_scope = name_scope
        self._dtype = dtype
        self._use_resource = use_resource
        self._constraint = constraint

    @property
    def name(self) -> str:
        return self._name

    @property
    def original_name_scope(self) -> str:
        return self._name_scope

    @property
    def reuse(self):
        return self._reuse

    @property
    def initializer(self):
        return self._initializer

    @property
    def dtype(self):
        return self._dtype

    @property
    def use_resource(self):
        return self._use_resource

    @property
    def regularizer(self):
        return self._regularizer

    @property
    def caching_device(self):
        return self._caching_device

    @property
    def partitioner(self):
        return self._partitioner

    @property
    def custom_getter(self):
        return self._custom_getter

    @property
    def constraint(self):
        return self._constraint

    def reuse_variables(self) -> None:
        """From now on, ``get_variable`` in this scope only finds existing variables."""
        self._reuse = True

    def set_initializer(self, initializer) -> None:
        self._initializer = initializer

    def set_dtype(self, dtype) -> None:
        self._dtype = dtype

    def set_use_resource(self, use_resource) -> None:
        self._use_resource = use_resource

    def set_regularizer(self, regularizer) -> None:
        self._regularizer = regularizer

    def set_caching_device(self, caching_device) -> None:
        self._caching_device = caching_device

    def set_partitioner(self, partitioner) -> None:
        self._partitioner = partitioner

    def set_custom_getter(self, custom_getter) -> None:
        self._custom_getter = custom_getter

    def get_collection(self, name):
        scope = self._name + "/" if self._name else ""
        return _ops.get_collection(name, scope)

    def trainable_variables(self):
        return self.get_collection(GraphKeys.TRAINABLE_VARIABLES)

    def global_variables(self):
        return self.get_collection(GraphKeys.GLOBAL_VARIABLES)

    def local_variables(self):
        return self.get_collection(GraphKeys.LOCAL_VARIABLES)

    def get_variable(self, var_store, name, shape=None, dtype=None, initializer=None,
                     regularizer=None, reuse=None, trainable=None, collections=None,
                     caching_device=None, partitioner=None, validate_shape=True,
                     use_resource=None, custom_getter=None, constraint=None, **kwargs):
        if regularizer is None:
            regularizer = self._regularizer
        if caching_device is None:
            caching_device = self._caching_device
        if partitioner is None:
            partitioner = self._partitioner
        if custom_getter is None:
            custom_getter = self._custom_getter
        if reuse is None:
            reuse = self._reuse
        full_name = self.name + "/" + name if self.name else name
        # Variable names depend only on the variable scope: clear the name scope meanwhile.
        with _ops.name_scope(None):
            if dtype is not None and initializer is not None and not callable(initializer):
                init_dtype = _value_dtype(initializer)
                if init_dtype is not _dt.as_dtype(dtype).base_dtype:
                    raise ValueError(f"Initializer type '{init_dtype.name}' and explicit dtype "
                                     f"'{_dt.as_dtype(dtype).name}' don't match.")
            if initializer is None:
                initializer = self._initializer
            if constraint is None:
                constraint = self._constraint
            if dtype is None and (initializer is None or callable(initializer)):
                dtype = self._dtype
            if use_resource is None:
                use_resource = self._use_resource
            return var_store.get_variable(
                full_name, shape=shape, dtype=dtype, initializer=initializer,
                regularizer=regularizer, reuse=reuse, trainable=trainable,
                collections=collections, caching_device=caching_device,
                partitioner=partitioner, validate_shape=validate_shape,
                use_resource=use_resource, custom_getter=custom_getter,
                constraint=constraint, **kwargs)

    def __repr__(self):
        return f"<VariableScope name={self._name!r} reuse={self._reuse!r}>"


class _VariableScopeStore:
    """The current scope and how many times each scope name has been opened."""

    def __init__(self):
        self.current_scope = VariableScope(False)
        self.variable_scopes_count: dict[str, int] = {}

    def open_variable_scope(self, scope_name) -> None:
        self.variable_scopes_count[scope_name] = self.variable_scopes_count.get(scope_name, 0) + 1

    def close_variable_subscopes(self, scope_name) -> None:
        # Leaving "a" forgets how often "a/b" was opened, so a later "a_1/b" starts at "b".
        for k in self.variable_scopes_count:
            if scope_name is None or k.startswith(scope_name + "/"):
                self.variable_scopes_count[k] = 0

    def variable_scope_count(self, scope_name) -> int:
        return self.variable_scopes_count.get(scope_name, 0)


def get_variable_scope_store() -> _VariableScopeStore:
    g = _ops.get_default_graph()
    if g.executes_eagerly:
        # An eager context keeps no collections: its scopes are the thread's (TF 2's are too).
        store = getattr(_THREAD, "eager_scopes", None)
        if store is None:
            store = _THREAD.eager_scopes = _VariableScopeStore()
        return store
    with g.lock:
        store = g.get_collection(_VARSCOPESTORE_KEY)
        if store:
            return store[0]
        store = _VariableScopeStore()
        g.add_to_collection(_VARSCOPESTORE_KEY, store)
        return store


def variable_stores(graph) -> tuple[_VariableStore | None, _VariableScopeStore | None]:
    """``get_variable``'s store and the variable-scope store of ``graph``, None where the graph
    has none yet (none is created here)."""
    var_store = graph.get_collection(_VARSTORE_KEY)
    scope_store = graph.get_collection(_VARSCOPESTORE_KEY)
    return (var_store[0] if var_store else None), (scope_store[0] if scope_store else None)


def get_variable_scope() -> VariableScope:
    """The current ``VariableScope`` (the root scope has the empty name)."""
    return get_variable_scope_store().current_scope


def _get_unique_variable_scope(prefix: str) -> str:
    store = get_variable_scope_store()
    current = get_variable_scope()
    name = current.name + "/" + prefix if current.name else prefix
    if store.variable_scope_count(name) == 0:
        return prefix
    idx = 1
    while store.variable_scope_count(f"{name}_{idx}") > 0:
        idx += 1
    return f"{prefix}_{idx}"


class _pure_variable_scope:  # noqa: N801 - TF's name
    """Sets the current VariableScope (no name scope): the variable half of variable_scope."""

    def __init__(self, name_or_scope, reuse=None, initializer=None, regularizer=None,
                 caching_device=None, partitioner=None, custom_getter=None, old_name_scope=None,
                 dtype=_dt.float32, use_resource=None, constraint=None):
        self._name_or_scope = name_or_scope
        self._reuse = reuse
        self._initializer = initializer
        self._regularizer = regularizer
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._old_name_scope = old_name_scope
        self._dtype = dtype
        self._use_resource = use_resource
        self._constraint = constraint
        self._var_scope_store = get_variable_scope_store()
        self._last_variable_scope_object = None
        if isinstance(name_or_scope, VariableScope):
            # Jumping to an existing scope: a copy of it, with any overrides asked for here.
            self._new_name = name_or_scope.name
            s = name_or_scope
            obj = VariableScope(
                s.reuse if not reuse else reuse, name=self._new_name,
                initializer=s.initializer, regularizer=s.regularizer,
                caching_device=s.caching_device, partitioner=s.partitioner, dtype=s.dtype,
                custom_getter=s.custom_getter, name_scope=s.original_name_scope,
                use_resource=s.use_resource, constraint=constraint)
            self._apply_overrides(obj)
            self._cached_variable_scope_object = obj

    def _apply_overrides(self, obj: VariableScope) -> None:
        if self._initializer is not None:
            obj.set_initializer(self._initializer)
        if self._regularizer is not None:
            obj.set_regularizer(self._regularizer)
        if self._caching_device is not None:
            obj.set_caching_device(self._caching_device)
        if self._partitioner is not None:
            obj.set_partitioner(self._partitioner)
        if self._custom_getter is not None:
            obj.set_custom_getter(_maybe_wrap_custom_getter(self._custom_getter,
                                                            obj.custom_getter))
        if self._dtype is not None:
            obj.set_dtype(self._dtype)
        if self._use_resource is not None:
            obj.set_use_resource(self._use_resource)

    def __enter__(self) -> VariableScope:
        store = self._var_scope_store
        self._old = store.current_scope
        if isinstance(self._name_or_scope, VariableScope):
            store.open_variable_scope(self._new_name)
            self._old_subscopes = copy.copy(store.variable_scopes_count)
            obj = self._cached_variable_scope_object
        else:
            old = self._old
            self._new_name = (old.name + "/" + self._name_or_scope if old.name
                              else self._name_or_scope)
            self._reuse = self._reuse or old.reuse  # reuse is inherited by sub-scopes
            name_scope = (self._name_or_scope if self._old_name_scope is None
                          else self._old_name_scope)
            obj = VariableScope(
                self._reuse, name=self._new_name, initializer=old.initializer,
                regularizer=old.regularizer, caching_device=old.caching_device,
                partitioner=old.partitioner, dtype=old.dtype, use_resource=old.use_resource,
                custom_getter=old.custom_getter, name_scope=name_scope,
                constraint=self._constraint)
            self._apply_overrides(obj)
            store.open_variable_scope(self._new_name)
        store.current_scope = obj
        self._last_variable_scope_object = obj
        return obj

    def __exit__(self, *exc):
        store = self._var_scope_store
        if store.current_scope is not self._last_variable_scope_object:
            raise RuntimeError("Improper nesting of variable_scope.")
        if isinstance(self._name_or_scope, VariableScope):
            store.variable_scopes_count = self._old_subscopes
        else:
            store.close_variable_subscopes(self._new_name)
        store.current_scope = self._old


def _maybe_wrap_custom_getter(custom_getter, old_getter):
    """Nested custom getters compose: the inner one receives the outer one as its getter."""
    if old_getter is None:
        return custom_getter

    def wrapped(getter, *args, **kwargs):
        return custom_getter(lambda *a, **k: old_getter(getter, *a, **k), *args, **kwargs)

    return wrapped


class variable_scope:  # noqa: N801 - TF's public name
    """A context manager for defining ops that create variables (TF1 ``tf.variable_scope``).

    Opens a variable scope (names of ``get_variable`` variables, reuse, default initializer …)
    and, unless ``auxiliary_name_scope=False``, a name scope of the same name for ops.
    ``reuse=True`` only finds existing variables, ``tf.AUTO_REUSE`` finds or creates them;
    reuse is inherited by nested scopes and cannot be switched off inside them.
    """

    def __init__(self, name_or_scope, default_name=None, values=None, initializer=None,
                 regularizer=None, caching_device=None, partitioner=None, custom_getter=None,
                 reuse=None, dtype=None, use_resource=None, constraint=None,
                 auxiliary_name_scope=True):
        self._name_or_scope = name_or_scope
        self._default_name = default_name
        self._values = values
        self._initializer = initializer
        self._regularizer = regularizer
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._reuse = reuse
        self._dtype = dtype
        self._use_resource = use_resource
        self._constraint = constraint
        if self._default_name is None and self._name_or_scope is None:
            raise TypeError("If default_name is None then name_or_scope is required")
        if self._reuse is False:
            self._reuse = None  # no non-inheriting scopes: False means "inherit" here
        if not (self._reuse is True or self._reuse is None or self._reuse is AUTO_REUSE):
            raise ValueError("The reuse parameter must be True or False or None.")
        if self._values is None:
            self._values = []
        self._graph = _ops.graph_of(self._values)
        if not isinstance(auxiliary_name_scope, bool):
            raise TypeError("The auxiliary_name_scope must be `True` or `False`, while get "
                            f"{auxiliary_name_scope}")
        self._auxiliary_name_scope = auxiliary_name_scope
        self._stack = None

    def __enter__(self) -> VariableScope:
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(self._graph.as_default())
            scope = self._enter(stack)
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        return scope

    def __exit__(self, *exc):
        stack, self._stack = self._stack, None
        return stack.__exit__(*exc)

    def _pure(self, name_or_scope, old_name_scope):
        return _pure_variable_scope(
            name_or_scope, reuse=self._reuse, initializer=self._initializer,
            regularizer=self._regularizer, caching_device=self._caching_device,
            partitioner=self._partitioner, custom_getter=self._custom_getter,
            old_name_scope=old_name_scope, dtype=self._dtype, use_resource=self._use_resource,
            constraint=self._constraint)

    def _enter(self, stack) -> VariableScope:
        current_name_scope = None
        if not self._auxiliary_name_scope:
            # Re-enter the current name scope instead of opening a new one.
            ns = _ops.get_name_scope()
            current_name_scope = _ops.name_scope(ns + "/" if ns else None)
        if self._name_or_scope is not None:
            if not isinstance(self._name_or_scope, (VariableScope, str)):
                raise TypeError("VariableScope: name_or_scope must be a string or "
                                "VariableScope.")
            if isinstance(self._name_or_scope, str):
                ns_name = self._name_or_scope
            else:
                ns_name = self._name_or_scope.name.split("/")[-1]
            if ns_name or current_name_scope is not None:
                current_name_scope = current_name_scope or _ops.name_scope(ns_name)
                entered = stack.enter_context(current_name_scope)
                if isinstance(self._name_or_scope, str):
                    old_name_scope = entered
                else:
                    old_name_scope = self._name_or_scope.original_name_scope
                return stack.enter_context(self._pure(self._name_or_scope, old_name_scope))
            # Entering the root variable scope.
            return stack.enter_context(self._pure(self._name_or_scope, None))
        # No name: a unique one made from default_name.
        if self._reuse:
            raise ValueError("reuse=True cannot be used without a name_or_scope")
        current_name_scope = current_name_scope or _ops.name_scope(self._default_name)
        entered = stack.enter_context(current_name_scope)
        unique = _get_unique_variable_scope(self._default_name)
        return stack.enter_context(self._pure(unique, entered))


# --------------------------------------------------------------------------------------------
# get_variable and friends
# --------------------------------------------------------------------------------------------
def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None,
                 trainable=None, collections=None, caching_device=None, partitioner=None,
                 validate_shape=True, use_resource=None, custom_getter=None, constraint=None,
                 synchronization=None, aggregation=None):
    """Get an existing variable named ``<scope>/name`` or create a new one (TF1 semantics)."""
    return get_variable_scope().get_variable(
        _get_default_variable_store(), name, shape=shape, dtype=dtype, initializer=initializer,
        regularizer=regularizer, trainable=trainable, collections=collections,
        caching_device=caching_device, partitioner=partitioner, validate_shape=validate_shape,
        use_resource=use_resource, custom_getter=custom_getter, constraint=constraint,
        synchronization=synchronization, aggregation=aggregation)


def get_local_variable(name, shape=None, dtype=None, initializer=None, regularizer=None,
                       trainable=False, collections=None, caching_device=None,
                       partitioner=None, validate_shape=True, use_resource=None,
                       custom_getter=None, constraint=None, synchronization=None,
                       aggregation=None):
    """``get_variable`` for a non-trainable variable in ``GraphKeys.LOCAL_VARIABLES``."""
    collections = list(collections or []) + [GraphKeys.LOCAL_VARIABLES]
    return get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                        regularizer=regularizer, trainable=False, collections=collections,
                        caching_device=caching_device, partitioner=partitioner,
                        validate_shape=validate_shape, use_resource=use_resource,
                        custom_getter=custom_getter, constraint=constraint,
                        synchronization=synchronization, aggregation=aggregation)


def variable(initial_value=None, trainable=None, collections=None, validate_shape=True,
             caching_device=None, name=None, dtype=None, constraint=None, use_resource=None,
             **kwargs):
    """A plain ``tf.Variable`` (TF1's ``variable_scope.variable``)."""
    return _variables.Variable(initial_value=initial_value, trainable=trainable,
                               collections=collections, validate_shape=validate_shape,
                               caching_device=caching_device, name=name, dtype=dtype,
                               constraint=constraint, use_resource=use_resource)


def create_partitioned_variables(shape, slicing, initializer, dtype=_dt.float32, trainable=True,
                                 collections=None, name=None, reuse=None) -> list:
    """TF1's (deprecated) ``tf.create_partitioned_variables``: the shards of a variable of
    ``shape`` split as ``slicing`` says (one count per dimension), named
    ``<name>/part_<i>``; ``initializer`` is a function called per shard or a value sliced."""
    if len(shape) != len(slicing):
        raise ValueError("The 'shape' and 'slicing' of a partitioned Variable must have the "
                         f"length: shape: {shape}, slicing: {slicing}")
    if len(shape) < 1:
        raise ValueError(f"A partitioned Variable must have rank at least 1: shape: {shape}")
    with variable_scope(name, "PartitionedVariable", reuse=reuse) as scope:
        with _ops.name_scope(None):
            partitioned = _get_default_variable_store().get_variable(
                scope.name, shape=shape, dtype=dtype, initializer=initializer,
                trainable=trainable, collections=collections, reuse=scope.reuse,
                partitioner=lambda **unused: list(slicing))
    return list(partitioned)


@contextlib.contextmanager
def op_scope(values, name, default_name=None):
    """TF1's deprecated ``tf.op_scope``: ``tf.name_scope`` with its arguments reordered."""
    _logger.warning("tf.op_scope(values, name, default_name) is deprecated, use "
                    "tf.name_scope(name, default_name, values)")
    with _ops.name_scope(name, default_name, values) as scope:
        yield scope


@contextlib.contextmanager
def variable_op_scope(values, name_or_scope, default_name=None, initializer=None,
                      regularizer=None, caching_device=None, partitioner=None,
                      custom_getter=None, reuse=None, dtype=None, use_resource=None,
                      constraint=None):
    """TF1's deprecated ``tf.variable_op_scope``: ``tf.variable_scope`` with its arguments
    reordered."""
    _logger.warning("tf.variable_op_scope(values, name, default_name) is deprecated, use "
                    "tf.variable_scope(name, default_name, values)")
    with variable_scope(name_or_scope, default_name=default_name, values=values,
                        initializer=initializer, regularizer=regularizer,
                        caching_device=caching_device, partitioner=partitioner,
                        custom_getter=custom_getter, reuse=reuse, dtype=dtype,
                        use_resource=use_resource, constraint=constraint) as scope:
        yield scope


def no_regularizer(_):
    """Use as ``regularizer=tf.no_regularizer`` to turn off a scope's default regularizer."""
    return None


__all__ = [
    "get_variable", "get_local_variable", "variable_scope", "get_variable_scope",
    "VariableScope", "AUTO_REUSE", "no_regularizer", "create_partitioned_variables", "op_scope",
    "variable_op_scope",
]
