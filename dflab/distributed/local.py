"""The in-process transport: every task of a cluster is a ``Task`` in this Python process.

A started ``tf.train.Server`` (protocol "grpc", which this transport stands in for) registers
its task here under the address the cluster gives it; an address serves one task at a time, as
a port does. A session on ``grpc://<address>`` gets a ``ClusterWorker`` over an
``InProcessStub`` per running task of that cluster, and calls are direct. The tasks'
partitions are objects of this process, so an untraced step runs in the client's own step
group (``ClusterWorker._run_here``): a tensor crossing tasks meets its receiver in one
rendezvous, as between two devices of one session. A traced step, or any step where
``simulate_network`` gives the cluster's links a cost, runs as a share per task: a tensor
crossing tasks is pulled from the sender's rendezvous without a copy (between memory spaces,
the sending device copies it onto the receiving one), and arrives when its link delivers it.
"""

from __future__ import annotations

import threading
import time

from dflab.distributed.cluster import ClusterSpec
from dflab.distributed.cluster_worker import ClusterWorker
from dflab.distributed.names import task_name
from dflab.distributed.network import delay_line, network_at, network_key
from dflab.distributed.stub import Done, StepRequest, TaskOutcome
from dflab.distributed.task import Task
from dflab.distributed.wire import unavailable
from dflab.framework import errors
from dflab.framework.rendezvous import parse_key
from dflab.runtime.resources import Forgotten
from dflab.runtime.session import register_session_target

TARGET_PREFIX = "grpc://"

_running: dict[str, tuple[Task, ClusterSpec]] = {}  # address -> the task serving there
_running_lock = threading.Lock()


# --- serving ---------------------------------------------------------------------------------
def start_task(cluster: ClusterSpec, job: str, index: int, config) -> Task:
    """Serve task ``index`` of ``job`` at its address; UnknownError when the address serves
    another task."""
    address = cluster.task_address(job, index)
    name = task_name(job, index)
    with _running_lock:
        other = _running.get(address)
        if other is not None:
            raise errors.UnknownError(
                None, None, f"Could not start server for {name}: address {address} is in use "
                f"by {other[0].name} (stop that server first)")
        task = Task(job, index, config, None)
        task.pull = _Puller(task, cluster)
        _running[address] = (task, cluster)
    return task


def stop_task(address: str, task: Task) -> None:
    """Stop serving ``task``: free its address, drop its state."""
    with _running_lock:
        if _running.get(address, (None,))[0] is task:
            del _running[address]
    task.close()


def is_serving(address: str) -> bool:
    return address in _running


def free_address(candidates) -> str:
    """The first of ``candidates`` no task serves."""
    with _running_lock:
        return next(a for a in candidates if a not in _running)


def _tasks_of_cluster(address: str) -> tuple[list[Task], ClusterSpec]:
    """The running tasks of the cluster of the task at ``address`` (that one first)."""
    with _running_lock:
        entry = _running.get(address)
        if entry is None:
            raise errors.UnavailableError(
                None, None, f"No server is running at {address} in this process: start a "
                f"tf.train.Server for that task first")
        task, cluster = entry
        others = [t for t, c in _running.values() if t is not task and c == cluster]
    return [task, *others], cluster


def _peer(cluster: ClusterSpec, name: str) -> Task | None:
    with _running_lock:
        for task, c in _running.values():
            if task.name == name and c == cluster:
                return task
    return None


class _Puller:
    """The pull hook of one in-process task: a receive of a tensor another task sent is
    answered from that task's rendezvous, through the cluster's simulated link if any."""

    def __init__(self, task: Task, cluster: ClusterSpec):
        self._task = task
        self._cluster = cluster
        self._network_key = network_key(cluster)
        self._peers: dict[str, Task] = {}
        self._moves: dict = {}  # a key without its step id -> how its value moves, or None

    def __call__(self, src_task: str, step_id: int, key: str, done) -> None:
        peer = self._peers.get(src_task)
        if peer is None or peer.closed:
            peer = _peer(self._cluster, src_task)
            if peer is None:
                done(None, unavailable(src_task, "its server stopped"))
                return
            self._peers[src_task] = peer
        move = self._move(peer, key)

        def arrived(value, error):
            if error is not None:
                done(None, error)
                return
            if move is not None:
                value = move(value)
            network = network_at(self._network_key)
            if network is None:
                done(value, None)
                return
            sent, now = time.time_ns(), time.monotonic()
            arrival = network.schedule(src_task, self._task.name,
                                       int(getattr(value, "nbytes", 0) or 0), now)
            if arrival is not None and arrival > now:
                delay_line.call_at(arrival, done, value, None, sent)
            else:
                done(value, None, sent)

        peer.serve_pull(step_id, key, arrived)

    def _move(self, peer: Task, key: str):
        """How a value of ``key`` moves from ``peer``'s device onto ours: None where the two
        share a memory space (found once per pair of devices: keys repeat every step)."""
        route = key.split(";", 1)[1]
        found = self._moves.get(route, False)
        if found is False:
            parsed = parse_key(key)
            src = peer.worker.devices[parsed.src_device]
            dst = self._task.worker.devices[parsed.dst_device]
            found = None if src.memory_space == dst.memory_space else \
                (lambda value: src.copy_to(value, dst))
            self._moves[route] = found
        return found


# --- the client side ---------------------------------------------------------------------------
class InProcessStub:
    """The task stub (``dflab.distributed.stub.TaskStub``) of a task in this process."""

    transport = "in-process"
    supports_stepping = True

    def __init__(self, task: Task, cluster: ClusterSpec):
        self.task = task.name
        self.where = task.name  # how errors name it
        self._task = task
        self._network_key = network_key(cluster)
        self._handles: list = []

    def devices(self) -> list:
        return list(self._task.worker.devices)

    def check(self) -> None:
        if self._task.closed:
            raise unavailable(self.task, "its server stopped (a restarted task starts empty; "
                              "create a new session to use it)")

    def runs_here(self) -> bool:
        # A simulated link delivers a tensor crossing tasks through the pull (``_Puller``).
        return network_at(self._network_key) is None

    def register_partition(self, spec, origins=None):
        part = self._task.worker.register_partition(spec, origins)
        self._handles.append(part.handle)
        return part.handle, part

    def deregister_partitions(self, handles) -> None:
        for h in handles:
            self._task.worker.deregister_partition(h)

    def run_step(self, request: StepRequest, observer=None, on_error=None):
        started = self._task.begin_step(request, observer, on_error)
        if isinstance(started, TaskOutcome) and started.error is not None and on_error:
            on_error(started.error)  # it never started: the other shares must not wait
        return _LocalShare(self._task, started)

    def start_step(self, request: StepRequest, observer=None) -> list:
        return self._task.start_step(request, observer)

    def step_done(self, step_id: int) -> None:
        self._task.drop_rendezvous(step_id)

    def abort_step(self, step_id: int, error: BaseException) -> None:
        self._task.abort_step(step_id, error)

    def responsive(self) -> bool:
        return not self._task.closed

    def gate_try_enter(self, holder: str):
        return Done(self._task.gate.try_enter(holder))

    def gate_exit(self) -> None:
        self._task.gate.exit()

    def gate_wait_open(self, timeout) -> bool:
        return self._task.gate.wait_open(timeout)

    def gate_close(self, holder: str, timeout) -> None:
        self._task.gate.close(holder, timeout)

    def gate_open(self, holder: str) -> None:
        self._task.gate.open(holder)

    def forget(self, op_names) -> Forgotten:
        return self._task.worker.forget_resources(op_names)

    def record_memory(self, summary: dict) -> None:
        self._task.worker.record_memory(summary)

    def close(self) -> None:
        self.deregister_partitions(self._handles)
        self._handles.clear()


class _LocalShare:
    """An in-process task's share of a step in flight (a ``Pending``)."""

    __slots__ = ("_task", "_started")

    def __init__(self, task: Task, started):
        self._task = task
        self._started = started

    def result(self, timeout: float | None = None) -> TaskOutcome:
        return self._task.finish_step(self._started, timeout)


def session_worker(target: str, config, session) -> ClusterWorker:
    """The worker of ``tf.Session("grpc://<address>")``: every running task of the cluster of
    the task at that address, that task's devices first."""
    tasks, cluster = _tasks_of_cluster(target[len(TARGET_PREFIX):])
    return ClusterWorker(config, session, [InProcessStub(t, cluster) for t in tasks],
                         tasks[0].name)


def reset(target: str, containers) -> None:
    """``Session.reset`` on an in-process cluster: clear ``containers`` (none: the default
    one) on every running task."""
    try:
        tasks, _ = _tasks_of_cluster(target[len(TARGET_PREFIX):])
    except errors.UnavailableError:
        return
    for task in tasks:
        task.worker.devices.clear_containers(containers)


def describe(cluster: ClusterSpec) -> list[dict]:
    """Every task of ``cluster``, and what each running one holds (see
    ``dflab.distributed.describe_cluster``)."""
    with _running_lock:
        running = {t.name: t for t, c in _running.values() if c == cluster}
    out = []
    for job, index, addr in cluster.tasks():
        name = task_name(job, index)
        entry = {"task": name, "job": job, "index": index, "address": addr,
                 "transport": "in-process", "running": name in running, "node": "", "gpu_ids": [],
                 "devices": [], "variables": []}
        if name in running:
            entry.update(running[name].worker.state_summary())
        out.append(entry)
    return out


def cluster_at(address: str) -> ClusterSpec:
    """The cluster of the task serving at ``address`` (UnavailableError: none does)."""
    return _tasks_of_cluster(address)[1]


register_session_target(TARGET_PREFIX, session_worker, reset)
