"""``Worker``: one task's devices and the state on them, running registered partitions per step.

The paper's split of a session (and TF's ``Worker`` service: ``RegisterGraph``, ``RunGraph``,
``AbortStep``): the master (``dflab.runtime.master``) prunes, places, partitions and fuses a
plan, then *registers* each partition with the worker of its task, as plain data — a
``PartitionSpec``: typed node defs plus the names of the tensors fed to it and fetched from it.
The worker rebuilds the partition's nodes from that data (``dflab.runtime.node``), binds their
kernels on its devices and keeps the resulting executor plan under a handle. Each step the
master asks it to run registered partitions with the step's fed values; the worker creates the
step's rendezvous (``create_rendezvous``), starts one execution per partition, concurrently on
its inter-op pool, and returns the fetched values. An error in any partition aborts the step's
rendezvous and cancels the others (``abort_step`` does the same from outside).

Nothing here needs the user's graph: a worker in another process registers the same specs
(their JSON form) and runs them the same way. A local worker is also given ``origins`` (op
names to the user's ops), so that errors, traces and the stepper name the user's ops.

A session talks to its worker through one interface (``WorkerInterface``, TF's worker
interface): this class for a session of its own, and ``dflab.distributed.cluster_worker.
ClusterWorker`` for a session on a cluster, which reaches each task through a task stub. Nothing
above the interface knows which it has.

Invariant: registering never changes a registered partition, and running a step never changes
what is registered; everything a step writes lives in its executions and its rendezvous.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from dflab.framework import errors
from dflab.framework.graph_io import GraphDef, graph_def_from_json
from dflab.framework.rendezvous import parse_key
from dflab.kernels import intra_op
from dflab.runtime import host_allocator
from dflab.runtime.devices import HOST_MEMORY, LOCAL_TASK, DeviceSet, Stream
from dflab.runtime.executor import Execution, to_client_value
from dflab.runtime.executor_plan import ExecutorPlan
from dflab.runtime.node import nodes_from_node_defs, split_input
from dflab.runtime.partition import short_device_name
from dflab.runtime.rendezvous import LocalRendezvous
from dflab.runtime.resources import Forgotten

_step_ids = itertools.count(1)


class WorkerInterface(Protocol):
    """What a session's master and client ask of the worker they run on."""

    devices: DeviceSet  # where the master places ops

    def register_partition(self, spec: PartitionSpec, origins=None):
        """Register a partition; returns what ``run_*`` take (``.device``, ``.feed_index``,
        ``.executor_plan`` where it runs in this process, ``.fetch_values(execution)``)."""

    def run_partition(self, part, feed_values, step_id: int, timeout=None,
                      observer=None) -> list:
        """Run one partition alone; its fetched values in host memory, or raise its error."""

    def run_step(self, parts, feed_values, step_id: int, timeout=None, observer=None,
                 main: int = 0) -> StepResult:
        """Run the partitions of one step concurrently."""

    def start_step(self, parts, feed_values, step_id: int, observer=None) -> list:
        """The executions of one step, not started (stepping), or UnimplementedError."""

    def abort_step(self, step_id: int, error: BaseException) -> bool: ...

    def consistent_snapshot(self, devices, timeout: float | None = None):
        """A context in which no step changes variables on ``devices`` (checkpoints)."""

    def forget_resources(self, op_names) -> Forgotten: ...

    def record_memory(self, summary: dict) -> None: ...

    def close(self) -> None: ...


def next_step_id() -> int:
    """A new step id, unique in this process (steps of every session and worker)."""
    return next(_step_ids)


@dataclass
class PartitionSpec:
    """One partition as plain data: what a master registers with a worker.

    ``graph_def``: the partition's typed node defs in topological order (loop back edges
    aside), each with its device; ``feeds``: names of the tensors fed to it, and
    ``feed_index``: their positions in the step's feeds; ``fetches``: names of the tensors it
    returns, in order; ``device``: the device it runs on ("" for a plan that runs unpartitioned
    over several devices, each node on its own); ``control_flow``: track deadness (a dead value
    may arrive through a ``_Recv`` even where no Switch or Merge runs).
    """

    device: str
    graph_def: GraphDef
    feeds: list = field(default_factory=list)
    feed_index: list = field(default_factory=list)
    fetches: list = field(default_factory=list)
    control_flow: bool = False

    def to_json(self) -> dict:
        return {"device": self.device, "graph_def": self.graph_def.to_json(),
                "feeds": list(self.feeds), "feed_index": list(self.feed_index),
                "fetches": list(self.fetches), "control_flow": bool(self.control_flow)}

    @classmethod
    def from_json(cls, data: dict) -> PartitionSpec:
        """Read a spec written by ``to_json``; malformed data is an InvalidArgumentError."""
        try:
            spec = cls(str(data["device"]), graph_def_from_json(data["graph_def"]),
                       [str(n) for n in data["feeds"]], [int(k) for k in data["feed_index"]],
                       [str(n) for n in data["fetches"]], bool(data["control_flow"]))
        except (KeyError, TypeError, ValueError) as e:
            raise errors.InvalidArgumentError(
                None, None, f"Malformed partition: {type(e).__name__}: {e}") from None
        if len(spec.feeds) != len(spec.feed_index):
            raise errors.InvalidArgumentError(
                None, None, "Malformed partition: feeds and feed_index differ in length")
        return spec


class RegisteredPartition:
    """What a worker keeps for one registered partition: its executor plan, which of the
    step's feeds it takes, the stream its expensive kernels run on (None: in parallel), and
    the device whose memory its feeds and fetches cross into and out of (None: host memory)."""

    __slots__ = ("handle", "device", "executor_plan", "feed_index", "cheap_start", "stream",
                 "memory", "scope", "_feeds_as_given", "replay", "_replay_reason", "steps")

    def __init__(self, handle: int, device: str, executor_plan: ExecutorPlan, feed_index,
                 stream, memory=None):
        self.handle = handle
        self.device = device
        self.executor_plan = executor_plan
        self.feed_index = tuple(feed_index)
        self.cheap_start = _cheap_until_recv(executor_plan)
        self.stream = stream
        self.memory = memory
        # What a thread running its kernels enters once per run (``Device.kernel_scope``).
        self.scope = memory.kernel_scope if memory is not None else None
        # The common case (a whole plan in host memory) takes the step's feeds as they come:
        # Session.run's fixed cost is measured in microseconds.
        self._feeds_as_given = memory is None and self.feed_index == tuple(range(len(feed_index)))
        # Whole-step replay on a GPU (``dflab.runtime.gpu_replay``), when asked for and
        # eligible; otherwise why not.
        self.replay = None
        self._replay_reason: str | None = None
        # The running steps of the worker it is registered with: a step that another worker
        # of this process runs over it is tracked there too, so that closing this one (its
        # task stopping) cancels that step (``Worker.begin_step``'s ``trackers``).
        self.steps: RunningSteps | None = None

    @property
    def replay_reason(self) -> str | None:
        """Why this partition's steps are not replayed as a captured graph (None: they are,
        or replay was not asked for)."""
        if self.replay is not None:
            return self.replay.reason
        return self._replay_reason

    def feeds(self, feed_values) -> list:
        """The step's fed values this partition takes, where its device keeps them (fed values
        arrive in host memory, like TF's client feeds; ``Device.accept``)."""
        if self._feeds_as_given and len(feed_values) == len(self.feed_index):
            return feed_values
        values = [feed_values[k] for k in self.feed_index]
        if self.memory is not None:
            values = [self.memory.accept(v) for v in values]
        return values

    def fetch_values(self, execution) -> list:
        """The partition's fetched values of a finished step, in host memory."""
        if self.memory is None:
            return execution.fetch_values()
        return [to_client_value(self.memory.to_host(v)) for v in execution.fetch_values()]

    def __repr__(self):
        return f"<RegisteredPartition {self.handle} {self.device}: " \
               f"{len(self.executor_plan.nodes)} nodes>"


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


class StepGroup:
    """The executions of one step on a worker: the first error aborts the rendezvous and
    cancels every other execution, and is the step's error unless it is a cancellation and
    a root cause arrives after it (another task's failure can reach this one first as the
    cancellation of a receive; TF's status groups prefer the root cause in the same way).
    ``on_error``, when set, hears the first error (a cluster step cancels its other tasks)."""

    __slots__ = ("rendezvous", "executions", "parts", "error", "_lock", "step_id", "on_error",
                 "trackers", "pins_blas")

    def __init__(self, rendezvous, step_id):
        self.rendezvous = rendezvous
        self.executions: list = []
        self.parts: list = []
        self.error = None
        self._lock = threading.Lock()
        self.step_id = step_id
        self.on_error = None
        self.trackers = ()  # other workers' running steps that track it (``begin_step``)
        self.pins_blas = False  # BLAS is on one thread until ``finish_step`` (``pin_blas``)

    def failed(self, error) -> None:
        with self._lock:
            if self.error is not None:
                if (isinstance(self.error, errors.CancelledError)
                        and not isinstance(error, errors.CancelledError)):
                    self.error = error  # the cause of the cancellation seen first
                return
            self.error = error
        why = f"Step {self.step_id} was cancelled: {_first_line(error)}"
        self.rendezvous.abort(errors.CancelledError(None, None, why))
        for ex in self.executions:
            if ex.error is None:
                ex.cancel(errors.CancelledError(None, None, why))
        if self.on_error is not None:
            self.on_error(error)


@dataclass(slots=True)  # made per step (per task on a cluster): slots make it cheaper
class StepResult:
    """One step's outcome on a worker: ``values``, the fetched values of each partition in
    host memory (None when the step failed), ``error``, its error, and ``progress``, per
    partition how far it got (for timeout messages)."""

    values: list | None
    error: BaseException | None = None
    progress: list = field(default_factory=list)


def _progress(group: StepGroup) -> list:
    """How far each partition of a failed step got (for its error message)."""
    return [f"{short_device_name(p.device) if p.device else 'all devices'}: "
            f"{ex.executed} of {len(p.executor_plan.nodes)} nodes run"
            for p, ex in zip(group.parts, group.executions)]


def _is_step_timeout(error) -> bool:
    """A deadline the executor met waiting for a step (not one a kernel raised)."""
    return isinstance(error, errors.DeadlineExceededError) and error.op is None


def step_timeout_error(timeout: float, progress) -> errors.DeadlineExceededError:
    """The error of a step that ran past ``timeout`` seconds, saying where each partition
    stood (``progress``)."""
    where = f" ({'; '.join(progress)})" if progress else ""
    return errors.DeadlineExceededError(
        None, None, f"Timed out after {timeout * 1000:.0f} ms waiting for the step to finish"
        f"{where}.")


class RunningSteps:
    """The steps running on a worker, by step id, each with a ``failed(error)`` that cancels
    it: what ``abort_step`` and a closing session reach. A step aborted before it started (a
    cancelled client racing its start) fails as it starts; bounded, so an abort that missed a
    finished step is forgotten in time."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running: dict = {}
        self._early: dict = {}

    def track(self, step_id: int, running) -> None:
        with self._lock:
            self._running[step_id] = running
            early = self._early.pop(step_id, None) if self._early else None
        if early is not None:
            running.failed(early)

    def untrack(self, step_id: int, running) -> None:
        with self._lock:
            if self._running.get(step_id) is running:
                del self._running[step_id]

    def ids(self) -> list:
        with self._lock:
            return list(self._running)

    def abort(self, step_id: int, error: BaseException) -> bool:
        """Cancel ``step_id``; False if it is not running (it then fails should it start)."""
        with self._lock:
            running = self._running.get(step_id)
            if running is None:
                self._early[step_id] = error
                if len(self._early) > _EARLY_ABORTS_KEPT:
                    del self._early[next(iter(self._early))]
        if running is None:
            return False
        running.failed(error)
        return True

    def cancel_all(self, error: BaseException) -> None:
        with self._lock:
            running = list(self._running.values())
        for r in running:
            r.failed(error)


class _Single:
    """A running step of one execution, as ``abort_step`` sees it."""

    __slots__ = ("execution",)

    def __init__(self, execution):
        self.execution = execution

    def failed(self, error) -> None:
        self.execution.cancel(error)


_EARLY_ABORTS_KEPT = 256


def _first_line(error) -> str:
    return str(error).split("\n", 1)[0] or type(error).__name__


class Worker:
    """The devices of one task and the partitions registered with it (see module docstring)."""

    def __init__(self, config, owner=None, task: str = LOCAL_TASK, devices=None,
                 ops_in_steps: bool = True):
        """``task``: the name its devices carry. ``devices``: run on devices owned elsewhere
        (a cluster's servers) instead of making its own; closing then leaves their state.
        ``ops_in_steps``: its ops run in steps (sessions, functions), not one by one as an
        eager context's; see ``_set_intra_op``."""
        self._config = config
        self._ops_in_steps = ops_in_steps
        self._owns_devices = devices is None
        if devices is None:
            devices = DeviceSet.from_config(config, self if owner is None else owner, task)
        self.devices = devices
        self._partitions: dict[int, RegisteredPartition] = {}
        self._handles = itertools.count(1)
        self.steps = RunningSteps()
        self._pool = None
        self._pool_lock = threading.Lock()
        self._closed = False
        self._intra_op = None
        self._pins_blas = False  # its steps put BLAS on one thread while they run
        self._serial_host_ops = False  # expensive host kernels run one at a time
        self._set_intra_op(config.intra_op_parallelism_threads, config.dflab)
        # Values cross between devices as they are unless two memory spaces meet here.
        spaces = {d.memory_space for d in self.devices}
        self._copy = self._copy_between_devices if len(spaces) > 1 else None

    def _set_intra_op(self, n: int, options) -> None:
        """Host kernels of this worker's devices run on ``n`` threads of a pool of its own:
        big work in chunks, matrix products too with ``split_products`` (BLAS then on one
        thread per call), else on BLAS's ``n`` threads (see ``dflab.kernels.intra_op`` for
        when each pays). BLAS keeps that count while the worker is open.

        With ``n`` 0 (the default), as TF, every usable core: the pool splits on all of them,
        and BLAS is put on one thread only while a step runs (``intra_op.pin_blas``), so that
        NumPy code between steps keeps BLAS's threads. An eager context (``ops_in_steps``
        False) has no steps to pin BLAS around: its kernels run on the calling thread, BLAS
        and oneDNN on every core.
        While such a pool spans every core and the inter-op setting is the default too,
        expensive host kernels run one at a time (``_stream_of``): each already has every
        core, and a second beside it only oversubscribes them (the LSTM and CNN steps of
        benchmarks/bench_models.py took 19-29% longer with two at once on 2 cores).

        Freed host memory is kept for the next step where the options say so
        (``runtime/host_allocator.py``). The pool also tells kernels whether they may run on
        oneDNN (``options.onednn``, products ``options.onednn_products``).
        Devices owned elsewhere (a cluster's servers) keep their owner's."""
        if not self._owns_devices:
            return  # nothing here would use a pool, and BLAS's threads are the owner's to set
        if options.retain_host_memory:
            host_allocator.retain_freed_memory()
        threads = n or (intra_op.usable_cores() if self._ops_in_steps else 1)
        self._intra_op = intra_op.IntraOpPool(
            threads, options.intra_op_split_products, library_threads=n,
            onednn=options.onednn, onednn_products=options.onednn_products)
        if n:
            self._intra_op.hold_blas()
        else:
            self._pins_blas = self._intra_op.splits_products
            self._serial_host_ops = (self._intra_op.threads > 1
                                     and not self._config.inter_op_parallelism_threads)
        for device in self.devices:
            device.context.intra_op = self._intra_op

    @property
    def closed(self) -> bool:
        return self._closed

    # --- registering ---------------------------------------------------------------------------
    def register_partition(self, spec: PartitionSpec, origins=None) -> RegisteredPartition:
        """Rebuild ``spec``'s nodes, bind their kernels on this worker's devices, and keep the
        executor plan under a new handle. ``origins`` (local workers): op names -> user ops."""
        graph = None
        if origins:
            graph = next(iter(origins.values())).graph
        nodes, feeds = nodes_from_node_defs(spec.graph_def.node, spec.feeds, origins, graph)
        by_name = {n.name: n for n in nodes}
        fetches = [self._resolve_fetch(name, by_name, feeds) for name in spec.fetches]
        devices = self.devices
        stream = self._stream_of_partition(spec.device, nodes)
        eplan = ExecutorPlan(nodes, feeds, fetches,
                             lambda node: devices.kernel_context(node.assigned_device),
                             control_flow=spec.control_flow, serial=stream is not None)
        memory = self.devices[spec.device] if spec.device else None
        if memory is not None and memory.memory_space == HOST_MEMORY:
            memory = None
        part = RegisteredPartition(next(self._handles), spec.device, eplan, spec.feed_index,
                                   stream, memory)
        part.steps = self.steps
        if self._config.dflab.gpu_step_replay:
            self._set_up_replay(part)
        self._partitions[part.handle] = part
        return part

    def _set_up_replay(self, part: RegisteredPartition) -> None:
        """Give ``part`` a ``PartitionReplay`` if its steps can be captured, else the reason
        (partitions without a CUDA GPU are left alone: replay does not apply to them)."""
        from dflab.runtime.gpu_replay import (
            PartitionReplay,
            partition_ineligible_reason,
            replay_applies,
        )

        if not replay_applies(part, self.devices):
            return
        device = self.devices[part.device] if part.device else None
        reason = partition_ineligible_reason(part, device)
        if reason is None:
            part.replay = PartitionReplay(part, device)
        else:
            part._replay_reason = reason

    def register_partition_json(self, data: dict) -> int:
        """``register_partition`` from the JSON form of a spec (another process's master)."""
        return self.register_partition(PartitionSpec.from_json(data)).handle

    def deregister_partition(self, handle: int) -> None:
        self._partitions.pop(handle, None)

    def partition(self, handle: int) -> RegisteredPartition:
        part = self._partitions.get(handle)
        if part is None:
            raise errors.NotFoundError(None, None, f"No partition registered as {handle}")
        return part

    @staticmethod
    def _resolve_fetch(name, by_name, feeds):
        op_name, index = split_input(name)
        for t in feeds:
            if t.op.name == op_name and t.value_index == index:
                return t
        node = by_name.get(op_name)
        if node is None or index >= len(node.outputs):
            raise errors.InvalidArgumentError(
                None, None, f"Fetch {name} is not produced by the partition")
        return node.outputs[index]

    def _stream_of_partition(self, device: str, nodes) -> Stream | None:
        """The stream a partition's expensive kernels run on, one at a time: its device's
        compute stream for a serial device (a GPU, real or simulated, as TF's GPU devices), any
        device's with one inter-op thread; None where independent ops run in parallel. A plan
        run unpartitioned over several devices gets one stream of its own if all of them are
        serial, none if any runs ops in parallel."""
        names = {device} if device else {n.assigned_device for n in nodes}
        streams = {self._stream_of(d) for d in names if d}
        if None in streams or not streams:
            return None
        if len(streams) == 1:
            return streams.pop()
        return Stream("unpartitioned step")

    def _stream_of(self, device: str) -> Stream | None:
        dev = self.devices[device]
        if self._serial_host_ops or self._config.inter_op_threads() < 2:
            return dev.streams["compute"]
        return dev.compute_stream

    # --- steps -----------------------------------------------------------------------------
    def create_rendezvous(self, step_id: int, traced: bool = False) -> LocalRendezvous:
        """The rendezvous of one step among this worker's devices (``traced``: the step is
        traced)."""
        return LocalRendezvous(step_id, self.device_copy)

    @property
    def device_copy(self):
        """What a rendezvous applies to a value crossing between two of this worker's devices
        (``copy(key, value)``), or None where all of them share one memory space."""
        return self._copy

    def _copy_between_devices(self, key: str, value):
        parsed = parse_key(key)
        return self.devices[parsed.src_device].copy_to(value, self.devices[parsed.dst_device])

    def inter_op_pool(self):
        if self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    # The calling thread runs ops too, so N inter-op threads = caller + N-1
                    # workers (one at least, for blocking ops such as a queue dequeue).
                    self._pool = ThreadPoolExecutor(
                        max_workers=max(self._config.inter_op_threads() - 1, 1),
                        thread_name_prefix="dflab-inter-op",
                    )
        return self._pool

    def run_partition(self, part: RegisteredPartition, feed_values, step_id: int,
                      timeout: float | None = None, observer=None) -> list:
        """Run one partition that needs no rendezvous (a whole plan on this worker) to its end;
        returns its fetched values in host memory. A partition set up for whole-step replay
        (``gpu_step_replay``) replays its captured step when the step is neither traced nor
        timed."""
        if part.replay is not None and observer is None and timeout is None:
            values = part.replay.run(feed_values)
            if values is not None:  # None: this step cannot be replayed
                return values
        eplan = part.executor_plan
        if not (part._feeds_as_given and len(feed_values) == len(part.feed_index)):
            feed_values = part.feeds(feed_values)
        ex = Execution(eplan, feed_values, step_id)
        ex.device = part.device
        ex.scope = part.scope
        ex.observer = observer
        if self._pins_blas and eplan.n_expensive:
            intra_op.pin_blas()
            try:
                self._execute(part, ex, step_id, timeout)
            finally:
                intra_op.unpin_blas()
        else:
            self._execute(part, ex, step_id, timeout)
        return part.fetch_values(ex)

    def _execute(self, part: RegisteredPartition, ex: Execution, step_id: int,
                 timeout: float | None) -> None:
        """Drive ``ex``, an execution of ``part``, to its end on the fastest driver it allows."""
        eplan = part.executor_plan
        if timeout is None and eplan.straight_line:
            ex.run_inline()
        elif timeout is None and part.stream is not None and eplan.inline_capable:
            # Expensive nodes would run one at a time on the stream anyway: in a fixed order on
            # this thread the dataflow bookkeeping between kernels is saved.
            ex.run_inline(part.stream)
        else:
            # A plan that may wait (a queue, an accumulator) can be cancelled while it runs.
            running = _Single(ex)
            self.steps.track(step_id, running)
            try:
                ex.run_dataflow(self.inter_op_pool(), timeout, part.stream)
            finally:
                self.steps.untrack(step_id, running)

    def start_step(self, parts, feed_values, step_id: int, observer=None,
                   rendezvous=None) -> list:
        """The executions of one step of ``parts``, sharing a rendezvous (a fresh one unless
        given), not started: what the stepper drives one node at a time."""
        return self._new_group(parts, feed_values, step_id, observer, rendezvous).executions

    def _new_group(self, parts, feed_values, step_id, observer, rendezvous) -> StepGroup:
        if rendezvous is None:
            rendezvous = self.create_rendezvous(step_id, observer is not None)
        group = StepGroup(rendezvous, step_id)
        execs = []
        for part in parts:
            ex = Execution(part.executor_plan, part.feeds(feed_values), step_id)
            ex.rendezvous = rendezvous
            ex.device = part.device
            ex.scope = part.scope
            ex.error_callback = group.failed
            ex.observer = observer
            execs.append(ex)
        group.executions = execs
        group.parts = list(parts)
        return group

    def begin_step(self, parts, feed_values, step_id: int, observer=None, main: int | None = 0,
                   rendezvous=None, on_error=None, trackers=()) -> StepGroup:
        """Start one step of ``parts``, concurrently: partitions with work to do at once go to
        the pool; those whose start is cheap, and ``main`` (the biggest; None: none) last, run
        on the calling thread until they finish or wait. ``on_error(error)`` is called once,
        with the step's first error, from whichever thread meets it. ``trackers``: the running
        steps of other workers that track the step too (those of the tasks whose partitions
        it runs, when it runs here over their devices: their closing cancels it).
        ``finish_step`` waits."""
        group = self._new_group(parts, feed_values, step_id, observer, rendezvous)
        group.on_error = on_error
        self.steps.track(step_id, group)
        if trackers:
            group.trackers = trackers
            for steps in trackers:
                steps.track(step_id, group)
        if self._pins_blas and any(p.executor_plan.n_expensive for p in parts):
            intra_op.pin_blas()
            group.pins_blas = True
        pool = self._pool or self.inter_op_pool()  # made once: most steps skip the call
        execs = group.executions
        if len(execs) == 1:  # a task's one partition of a cluster step: no order to keep
            part = parts[0]
            execs[0].start(pool, part.stream, inline=main is not None or part.cheap_start)
            return group
        for i, ex in enumerate(execs):  # partitions with work to do at once: on the pool
            if i != main and not parts[i].cheap_start:
                ex.start(pool, parts[i].stream)
        for i, ex in enumerate(execs):  # the others, and the main one last, here
            if i != main and parts[i].cheap_start:
                ex.start(pool, parts[i].stream, inline=True)
        if main is not None:
            execs[main].start(pool, parts[main].stream, inline=True)
        return group

    def finish_step(self, group: StepGroup, timeout: float | None = None) -> StepResult:
        """Wait for a step ``begin_step`` started (``timeout`` seconds at most: then it is
        cancelled); its fetched values per partition in host memory, or its error."""
        try:
            if timeout is None:  # most steps: no deadline to count down
                for ex in group.executions:
                    try:
                        ex.wait()
                    except Exception:  # noqa: BLE001 - group.error holds the step's first error
                        pass
            else:
                deadline = time.monotonic() + timeout
                for ex in group.executions:
                    try:
                        ex.wait(max(deadline - time.monotonic(), 0.0))
                    except Exception:  # noqa: BLE001 - as above
                        pass
        finally:
            self.steps.untrack(group.step_id, group)
            for steps in group.trackers:
                steps.untrack(group.step_id, group)
            if group.pins_blas:
                group.pins_blas = False
                intra_op.unpin_blas()
        error = group.error
        if error is None:
            try:
                parts, execs = group.parts, group.executions
                if len(execs) == 1:  # a task's one partition of a cluster step
                    return StepResult([parts[0].fetch_values(execs[0])])
                return StepResult([p.fetch_values(ex) for p, ex in zip(parts, execs)])
            except errors.OpError as e:
                error = e
        progress = _progress(group)
        if timeout is not None and _is_step_timeout(error):
            error = step_timeout_error(timeout, progress)
        return StepResult(None, error, progress)

    def run_step(self, parts, feed_values, step_id: int, timeout: float | None = None,
                 observer=None, main: int = 0) -> StepResult:
        """Run ``parts`` concurrently for one step, sharing a fresh rendezvous; returns their
        fetched values, or the step's first error, once every execution has ended."""
        group = self.begin_step(parts, feed_values, step_id, observer, main)
        return self.finish_step(group, timeout)

    def abort_step(self, step_id: int, error: BaseException) -> bool:
        """Cancel a step (its rendezvous and executions); False if it is not running, in which
        case it fails as soon as it starts, should it start later."""
        return self.steps.abort(step_id, error)

    def cancel_steps(self, error: BaseException) -> None:
        """Cancel every step running here (a session closing: TF's cancellation manager)."""
        self.steps.cancel_all(error)

    def consistent_snapshot(self, devices, timeout: float | None = None):
        """Held around a save or restore of variables on ``devices``: a worker of one client
        has nothing to exclude beyond the session's own step gate (clusters do)."""
        return contextlib.nullcontext()

    # --- state ---------------------------------------------------------------------------------
    def record_memory(self, summary: dict) -> None:
        """A traced step's memory per device (``tracing.memory_summary``), folded into each
        device's account."""
        for name, entry in summary.items():
            try:
                device = self.devices[name]
            except KeyError:
                continue
            device.memory.record_step(entry["peak_bytes"], entry["bytes_allocated"])

    def state_summary(self) -> dict:
        """What this task holds, as plain data: its devices, and per variable its device,
        shape, dtype and bytes (uninitialized ones with ``bytes`` 0 and ``shape`` None)."""
        devices, variables = [], []
        for d in self.devices:
            devices.append({"name": d.name, "device_type": d.device_type,
                            "description": d.description})
            for name, state in sorted(d.resources.variables().items()):
                value = state.value
                variables.append({
                    "name": name, "device": d.name,
                    "shape": None if value is None else tuple(int(n) for n in value.shape),
                    "dtype": None if value is None else str(value.dtype),
                    "bytes": 0 if value is None else int(value.nbytes)})
        return {"devices": devices, "variables": variables}

    def forget_resources(self, op_names) -> Forgotten:
        """Drop the state (variables, queues, kernel state) that ops named ``op_names`` hold on
        every device, as when a notebook cell that built them is replaced; ``undo()`` on the
        result puts it back."""
        record = Forgotten()
        for device in self.devices:
            record.extend(device.resources.forget(op_names))
        return record

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.cancel_steps(errors.CancelledError(None, None, "The session was closed"))
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if self._intra_op is not None:
            self._intra_op.close()
        if self._owns_devices:
            self.devices.close()

    def __del__(self):
        try:
            if self._pool is not None and not self._closed:
                self._pool.shutdown(wait=False)
        except Exception:  # noqa: BLE001 - interpreter teardown
            pass
