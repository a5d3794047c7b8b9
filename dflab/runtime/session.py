"""``Session``: the client of the paper's master/worker split, running in the user's process.

``run`` maps the user's (possibly nested) fetches to a flat list of unique graph elements
(``runtime/fetches.py``), checks and converts feeds, asks the **master** (``runtime/master.py``)
for the plan of that signature — built and cached once: pruned, placed, partitioned, fused and
registered with the worker as plain data — and has the **worker** (``runtime/worker.py``), which
owns the devices and the state on them, run the plan's partitions for one step; then it builds
the fetch structure from the values. A local session is this client, one master and one
in-process worker; values cross between them without a copy.

A plan on one device runs as one execution, with no partitioning cost at all. A plan spanning
devices runs one execution per partition, concurrently, sharing the step's rendezvous; the first
error in any partition cancels the others and is the error the caller sees, naming the user's
op and file:line.

Seams for the layers above (the notebook, ``train``): ``add_step_listener`` (live views),
``step_gate``/``set_step_gate`` (consistent snapshots), ``forget_state`` (state of ops a
re-run notebook cell replaced), ``prepare_step``/``start_step`` (the stepper), and
``sessions_on(graph)`` (the live sessions of a graph).
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Mapping
from contextlib import contextmanager, nullcontext

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.framework import ops as _ops
from dflab.framework.tensor_shape import TensorShape
from dflab.ops.session_ops import TensorHandle
from dflab.runtime import config as _config
from dflab.runtime import fetches as _fetches
from dflab.runtime.config import ConfigProto, RunMetadata, RunOptions
from dflab.runtime.devices import DeviceSet
from dflab.runtime.executor import Execution, to_client_value
from dflab.runtime.master import Master, Plan
from dflab.runtime.partition import user_op
from dflab.runtime.worker import Worker, WorkerInterface, next_step_id

get_default_session = _ops.get_default_session

# Every open session, weakly: what ``sessions_on`` answers from.
_live_sessions: weakref.WeakSet = weakref.WeakSet()


def sessions_on(graph) -> list:
    """The open sessions on ``graph`` (a notebook keeps sessions in many places)."""
    return [s for s in list(_live_sessions) if s.graph is graph and not s._closed]


class StepListener:
    """What ``Session.add_step_listener`` returns: ``remove()`` detaches the listener."""

    __slots__ = ("session", "fn")

    def __init__(self, session, fn):
        self.session = session
        self.fn = fn

    def remove(self) -> None:
        try:
            self.session._step_listeners.remove(self)
        except ValueError:
            pass  # already removed


# The step canceller active on each thread (see ``StepCanceller``), and how many are active
# on any thread (a step of a thread without one pays for no thread-local lookup).
_thread_steps = threading.local()
_cancellers_active = 0
_cancellers_lock = threading.Lock()


class StepCanceller:
    """Cancels the steps of the threads it is active on (TF's cancellation manager, for the
    steps a group of threads runs): ``with canceller.active():`` makes the calling thread's
    ``Session.run`` calls (of any session) cancellable; ``cancel(error)`` fails the running
    ones on every task they run on, and every later one at its start. A ``QueueRunner``
    cancels its threads' enqueue steps this way when its coordinator stops, so a thread parked
    in an enqueue, a dequeue or an accumulator's take ends at once."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running: dict = {}  # step id -> the session running it
        self._error: BaseException | None = None

    @contextmanager
    def active(self):
        global _cancellers_active
        before = getattr(_thread_steps, "canceller", None)
        _thread_steps.canceller = self
        with _cancellers_lock:
            _cancellers_active += 1
        try:
            yield self
        finally:
            with _cancellers_lock:
                _cancellers_active -= 1
            _thread_steps.canceller = before

    @property
    def cancelled(self) -> bool:
        return self._error is not None

    def cancel(self, error: BaseException | None = None) -> None:
        with self._lock:
            if self._error is None:
                self._error = error or errors.CancelledError(None, None, "Step was cancelled")
            error = self._error
            running = list(self._running.items())
        for step_id, session in running:
            session._worker.abort_step(step_id, error)

    def run(self, session, plan, feed_values, options, run_metadata):
        step_id = next_step_id()
        with self._lock:
            if self._error is not None:
                raise type(self._error)(None, None, self._error.message)
            self._running[step_id] = session
        try:
            return session._run_plan(plan, feed_values, options, run_metadata, step_id)
        finally:
            with self._lock:
                self._running.pop(step_id, None)


# Session targets other than the in-process one (""): a prefix such as "grpc://" -> a
# factory(target, config, session) returning the worker the session's master registers with and
# runs on (TF's SessionFactory registry: DirectSession for "", GrpcSession for "grpc://"). The
# distributed layer registers its targets here; the runtime never imports it.
_TARGET_FACTORIES: dict = {}
_TARGET_RESETS: dict = {}


def register_session_target(prefix: str, factory, reset=None) -> None:
    """``factory(target, config, session) -> WorkerInterface``; ``reset(target, containers)`` clears
    the resource containers of the target's tasks (``Session.reset``)."""
    _TARGET_FACTORIES[prefix] = factory
    if reset is not None:
        _TARGET_RESETS[prefix] = reset


def _worker_for(target: str, config, session) -> WorkerInterface:
    if not target:
        return Worker(config, owner=session)
    for prefix, factory in _TARGET_FACTORIES.items():
        if target.startswith(prefix):
            return factory(target, config, session)
    known = ", ".join(repr(p) for p in ["", *_TARGET_FACTORIES])
    raise errors.NotFoundError(
        None, None, f"No session factory registered for the given session options: "
        f"{{target: {target!r}}} Registered target prefixes: {known}")


def _user_error(error):
    """Errors name the user's op, not the plan's node standing for it."""
    op = getattr(error, "op", None)
    if op is not None and not isinstance(op, _ops.Operation):
        error.op = user_op(op)
    return error


class BaseSession:
    def __init__(self, target: str = "", graph=None, config: ConfigProto | None = None):
        if target not in ("", None) and not isinstance(target, str):
            raise TypeError("target must be a string")
        self._target = target or ""
        self._graph = graph if graph is not None else _ops.get_default_graph()
        self._config = config if config is not None else _config.default_config()
        ms = self._config.operation_timeout_in_ms
        # Seconds any step may take unless RunOptions say otherwise (None: no limit).
        self._operation_timeout = ms / 1000.0 if ms else None
        self._closed = False
        # Closed by ``Session.reset`` on its target: as TF, its runs are aborted (the master no
        # longer knows it) until the user closes it too.
        self._reset = False
        self._worker = _worker_for(self._target, self._config, self)
        self._master = Master(self._graph, self._config, self._worker)
        self._partial_runs: dict = {}
        self._step_listeners: list = []
        # Consistent snapshots (dflab.train.step_gate): when set, every driver of a step that
        # changes variables (run, make_callable, partial_run, the stepper) passes this gate.
        self._step_gate = None
        _live_sessions.add(self)

    # --- properties ------------------------------------------------------------------------
    @property
    def graph(self):
        return self._graph

    @property
    def graph_def(self):
        return self._graph.as_graph_def()

    @property
    def sess_str(self):
        return self._target

    @property
    def devices(self) -> DeviceSet:
        return self._worker.devices

    @property
    def worker(self) -> WorkerInterface:
        return self._worker

    @property
    def master(self) -> Master:
        return self._master

    @property
    def closed(self) -> bool:
        return self._closed

    def list_devices(self):
        return self.devices.list()

    def as_default(self):
        return _ops.default_session(self)

    def __enter__(self):
        _ops.push_default_session(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        _ops.pop_default_session(self)
        self.close()

    def close(self) -> None:
        if self._reset:
            self._reset = False  # (TF's close says so once; then the session is closed)
            raise self._reset_error(" Possibly, this master has restarted.")
        if self._closed:
            return
        self._closed = True
        self._worker.close()

    def check_open(self) -> None:
        """Raise what using this session raises once it is closed (or was reset)."""
        if self._reset:
            raise self._reset_error()
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")

    def _reset_error(self, more: str = "") -> errors.AbortedError:
        return errors.AbortedError(None, None, f"Session {id(self):x} is not found.{more}")

    # --- run -------------------------------------------------------------------------------
    def run(self, fetches, feed_dict=None, options: RunOptions | None = None,
            run_metadata: RunMetadata | None = None):
        if self._closed:
            self.check_open()
        mapper = _fetches.mapper_for(self._graph, fetches)
        feed_tensors, feed_values = self._process_feeds(feed_dict)
        plan = self._master.get_plan(mapper.tensors, mapper.targets, feed_tensors)
        values = self._run_plan(plan, feed_values, options, run_metadata)
        if mapper.handles:
            values = self._as_handles(values, mapper.handles)
        return mapper.build(values)

    def make_callable(self, fetches, feed_list=None, accept_options=False):
        """A callable that runs ``fetches`` with positional feeds, skipping all per-call lookups."""
        mapper = _fetches.mapper_for(self._graph, fetches)
        feed_list = list(feed_list or [])
        # A SparseTensor in feed_list takes one argument and feeds its three components.
        keys = [[k for k, _ in _fetches.expand_feeds(f, (None,) * 3)] for f in feed_list]
        feed_tensors = [self._feed_key(k) for ks in keys for k in ks]
        plan = self._master.get_plan(mapper.tensors, mapper.targets, feed_tensors)
        convert = [self._feed_converter(t) for t in feed_tensors]
        expands = len(feed_tensors) != len(feed_list)  # a SparseTensor feed: its components

        def call(*args, options=None, run_metadata=None):
            if len(args) != len(feed_list):
                raise ValueError(f"Expected {len(feed_list)} feeds, got {len(args)}")
            if expands:
                args = [v for f, a in zip(feed_list, args) for _, v in _fetches.expand_feeds(f, a)]
            vals = [c(a) for c, a in zip(convert, args)]
            values = self._run_plan(plan, vals, options, run_metadata)
            if mapper.handles:
                values = self._as_handles(values, mapper.handles)
            return mapper.build(values)

        return call

    def _as_handles(self, values, handles) -> list:
        """``values`` with the fetched session handles as ``TensorHandle``s of this session."""
        values = list(values)
        for k, dtype in handles:
            values[k] = TensorHandle(values[k], dtype, self)
        return values

    # --- feeds -----------------------------------------------------------------------------
    def _feed_key(self, key) -> _ops.Tensor:
        try:
            t = self._graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
        except (KeyError, ValueError, TypeError) as e:
            raise TypeError(f"Cannot interpret feed_dict key as Tensor: {e}") from None
        if not self._graph.is_feedable(t):
            raise ValueError(f"Tensor {t.name} may not be fed.")
        return t

    def _process_feeds(self, feed_dict):
        if not feed_dict:
            return (), ()
        tensors, values = [], []
        seen = set()
        for key, value in _fetches.feed_items(feed_dict):
            t = self._feed_key(key)
            if id(t) in seen:
                continue
            seen.add(id(t))
            tensors.append(t)
            values.append(self._feed_converter(t)(value))
        # Plans are keyed by the *set* of fed tensors: sort to make the key order-free.
        order = sorted(range(len(tensors)), key=lambda i: id(tensors[i]))
        return tuple(tensors[i] for i in order), tuple(values[i] for i in order)

    def _feed_converter(self, t: _ops.Tensor):
        dtype = t.dtype.base_dtype
        np_dtype = dtype._np
        shape = t.shape

        def convert(value):
            if isinstance(value, _ops.Tensor):
                raise TypeError(
                    f"The value of a feed cannot be a tf.Tensor object (feeding {t.name}). "
                    "Acceptable feed values include Python scalars, strings, lists, numpy "
                    "ndarrays, or TensorHandles."
                )
            if isinstance(value, TensorHandle):
                value = value.handle
            if dtype is _dt.string:
                arr = np.asarray(value, dtype=object)
            else:
                src = np.asarray(value)
                if src.dtype.kind in "USO" or (
                    src.dtype.kind in "fc" and (dtype.is_integer or dtype.is_bool)
                    and src.size and not np.all(np.mod(src, 1) == 0)
                ):
                    raise TypeError(
                        f"Cannot feed value of dtype {src.dtype} to Tensor {t.name!r} of "
                        f"dtype {dtype.name}"
                    )
                arr = src.astype(np_dtype, copy=False)
            if not shape.is_compatible_with(TensorShape(arr.shape)):
                raise ValueError(
                    f"Cannot feed value of shape {arr.shape} for Tensor {t.name!r}, which has "
                    f"shape {shape}"
                )
            if arr is value or (isinstance(value, np.ndarray) and np.shares_memory(arr, value)):
                # Never let a kernel mutate, or a variable capture, the caller's array.
                arr = arr.view()
                arr.flags.writeable = False
            return arr

        return convert

    # --- step listeners (live views) ---------------------------------------------------------
    def add_step_listener(self, fn) -> StepListener:
        """Call ``fn(run_metadata)`` after every ``run`` of this session, which is traced while
        any listener is attached (live timelines and monitors); ``.remove()`` on the returned
        handle detaches it. Listeners run on the thread that called ``run``; one that raises is
        reported as a warning and detached, so a broken view never stops a training loop."""
        if not callable(fn):
            raise TypeError(f"A step listener must be callable, not {fn!r}")
        handle = StepListener(self, fn)
        self._step_listeners.append(handle)
        return handle

    def _run_plan_observed(self, plan: Plan, feed_values, options, run_metadata,
                           step_id=None):
        if options is None or not options.trace_level or run_metadata is None:
            options = RunOptions(
                trace_level=RunOptions.FULL_TRACE,
                timeout_in_ms=options.timeout_in_ms if options is not None else 0,
                output_partition_graphs=bool(options and options.output_partition_graphs))
            run_metadata = RunMetadata()
        values = self._run_plan_now(plan, feed_values, options, run_metadata, step_id)
        for handle in list(self._step_listeners):
            try:
                handle.fn(run_metadata)
            except Exception as e:  # noqa: BLE001 - a view's bug must not stop the user's loop
                handle.remove()
                warnings.warn(f"step listener {handle.fn!r} raised {type(e).__name__}: {e}; "
                              "it has been detached", RuntimeWarning, stacklevel=4)
        return values

    # --- seams for the layers above --------------------------------------------------------
    @property
    def step_gate(self):
        """The step gate every variable-changing step passes (None: none installed)."""
        return self._step_gate

    def set_step_gate(self, gate) -> None:
        """Install ``gate`` (``dflab.train.step_gate.StepGate``) for every later step."""
        self._step_gate = gate

    def forget_state(self, op_names):
        """Drop the state that ops named ``op_names`` hold on this session's devices (variable
        values, queues, random streams), so new ops of those names start afresh; ``undo()``
        on the returned record puts it back."""
        return self._worker.forget_resources(op_names)

    def prepare_step(self, fetches, feed_dict=None):
        """What ``run(fetches, feed_dict)`` would run, without running it:
        ``(fetch mapper, plan, converted feed values)``."""
        self.check_open()
        mapper = _fetches.mapper_for(self._graph, fetches)
        feed_tensors, feed_values = self._process_feeds(feed_dict)
        return mapper, self._master.get_plan(mapper.tensors, mapper.targets,
                                             feed_tensors), feed_values

    def start_step(self, plan: Plan, feed_values, observer=None) -> list:
        """The executions of one step of ``plan``, wired to a fresh rendezvous but not started
        (the stepper drives them one node at a time)."""
        return self._worker.start_step(plan.parts, feed_values, next_step_id(), observer)

    def _run_plan(self, plan: Plan, feed_values, options, run_metadata, step_id=None):
        if step_id is None and _cancellers_active:
            canceller = getattr(_thread_steps, "canceller", None)
            if canceller is not None:  # this thread's steps are cancellable (a queue runner)
                return canceller.run(self, plan, feed_values, options, run_metadata)
        gate = self._step_gate
        if gate is not None and plan.changes_variables:
            with gate.step():
                return self._run_plan_ungated(plan, feed_values, options, run_metadata,
                                              step_id)
        if self._step_listeners:  # _run_plan_ungated, inlined: the common path stays short
            return self._run_plan_observed(plan, feed_values, options, run_metadata, step_id)
        return self._run_plan_now(plan, feed_values, options, run_metadata, step_id)

    def _run_plan_ungated(self, plan: Plan, feed_values, options, run_metadata, step_id):
        if self._step_listeners:
            return self._run_plan_observed(plan, feed_values, options, run_metadata, step_id)
        return self._run_plan_now(plan, feed_values, options, run_metadata, step_id)

    def _run_plan_now(self, plan: Plan, feed_values, options, run_metadata, step_id=None):
        if step_id is None:
            step_id = next_step_id()
        if plan.partitioned:
            return self._run_partitioned(plan, feed_values, options, run_metadata, step_id)
        if options is None:  # the common case, kept short: Session.run costs microseconds
            timeout, tracer = self._operation_timeout, None
        else:
            timeout = self._step_timeout(options)
            tracer = _tracer_for(plan, options, run_metadata)
        try:
            values = self._worker.run_partition(plan.parts[0], feed_values, step_id, timeout,
                                                tracer)
        except errors.OpError as e:
            raise _user_error(e) from None
        if options is not None:
            self._fill_metadata(tracer, plan, options, run_metadata)
        return values

    def _step_timeout(self, options) -> float | None:
        """Seconds a step may take: ``RunOptions.timeout_in_ms``, else the session's
        ``operation_timeout_in_ms``; None for no limit."""
        ms = options.timeout_in_ms if options is not None else 0
        return ms / 1000.0 if ms else self._operation_timeout

    def _fill_metadata(self, tracer, plan, options, run_metadata) -> None:
        """What ``options`` asks of ``run_metadata``: the step's trace when it was traced, and
        the partition graphs, which TF gives whatever the trace level."""
        if tracer is not None:
            self._fill_trace(tracer, plan, options, run_metadata)
        elif options.output_partition_graphs and run_metadata is not None:
            run_metadata.partition_graphs[:] = plan.partition_graph_defs()

    def _fill_trace(self, tracer, plan, options, run_metadata) -> None:
        from dflab.runtime.gpu_replay import replay_status
        from dflab.runtime.tracing import memory_summary

        graphs = plan.partition_graph_defs() if options.output_partition_graphs else None
        tracer.fill(run_metadata, options, partition_graphs=graphs)
        run_metadata.step_replay = replay_status(plan.parts)
        self._worker.record_memory(memory_summary(run_metadata))

    def memory_stats(self) -> dict:
        """Per device: memory figures over the session's traced steps (``DeviceMemory``)."""
        return self.devices.memory_stats()

    def _run_partitioned(self, plan: Plan, feed_values, options, run_metadata, step_id):
        """One execution per partition, all started at once, sharing the step's rendezvous."""
        tracer = _tracer_for(plan, options, run_metadata)
        timeout = self._step_timeout(options)
        result = self._worker.run_step(plan.parts, feed_values, step_id, timeout,
                                       tracer, plan.main_partition)
        if result.error is not None:
            raise _user_error(result.error)
        if options is not None:
            self._fill_metadata(tracer, plan, options, run_metadata)
        return plan.fetched_values(result.values, feed_values)

    # --- partial runs ----------------------------------------------------------------------
    def partial_run_setup(self, fetches, feeds=None):
        mapper = _fetches.mapper_for(self._graph, fetches)
        feed_tensors = tuple(self._feed_key(k) for f in (feeds or [])
                             for k, _ in _fetches.expand_feeds(f, (None,) * 3))
        plan = self._master.build_plan(mapper.tensors, mapper.targets, feed_tensors,
                                       partition=False)
        ex = Execution(plan.executor_plan, (), next_step_id(), partial=True)
        handle = f"partial_run_{ex.step_id}"
        self._partial_runs[handle] = (plan, ex, set(), set())
        return handle

    def partial_run(self, handle, fetches, feed_dict=None):
        if handle not in self._partial_runs:
            raise errors.InvalidArgumentError(None, None, f"Unknown partial run handle {handle}")
        plan, ex, fed, fetched = self._partial_runs[handle]
        eplan = plan.executor_plan
        # The plan's feeds and fetches are its own nodes' tensors: match the user's by name.
        feed_index = {t.name: k for k, t in enumerate(eplan.feeds)}
        for key, value in _fetches.feed_items(feed_dict or {}):
            t = self._feed_key(key)
            k = feed_index.get(t.name)
            if k is None:
                raise errors.InvalidArgumentError(
                    None, t.op, f"Input to feed {t.name} was not specified in partial_run_setup.")
            if k in fed:
                raise errors.InvalidArgumentError(
                    None, t.op, f"Input {t.name} has already been fed.")
            fed.add(k)
            ex.provide_feed(k, self._feed_converter(t)(value))
        mapper = _fetches.mapper_for(self._graph, fetches)
        fetch_index = {t.name: k for k, t in enumerate(eplan.fetches)}
        wanted_slots = []
        for t in mapper.tensors:
            if t.name not in fetch_index:
                raise errors.InvalidArgumentError(
                    None, t.op, f"Fetch {t.name} was not specified in partial_run_setup.")
            if t.name in fetched:
                raise errors.InvalidArgumentError(
                    None, t.op, f"Fetch {t.name} has already been fetched.")
            fetched.add(t.name)
            wanted_slots.append(eplan.fetch_slots[fetch_index[t.name]])
        needed = _needed_nodes(eplan, [t.name for t in mapper.tensors],
                               [op.name for op in mapper.targets])
        gate = self._step_gate
        try:
            with gate.step() if gate is not None and plan.changes_variables else nullcontext():
                while True:
                    runnable = [item for item in ex.ready if item[0] in needed]
                    if not runnable:
                        break
                    for item in runnable:
                        ex.step(item)
        except errors.OpError as e:
            raise _user_error(e) from None
        missing = [i for i in needed if not ex.done_flags[i]]
        if missing:
            op = user_op(eplan.nodes[missing[0]].op)
            raise errors.InvalidArgumentError(
                None, op, "Partial run cannot compute the fetches: they depend on a feed that "
                "has not been provided yet.")
        return mapper.build([to_client_value(ex.slots[s]) for s in wanted_slots])


def _tracer_for(plan, options, run_metadata):
    """A ``StepTracer`` when the run asks for tracing and gives somewhere to put it."""
    if options is None or not options.trace_level or run_metadata is None:
        return None
    from dflab.runtime.tracing import StepTracer

    return StepTracer(plan)


def _needed_nodes(eplan, tensor_names, target_names) -> set:
    """The plan nodes the named tensors and targets need. Walks the plan's nodes by name: a
    fused node took its sink's name and stands for the ops it replaced."""
    index: dict[str, int] = {}
    for n in eplan.nodes:
        index.setdefault(n.op.name, n.index)
        for member in getattr(n.op, "fused_ops", ()):
            index.setdefault(member.name, n.index)
    fed = {t.name for t in eplan.feeds}
    stack = [name.rpartition(":")[0] for name in tensor_names if name not in fed]
    stack += list(target_names)
    needed: set[int] = set()
    while stack:
        i = index.get(stack.pop())
        if i is None or i in needed:
            continue
        needed.add(i)
        op = eplan.nodes[i].op
        stack.extend(t.op.name for t in op.inputs if t.name not in fed)
        stack.extend(c.name for c in op.control_inputs)
    return needed


class Session(BaseSession):
    """TF1 ``tf.Session``."""

    @staticmethod
    def reset(target: str, containers=None, config=None) -> None:
        """Close every session connected to ``target`` and clear the resource containers
        ``containers`` (variables, queues, tables… that ops built under ``tf.container`` keep
        there) on its tasks, as TF's ``Session.reset``; no containers: the default one (TF's
        "localhost", where ops with no container keep their state)."""
        target = target or ""
        for s in list(_live_sessions):
            if s._target == target and not s._closed:
                s.close()
                s._reset = True
        for prefix, reset in _TARGET_RESETS.items():
            if target and target.startswith(prefix):
                reset(target, containers)


class InteractiveSession(BaseSession):
    """A session that installs itself as the default on construction (TF1 semantics)."""

    def __init__(self, target="", graph=None, config=None):
        super().__init__(target, graph, config)
        _ops.push_default_session(self)

    def close(self):
        _ops.pop_default_session(self)
        super().close()


def _is_mapping(x):
    return isinstance(x, Mapping)
