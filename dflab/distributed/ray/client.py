"""The client side of the Ray transport: ``RayTaskStub``, one task's actor as a task stub
(``dflab.distributed.stub``), and the session worker of a ``dflab+ray://`` target.

A task that died, restarted (``max_restarts``: Ray brings it back empty, with a new
incarnation) or does not answer is an ``UnavailableError``/``AbortedError`` naming it. A step
is one ``run_step`` call per task; the ids of the client's finished steps ride along with its
next call to that task, which drops their rendezvous then.
"""

from __future__ import annotations

import contextlib
import os
import time

import ray
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RayTaskError

from dflab.distributed.cluster import ClusterSpec
from dflab.distributed.cluster_worker import ClusterWorker
from dflab.distributed.names import task_name
from dflab.distributed.ray.actor import why
from dflab.distributed.ray.placement import host_of
from dflab.distributed.ray.targets import actor_name, parse_target
from dflab.distributed.stub import PendingTimeoutError, StepRequest, TaskOutcome
from dflab.distributed.wire import RemoteDevice, error_from_info, error_info, unavailable
from dflab.framework import errors
from dflab.runtime.resources import Forgotten

# A task's actor is gone (dead) or, for now, unreachable (restarting).
TASK_GONE = (RayActorError, ActorUnavailableError)
# How long a client waits for a silent task to answer a ping before calling it unavailable.
PING_TIMEOUT_S = 5.0
# How long a session waits for a task's actor that is still starting (a new process importing
# dflab) before calling the task unavailable.
START_TIMEOUT_S = 120.0
RESTART_POLL_S = 0.5


class RayTaskStub:
    """The task stub of a task served by a Ray actor."""

    transport = "ray"
    supports_stepping = False

    def __init__(self, task: str, actor, info: dict):
        self.task = task
        self.actor = actor
        self.incarnation = info["incarnation"]
        # How errors name the task: with its host, where a node went away with it.
        self.where = f"{task} (on {host_of(info)})" if host_of(info) else task
        self._devices = [RemoteDevice(task, d) for d in info["devices"]]
        self._origins: dict = {}  # the client's op names -> ops, to name them in errors
        self._handles: list = []
        self._sizes: dict = {}  # handle -> its partition's node count
        self._finished: list = []  # step ids whose rendezvous the task may drop

    def devices(self) -> list:
        return list(self._devices)

    def check(self) -> None:
        """A dead actor is found by the step's calls."""

    def runs_here(self) -> bool:
        return False  # the task's partitions live in its actor's process

    def _call(self, method, *args, timeout: float | None = None):
        """``actor.method(*args)``, its Ray failures as the task's OpErrors."""
        try:
            return ray.get(method.remote(*args), timeout=timeout)
        except RayTaskError as e:
            raise self._task_error(e) from None
        except TASK_GONE as e:
            raise unavailable(self.where, why(e)) from None

    def _task_error(self, e: RayTaskError) -> errors.OpError:
        cause = getattr(e, "cause", None)
        if isinstance(cause, errors.OpError):
            return error_from_info(error_info(cause), self._origins)
        return errors.InternalError(None, None, f"Task {self.task} failed: {e}")

    def register_partition(self, spec, origins=None):
        if origins:
            self._origins.update(origins)
        handle = self._call(self.actor.register_partition, spec.to_json(), self.incarnation)
        self._handles.append(handle)
        self._sizes[handle] = len(spec.graph_def.node)
        return handle, None

    def deregister_partitions(self, handles) -> None:
        with contextlib.suppress(*TASK_GONE):
            self.actor.deregister_partitions.remote(list(handles))

    def run_step(self, request: StepRequest, observer=None, on_error=None):
        if request.main is None:  # the actor's thread runs the biggest partition itself
            sizes = [self._sizes.get(h, 0) for h in request.handles]
            request.main = sizes.index(max(sizes))
        finished, self._finished = self._finished, []
        ref = self.actor.run_step.remote(vars(request), self.incarnation, finished)
        share = _RemoteShare(self, ref)
        if on_error is not None:
            ref.future().add_done_callback(lambda _: share.report(on_error))
        return share

    def start_step(self, request: StepRequest, observer=None) -> list:
        raise errors.UnimplementedError(None, None, "A Ray task cannot be stepped from here")

    def step_done(self, step_id: int) -> None:
        self._finished.append(step_id)  # dropped with the next step, or at close

    def abort_step(self, step_id: int, error: BaseException) -> None:
        with contextlib.suppress(*TASK_GONE):
            self.actor.abort_step.remote(step_id, str(error).split("\n", 1)[0])

    def responsive(self) -> bool:
        try:
            ray.get(self.actor.ping.remote(), timeout=PING_TIMEOUT_S)
        except (GetTimeoutError, *TASK_GONE):
            return False
        return True

    def gate_try_enter(self, holder: str):
        return _RemoteCall(self, self.actor.gate_try_enter.remote(holder, self.incarnation))

    def gate_exit(self) -> None:
        with contextlib.suppress(*TASK_GONE):
            self.actor.gate_exit.remote()

    def gate_wait_open(self, timeout) -> bool:
        return self._call(self.actor.gate_wait_open, timeout)

    def gate_close(self, holder: str, timeout) -> None:
        info = self._call(self.actor.gate_close, holder, timeout, self.incarnation)
        if info is not None:
            raise error_from_info(info)

    def gate_open(self, holder: str) -> None:
        with contextlib.suppress(GetTimeoutError, *TASK_GONE):
            ray.get(self.actor.gate_open.remote(holder), timeout=PING_TIMEOUT_S)

    def forget(self, op_names) -> Forgotten:
        with contextlib.suppress(*TASK_GONE):
            self.actor.forget.remote(list(op_names))
        return Forgotten()  # the task's state is in its process: not undoable from here

    def record_memory(self, summary: dict) -> None:
        """Memory is accounted in the task's process."""

    def close(self) -> None:
        try:
            if self._handles:
                self.actor.deregister_partitions.remote(list(self._handles))
            for step_id in self._finished:
                self.actor.cleanup_step.remote(step_id)
        except TASK_GONE:
            pass
        self._handles.clear()
        self._finished.clear()


class _RemoteCall:
    """A call in flight to a task's actor (a ``Pending``)."""

    __slots__ = ("_stub", "_ref")

    def __init__(self, stub: RayTaskStub, ref):
        self._stub = stub
        self._ref = ref

    def result(self, timeout: float | None = None):
        try:
            return ray.get(self._ref, timeout=timeout)
        except GetTimeoutError:
            raise PendingTimeoutError() from None
        except RayTaskError as e:
            raise self._stub._task_error(e) from None
        except TASK_GONE as e:
            raise unavailable(self._stub.where, why(e)) from None


class _RemoteShare(_RemoteCall):
    """A task's share of a step in flight on its actor: its answer as a ``TaskOutcome``."""

    __slots__ = ()

    def result(self, timeout: float | None = None) -> TaskOutcome:
        try:
            values, info, stats, transfers, progress = super().result(timeout)
        except errors.OpError as e:
            return TaskOutcome(None, e)
        error = None if info is None else error_from_info(info, self._stub._origins)
        return TaskOutcome(values, error, progress, transfers, stats)

    def report(self, on_error) -> None:
        """Tell ``on_error`` at once if the share failed (called when it has answered)."""
        outcome = self.result(0)
        if outcome.error is not None:
            on_error(outcome.error)


def ensure_ray() -> None:
    """Connect to Ray: ``RAY_ADDRESS`` if set, else start a local instance (CPU only)."""
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False,
                 log_to_driver=False, ignore_reinit_error=True)


def _connect(namespace: str, job: str, index: int):
    """The actor of a task and its ``info``, or None when none answers; an actor Ray is
    restarting (its node went away, say) is waited for, within ``START_TIMEOUT_S``."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            actor = ray.get_actor(actor_name(job, index), namespace=namespace)
            return actor, ray.get(actor.info.remote(), timeout=START_TIMEOUT_S)
        except ActorUnavailableError:
            if time.monotonic() > deadline:
                return None
            time.sleep(RESTART_POLL_S)
        except (ValueError, GetTimeoutError, RayActorError):
            return None


def session_worker(target: str, config, session) -> ClusterWorker:
    """The worker of ``tf.Session("dflab+ray://<namespace>/<job>/<index>")``: every running
    task of the target's cluster, the target's devices first (unplaced ops go there)."""
    namespace, job, index = parse_target(target)
    ensure_ray()
    found = _connect(namespace, job, index)
    if found is None:
        raise errors.UnavailableError(
            None, None, f"No task serves {target}: start its tf.train.Server(..., "
            "protocol='ray') first")
    target_task = task_name(job, index)
    stubs = [RayTaskStub(target_task, *found)]
    cluster = ClusterSpec(found[1]["cluster"])
    for j, i, _ in cluster.tasks():
        if task_name(j, i) == target_task:
            continue
        other = _connect(namespace, j, i)
        if other is not None:  # else not started: like an in-process cluster's stopped task
            stubs.append(RayTaskStub(task_name(j, i), *other))
    return ClusterWorker(config, session, stubs, target_task)


def _cluster_of_target(target: str) -> tuple[str, ClusterSpec]:
    """The Ray namespace and the ``ClusterSpec`` of the task ``target`` names."""
    namespace, job, index = parse_target(target)
    ensure_ray()
    found = _connect(namespace, job, index)
    if found is None:
        raise errors.UnavailableError(None, None, f"No task serves {target}")
    return namespace, ClusterSpec(found[1]["cluster"])


def _running_actor(namespace: str, job: str, index: int):
    try:
        return ray.get_actor(actor_name(job, index), namespace=namespace)
    except ValueError:
        return None


def reset(target: str, containers) -> None:
    """``Session.reset`` on a Ray target: clear ``containers`` (none: the default one) on
    every running task."""
    namespace, cluster = _cluster_of_target(target)
    actors = [_running_actor(namespace, j, i) for j, i, _ in cluster.tasks()]
    ray.get([a.reset.remote(list(containers or [])) for a in actors if a is not None])


def describe(target: str) -> list[dict]:
    """``describe_cluster`` for a Ray cluster: every task of the target's cluster."""
    namespace, cluster = _cluster_of_target(target)
    out = []
    for j, i, address in cluster.tasks():
        entry = {"task": task_name(j, i), "job": j, "index": i, "address": address,
                 "transport": "ray", "running": False, "node": "", "gpu_ids": [],
                 "devices": [], "variables": []}
        actor = _running_actor(namespace, j, i)
        if actor is not None:
            try:
                entry.update(ray.get(actor.state_summary.remote(), timeout=START_TIMEOUT_S))
                info = ray.get(actor.info.remote(), timeout=START_TIMEOUT_S)
                entry.update(running=True, node=host_of(info), gpu_ids=info["gpu_ids"])
            except (GetTimeoutError, *TASK_GONE):
                pass
        out.append(entry)
    return out
