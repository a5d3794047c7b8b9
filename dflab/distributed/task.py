"""``Task``: one task of a cluster as it runs, whatever the transport.

A task owns a ``Worker`` (its devices, the state on them, the partitions clients registered),
its step gate (``dflab.distributed.task_gate``), and the rendezvous of the steps running on it.
The in-process transport (``dflab.distributed.local``) calls a ``Task`` directly; the Ray
transport's actor (``dflab.distributed.ray.actor``) wraps one. What differs between them is the
one hook a task is built with, TF's ``RecvFromRemoteAsync``: ``pull(src_task, step_id, key,
done)`` — receive ``key`` of step ``step_id`` from the task that sent it, and call
``done(value, error, sent_ns)`` with the value on the receiving device (``sent_ns``: when it
left the sender, for traces; None when unknown). (An in-process cluster's untraced steps do not
come here at all: the client runs them in one step group of its own, see
``ClusterWorker._run_here``.)

A step's rendezvous on a task (``TaskRendezvous``) is made by whichever comes first, the task's
share of the step or a peer's pull (every task starts at once), and kept until the client says
the step is done (``drop_rendezvous``), so a value sent for a slower receiver waits for its
pull. Sends always stay local: a receiver on another task pulls.
"""

from __future__ import annotations

import secrets
import time

from dflab.distributed.names import task_name, task_of_device
from dflab.distributed.stub import GATE_ADMITTED, GATE_ENTER, StepRequest, TaskOutcome
from dflab.distributed.task_gate import TaskGate
from dflab.framework import errors
from dflab.framework.rendezvous import parse_key
from dflab.runtime.devices import HOST_MEMORY
from dflab.runtime.rendezvous import LocalRendezvous
from dflab.runtime.worker import Worker


class TaskRendezvous(LocalRendezvous):
    """One step's rendezvous on one task: local sends and receives as ``LocalRendezvous``; a
    receive of a tensor another task sent goes through the task's pull hook. Pulls are recorded
    in ``transfers`` (key, bytes, start ns, end ns)."""

    __slots__ = ("_task", "transfers", "traced")

    def __init__(self, step_id: int, task: Task):
        super().__init__(step_id, task.device_copy)
        self._task = task
        self.transfers: list = []
        self.traced = False  # pulls are recorded for a traced step only

    def recv_async(self, key: str, callback) -> None:
        # The sending device's task, found once per device (keys repeat every step).
        device = key.split(";", 2)[1]
        src = self._task._owners.get(device, False)
        if src is False:
            src = self._task.owner_of(device)
        if src is None:
            return super().recv_async(key, callback)
        with self._lock:
            error = self._error
            if error is None:
                self._waiters[key] = callback  # so that an abort wakes it
        if error is not None:
            callback(None, error)
            return
        asked = time.time_ns() if self.traced else 0
        self._task.pull(src, self.step_id, key,
                        lambda value, error, sent=None: self._pulled(key, value, error,
                                                                     sent or asked))

    def _pulled(self, key: str, value, error, sent: int) -> None:
        with self._lock:
            callback = self._waiters.pop(key, None)
            if callback is not None and error is None and self.traced:
                nbytes = int(getattr(value, "nbytes", 0) or 0)
                self.transfers.append((key, nbytes, sent, time.time_ns()))
        if callback is not None:  # None: the step was aborted meanwhile
            callback(value, error)

    def serve(self, key: str, done) -> None:
        """A peer's pull of ``key``, which this task sends: always a local key, so straight to
        the table (``recv_async`` would ask again who sends it)."""
        LocalRendezvous.recv_async(self, key, done)


class _CopyingTaskRendezvous(TaskRendezvous):
    """A ``TaskRendezvous`` on a task whose devices span memory spaces: a value for another
    task leaves uncopied (the receiving task moves it onto its device); local ones are copied
    between the task's devices as ``LocalRendezvous`` does. Tasks in one memory space use the
    plain class, whose sends need no check."""

    __slots__ = ()

    def send(self, key: str, value) -> None:
        if self._task.owner_of(key.split(";", 4)[3]) is not None:
            # For another task: it leaves as it is; the receiving task moves it to its device.
            with self._lock:
                if self._error is not None:
                    raise self._error
                waiter = self._waiters.pop(key, None)
                if waiter is None:
                    self._values[key] = value
                    return
            waiter(value, None)
            return
        super().send(key, value)


class Task:
    """One task of a cluster (see the module docstring)."""

    def __init__(self, job: str, index: int, config, pull):
        self.name = task_name(job, index)
        self.job, self.index = job, index
        # Drawn at every (re)start: a client that registered with an earlier incarnation
        # learns that the task's partitions and state are gone.
        self.incarnation = secrets.randbits(63) or 1
        self.config = config
        self.worker = Worker(config, task=self.name)
        self.gate = TaskGate(self.name)
        self.pull = pull
        self._rendezvous: dict[int, TaskRendezvous] = {}
        # Whether the task stopped: its worker is closed with it, and only then. An attribute
        # rather than the worker's property: every step and pull asks.
        self.closed = False
        self._owners: dict[str, str | None] = {}  # device -> its task (None: this one)
        # Fixed with the worker's devices: which rendezvous class a step gets, and its copy.
        self.device_copy = self.worker.device_copy
        self._rendezvous_class = TaskRendezvous if self.device_copy is None \
            else _CopyingTaskRendezvous

    # --- the rendezvous of steps ---------------------------------------------------------------
    def source_of(self, key: str) -> str | None:
        """The task that sends ``key``, or None when it is this one."""
        return self.owner_of(key.split(";", 2)[1])

    def owner_of(self, device: str) -> str | None:
        """The task owning ``device``, or None when it is this one (cached: steps ask)."""
        found = self._owners.get(device, False)
        if found is False:
            task = task_of_device(device)
            found = self._owners[device] = None if task == self.name else task
        return found

    def rendezvous(self, step_id: int) -> TaskRendezvous:
        """Step ``step_id``'s rendezvous here, made on first use."""
        rdv = self._rendezvous.get(step_id)
        if rdv is None:
            # No lock: ``setdefault`` is atomic, so of two racing first users (a share and a
            # pull) one's rendezvous is kept and both get it.
            rdv = self._rendezvous.setdefault(step_id, self._rendezvous_class(step_id, self))
        return rdv

    def drop_rendezvous(self, step_id: int) -> None:
        # No lock: a dict pop is atomic, and one racing ``rendezvous`` (a late pull) makes a
        # fresh one after it, as it would after a locked pop.
        self._rendezvous.pop(step_id, None)

    def serve_pull(self, step_id: int, key: str, done) -> None:
        """A peer's pull of ``key``, which this task sent (or will send) in ``step_id``:
        ``done(value, error)`` once it is here, on the sending thread."""
        self.rendezvous(step_id).serve(key, done)

    def to_receiver(self, key: str, value):
        """A pulled value (in host memory) moved onto the device that receives it here."""
        device = self.worker.devices[parse_key(key).dst_device]
        if device.memory_space == HOST_MEMORY:
            return value
        return device.from_host(value)

    # --- steps ---------------------------------------------------------------------------------
    def begin_step(self, request: StepRequest, observer=None, on_error=None):
        """Start this task's share of a step (``request.main`` runs on the calling thread);
        ``finish_step`` waits for it. Returns the worker's step group, or an outcome when the
        share could not start (a ``_Share`` where the gate counted it)."""
        handles, worker = request.handles, self.worker
        try:
            # One partition per task is the common case on a cluster: no comprehension.
            parts = [worker.partition(handles[0])] if len(handles) == 1 else \
                [worker.partition(h) for h in handles]
        except errors.OpError as e:
            return TaskOutcome(None, e)
        counted = request.gate == GATE_ADMITTED
        if request.gate == GATE_ENTER:
            try:
                counted = self.gate.enter(request.holder, request.timeout)
            except errors.OpError as e:
                return TaskOutcome(None, e)
        rendezvous = self.rendezvous(request.step_id)
        if request.trace:
            rendezvous.traced = True
        feeds = _feed_list(request.feeds) if request.feeds else []
        try:
            group = self.worker.begin_step(parts, feeds, request.step_id, observer,
                                           request.main, rendezvous, on_error)
        except BaseException:
            if counted:
                self.gate.exit()
            raise
        # Most steps pass no gate here (they change no variable, or were admitted by the
        # client): their share is the group itself, with nothing to count out.
        return _Share(group) if counted else group

    def finish_step(self, started, timeout: float | None) -> TaskOutcome:
        """Wait for a share ``begin_step`` started (cancelled after ``timeout`` seconds)."""
        if isinstance(started, TaskOutcome):
            return started
        if isinstance(started, _Share):
            group = started.group
            try:
                result = self.worker.finish_step(group, timeout)
            finally:
                self.gate.exit()
        else:
            group = started
            result = self.worker.finish_step(group, timeout)
        rendezvous = group.rendezvous
        # Pulls are recorded for a traced step only: other steps have none to copy.
        transfers = list(rendezvous.transfers) if rendezvous.traced else []
        return TaskOutcome(result.values, result.error, result.progress, transfers)

    def run_step(self, request: StepRequest, observer=None) -> TaskOutcome:
        """This task's share of a step, run to its end (the biggest partition on this
        thread)."""
        if request.main is None and request.handles:
            request.main = self._biggest(request.handles)
        return self.finish_step(self.begin_step(request, observer), request.timeout)

    def _biggest(self, handles) -> int:
        sizes = []
        for h in handles:
            try:
                sizes.append(len(self.worker.partition(h).executor_plan.nodes))
            except errors.OpError:
                sizes.append(0)
        return max(range(len(sizes)), key=sizes.__getitem__)

    def start_step(self, request: StepRequest, observer=None) -> list:
        """The executions of this task's share of a step, not started (stepping)."""
        parts = [self.worker.partition(h) for h in request.handles]
        return self.worker.start_step(parts, _feed_list(request.feeds), request.step_id,
                                      observer, self.rendezvous(request.step_id))

    def abort_step(self, step_id: int, error: BaseException) -> None:
        """Cancel this task's share of a step, and every later receive or send of it here."""
        self.worker.abort_step(step_id, error)
        self.rendezvous(step_id).abort(error)

    def check_incarnation(self, incarnation: int) -> None:
        """A client that registered with an earlier incarnation of this task gets AbortedError."""
        if incarnation and incarnation != self.incarnation:
            raise errors.AbortedError(
                None, None, f"Task {self.name} restarted: the partitions and state the "
                "session relied on are gone; create a new session")

    def close(self) -> None:
        self.closed = True
        # Taken one at a time (each pop atomic): the map is read and changed without a lock.
        steps = []
        while self._rendezvous:
            try:
                steps.append(self._rendezvous.popitem()[1])
            except KeyError:  # emptied meanwhile (a step dropped its own)
                break
        stopped = errors.CancelledError(None, None, f"Task {self.name} stopped")
        for rdv in steps:
            rdv.abort(stopped)
        # Steps running over this task's partitions are cancelled, here or in the client's
        # group (``ClusterWorker._run_here``), before its devices close under them.
        self.worker.cancel_steps(stopped)
        self.worker.close()


def _feed_list(feeds: dict) -> list:
    """A step's fed values by position (``feeds``: the positions a task's share takes)."""
    if not feeds:
        return []
    return [feeds.get(k) for k in range(max(feeds) + 1)]


class _Share:
    """A task's share of a step in flight that the task's gate counted (to count it out when
    it ends); a share the gate did not count is its step group alone."""

    __slots__ = ("group",)

    def __init__(self, group):
        self.group = group
