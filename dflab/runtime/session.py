"""``Session``: feeds, fetches, the plan cache, and running plans on the executor.

``run`` maps the user's (possibly nested) fetches to a flat list of unique graph elements, checks
and converts feeds, then looks up a cached plan for the signature (fetches, feeds, targets). A plan
is built once per signature: prune the graph to what the fetches need (cutting at fed tensors),
check it is acyclic, place every op on a device, bind kernels. Variable state lives in per-device
resource managers owned by the session, so it persists across ``run`` calls and is shared by
concurrent ones.

A plan whose ops all sit on one device (the common case) runs on one executor, with no
partitioning cost at all. A plan spanning several devices is split by ``runtime.partition`` into
one subgraph per device joined by ``_Send``/``_Recv`` pairs; each step then runs one execution per
partition, concurrently on the inter-op pool, sharing a fresh ``Rendezvous`` (so concurrent steps
never mix their tensors). The first error in any partition aborts the rendezvous and cancels the
other partitions, and is the error the caller sees. Plans with dynamic control flow are not
partitioned yet: they run in one execution, each op with its own device's kernel context.
"""

from __future__ import annotations

import itertools
import threading
import time
import warnings
import weakref
from collections.abc import Mapping
from contextlib import nullcontext

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.framework import ops as _ops
from dflab.framework.tensor_shape import TensorShape
from dflab.runtime import fetches as _fetches
from dflab.runtime.config import ConfigProto, RunMetadata, RunOptions
from dflab.runtime.devices import DeviceSet
from dflab.runtime.executor import Execution, to_client_value
from dflab.runtime.executor_plan import CONTROL_FLOW_OPS, ExecutorPlan
from dflab.runtime.partition import user_op
from dflab.runtime.placer import place
from dflab.runtime.subgraph import prune, topological_order

_default_session = threading.local()
_step_ids = itertools.count(1)


def _next_step_id() -> int:
    return next(_step_ids)


def get_default_session():
    stack = getattr(_default_session, "stack", None)
    return stack[-1] if stack else None


class _DefaultSessionContext:
    def __init__(self, sess):
        self._sess = sess

    def __enter__(self):
        if not hasattr(_default_session, "stack"):
            _default_session.stack = []
        _default_session.stack.append(self._sess)
        return self._sess

    def __exit__(self, *exc):
        _default_session.stack.remove(self._sess)


class PartitionRun:
    """The fixed part of running one device's partition: its executor plan and which of the
    step's feeds it takes."""

    __slots__ = ("device", "executor_plan", "feed_index", "cheap_start")

    def __init__(self, device: str, executor_plan: ExecutorPlan, feed_index):
        self.device = device
        self.executor_plan = executor_plan
        self.feed_index = tuple(feed_index)
        self.cheap_start = _cheap_until_recv(executor_plan)

    def __repr__(self):
        return f"<PartitionRun {self.device}: {len(self.executor_plan.nodes)} nodes>"


def _cheap_until_recv(eplan) -> bool:
    """Whether everything the partition can run before its first ``_Recv`` completes is cheap.

    Such a partition (typically ``_Recv`` nodes and constants) is started on the calling thread:
    that costs less than a hand-off to the pool, and cannot hold the thread for long, since
    anything expensive waits for a ``_Recv``, whose completion is scheduled on the pool.
    """
    nodes = eplan.nodes
    after_recv = [False] * len(nodes)
    for node in nodes:  # topological order
        if node.is_async or after_recv[node.index]:
            for j, _, _ in node.edges:
                after_recv[j] = True
        elif node.expensive or node.blocking:
            return False
    return True


class Plan:
    """A cached, placed, kernel-bound execution plan for one run signature.

    ``placement`` maps each user op to its ``Placement`` (``.device``, ``.reason``); ``ops`` are
    the pruned ops in topological order. ``partitions`` maps each device the plan uses to the
    nodes it runs there: the user's ops, or for a partitioned plan their per-partition views plus
    the ``_Send``/``_Recv`` nodes. A single-device (or unpartitioned) plan has one
    ``executor_plan``; a partitioned one has ``executor_plan = None`` and one ``PartitionRun`` per
    device in ``partition_runs``.
    """

    def __init__(self, executor_plan: ExecutorPlan | None, placement: dict, ops,
                 partitions: dict | None = None, partitioning=None, partition_runs=(),
                 fetch_map=(), main_partition: int = 0, unpartitioned_reason: str | None = None):
        self.executor_plan = executor_plan
        self.placement = placement
        self.ops = ops
        self.partitions = partitions if partitions is not None else _by_device(ops, placement)
        self.partitioning = partitioning
        self.partition_runs = list(partition_runs)
        # Per fetch: (partition position, local fetch index), or (-1, k) for fed tensor k.
        self.fetch_map = list(fetch_map)
        self.main_partition = main_partition
        self.unpartitioned_reason = unpartitioned_reason
        self.parallel = None  # may ops of one step run at once (set on the first dataflow run)
        self._graph_defs = None
        self._changes_variables = None

    @property
    def partitioned(self) -> bool:
        return self.executor_plan is None

    @property
    def changes_variables(self) -> bool:
        """Whether the step may change a variable (it has an op with a ref input: ``Assign*``,
        ``Scatter*``, the optimizers' ``Apply*``): such steps pass the step gate."""
        if self._changes_variables is None:
            self._changes_variables = any(op._op_def.ref_inputs for op in self.ops)
        return self._changes_variables

    def partition_graph_defs(self) -> list:
        """One ``GraphDef`` per device (``_Send``/``_Recv`` included), built on first use."""
        if self._graph_defs is None:
            from dflab.runtime.partition import graph_defs_of

            self._graph_defs = graph_defs_of(self.partitions)
        return self._graph_defs


def _by_device(ops, placement) -> dict:
    out: dict = {}
    for op in ops:
        out.setdefault(placement[op].device, []).append(op)
    return out


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


def partition_executions(plan: Plan, feed_values, step_id: int, observer=None):
    """The executions of one step of a partitioned plan, sharing a fresh rendezvous: the
    ``_StepGroup`` (first error wins, aborts the others) and one execution per partition."""
    from dflab.runtime.rendezvous import Rendezvous

    group = _StepGroup(Rendezvous(), step_id)
    execs = []
    for run in plan.partition_runs:
        ex = Execution(run.executor_plan, [feed_values[k] for k in run.feed_index], step_id)
        ex.rendezvous = group.rendezvous
        ex.device = run.device
        ex.error_callback = group.failed
        ex.observer = observer
        execs.append(ex)
    group.executions = execs
    return group, execs


class _StepGroup:
    """The partitions' executions of one step: the first error wins, aborts the rendezvous and
    cancels every other partition."""

    __slots__ = ("rendezvous", "executions", "error", "_lock", "step_id")

    def __init__(self, rendezvous, step_id):
        self.rendezvous = rendezvous
        self.executions: list = []
        self.error = None
        self._lock = threading.Lock()
        self.step_id = step_id

    def failed(self, error) -> None:
        with self._lock:
            if self.error is not None:
                return
            self.error = error
        why = f"Step {self.step_id} was cancelled: {_first_line(error)}"
        self.rendezvous.abort(errors.CancelledError(None, None, why))
        for ex in self.executions:
            if ex.error is None:
                ex.cancel(errors.CancelledError(None, None, why))


def _first_line(error) -> str:
    return str(error).split("\n", 1)[0] or type(error).__name__


def _user_error(error):
    """Errors name the user's op, not the partition's view of it."""
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
        self._config = config if config is not None else ConfigProto()
        self._devices = DeviceSet.from_config(self._config, self)
        self._plans: dict = {}
        self._plans_lock = threading.Lock()
        # Where plans put stateful ops (variables, queues…): later plans keep them there. Weak,
        # so an op a re-run notebook cell replaced (same name, new object) is placed afresh.
        self._stateful_placements: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._closed = False
        self._pool = None
        self._pool_lock = threading.Lock()
        self._blas_limits = None
        self._partial_runs: dict = {}
        self._step_listeners: list = []
        # Consistent snapshots (dflab.train.step_gate): when set, every driver of a step that
        # changes variables (run, make_callable, partial_run, the stepper) passes this gate.
        self._step_gate = None
        self._default_ctx = None
        if self._config.intra_op_parallelism_threads:
            from threadpoolctl import threadpool_limits

            self._blas_limits = threadpool_limits(self._config.intra_op_parallelism_threads)

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
        return self._devices

    def list_devices(self):
        return self._devices.list()

    def as_default(self):
        return _DefaultSessionContext(self)

    def __enter__(self):
        self._default_ctx = _DefaultSessionContext(self)
        self._default_ctx.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._default_ctx is not None:
            self._default_ctx.__exit__(exc_type, exc, tb)
            self._default_ctx = None
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if self._blas_limits is not None:
            self._blas_limits.restore_original_limits()
        self._devices.close()

    def __del__(self):
        try:
            if self._pool is not None and not self._closed:
                self._pool.shutdown(wait=False)
        except Exception:  # noqa: BLE001 - interpreter teardown
            pass

    def _inter_op_pool(self):
        if self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    from concurrent.futures import ThreadPoolExecutor

                    # The calling thread runs ops too, so N inter-op threads = caller + N-1
                    # workers (one at least, for blocking ops such as a queue dequeue).
                    self._pool = ThreadPoolExecutor(
                        max_workers=max(self._config.inter_op_threads() - 1, 1),
                        thread_name_prefix="dflab-inter-op",
                    )
        return self._pool

    # --- run -------------------------------------------------------------------------------
    def run(self, fetches, feed_dict=None, options: RunOptions | None = None,
            run_metadata: RunMetadata | None = None):
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        mapper = _fetches.mapper_for(self._graph, fetches)
        feed_tensors, feed_values = self._process_feeds(feed_dict)
        plan = self._get_plan(mapper.tensors, mapper.targets, feed_tensors)
        values = self._run_plan(plan, feed_values, options, run_metadata)
        return mapper.build(values)

    def make_callable(self, fetches, feed_list=None, accept_options=False):
        """A callable that runs ``fetches`` with positional feeds, skipping all per-call lookups."""
        mapper = _fetches.mapper_for(self._graph, fetches)
        feed_tensors = [self._feed_key(k) for k in (feed_list or [])]
        plan = self._get_plan(mapper.tensors, mapper.targets, feed_tensors)
        convert = [self._feed_converter(t) for t in feed_tensors]

        def call(*args, options=None, run_metadata=None):
            if len(args) != len(convert):
                raise ValueError(f"Expected {len(convert)} feeds, got {len(args)}")
            vals = [c(a) for c, a in zip(convert, args)]
            return mapper.build(self._run_plan(plan, vals, options, run_metadata))

        return call

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
        for key, value in feed_dict.items():
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

    # --- plans -----------------------------------------------------------------------------
    def _get_plan(self, fetch_tensors, targets, feed_tensors) -> Plan:
        key = (tuple(map(id, fetch_tensors)), tuple(map(id, targets)),
               tuple(map(id, feed_tensors)), self._graph._plan_epoch)
        plan = self._plans.get(key)
        if plan is None:
            with self._plans_lock:
                plan = self._plans.get(key)
                if plan is None:
                    plan = self._build_plan(fetch_tensors, targets, feed_tensors)
                    self._plans[key] = plan
        return plan

    def _build_plan(self, fetch_tensors, targets, feed_tensors, partition: bool = True) -> Plan:
        for t in fetch_tensors:
            if not self._graph.is_fetchable(t):
                raise ValueError(f"Operation {t.op.name!r} has been marked as not fetchable.")
        ops = prune(fetch_tensors, targets, feed_tensors)
        _ops.check_not_stale(self._graph, ops)  # ops whose inputs a re-run notebook cell replaced
        ordered = topological_order(ops, feed_tensors)
        placement = place(ordered, self._devices, self._config, self._stateful_placements)
        for op, p in placement.items():
            if op._op_def is not None and op._op_def.stateful:
                self._stateful_placements.setdefault(op, p.device)
        devices = self._devices
        used = {placement[op].device for op in ordered}
        reason = None
        if len(used) > 1:
            if not partition:
                reason = "partial runs execute unpartitioned"
            else:
                from dflab.runtime.partition import LoopNotPartitionableError

                cf = any(op.type in CONTROL_FLOW_OPS for op in ordered)
                try:
                    return self._build_partitioned_plan(ordered, placement, feed_tensors,
                                                        fetch_tensors, cf)
                except LoopNotPartitionableError as e:
                    reason = f"a while loop cannot be partitioned ({e}): the plan runs in one " \
                        "execution"
        if len(used) == 1 and self._fuses_on(next(iter(used))):
            device = next(iter(used))
            nodes = self._fused(ordered, device, list(fetch_tensors) + list(feed_tensors))
            ctx = devices.kernel_context(device)
            eplan = ExecutorPlan(nodes, feed_tensors, fetch_tensors, lambda op: ctx)
            return Plan(eplan, placement, ordered, {device: nodes})
        eplan = ExecutorPlan(
            ordered, feed_tensors, fetch_tensors,
            lambda op: devices.kernel_context(placement[op].device),
        )
        return Plan(eplan, placement, ordered, unpartitioned_reason=reason)

    def _fuses_on(self, device: str) -> bool:
        """Whether elementwise fusion runs on ``device``'s part of a plan (``RewriterConfig``:
        by default on devices with GPU kernels, i.e. real GPUs)."""
        from dflab.runtime.config import RewriterConfig

        mode = self._config.graph_options.rewrite_options.remapping
        if mode == RewriterConfig.DEFAULT:
            return self._devices[device].kernel_device_type == "GPU"
        return mode == RewriterConfig.ON

    @staticmethod
    def _fused(nodes, device, keep) -> list:
        from dflab.runtime.fusion import fuse_elementwise

        return fuse_elementwise(nodes, device, keep)[0]

    def _build_partitioned_plan(self, ordered, placement, feed_tensors, fetch_tensors,
                                control_flow=False) -> Plan:
        """``control_flow``: the plan has conds, so every partition tracks deadness (a dead
        value may arrive through a ``_Recv`` even where no Switch or Merge runs)."""
        from dflab.runtime.partition import partition

        devices = self._devices
        pt = partition(ordered, placement, feed_tensors, fetch_tensors,
                       incarnation=lambda name: id(devices[name]),
                       device_order=[d.name for d in devices])
        runs, position = [], {}
        for device, part in pt.partitions.items():
            ctx = devices.kernel_context(device)
            if self._fuses_on(device):
                # What runs is what the partition graphs show: the fused nodes, not the groups.
                part.nodes = self._fused(part.nodes, device, part.fetches + part.feeds)
            try:
                eplan = ExecutorPlan(part.nodes, part.feeds, part.fetches, lambda op, c=ctx: c,
                                     control_flow=control_flow)
            except errors.OpError as e:
                raise _user_error(e) from None
            position[device] = len(runs)
            runs.append(PartitionRun(device, eplan, part.feed_index))
        fetch_map = [(-1, where[1]) if where[0] == "feed" else (position[where[0]], where[1])
                     for where in pt.fetch_map]
        # The calling thread runs the biggest partition itself; the others go to the pool.
        main = max(range(len(runs)), key=lambda i: len(runs[i].executor_plan.nodes))
        parts = {device: part.nodes for device, part in pt.partitions.items()}
        return Plan(None, placement, ordered, parts, pt, runs, fetch_map, main)

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

    def _run_plan_observed(self, plan: Plan, feed_values, options, run_metadata):
        if options is None or not options.trace_level or run_metadata is None:
            options = RunOptions(
                trace_level=RunOptions.FULL_TRACE,
                timeout_in_ms=options.timeout_in_ms if options is not None else 0,
                output_partition_graphs=bool(options and options.output_partition_graphs))
            run_metadata = RunMetadata()
        values = self._run_plan_now(plan, feed_values, options, run_metadata)
        for handle in list(self._step_listeners):
            try:
                handle.fn(run_metadata)
            except Exception as e:  # noqa: BLE001 - a view's bug must not stop the user's loop
                handle.remove()
                warnings.warn(f"step listener {handle.fn!r} raised {type(e).__name__}: {e}; "
                              "it has been detached", RuntimeWarning, stacklevel=4)
        return values

    def _run_plan(self, plan: Plan, feed_values, options, run_metadata):
        gate = self._step_gate
        if gate is not None and plan.changes_variables:
            with gate.step():
                return self._run_plan_ungated(plan, feed_values, options, run_metadata)
        return self._run_plan_ungated(plan, feed_values, options, run_metadata)

    def _run_plan_ungated(self, plan: Plan, feed_values, options, run_metadata):
        if self._step_listeners:
            return self._run_plan_observed(plan, feed_values, options, run_metadata)
        return self._run_plan_now(plan, feed_values, options, run_metadata)

    def _run_plan_now(self, plan: Plan, feed_values, options, run_metadata):
        eplan = plan.executor_plan
        if eplan is None:
            return self._run_partitioned(plan, feed_values, options, run_metadata)
        ex = Execution(eplan, feed_values, _next_step_id())
        timeout = self._step_timeout(options)
        tracer = _tracer_for(plan, options, run_metadata)
        ex.observer = tracer
        if eplan.straight_line and timeout is None:
            ex.run_inline()
        else:
            if plan.parallel is None:
                plan.parallel = any(self._runs_ops_in_parallel(p.device)
                                    for p in plan.placement.values())
            ex.run_dataflow(self._inter_op_pool(), timeout, plan.parallel)
        if tracer is not None:
            tracer.fill(run_metadata, options)
            self._record_memory(run_metadata)
        return ex.fetch_values()

    def _step_timeout(self, options) -> float | None:
        """Seconds a step may take: ``RunOptions.timeout_in_ms``, else the session's
        ``operation_timeout_in_ms``; None for no limit."""
        ms = (options.timeout_in_ms if options is not None else 0) or \
            self._config.operation_timeout_in_ms
        return ms / 1000.0 if ms else None

    def _record_memory(self, run_metadata) -> None:
        """A traced step's memory per device, folded into each device's session account."""
        from dflab.runtime.tracing import memory_summary

        for name, entry in memory_summary(run_metadata).items():
            try:
                device = self._devices[name]
            except KeyError:
                continue
            device.memory.record_step(entry["peak_bytes"], entry["bytes_allocated"])

    def memory_stats(self) -> dict:
        """Per device: memory figures over the session's traced steps (``DeviceMemory``)."""
        return self._devices.memory_stats()

    def _runs_ops_in_parallel(self, device: str) -> bool:
        """CPU devices run independent ops on the inter-op threads; a GPU (real or simulated)
        runs its kernels one at a time, on one stream, as TF's GPU devices do."""
        if self._config.inter_op_threads() < 2:
            return False
        try:
            return self._devices[device].device_type != "GPU"
        except KeyError:
            return True

    def _run_partitioned(self, plan: Plan, feed_values, options, run_metadata):
        """One execution per partition, all started at once, sharing the step's rendezvous."""
        from dflab.runtime.partition import short_device_name
        step_id = _next_step_id()
        tracer = _tracer_for(plan, options, run_metadata)
        group, execs = partition_executions(plan, feed_values, step_id, tracer)
        timeout = self._step_timeout(options)
        deadline = None if timeout is None else time.monotonic() + timeout
        pool = self._inter_op_pool()
        main = plan.main_partition
        runs = plan.partition_runs
        if plan.parallel is None:
            plan.parallel = [self._runs_ops_in_parallel(r.device) for r in runs]
        parallel = plan.parallel
        for i, ex in enumerate(execs):  # partitions with work to do at once: on the pool
            if i != main and not runs[i].cheap_start:
                ex.start(pool, parallel[i])
        for i, ex in enumerate(execs):  # the others, and the main one last, on this thread
            if i != main and runs[i].cheap_start:
                ex.start(pool, parallel[i], inline=True)
        execs[main].start(pool, parallel[main], inline=True)
        for ex in execs:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                ex.wait(left)
            except Exception:  # noqa: BLE001 - group.error holds the step's first error
                pass
        error = group.error
        if error is not None:
            if isinstance(error, errors.DeadlineExceededError) and error.op is None \
                    and timeout is not None:
                # The executor timed out one partition: report the step's timeout and where
                # every partition stood.
                where = "; ".join(f"{short_device_name(r.device)}: {ex.executed} of "
                                  f"{len(r.executor_plan.nodes)} nodes run"
                                  for r, ex in zip(runs, execs))
                error = errors.DeadlineExceededError(
                    None, None, f"Timed out after {timeout * 1000:.0f} ms waiting for the step "
                    f"to finish ({where}).")
            raise _user_error(error)
        if tracer is not None:
            graphs = plan.partition_graph_defs() if options.output_partition_graphs else None
            tracer.fill(run_metadata, options, partition_graphs=graphs)
            self._record_memory(run_metadata)
        try:
            parts = [ex.fetch_values() for ex in execs]
        except errors.OpError as e:
            raise _user_error(e) from None
        return [to_client_value(feed_values[k]) if src < 0 else parts[src][k]
                for src, k in plan.fetch_map]

    # --- partial runs ----------------------------------------------------------------------
    def partial_run_setup(self, fetches, feeds=None):
        mapper = _fetches.mapper_for(self._graph, fetches)
        feed_tensors = tuple(self._feed_key(f) for f in (feeds or []))
        plan = self._build_plan(mapper.tensors, mapper.targets, feed_tensors, partition=False)
        ex = Execution(plan.executor_plan, (), _next_step_id(), partial=True)
        handle = f"partial_run_{ex.step_id}"
        self._partial_runs[handle] = (plan, ex, set(), set())
        return handle

    def partial_run(self, handle, fetches, feed_dict=None):
        if handle not in self._partial_runs:
            raise errors.InvalidArgumentError(None, None, f"Unknown partial run handle {handle}")
        plan, ex, fed, fetched = self._partial_runs[handle]
        eplan = plan.executor_plan
        feed_index = {id(t): k for k, t in enumerate(eplan.feeds)}
        for key, value in (feed_dict or {}).items():
            t = self._feed_key(key)
            k = feed_index.get(id(t))
            if k is None:
                raise errors.InvalidArgumentError(
                    None, t.op, f"Input to feed {t.name} was not specified in partial_run_setup.")
            if k in fed:
                raise errors.InvalidArgumentError(
                    None, t.op, f"Input {t.name} has already been fed.")
            fed.add(k)
            ex.provide_feed(k, self._feed_converter(t)(value))
        mapper = _fetches.mapper_for(self._graph, fetches)
        fetch_index = {id(t): k for k, t in enumerate(eplan.fetches)}
        wanted_slots = []
        for t in mapper.tensors:
            if id(t) not in fetch_index:
                raise errors.InvalidArgumentError(
                    None, t.op, f"Fetch {t.name} was not specified in partial_run_setup.")
            if id(t) in fetched:
                raise errors.InvalidArgumentError(
                    None, t.op, f"Fetch {t.name} has already been fetched.")
            fetched.add(id(t))
            wanted_slots.append(eplan.fetch_slots[fetch_index[id(t)]])
        needed = _needed_nodes(eplan, mapper.tensors, mapper.targets)
        gate = self._step_gate
        with gate.step() if gate is not None and plan.changes_variables else nullcontext():
            while True:
                runnable = [item for item in ex.ready if item[0] in needed]
                if not runnable:
                    break
                for item in runnable:
                    ex.step(item)
        missing = [i for i in needed if not ex.done_flags[i]]
        if missing:
            op = eplan.nodes[missing[0]].op
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


def _needed_nodes(eplan, tensors, targets) -> set:
    """The plan nodes the tensors and targets need. Walks the plan's nodes, not the user's
    ops: a fused node stands for the ops it replaced (it produces its sink's outputs)."""
    index: dict[int, int] = {}
    for n in eplan.nodes:
        index.setdefault(id(n.op), n.index)
        for t in n.op._outputs:
            index.setdefault(id(t.op), n.index)
    fed = {id(t) for t in eplan.feeds}
    stack = [t.op for t in tensors if id(t) not in fed] + list(targets)
    needed: set[int] = set()
    while stack:
        i = index.get(id(stack.pop()))
        if i is None or i in needed:
            continue
        needed.add(i)
        op = eplan.nodes[i].op
        stack.extend(t.op for t in op._inputs if id(t) not in fed)
        stack.extend(op._control_inputs)
    return needed


class Session(BaseSession):
    """TF1 ``tf.Session``."""


class InteractiveSession(BaseSession):
    """A session that installs itself as the default on construction (TF1 semantics)."""

    def __init__(self, target="", graph=None, config=None):
        super().__init__(target, graph, config)
        self._ctx = _DefaultSessionContext(self)
        self._ctx.__enter__()

    def close(self):
        if self._ctx is not None:
            try:
                self._ctx.__exit__(None, None, None)
            except ValueError:
                pass
            self._ctx = None
        super().close()


def _is_mapping(x):
    return isinstance(x, Mapping)
