"""``Graph``: the container of the graph IR, and the scopes that shape op creation.

A graph is plain data: operations in creation order, each with typed inputs, control inputs,
attributes, a *requested* device and the user's file:line where it was created, plus
collections and the per-thread name, control-dependency, device and colocation scopes that
``_create_op`` applies to each new op. Nothing here executes; the runtime reads a graph and builds
plans from it. Ops are never removed except through a ``GraphTransaction``
(``dflab.framework.graph_transaction``: a notebook cell replacing what it built, or undoing a
failed run), which bumps ``Graph.version`` and the plan epoch so cached plans are dropped. Ops
left in the graph that read a removed op are *stale* (``stale_marks``): they stay (so they can be
shown) but ``check_not_stale`` refuses to run them, and no new op may read a removed one.
Re-exported by ``dflab.framework.ops``, which also holds the default graph and TF's module-level
functions.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

from dflab.framework import errors
from dflab.framework.device_spec import DeviceSpec
from dflab.framework.display import RichDisplay
from dflab.framework.op_kinds import EXIT_OPS
from dflab.framework.operation import Operation
from dflab.framework.tensor import Tensor
from dflab.framework.tensor_shape import as_shape

if TYPE_CHECKING:
    from dflab.framework.graph_transaction import StaleMark

_DFLAB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_VALID_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$")
_VALID_SCOPE = re.compile(r"^[A-Za-z0-9_.\-/>]*$")


def _user_site() -> str:
    """file:line of the innermost frame outside the dflab package (where the user built the op)."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_DFLAB_DIR):
        f = f.f_back
    if f is None:
        return ""
    return f"{f.f_code.co_filename}:{f.f_lineno}"


class _ThreadGraphs(threading.local):
    """The graphs entered with ``Graph.as_default`` on one thread (innermost last); each thread
    starts with an empty stack, so reading it is one attribute access (every op reads it)."""

    def __init__(self):
        self.stack: list = []


_local = _ThreadGraphs()


def _default_graph_stack() -> list:
    return _local.stack


class _NameScope:
    """A name scope: the thread's scope string set on entry and put back on exit (a class,
    not a generator: every builder opens one, eagerly too)."""

    __slots__ = ("_st", "_new", "_old")

    def __init__(self, st, new: str):
        self._st, self._new = st, new

    def __enter__(self) -> str:
        self._old = self._st.name_scope
        self._st.name_scope = self._new
        return self._new

    def __exit__(self, *exc) -> None:
        self._st.name_scope = self._old


def _check_loop_value_in_reach(t, inner, ctx, op_type: str) -> None:
    """TF 1.x's rule, checked where the op is built: a value computed in a while loop's body
    is used only in that loop (or loops inside it); outside it leaves through ``Exit``.
    (Elsewhere it could only fail when the step runs.)"""
    # An Exit is built in its loop's context, but its value is the context around the loop's.
    loop = inner.outer_context if t.op.type in EXIT_OPS else inner
    while loop is not None and not getattr(loop, "is_loop", False):
        loop = loop.outer_context
    if loop is None or (ctx is not None and loop.contains(ctx)):
        return
    raise ValueError(
        f"Cannot use '{t.name}' as input to '{op_type}' because '{t.op.name}' is in a while "
        f"loop (created at {errors._site_of(t.op)}): use a value the loop returns, or a "
        "TensorArray or loop variable that carries it out.")


class Graph(RichDisplay):
    """A dataflow graph of operations, with the scopes that name and place new ops."""

    def __init__(self):
        self._lock = threading.RLock()
        self._ops_by_name: dict[str, Operation] = {}
        self._ops: list[Operation] = []
        self._names_in_use: dict[str, int] = {}
        self._collections: dict[str, list] = {}
        self._finalized = False
        self._version = 0
        # Bumped only by edits that can change an existing plan (new control edges, removed ops);
        # adding ops never invalidates a cached plan, so sessions key their plans on this.
        self._plan_epoch = 0
        self._next_id = 0
        self._seed = None
        self._unfeedable: set[int] = set()
        self._unfetchable: set[int] = set()
        self._stacks = threading.local()
        self._building_function = False
        # Called with each new op (``add_op_observer``: a graph transaction records its ops).
        self._op_observers: list[Callable[[Operation], None]] = []
        # gradient_override_map's op type -> gradient name, for the ops being created.
        self._gradient_overrides: dict[str, str] = {}
        # Ops that read an op a transaction removed: kept for display, refused at run time.
        self._stale: dict[Operation, StaleMark] = {}
        # Why each removed op went (weak: a removed op lives only while something refers to it).
        self._removed: weakref.WeakKeyDictionary[Operation, str] = weakref.WeakKeyDictionary()
        # The resource container of new stateful ops (``container``): graph-wide, as TF's.
        self._container = ""

    # --- per-thread scope stacks ---------------------------------------------------------
    def _st(self):
        st = self._stacks
        if not hasattr(st, "name_scope"):
            st.name_scope = ""
            st.control = []  # list of lists of ops
            st.device = []  # list of (kind, value)
            st.colocate = []  # list of ops (None clears)
            st.attr_scope = []
            st.cf_context = None  # the cond branch / while body being built
        return st

    @property
    def control_flow_context(self):
        """The cond branch or while loop body (a ``ControlFlowContext``) being built on this
        thread, or None: every op created meanwhile passes through it. Set by the builders of
        ``dflab.ops.control_flow_ops``."""
        return self._st().cf_context

    @control_flow_context.setter
    def control_flow_context(self, ctx) -> None:
        self._st().cf_context = ctx

    @property
    def seed(self):
        return self._seed

    @seed.setter
    def seed(self, value):
        self._seed = value

    @property
    def version(self) -> int:
        return self._version

    @property
    def plan_epoch(self) -> int:
        """Changes only with edits that can change an existing plan (new control edges,
        rewired inputs, removed ops): sessions key their cached plans on it."""
        return self._plan_epoch

    @property
    def finalized(self) -> bool:
        return self._finalized

    def finalize(self) -> None:
        self._finalized = True

    def _unsafe_unfinalize(self) -> None:
        self._finalized = False

    def _check_not_finalized(self) -> None:
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")

    @contextlib.contextmanager
    def as_default(self):
        _default_graph_stack().append(self)
        try:
            yield self
        finally:
            stack = _default_graph_stack()
            if stack and stack[-1] is self:
                stack.pop()

    # --- lookup --------------------------------------------------------------------------
    def get_operations(self) -> list[Operation]:
        with self._lock:
            return list(self._ops)

    def get_operation_by_name(self, name: str) -> Operation:
        if not isinstance(name, str):
            raise TypeError(f"Operation names are strings (or similar), not {type(name).__name__}")
        op = self._ops_by_name.get(name)
        if op is None:
            if ":" in name:
                raise ValueError(f"Name {name!r} appears to refer to a Tensor, not an Operation.")
            raise KeyError(f"The name {name!r} refers to an Operation not in the graph.")
        return op

    def find_operation(self, name: str) -> Operation | None:
        """The op named ``name``, or None (``get_operation_by_name`` raises instead)."""
        return self._ops_by_name.get(name)

    def get_tensor_by_name(self, name: str) -> Tensor:
        if not isinstance(name, str):
            raise TypeError(f"Tensor names are strings (or similar), not {type(name).__name__}")
        op_name, sep, idx = name.rpartition(":")
        if not sep:
            raise ValueError(
                f"The name {name!r} looks like an (invalid) Operation name, not a Tensor. "
                "Tensor names must be of the form \"<op_name>:<output_index>\"."
            )
        if not idx.isdigit():
            raise ValueError(
                f"The name {name!r} looks a like a Tensor name, but is not a valid one. "
                "Tensor names must be of the form \"<op_name>:<output_index>\"."
            )
        op = self._ops_by_name.get(op_name)
        if op is None:
            raise KeyError(f"The name {name!r} refers to a Tensor which does not exist. "
                           f"The operation, {op_name!r}, does not exist in the graph.")
        i = int(idx)
        if i >= len(op._outputs):
            raise KeyError(f"The name {name!r} refers to a Tensor which does not exist. The "
                           f"operation, {op_name!r}, exists but only has "
                           f"{len(op._outputs)} outputs.")
        return op._outputs[i]

    def as_graph_element(self, obj, allow_tensor=True, allow_operation=True):
        if hasattr(obj, "_as_graph_element") and not isinstance(obj, (Tensor, Operation)):
            obj = obj._as_graph_element()
        if isinstance(obj, str):
            if ":" in obj and allow_tensor:
                return self.get_tensor_by_name(obj)
            if allow_operation:
                return self.get_operation_by_name(obj)
            raise ValueError(f"Name {obj!r} refers to an Operation, not a Tensor.")
        if isinstance(obj, Tensor) and allow_tensor:
            if obj.graph is not self:
                raise ValueError(f"Tensor {obj} is not an element of this graph.")
            return obj
        if isinstance(obj, Operation) and allow_operation:
            if obj.graph is not self:
                raise ValueError(f"Operation {obj!r} is not an element of this graph.")
            return obj
        raise TypeError(f"Can not convert a {type(obj).__name__} into a graph element.")

    # --- names ---------------------------------------------------------------------------
    def get_name_scope(self) -> str:
        return self._st().name_scope.rstrip("/")

    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        scope = self._st().name_scope
        if scope:
            name = scope + name
        key = name.lower()
        i = self._names_in_use.get(key, 0)
        if mark_as_used:
            self._names_in_use[key] = i + 1
        if i > 0:
            base = key
            while key in self._names_in_use:
                key = f"{base}_{i}"
                i += 1
            if mark_as_used:
                self._names_in_use[key] = 1
            name = f"{name}_{i - 1}"
        return name

    def name_scope(self, name):
        """A scope for the names of ops (and variables) made in it: ``name`` made unique, an
        exact scope when it ends in ``/``, the root for ``""``/None. Checked and made unique
        at the call; entered by ``with``."""
        if name is None or name == "":
            new = ""
        elif not _VALID_SCOPE.match(name):
            raise ValueError(f"'{name}' is not a valid scope name")
        else:
            new = name if name.endswith("/") else self.unique_name(name) + "/"
        return _NameScope(self._st(), new)

    # --- control dependencies, devices, colocation --------------------------------------
    @contextlib.contextmanager
    def control_dependencies(self, control_inputs):
        """TF1 semantics: ``None`` clears the control dependencies *and* leaves any cond branch
        or loop body being built (so variables and slots created there live outside it)."""
        st = self._st()
        old = st.control
        old_cf = st.cf_context
        if control_inputs is None:
            st.control = []
            st.cf_context = None
        else:
            ops = []
            for c in control_inputs:
                if hasattr(c, "_as_graph_element") and not isinstance(c, (Tensor, Operation)):
                    c = c._as_graph_element()
                if isinstance(c, Tensor):
                    c = c.op
                if not isinstance(c, Operation):
                    raise TypeError(f"Control input must be an Operation or Tensor: {c!r}")
                if c.graph is not self:
                    raise ValueError(f"Control input {c.name} must be from the same graph.")
                ops.append(c)
            st.control = old + [ops]
        try:
            yield None
        finally:
            st.control = old
            st.cf_context = old_cf

    @contextlib.contextmanager
    def no_control_dependencies(self):
        """A block whose new ops get no control inputs from enclosing ``control_dependencies``
        blocks, while staying in the cond branch or loop body being built (which
        ``control_dependencies(None)`` leaves): for control-flow builders."""
        st = self._st()
        old = st.control
        st.control = []
        try:
            yield None
        finally:
            st.control = old

    @contextlib.contextmanager
    def device(self, device_name_or_function):
        st = self._st()
        old = st.device
        d = device_name_or_function
        if d is None:
            st.device = [("reset", None)]
        elif callable(d) and not isinstance(d, (str, DeviceSpec)):
            st.device = old + [("fn", d)]
        else:
            spec = d if isinstance(d, DeviceSpec) else DeviceSpec.from_string(d)
            st.device = old + [("spec", spec)]
        try:
            yield
        finally:
            st.device = old

    def _current_device(self, op: Operation) -> str:
        # TF applies the scopes innermost first: a string scope fills only the fields still
        # unset, a device function sees op.device as the inner scopes left it and its answer
        # replaces it; a None scope stops the walk.
        spec = DeviceSpec()
        for kind, val in reversed(self._st().device):
            if kind == "reset":
                break
            if kind == "spec":
                spec = val.make_merged_spec(spec)
            else:
                op._device = spec.to_string()
                out = val(op)
                spec = DeviceSpec.from_string(out or "") if not isinstance(out, DeviceSpec) \
                    else out
        return spec.to_string()

    def colocate_with(self, op, ignore_existing=False):
        """Ops made in the block go where ``op`` goes (None: no colocation). A graph that
        captures values from outside (a traced function's) leaves colocation with an op
        outside it to the op that calls the function, which runs where its resource inputs
        live."""
        if op is not None:
            if hasattr(op, "_as_graph_element") and not isinstance(op, (Tensor, Operation)):
                op = op._as_graph_element()
            if self.captures_foreign_tensors and op.graph is not self:
                return contextlib.nullcontext()  # (an eager value: no op to be beside)
            if isinstance(op, Tensor):
                op = op.op
        return self._colocate(op, ignore_existing)

    @contextlib.contextmanager
    def _colocate(self, op, ignore_existing):
        st = self._st()
        old_col, old_dev = st.colocate, st.device
        if op is None:
            st.colocate = []
        else:
            st.colocate = ([] if ignore_existing else old_col) + [op]
            # Colocation overrides device scopes (TF does the same).
            st.device = [("reset", None)]
        try:
            yield
        finally:
            st.colocate, st.device = old_col, old_dev

    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map):
        """TF1's ``Graph.gradient_override_map``: ops of a mapped type created in the block take
        their gradient from the function registered (``RegisterGradient``) under the mapped
        name, through the ``_gradient_op_type`` attribute the gradient lookup reads."""
        if not isinstance(op_type_map, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in op_type_map.items()):
            raise TypeError("op_type_map must be a dictionary mapping strings to strings")
        saved = dict(self._gradient_overrides)
        self._gradient_overrides.update(op_type_map)
        try:
            yield
        finally:
            self._gradient_overrides = saved

    @contextlib.contextmanager
    def container(self, container_name):
        """A block whose new stateful ops with an empty ``container`` attr (variables, queues,
        tables, readers, accumulators, iterators) get ``container_name``: their state lives
        in that container of their device, which ``Session.reset(target, [name])`` clears.
        ``""`` or None goes back to the default container. Yields the name, as TF's."""
        old = self._container
        self._container = container_name
        try:
            yield self._container
        finally:
            self._container = old

    # --- op creation ---------------------------------------------------------------------
    def create_op(self, op_type, inputs, dtypes=None, input_types=None, name=None, attrs=None,
                  op_def=None, compute_shapes=True, compute_device=True):
        """TF's public ``Graph.create_op``; dflab infers output dtypes from the op schema."""
        return self._create_op(op_type, list(inputs), attrs or {}, name)

    # An eager context (``dflab.eager.context.EagerContext``) is a graph whose ``_create_op``
    # runs each op at once: ``apply_op`` hands it the op before any graph bookkeeping.
    executes_eagerly = False

    # A traced function's graph (``dflab.eager.function.FuncGraph``), or one standing in for
    # one: state is made outside it (``init_scope``), in its ``outer_graph``.
    is_function_graph = False

    # A function graph (a ``tf.data`` map function's body, see ``dflab.ops.dataset_ops``) sets
    # this: ops built while it is the default graph land in it even when all their inputs come
    # from another graph, which ``_capture`` then brings in.
    captures_foreign_tensors = False

    # A traced function's graph runs its stateful ops in program order (TF's automatic control
    # dependencies), kept per control-flow context while that context is being built: the
    # function's top level (``None``), a loop's frame, a cond branch. ``last_side_effect()`` is
    # the op the next stateful op of the current context waits for, ``after_side_effect(op)``
    # makes it ``op`` (a loop: its exit; a cond: the merge of its branches' ends);
    # ``begin_side_effects(ctx, after)`` starts ordering a context being built, its first
    # stateful op waiting for ``after``, and ``end_side_effects(ctx)`` stops it and gives its
    # last one. Plain graphs keep TF 1.x's rule: only data and explicit control dependencies
    # order ops.
    def ordering_side_effects(self) -> bool:
        """Whether stateful ops built now, in the current control-flow context, are ordered."""
        return False

    def last_side_effect(self):
        return None

    def after_side_effect(self, op) -> None:
        """Nothing to record in a graph that does not order its stateful ops."""

    def begin_side_effects(self, ctx, after=None) -> None:
        """Nothing to order in a graph that does not order its stateful ops."""

    def end_side_effects(self, ctx):
        return None

    def side_effects_unordered(self):
        """A block whose stateful ops are left out of the program order (a gradient's)."""
        return contextlib.nullcontext()

    def _capture(self, t: Tensor, op_type: str) -> Tensor:
        """The stand-in in this graph for a tensor ``t`` of another graph (none here)."""
        if t.is_eager:  # (TF's error; only a traced function's graph captures eager values)
            raise RuntimeError(f"{op_type}: Attempting to capture an EagerTensor without "
                               "building a function.")
        raise ValueError(
            f"Tensor {t.name} must be from the same graph as the op {op_type} being created."
        )

    def _create_op(self, op_type: str, inputs: list, attrs: dict, name: str | None,
                   site: str | None = None, extra_control: list | None = None) -> Operation:
        self._check_not_finalized()
        for t in inputs:
            if not isinstance(t, Tensor):
                raise TypeError(f"Input to op {op_type} must be a Tensor, got {t!r}")
        inputs = [t if t.graph is self else self._capture(t, op_type) for t in inputs]
        cf_context = self._st().cf_context
        if cf_context is not None:
            # Inside a cond branch or loop body, outside values come in through Switch/Enter.
            inputs = [cf_context.AddValue(t) for t in inputs]
        for t in inputs:
            inner = t.op._control_flow_context
            if inner is not None and inner is not cf_context:
                _check_loop_value_in_reach(t, inner, cf_context, op_type)
        with self._lock:
            if name is None:
                name = op_type
            if name.endswith("/"):
                name = name[:-1]
                if name in self._ops_by_name:
                    raise ValueError(f"Duplicate node name in graph: {name!r}")
                # A scope-style name ("w/") names the op exactly; make sure later unique_name
                # calls see it as taken without counting the scope's own use twice.
                self._names_in_use.setdefault(name.lower(), 1)
            else:
                if not _VALID_NAME.match(name):
                    raise ValueError(f"'{name}' is not a valid node name")
                name = self.unique_name(name)
            st = self._st()
            control = []
            input_ops = {t.op for t in inputs}
            for group in st.control:
                for c in group:
                    if c not in control and c not in input_ops:
                        control.append(c)
            if extra_control:
                control.extend(c for c in extra_control if c not in control)
            if self._removed:
                self._refuse_removed_inputs(name, op_type, inputs, control)
            override = self._gradient_overrides.get(op_type)
            if override is not None:
                attrs = {**attrs, "_gradient_op_type": override}
            op = Operation(self, name, op_type, inputs, attrs, "", control,
                           site if site is not None else _user_site())
            if self._container and op._op_def.stateful and op._attrs.get("container") == "":
                op._attrs["container"] = self._container
            if st.colocate:
                target = st.colocate[-1]
                op._colocation = list(target._colocation) or [f"loc:@{target.name}"]
                op._device = target.device
            else:
                op._device = self._current_device(op)
            try:
                specs = op._op_def.infer(op)
            except (ValueError, TypeError) as e:
                shapes = ", ".join(str(t.shape) for t in inputs)
                raise type(e)(
                    f"{e} for '{name}' (op: '{op_type}') with input shapes: [{shapes}]. "
                    f"Created at {errors._site_of(op)}"
                ) from None
            op._outputs = [Tensor(op, i, dt, as_shape(sh)) for i, (dt, sh) in enumerate(specs)]
            for t in inputs:
                t._consumers.append(op)
            for c in control:
                c._control_outputs.append(op)
            op._id = self._next_id
            self._next_id += 1
            self._ops_by_name[name] = op
            self._ops.append(op)
            self._version += 1
        if cf_context is not None:
            op._control_flow_context = cf_context
            cf_context.AddOp(op)
        for obs in self._op_observers:
            obs(op)
        return op

    def add_op_observer(self, observer: Callable[[Operation], None]) -> None:
        """Call ``observer(op)`` with each op created from now on (a graph transaction records
        what a notebook cell built this way)."""
        with self._lock:
            self._op_observers.append(observer)

    def remove_op_observer(self, observer: Callable[[Operation], None]) -> None:
        with self._lock:
            if observer in self._op_observers:
                self._op_observers.remove(observer)

    def _refuse_removed_inputs(self, name, op_type, inputs, control) -> None:
        for x in [t.op for t in inputs] + list(control):
            if x in self._removed:
                why = self._removed[x]
                raise ValueError(
                    f"Cannot create op '{name}' ({op_type}): its input '{x.name}' was removed "
                    f"from the graph{' when ' + why if why else ''}. Use the op that replaced it "
                    "(re-run the cell that refers to the old one)."
                )

    def stale_marks(self) -> list[StaleMark]:
        """The marks of the stale ops (readers of removed ops), in creation order."""
        with self._lock:
            return sorted(self._stale.values(), key=lambda m: m.op._id)

    # --- feeds / fetches -----------------------------------------------------------------
    def prevent_feeding(self, tensor: Tensor) -> None:
        self._unfeedable.add(id(tensor))

    def is_feedable(self, tensor: Tensor) -> bool:
        return id(tensor) not in self._unfeedable

    def prevent_fetching(self, op: Operation) -> None:
        self._unfetchable.add(id(op))

    def is_fetchable(self, tensor_or_op) -> bool:
        op = tensor_or_op.op if isinstance(tensor_or_op, Tensor) else tensor_or_op
        return id(op) not in self._unfetchable

    # --- collections ---------------------------------------------------------------------
    @property
    def lock(self) -> contextlib.AbstractContextManager:
        """The graph's re-entrant lock, held while ops are created or removed and while
        collections change: hold it to make a look-up-then-add sequence atomic (one variable
        store per graph, say)."""
        return self._lock

    def add_to_collection(self, name, value) -> None:
        self._check_not_finalized()
        with self._lock:
            self._collections.setdefault(name, []).append(value)

    def add_to_collections(self, names, value) -> None:
        names = (names,) if isinstance(names, str) else set(names)
        for n in names:
            self.add_to_collection(n, value)

    def get_collection_ref(self, name) -> list:
        with self._lock:
            return self._collections.setdefault(name, [])

    def get_collection(self, name, scope=None) -> list:
        with self._lock:
            items = list(self._collections.get(name, []))
        if scope is None:
            return items
        pattern = re.compile(scope)
        return [v for v in items if hasattr(v, "name") and pattern.match(v.name)]

    def get_all_collection_keys(self) -> list:
        return [k for k, v in self._collections.items() if v]

    def clear_collection(self, name) -> None:
        with self._lock:
            self._collections.pop(name, None)

    # --- serialization -------------------------------------------------------------------
    def as_graph_def(self, from_version=None, add_shapes=False):
        from dflab.framework.graph_io import graph_to_def

        return graph_to_def(self, add_shapes=add_shapes)

    def __repr__(self):
        return f"<dflab.Graph with {len(self._ops)} ops>"


def _about_the_graph(error: errors.OpError) -> errors.OpError:
    """Mark an error that is about the user's graph, not the engine: IPython (which asks an
    exception for ``_render_traceback_``) then shows its type and message alone, without the
    runtime's frames between the user's call and the check."""
    error._render_traceback_ = lambda: [f"{type(error).__name__}: {error}"]
    return error


def check_not_stale(graph: Graph, ops) -> None:
    """Raise ``FailedPreconditionError`` if ``ops`` (what a run needs) include a stale op or an
    op removed from ``graph``. Costs nothing unless ops were ever removed from the graph."""
    if not graph._stale and not graph._removed:
        return
    stale = [graph._stale[op] for op in ops if op in graph._stale]
    if stale:
        first = min(stale, key=lambda m: m.op._id)
        more = f" ({len(stale) - 1} more stale ops are needed too)" if len(stale) > 1 else ""
        raise _about_the_graph(errors.FailedPreconditionError(None, first.op,
                                                              first.message() + more))
    for op in ops:
        if op in graph._removed:
            why = graph._removed[op]
            raise errors.FailedPreconditionError(
                None, op, f"Operation '{op.name}' was removed from the graph"
                f"{' when ' + why if why else ''}; fetch the op that replaced it instead."
            )

