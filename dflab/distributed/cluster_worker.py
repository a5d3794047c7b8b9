"""``ClusterWorker``: a client session's worker over the tasks of a cluster, through task stubs.

The master (``dflab.runtime.master``) registers each partition with the worker of its device's
task and asks for steps; on a cluster, that worker is this one, and it reaches every task
through a ``TaskStub`` (``dflab.distributed.stub``) — in-process or Ray, it never knows which.
Everything the two transports share is here, once:

* the device set: every running task's devices (the target task's first: unplaced ops go there,
  as they go to the master's task in TF), narrowed by ``ConfigProto.device_filters``;
* which task owns a partition (``dflab.distributed.names``), and failing a step that needs a
  task that is gone;
* step admission through the task gates of the tasks whose variables a step changes, and
  consistent snapshots across tasks for checkpoints (``dflab.distributed.task_gate``);
* a step: each task's share started at once (the biggest partition's task last, its partition
  on the calling thread where the transport allows), the first error cancelling every other
  task's share, a root cause preferred to the cancellations it caused, a timeout reported as
  the task that did not answer or the step that ran late;
* stepping through a cluster step, or its refusal, in one place.

Where the tasks' partitions are objects of this process (a stub's ``runs_here``: an
in-process cluster without simulated links), they run on a worker of this process over the
tasks' devices, admitted through the same gates and tracked by the tasks' workers: a plan that
runs unpartitioned over devices of several tasks (a while loop whose body spans devices, a
partial run), which can run nowhere else, and every untraced step, which then costs what the
same partitions cost in one session (a traced step runs as shares, so that its trace shows
each task's share and the tensors crossing tasks).
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
import uuid
import weakref

from dflab.distributed.names import task_of_device
from dflab.distributed.stub import (
    GATE_ADMITTED,
    GATE_ENTER,
    GATE_NONE,
    PendingTimeoutError,
    StepRequest,
    TaskOutcome,
)
from dflab.distributed.task_gate import admit, tasks_of_devices, writing_tasks
from dflab.distributed.wire import RemoteDevice, unavailable
from dflab.framework import errors
from dflab.framework.device_spec import DeviceSpec
from dflab.runtime.devices import DeviceSet, spec_matches
from dflab.runtime.resources import Forgotten
from dflab.runtime.worker import RunningSteps, StepResult, Worker, step_timeout_error

# The high bits of this process's step ids on a cluster (TF draws distributed step ids at random
# for the same reason: many clients, in many processes, run steps on one task).
STEP_ID_BASE = (secrets.randbits(30) + 1) << 32


class ClusterPartition:
    """A partition registered with one task (or, spanning tasks, with a worker here)."""

    __slots__ = ("task", "handle", "device", "feed_index", "writes", "local", "nodes")

    def __init__(self, task: str | None, handle, spec, writes: frozenset, local=None):
        self.task = task
        self.handle = handle
        self.device = spec.device
        self.feed_index = tuple(spec.feed_index)
        self.writes = writes  # the tasks whose variables it changes
        self.local = local  # the registered partition, where it is an object of this process
        self.nodes = len(spec.graph_def.node)

    @property
    def executor_plan(self):
        """Its executor plan, where it runs in this process (None elsewhere)."""
        return None if self.local is None else self.local.executor_plan

    def fetch_values(self, execution) -> list:
        """A stepped execution's fetched values (stepping runs in this process)."""
        return self.local.fetch_values(execution)

    def __repr__(self):
        return f"<ClusterPartition {self.handle} on {self.task}: {self.device}>"


class ClusterWorker:
    """A client session's worker over a cluster's tasks (see the module docstring)."""

    def __init__(self, config, owner, stubs: list, target_task: str):
        self._config = config
        self._owner = owner
        self._stubs = {s.task: s for s in stubs}  # the target task's first
        self.target_task = target_task
        self.devices = DeviceSet(_filtered([d for s in stubs for d in s.devices()],
                                           config.device_filters))
        self._origins: dict = {}
        # A worker of this process over the tasks' devices, where they are objects of this
        # process: it runs plans spanning tasks unpartitioned, and steps run here (_run_here).
        self._here: Worker | None = None
        self._token = uuid.uuid4().hex  # names this session as a holder of task gates
        self.steps = RunningSteps()  # step id -> its _ClusterStep, while it runs
        self._layouts: dict = {}  # (id of a plan's partition list, main) -> its _Layout
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def stubs(self) -> list:
        return list(self._stubs.values())

    def _stub(self, task: str):
        stub = self._stubs.get(task)
        if stub is None:
            raise unavailable(task, "no server serves it (start its tf.train.Server)")
        return stub

    # --- registering ---------------------------------------------------------------------------
    def register_partition(self, spec, origins=None) -> ClusterPartition:
        writes = writing_tasks(spec, self.target_task)
        if origins:
            self._origins.update(origins)
        if not spec.device:
            return ClusterPartition(None, None, spec, writes,
                                    self._here_worker().register_partition(spec, origins))
        stub = self._stub(task_of_device(spec.device))
        handle, local = stub.register_partition(spec, origins)
        return ClusterPartition(stub.task, handle, spec, writes, local)

    def _here_worker(self) -> Worker:
        if any(isinstance(d, RemoteDevice) for d in self.devices):
            raise errors.UnimplementedError(
                None, None, "This plan runs unpartitioned over several devices (a while "
                "loop whose body spans devices, or a partial run); with tasks in other "
                "processes each loop must stay on one task's device, fed from the others")
        if self._here is None:
            self._here = Worker(self._config, self._owner, devices=self.devices)
        return self._here

    # --- steps ---------------------------------------------------------------------------------
    def run_partition(self, part: ClusterPartition, feed_values, step_id, timeout=None,
                      observer=None) -> list:
        result = self.run_step([part], feed_values, step_id, timeout, observer)
        if result.error is not None:
            raise result.error
        return result.values[0]

    def run_step(self, parts, feed_values, step_id, timeout=None, observer=None,
                 main=0) -> StepResult:
        """Run each task's share of one step at once; the step's values per partition, or its
        first error (see the module docstring)."""
        step_id = STEP_ID_BASE | step_id
        layout = self._layout(parts, main)
        here = layout.here and observer is None
        for stub in layout.stub_list:
            stub.check()
            if here and not stub.runs_here():
                here = False
        holder = self._holder() if layout.writing else ""
        if layout.spanning:  # spanning tasks: run here, admitted there
            return self._run_spanning(parts, feed_values, step_id, timeout, observer,
                                      layout.writing, holder)
        if here:
            return self._run_here(layout, feed_values, step_id, timeout, main, holder)
        # Several writing tasks admit the step first; one decides alone, with its share (the
        # layout's gate per share says so).
        gates = self.admit(layout.writing, holder, timeout) if len(layout.writing) > 1 \
            else None
        step = _ClusterStep(step_id, parts, layout.stubs)
        self.steps.track(step_id, step)
        traced = observer is not None
        try:
            pending = step.pending
            for task, stub, indices, handles, feed_keys, task_main, gate in layout.shares:
                # Shares that take no feeds (most of them) skip building a dict of them.
                feeds = {k: feed_values[k] for k in feed_keys} if feed_keys else {}
                if gates is not None:
                    gate = gates.get(task, GATE_NONE)
                request = StepRequest(step_id, handles, feeds, task_main, timeout, traced,
                                      gate, holder)
                pending[task] = (stub.run_step(request, observer,
                                               lambda e, t=task: step.share_failed(t, e)),
                                 indices)
            step.collect(timeout, observer)
        finally:
            self.steps.untrack(step_id, step)
            for stub in layout.stub_list:
                stub.step_done(step_id)
        return step.result(timeout)

    def _layout(self, parts, main: int) -> _Layout:
        """How a plan's partitions split among tasks: fixed per plan, so kept."""
        key = (id(parts), main)
        layout = self._layouts.get(key)
        if layout is None or layout.parts is not parts:
            layout = self._layouts[key] = _Layout(parts, main, self._stubs)
        return layout

    def _run_spanning(self, parts, feed_values, step_id, timeout, observer, writing,
                      holder) -> StepResult:
        [part] = parts
        admitted = self.admit(writing, holder, timeout) if writing else ()
        try:
            return StepResult([self._here.run_partition(part.local, feed_values, step_id,
                                                        timeout, observer)])
        except errors.OpError as e:
            return StepResult(None, e)
        finally:
            if admitted:
                self._count_out(admitted)

    def _run_here(self, layout: _Layout, feed_values, step_id, timeout, main,
                  holder) -> StepResult:
        """A step whose partitions are all objects of this process (the tasks of an
        in-process cluster, with no simulated link between them), untraced: run here as one
        session runs its partitions, in one step group with one rendezvous, admitted through
        the tasks' gates and tracked by their workers, so that a task's stopping cancels it.
        Per task, a share of its own (request, rendezvous, step group, outcome) would cost
        more than a small step's work; a traced step takes that way, so that its trace shows
        each task's share and the tensors crossing tasks."""
        admitted = self.admit(layout.writing, holder, timeout) if layout.writing else ()
        try:
            here = self._here or self._here_worker()
            group = here.begin_step(layout.local_parts, feed_values, step_id, None, main,
                                    trackers=layout.trackers)
            return here.finish_step(group, timeout)
        finally:
            if admitted:
                self._count_out(admitted)

    def _count_out(self, admitted) -> None:
        """A step run here has ended: the gates that admitted it count it out."""
        for task in admitted:
            self._stubs[task].gate_exit()

    def start_step(self, parts, feed_values, step_id, observer=None) -> list:
        """The executions of one step of ``parts``, not started (the stepper drives them);
        refused where a task cannot be stepped from here."""
        step_id = STEP_ID_BASE | step_id
        self._check(parts)
        if any(p.task is None for p in parts):
            return self._here.start_step([p.local for p in parts], feed_values, step_id,
                                             observer)
        by_task: dict = {}
        for i, part in enumerate(parts):
            by_task.setdefault(part.task, []).append(i)
        refused = [t for t in by_task if not self._stubs[t].supports_stepping]
        if refused:
            raise errors.UnimplementedError(
                None, None, f"Stepping through a step of tasks {', '.join(refused)} is not "
                "supported: their transport cannot hand their executions to this process "
                "(step it on an in-process cluster: tf.train.Server without protocol='ray')")
        execs = [None] * len(parts)
        for task, indices in by_task.items():
            request = StepRequest(step_id, [parts[i].handle for i in indices],
                                  {k: feed_values[k] for i in indices
                                   for k in parts[i].feed_index})
            for i, ex in zip(indices, self._stubs[task].start_step(request, observer)):
                execs[i] = ex
        # The tasks keep the step's rendezvous until the stepped executions are gone.
        stubs = [self._stubs[t] for t in by_task]
        weakref.finalize(execs[0], _steps_done, stubs, step_id)
        return execs

    def abort_step(self, step_id: int, error: BaseException) -> bool:
        """Cancel a step on every task; False if it is not running, in which case it fails as
        soon as it starts, should it start later."""
        step_id = STEP_ID_BASE | step_id
        if self.steps.abort(step_id, error):
            return True
        return self._here is not None and self._here.abort_step(step_id, error)

    def cancel_steps(self, error: BaseException) -> None:
        """Cancel every step of this session running on the cluster."""
        self.steps.cancel_all(error)
        if self._here is not None:
            self._here.cancel_steps(error)

    def _check(self, parts) -> None:
        """A step may run only while every task it uses serves."""
        for task in {p.task for p in parts if p.task is not None}:
            self._stubs[task].check()

    # --- gates: admission and consistent snapshots ---------------------------------------------
    def _holder(self) -> str:
        return f"{self._token}/{threading.get_ident()}"

    def admit(self, tasks: list, holder: str, timeout: float | None) -> dict:
        """Admit a step on the gates of ``tasks`` (``task_gate.admit``); returns task ->
        ``GATE_ADMITTED`` for the gates that counted it."""
        counted = admit([self._stub(t) for t in tasks], holder, timeout)
        return {s.task: GATE_ADMITTED for s in counted}

    @contextlib.contextmanager
    def consistent_snapshot(self, devices, timeout: float | None = None):
        """Held around a save or restore of variables on ``devices``: the gates of their tasks
        closed, in task order, once every step admitted there has finished."""
        holder, closed = self._holder(), []
        try:
            for task in tasks_of_devices(devices, self.target_task, self.devices):
                stub = self._stub(task)
                stub.gate_close(holder, timeout)
                closed.append(stub)
            yield
        finally:
            for stub in reversed(closed):
                with contextlib.suppress(errors.OpError):
                    stub.gate_open(holder)

    # --- state ---------------------------------------------------------------------------------
    def forget_resources(self, op_names) -> Forgotten:
        record = Forgotten()
        for stub in self._stubs.values():
            record.extend(stub.forget(op_names))
        return record

    def record_memory(self, summary: dict) -> None:
        for stub in self._stubs.values():
            stub.record_memory(summary)

    def close(self) -> None:
        """Deregister this session's partitions; the tasks' state belongs to their servers."""
        if self._closed:
            return
        self._closed = True
        self.cancel_steps(errors.CancelledError(None, None, "The session was closed"))
        for stub in self._stubs.values():
            stub.close()
        if self._here is not None:
            self._here.close()


class _Layout:
    """A plan's partitions by task, as every step of the plan runs them: per task (the main
    partition's last, so that its share runs on the calling thread once the others started)
    its stub, the positions of its partitions, their handles, the feeds they take, the position
    of the main partition and its gate mode where it alone decides; the tasks whose variables
    the step changes."""

    __slots__ = ("parts", "stubs", "stub_list", "shares", "writing", "spanning", "here",
                 "local_parts", "trackers")

    def __init__(self, parts, main: int, stubs: dict):
        self.parts = parts
        self.writing = sorted({t for p in parts for t in p.writes})
        self.spanning = any(p.task is None for p in parts)
        # Every partition an object of this process: the step may run here (``_run_here``),
        # tracked by the running steps of each task's worker.
        self.here = not self.spanning and all(p.local is not None for p in parts)
        self.local_parts = [p.local for p in parts] if self.here else []
        self.trackers = tuple({id(p.steps): p.steps for p in self.local_parts}.values())
        by_task: dict = {}
        for i, part in enumerate(parts):
            by_task.setdefault(part.task, []).append(i)
        main_task = parts[main].task
        order = [t for t in by_task if t != main_task] + [main_task]
        self.stubs = {} if self.spanning else {t: stubs[t] for t in order}
        self.stub_list = list(self.stubs.values())
        # With one writing task, the step is admitted there, with its share.
        alone = self.writing[0] if len(self.writing) == 1 else None
        self.shares = [] if self.spanning else [
            (t, self.stubs[t], by_task[t], [parts[i].handle for i in by_task[t]],
             [k for i in by_task[t] for k in parts[i].feed_index],
             by_task[t].index(main) if t == main_task else None,
             GATE_ENTER if t == alone else GATE_NONE)
            for t in order]


def _first_line(error: BaseException) -> str:
    return str(error).split("\n", 1)[0] or type(error).__name__


def _steps_done(stubs, step_id) -> None:
    for stub in stubs:
        with contextlib.suppress(Exception):
            stub.step_done(step_id)


def _filtered(devices: list, device_filters) -> list:
    """``devices`` narrowed by ``ConfigProto.device_filters`` (all of them without filters)."""
    filters = [DeviceSpec.from_string(f) for f in device_filters or ()]
    kept = [d for d in devices if not filters or any(spec_matches(f, d.spec) for f in filters)]
    if not kept:
        raise errors.InvalidArgumentError(
            None, None, f"No device of the cluster matches device_filters {device_filters}")
    return kept


class _ClusterStep:
    """One step across tasks while it runs: each task's pending share, the first error (which
    cancels every other share), and the outcomes."""

    __slots__ = ("step_id", "parts", "stubs", "pending", "outcomes", "values", "errors",
                 "_lock", "_aborted")

    def __init__(self, step_id: int, parts, stubs: dict):
        self.step_id = step_id
        self.parts = parts
        self.stubs = stubs  # task -> stub, of every task with a share of the step
        self.pending: dict = {}  # task -> (pending answer, partition indices), as started
        self.outcomes: dict = {}
        self.values = [None] * len(parts)  # per partition, as its task's outcome arrives
        self.errors: list = []
        self._lock = threading.Lock()
        self._aborted = False

    def failed(self, error: BaseException) -> None:
        """The step is aborted from outside (a session closing, a canceller): cancel every
        share."""
        self.share_failed(None, error)

    def share_failed(self, task: str | None, error: BaseException) -> None:
        """``task``'s share failed with ``error``: cancel every other share."""
        with self._lock:
            self.errors.append(error)
            if self._aborted:
                return
            self._aborted = True
        cancel = errors.CancelledError(
            None, None, f"Step {self.step_id} was cancelled: {_first_line(error)}")
        for other, stub in self.stubs.items():
            if other != task:
                with contextlib.suppress(errors.OpError):
                    stub.abort_step(self.step_id, cancel)

    def collect(self, timeout: float | None, observer) -> None:
        """Wait for every share (until ``timeout`` seconds from now at most)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        values = self.values
        left = None
        for task, (pending, indices) in list(self.pending.items()):
            if deadline is not None:
                left = max(deadline - time.monotonic(), 0.0)
            try:
                outcome = pending.result(left)
            except PendingTimeoutError:
                self._timed_out(timeout)
                return
            except errors.OpError as e:
                outcome = TaskOutcome(None, e)
            self.outcomes[task] = outcome
            if outcome.error is not None:
                self.share_failed(task, outcome.error)
            else:
                for i, vals in zip(indices, outcome.values):
                    values[i] = vals
            if observer is not None:
                if outcome.stats:
                    observer.add_device_stats(outcome.stats)
                if outcome.transfers and hasattr(observer, "add_transfers"):
                    observer.add_transfers(outcome.transfers)

    def _timed_out(self, timeout: float) -> None:
        """No answer from some tasks in time: those that do not answer at all are
        unavailable; otherwise the step ran past its deadline."""
        silent = [t for t in self.pending if t not in self.outcomes]
        dead = [self.stubs[t].where for t in silent if not self.stubs[t].responsive()]
        if dead:
            error = unavailable(", ".join(dead), "it did not answer within the step's timeout "
                                f"of {timeout * 1000:.0f} ms")
        else:
            error = errors.DeadlineExceededError(
                None, None, f"Timed out after {timeout * 1000:.0f} ms waiting for the step "
                f"to finish on {', '.join(silent)}")
        self.share_failed(None, error)
        self.errors.insert(0, error)

    def result(self, timeout: float | None) -> StepResult:
        if self.errors:
            return StepResult(None, self._error(timeout))
        return StepResult(self.values)

    def _error(self, timeout: float | None) -> BaseException:
        """The step's error: a root cause before the cancellations it caused; a step timeout
        says where every partition stood."""
        error = next((e for e in self.errors if not isinstance(e, errors.CancelledError)),
                     self.errors[0])
        if timeout is not None and isinstance(error, errors.DeadlineExceededError) \
                and error.op is None and self.outcomes:
            progress = [p for o in self.outcomes.values() for p in o.progress]
            if progress:
                return step_timeout_error(timeout, progress)
        return error
