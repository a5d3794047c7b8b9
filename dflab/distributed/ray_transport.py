"""The Ray transport: each task of a cluster is a Ray actor; tensors cross tasks through Ray's
object store (``pip install dflab[ray]``; see docs/distributed.md).

Ray is the engine for processes, scheduling across machines, transfer and actor restarts;
dflab adds only the dataflow protocol on top, TF's worker service as actor methods:

* ``TaskServer`` (the actor, named ``dflab/<job>/<index>`` in a Ray namespace) owns its task's
  devices and state (a ``TaskWorker``). ``register_partition`` takes a partition's JSON form
  (TF's ``RegisterGraph``), ``run_step`` runs registered partitions for one step id
  (``RunGraph``), ``recv_tensor`` answers another task's pull of a tensor this task sent in
  that step (``RecvTensor``), ``abort_step`` and ``cleanup_step`` end a step (the master
  sends a task the ids of its finished steps with its next ``run_step``: one call a step).
* A step's rendezvous on a task is made by whichever comes first, the step's ``run_step`` or a
  peer's pull (the two race: every task starts at once), and kept until the master's
  ``cleanup_step``, so a value sent for a slower receiver waits for its pull. A ``_Recv`` of a
  tensor sent by another task pulls it from the sender's actor; NumPy arrays cross zero-copy
  on one node (Ray's shared-memory object store) and are copied on by the receiver's kernels
  only where they write (arrays arrive read-only, as dflab's values are immutable anyway).
* ``RayClusterWorker`` is the client session's worker (the master's side): devices described by
  each task's actor, partitions registered with the actor of their device's task, a step run
  on every task at once and aborted on all at its first error. A task that died, restarted
  (``max_restarts``: Ray brings it back empty) or does not answer within the step's timeout
  fails the step with ``UnavailableError``/``AbortedError`` naming it.
* Each task keeps a step gate (``dflab.distributed.task_gate``): a step that changes variables
  on several tasks is admitted by all of them first (one round of ``gate_try_enter`` calls), on
  one task inside its ``run_step``; a save closes the gates of its variables' tasks
  (``gate_close``), so checkpoints are one snapshot across ps tasks.

Two ways to start a cluster: ``tf.train.Server(cluster, job_name=…, task_index=…,
protocol="ray")`` in one OS process per task (TF's way; ``RAY_ADDRESS`` or an earlier
``ray.init`` says which Ray cluster), and ``launch(main, cluster={"ps": 1, "worker": 2})``, which
starts every task as an actor and runs ``main(task)`` on each worker task.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import threading
import time
import uuid
from dataclasses import dataclass

import ray
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from dflab.distributed.cluster import ClusterSpec
from dflab.distributed.task_gate import TaskGate, tasks_of_devices, writing_tasks
from dflab.framework import errors
from dflab.framework.device_spec import DeviceSpec
from dflab.framework.rendezvous import parse_key
from dflab.runtime.config import ConfigProto
from dflab.runtime.devices import Device, DeviceSet, spec_matches
from dflab.runtime.executor import to_client_value
from dflab.runtime.rendezvous import LocalRendezvous
from dflab.runtime.resources import Forgotten
from dflab.runtime.worker import PartitionSpec, Worker

TARGET_PREFIX = "dflab+ray://"
DEFAULT_NAMESPACE = "dflab"
# Threads of one task actor: a step, the pulls its peers make of it, pings and control calls
# run at once (a pull waits for its tensor on a thread of its own).
ACTOR_CONCURRENCY = 64
# How long the master waits for a silent task to answer a ping before calling it unavailable.
PING_TIMEOUT_S = 5.0
# How long a session waits for a task's actor that is still starting (a new process importing
# dflab) before calling the task unavailable.
START_TIMEOUT_S = 120.0
# The high bits of this process's step ids on a Ray cluster (TF draws distributed step ids at
# random for the same reason: many clients run steps on one task).
STEP_ID_BASE = (secrets.randbits(30) + 1) << 32
# A task's actor is gone (dead) or, for now, unreachable (restarting).
TASK_GONE = (RayActorError, ActorUnavailableError)
# How a task's ``run_step`` treats its step gate: not at all (the step changes no variable
# there, or it is the gate holder's own), count out a step admitted beforehand, or admit it
# itself (the only task the step changes).
GATE_NONE, GATE_ADMITTED, GATE_ENTER = 0, 1, 2


def actor_name(job: str, index: int) -> str:
    return f"dflab/{job}/{index}"


def task_name(job: str, index: int) -> str:
    return f"/job:{job}/replica:0/task:{index}"


def task_of_device(device: str) -> str:
    d = DeviceSpec.from_string(device)
    return task_name(d.job, d.task)


def target_of(namespace: str, job: str, index: int) -> str:
    return f"{TARGET_PREFIX}{namespace}/{job}/{index}"


def parse_target(target: str) -> tuple[str, str, int]:
    """``dflab+ray://<namespace>/<job>/<index>`` -> (namespace, job, index)."""
    rest = target[len(TARGET_PREFIX):]
    parts = rest.rsplit("/", 2)
    if len(parts) != 3 or not all(parts) or not parts[2].isdigit():
        raise errors.InvalidArgumentError(
            None, None, f"Malformed Ray target {target!r}: expected "
            f"{TARGET_PREFIX}<namespace>/<job>/<task index>")
    return parts[0], parts[1], int(parts[2])


# --- errors across processes ---------------------------------------------------------------
def _error_info(error: BaseException) -> tuple:
    """An error as plain data (OpErrors carry nodes and ops, which stay in their process)."""
    code = getattr(error, "error_code", errors.UNKNOWN)
    message = getattr(error, "message", None) or f"{type(error).__name__}: {error}"
    op = getattr(error, "op", None)
    return int(code), str(message), getattr(op, "name", None), \
        getattr(op, "creation_site", None)


_ERROR_CLASSES = {cls.error_code: cls for cls in vars(errors).values()
                  if isinstance(cls, type) and issubclass(cls, errors.OpError)
                  and cls is not errors.OpError}


def _error_from_info(info, ops=None) -> errors.OpError:
    """The error ``_error_info`` described, naming the user's op where the client has it."""
    code, message, op_name, site = info
    op = (ops or {}).get(op_name)
    if op is None and op_name:
        where = f" (defined at {site})" if site else ""
        message = f"{message}\n\t [[node {op_name}{where}]]"
    return _ERROR_CLASSES.get(code, errors.UnknownError)(None, op, message)


def _unavailable(task: str, why: str) -> errors.UnavailableError:
    return errors.UnavailableError(None, None, f"Task {task} is unavailable: {why}")


# --- the task side (inside the actor) --------------------------------------------------------
class TaskRendezvous(LocalRendezvous):
    """One step's rendezvous on one task: local sends and receives as ``LocalRendezvous``;
    a receive of a tensor sent by another task pulls it from the sender's actor."""

    __slots__ = ("_server", "transfers")

    def __init__(self, step_id: int, server: TaskServer, copy=None):
        super().__init__(step_id, copy)
        self._server = server
        self.transfers: list = []  # (key, bytes, start ns, end ns) of this task's pulls

    def recv_async(self, key: str, callback) -> None:
        parsed = parse_key(key)
        src_task = task_of_device(parsed.src_device)
        if src_task == self._server.task:
            return super().recv_async(key, callback)
        with self._lock:
            error = self._error
            if error is None:
                self._waiters[key] = callback  # so that an abort wakes it
        if error is not None:
            callback(None, error)
            return
        self._server.pull(src_task, self.step_id, key, self._pulled)

    def _pulled(self, key: str, value, error, nbytes: int, start: int) -> None:
        with self._lock:
            callback = self._waiters.pop(key, None)
            if callback is not None and error is None:
                self.transfers.append((key, nbytes, start, time.time_ns()))
        if callback is not None:  # None: the step was aborted meanwhile
            callback(value, error)


class TaskWorker(Worker):
    """A task's worker whose per-step rendezvous outlives the step until the master cleans
    it up (a peer may pull what the step sent after the step ended here)."""

    def __init__(self, config, server: TaskServer):
        super().__init__(config, task=server.task)
        self._server = server
        self._rendezvous: dict[int, TaskRendezvous] = {}
        self._rendezvous_lock = threading.Lock()

    def create_rendezvous(self, step_id: int, traced: bool = False) -> TaskRendezvous:
        with self._rendezvous_lock:
            rdv = self._rendezvous.get(step_id)
            if rdv is None:
                rdv = self._rendezvous[step_id] = TaskRendezvous(step_id, self._server,
                                                                 self._copy)
            return rdv

    def drop_rendezvous(self, step_id: int) -> TaskRendezvous | None:
        with self._rendezvous_lock:
            return self._rendezvous.pop(step_id, None)


class TaskServer:
    """The actor of one task (see the module docstring); made remote by ``_actor_class``."""

    def __init__(self, cluster_def: dict, job: str, index: int, namespace: str,
                 config: ConfigProto | None = None):
        from dflab.kernels.control_flow_kernels import DEAD

        self.cluster = ClusterSpec(cluster_def)
        self.job, self.index, self.namespace = job, index, namespace
        self.task = task_name(job, index)
        # Drawn at every (re)start: a master that registered with an earlier incarnation
        # learns that the task's partitions and state are gone.
        self.incarnation = secrets.randbits(63) or 1
        self.config = config if config is not None else ConfigProto()
        self.worker = TaskWorker(self.config, self)
        self.gate = TaskGate(self.task)
        self._peers: dict = {}
        self._peers_lock = threading.Lock()
        self._dead = DEAD

    # --- what the master asks ----------------------------------------------------------------
    def info(self) -> dict:
        return {"task": self.task, "incarnation": self.incarnation,
                "cluster": self.cluster.as_dict(), "pid": os.getpid(),
                "node": ray.get_runtime_context().get_node_id(),
                "devices": [_device_info(d) for d in self.worker.devices]}

    def ping(self) -> int:
        return self.incarnation

    def register_partition(self, spec_json: dict, incarnation: int) -> int:
        self._check_incarnation(incarnation)
        return self.worker.register_partition_json(spec_json)

    def deregister_partitions(self, handles) -> None:
        for h in handles:
            self.worker.deregister_partition(h)

    def run_step(self, step_id: int, handles, feeds: dict, timeout, trace: bool,
                 incarnation: int, finished=(), gate: int = GATE_NONE, holder: str = ""):
        """Run this task's partitions of one step; ``feeds``: the step's fed values these
        partitions take, by position. Returns ``(fetched values per partition, error info or
        None, device step stats or None, transfers)``. ``finished``: earlier steps whose
        rendezvous can go; ``gate``: ``GATE_*``, ``holder`` the client asking."""
        for old in finished:
            self.worker.drop_rendezvous(old)
        self._check_incarnation(incarnation)
        counted = gate == GATE_ADMITTED
        if gate == GATE_ENTER:
            try:
                counted = self.gate.enter(holder, timeout)
            except errors.OpError as e:
                return None, _error_info(e), None, []
        try:
            return self._run_step(step_id, handles, feeds, timeout, trace)
        finally:
            if counted:
                self.gate.exit()

    def _run_step(self, step_id, handles, feeds, timeout, trace):
        tracer = None
        if trace:
            from dflab.runtime.tracing import StepTracer

            tracer = StepTracer()
        try:
            parts = [self.worker.partition(h) for h in handles]
        except errors.OpError as e:
            return None, _error_info(e), None, []
        feed_values = [None] * (max(feeds) + 1 if feeds else 0)
        for k, v in feeds.items():
            feed_values[k] = v
        group, execs = self.worker.run_step(parts, feed_values, step_id, timeout, tracer,
                                            _biggest(parts))
        rdv = group.rendezvous
        transfers = list(rdv.transfers)
        stats = _device_stats(tracer) if tracer is not None else None
        if group.error is not None:
            return None, _error_info(group.error), stats, transfers
        values = [[self._sendable(v) for v in p.fetch_values(ex)] for p, ex in zip(parts, execs)]
        return values, None, stats, transfers

    def recv_tensor(self, step_id: int, key: str, timeout):
        """A peer's pull of a tensor this task sent (or will send) in step ``step_id``:
        ``(value, error info or None)``; dead values travel as ``None`` with a flag."""
        rdv = self.worker.create_rendezvous(step_id)
        done = threading.Event()
        box = []

        def arrived(value, error):
            box.append((value, error))
            done.set()

        rdv.recv_async(key, arrived)
        if not done.wait(timeout):
            rdv.abort(errors.DeadlineExceededError(
                None, None, f"{self.task} waited {timeout:.1f} s for tensor {key} to be sent"))
            done.wait()
        value, error = box[0]
        if error is not None:
            return None, False, _error_info(error)
        if value is self._dead:
            return None, True, None
        return value, False, None

    def abort_step(self, step_id: int, message: str) -> None:
        error = errors.CancelledError(None, None, message)
        self.worker.abort_step(step_id, error)
        self.worker.create_rendezvous(step_id).abort(error)

    def cleanup_step(self, step_id: int) -> None:
        self.worker.drop_rendezvous(step_id)

    # --- the step gate (dflab.distributed.task_gate) -----------------------------------------
    def gate_try_enter(self, holder: str, incarnation: int):
        self._check_incarnation(incarnation)
        return self.gate.try_enter(holder)

    def gate_exit(self) -> None:
        self.gate.exit()

    def gate_wait_open(self, timeout) -> bool:
        return self.gate.wait_open(timeout)

    def gate_close(self, holder: str, timeout, incarnation: int):
        """Close the gate for ``holder`` once its steps drained: error info or None."""
        try:
            self._check_incarnation(incarnation)
            self.gate.close(holder, timeout)
        except errors.OpError as e:
            return _error_info(e)
        return None

    def gate_open(self, holder: str) -> None:
        self.gate.open(holder)

    def reset(self) -> None:
        self.worker.devices.close()

    def forget(self, op_names) -> None:
        self.worker.forget_resources(op_names)

    def state_summary(self) -> dict:
        return self.worker.state_summary()

    def run_client(self, fn, task_info: dict):
        """The launcher's client function for this task, run here (between-graph
        replication: each worker task runs its own client): ``(result, error info)``, as a
        TF error holds ops of this process's graph."""
        try:
            return fn(TaskContext(**task_info)), None
        except errors.OpError as e:
            return None, _error_info(e)

    # --- pulls from peers --------------------------------------------------------------------
    def pull(self, src_task: str, step_id: int, key: str, done) -> None:
        """Ask ``src_task`` for ``key`` of ``step_id``; ``done(key, value, error, nbytes,
        start_ns)`` is called on a Ray thread when it arrives."""
        start = time.time_ns()
        try:
            peer = self._peer(src_task)
            ref = peer.recv_tensor.remote(step_id, key, self._pull_timeout())
        except Exception as e:  # noqa: BLE001 - the peer's actor is gone or unknown
            done(key, None, _unavailable(src_task, _why(e)), 0, start)
            return

        def finished(future):
            try:
                value, dead, info = future.result()
            except Exception as e:  # noqa: BLE001 - the peer died during the pull
                done(key, None, _unavailable(src_task, _why(e)), 0, start)
                return
            if info is not None:
                done(key, None, _error_from_info(info), 0, start)
            elif dead:
                done(key, self._dead, None, 0, start)
            else:
                done(key, value, None, int(getattr(value, "nbytes", 0) or 0), start)

        ref.future().add_done_callback(finished)

    def _pull_timeout(self) -> float:
        ms = self.config.operation_timeout_in_ms
        return ms / 1000.0 if ms else 24 * 3600.0

    def _peer(self, task: str):
        with self._peers_lock:
            actor = self._peers.get(task)
            if actor is None:
                d = DeviceSpec.from_string(task)
                actor = self._peers[task] = ray.get_actor(actor_name(d.job, d.task),
                                                          namespace=self.namespace)
            return actor

    def _check_incarnation(self, incarnation: int) -> None:
        if incarnation and incarnation != self.incarnation:
            raise errors.AbortedError(
                None, None, f"Task {self.task} restarted: the partitions and state the "
                "session relied on are gone; create a new session")

    def _sendable(self, value):
        return None if value is self._dead else value


def _why(error: BaseException) -> str:
    if isinstance(error, ActorUnavailableError):
        return "its actor is restarting (its state is lost)"
    if isinstance(error, RayActorError):
        return "its actor died"
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"


def _biggest(parts) -> int:
    return max(range(len(parts)), key=lambda i: len(parts[i].executor_plan.nodes))


def _device_info(d: Device) -> dict:
    return {"device_type": d.device_type, "index": d.index, "simulated": d.simulated,
            "kernel_device_type": d.kernel_device_type, "description": d.description,
            "params": dict(d.params), "incarnation": d.incarnation}


def _device_stats(tracer) -> list:
    from dflab.runtime.config import RunMetadata, RunOptions

    md = RunMetadata()
    tracer.fill(md, RunOptions(trace_level=RunOptions.FULL_TRACE))
    return list(md.step_stats.dev_stats)


_ACTOR_CLASS = None


def _actor_class():
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        _ACTOR_CLASS = ray.remote(TaskServer)
    return _ACTOR_CLASS


@dataclass
class TaskContext:
    """What the launcher gives a client function: its task and the session target."""

    job_name: str
    task_index: int
    target: str
    cluster: dict
    namespace: str

    @property
    def cluster_spec(self) -> ClusterSpec:
        return ClusterSpec(self.cluster)

    @property
    def task(self) -> str:
        return task_name(self.job_name, self.task_index)


def alive(actor, timeout: float = PING_TIMEOUT_S) -> bool:
    """False once the actor is dead; a busy or still-starting actor counts as alive."""
    try:
        ray.get(actor.ping.remote(), timeout=timeout)
    except GetTimeoutError:
        return True
    except TASK_GONE:
        return False
    return True


# --- starting tasks --------------------------------------------------------------------------
def ensure_ray() -> None:
    """Connect to Ray: ``RAY_ADDRESS`` if set, else start a local instance (CPU only)."""
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False,
                 log_to_driver=False, ignore_reinit_error=True)


def start_task(cluster: ClusterSpec, job: str, index: int, namespace: str,
               config: ConfigProto | None = None, max_restarts: int = 0,
               actor_options: dict | None = None):
    """Start the actor of one task (its process starts in the background: the first call to
    it waits for it); UnknownError if a live actor already serves the task."""
    ensure_ray()
    name = actor_name(job, index)
    try:
        ray.get_actor(name, namespace=namespace)
    except ValueError:
        pass
    else:
        raise errors.UnknownError(
            None, None, f"Could not start server for {task_name(job, index)}: Ray actor "
            f"{name!r} in namespace {namespace!r} is already running (stop it first)")
    options = {"name": name, "namespace": namespace, "max_restarts": max_restarts,
               "max_task_retries": 0, "max_concurrency": ACTOR_CONCURRENCY, "num_cpus": 0,
               # On the node of the process that starts it, as a TF server runs in its process.
               "scheduling_strategy": NodeAffinitySchedulingStrategy(
                   ray.get_runtime_context().get_node_id(), soft=True)}
    options.update(actor_options or {})
    return _actor_class().options(**options).remote(cluster.as_dict(), job, index, namespace,
                                                    config)


def launch(main, cluster: dict, *, namespace: str | None = None,
           config: ConfigProto | None = None, max_restarts: int = 0,
           actor_options: dict | None = None, timeout: float | None = None,
           client_job: str = "worker") -> list:
    """Start a cluster's tasks as Ray actors and run ``main(task)`` on every task of
    ``client_job`` (each its own client, as between-graph replication has it); returns their
    results in task order and stops the tasks.

    ``cluster``: job -> number of tasks (``{"ps": 1, "worker": 2}``), or any form
    ``ClusterSpec`` takes. ``task`` is a ``TaskContext``: ``job_name``, ``task_index``,
    ``target`` (for ``tf.Session``), ``cluster_spec``. ``namespace``: the Ray namespace of the
    tasks' actors (a fresh one by default, so that launches never meet)."""
    spec = _cluster_of_counts(cluster)
    if client_job not in spec.jobs:
        raise ValueError(f"The cluster has no {client_job!r} job to run clients on: jobs are "
                         f"{spec.jobs}")
    namespace = namespace or f"dflab-{uuid.uuid4().hex[:8]}"
    ensure_ray()
    _ship_by_value(main)
    actors = {}
    try:
        for job in spec.jobs:
            for index in spec.task_indices(job):
                actors[(job, index)] = start_task(spec, job, index, namespace, config,
                                                  max_restarts, actor_options)
        ray.get([a.ping.remote() for a in actors.values()])  # every task up before a client
        refs = [actors[(client_job, i)].run_client.remote(
                    main, {"job_name": client_job, "task_index": i,
                           "target": target_of(namespace, client_job, i),
                           "cluster": spec.as_dict(), "namespace": namespace})
                for i in spec.task_indices(client_job)]
        try:
            outcomes = ray.get(refs, timeout=timeout)
        except RayTaskError as e:
            cause = e.cause if isinstance(e.cause, BaseException) else None
            raise (cause or e) from None
        for index, (_, info) in zip(spec.task_indices(client_job), outcomes):
            if info is not None:
                error = _error_from_info(info)
                error.message = f"In the client of {task_name(client_job, index)}: " \
                                f"{error.message}"
                raise type(error)(None, None, error.message)
        return [result for result, _ in outcomes]
    finally:
        for actor in actors.values():
            ray.kill(actor)


def _ship_by_value(fn) -> None:
    """Send ``fn``'s module with it when it is the user's code (a script, a test, a helper
    module next to a notebook): the tasks' processes may not be able to import it by name,
    as they can import installed packages."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    path = getattr(module, "__file__", None) or ""
    if module is None or module.__name__ == "__main__" or module.__name__.startswith("dflab") \
            or not path or any(p in path for p in ("site-packages", "dist-packages")):
        return
    ray.cloudpickle.register_pickle_by_value(module)


def _cluster_of_counts(cluster) -> ClusterSpec:
    if isinstance(cluster, dict) and cluster and all(isinstance(v, int) and
                                                     not isinstance(v, bool)
                                                     for v in cluster.values()):
        if any(v < 1 for v in cluster.values()):
            raise ValueError(f"Every job needs at least one task: {cluster}")
        return ClusterSpec({job: [f"{job}{i}.ray:0" for i in range(n)]
                            for job, n in cluster.items()})
    return ClusterSpec(cluster)


# --- the client side (the master's worker) ---------------------------------------------------
class RemoteDevice(Device):
    """A device of another process, as the master sees it: its name, type and incarnation,
    for placement and rendezvous keys (its memory and state live in its task's actor)."""

    def __init__(self, task: str, info: dict):
        super().__init__(info["device_type"], info["index"], simulated=info["simulated"],
                         task=task, kernel_device_type=info["kernel_device_type"],
                         description=info["description"], params=info["params"])
        self.incarnation = info["incarnation"]
        self.memory_space = f"{task}/host"


class RemotePartition:
    """A partition registered with a task's actor: what the master keeps to run it."""

    __slots__ = ("task", "handle", "device", "feed_index", "nodes", "executor_plan", "writes")

    def __init__(self, task: str, handle: int, spec: PartitionSpec):
        self.task = task
        self.writes = bool(writing_tasks(spec, task))  # it changes a variable of its task
        self.handle = handle
        self.device = spec.device
        self.feed_index = tuple(spec.feed_index)
        self.nodes = len(spec.graph_def.node)
        self.executor_plan = None  # it lives in the task's process

    def fetch_values(self, result) -> list:
        return [to_client_value(v) for v in result.values]

    def __repr__(self):
        return f"<RemotePartition {self.handle} on {self.task}: {self.device}>"


class RemoteResult:
    """One partition's outcome of a step on a task (what ``fetch_values`` reads)."""

    __slots__ = ("values", "executed")

    def __init__(self, values):
        self.values = values
        self.executed = "?"


class RemoteStep:
    """A step run on the tasks (the session reads ``error``)."""

    __slots__ = ("error", "step_id", "transfers")

    def __init__(self, step_id: int):
        self.error = None
        self.step_id = step_id
        self.transfers: list = []


class TaskHandle:
    """The master's handle on one task: its actor and the incarnation it registered with."""

    __slots__ = ("task", "actor", "incarnation", "handles", "finished")

    def __init__(self, task: str, actor, incarnation: int):
        self.task = task
        self.actor = actor
        self.incarnation = incarnation
        self.handles: list = []
        self.finished: list = []  # step ids whose rendezvous the task may drop


class RayClusterWorker(Worker):
    """A client session's worker over a cluster of Ray task actors (see module docstring)."""

    def __init__(self, config, owner, tasks: dict, devices: DeviceSet, target_task: str):
        super().__init__(config, owner, devices=devices)
        self._tasks = tasks  # task name -> TaskHandle, the target's first
        self.target_task = target_task
        self._origins: dict = {}
        self._token = uuid.uuid4().hex  # names this session as a holder of task gates

    # --- registering ---------------------------------------------------------------------
    def register_partition(self, spec: PartitionSpec, origins=None):
        if not spec.device:
            raise errors.UnimplementedError(
                None, None, "This plan runs unpartitioned over several devices (a while "
                "loop whose body spans devices); on a Ray cluster each loop must stay on one "
                "task's device, fed from the others")
        task = self._task(task_of_device(spec.device))
        if origins:
            self._origins.update(origins)
        try:
            handle = ray.get(task.actor.register_partition.remote(spec.to_json(),
                                                                  task.incarnation))
        except RayTaskError as e:
            raise self._task_error(task, e) from None
        except TASK_GONE as e:
            raise _unavailable(task.task, _why(e)) from None
        task.handles.append(handle)
        return RemotePartition(task.task, handle, spec)

    def _task(self, task: str) -> TaskHandle:
        handle = self._tasks.get(task)
        if handle is None:
            raise _unavailable(task, "no Ray actor serves it (start its tf.train.Server)")
        return handle

    def _task_error(self, task: TaskHandle, e: RayTaskError):
        cause = getattr(e, "cause", None)
        if isinstance(cause, errors.OpError):
            return _error_from_info(_error_info(cause), self._origins)
        return errors.InternalError(None, None, f"Task {task.task} failed: {e}")

    # --- steps -------------------------------------------------------------------------
    def run_partition(self, part, feed_values, step_id, timeout=None, observer=None):
        group, results = self.run_step([part], feed_values, step_id, timeout, observer)
        if group.error is not None:
            raise group.error
        return results[0]

    def run_step(self, parts, feed_values, step_id, timeout=None, observer=None, main=0):
        """Run each task's partitions of one step on its actor, all at once; returns
        ``(step, results)`` like ``Worker.run_step`` (``step.error``: the first error)."""
        # Step ids count per process; clients in other processes share the tasks, so a step
        # is named across the cluster by this process's random prefix and its local id.
        step_id = STEP_ID_BASE | step_id
        step = RemoteStep(step_id)
        by_task: dict = {}
        for i, part in enumerate(parts):
            by_task.setdefault(part.task, []).append(i)
        trace = observer is not None
        writing = sorted({p.task for p in parts if getattr(p, "writes", False)})
        holder = self._holder()
        if len(writing) > 1:
            gates = self._admit(writing, holder, timeout)
        else:
            gates = dict.fromkeys(writing, GATE_ENTER)
        refs = {}
        for task_name_, indices in by_task.items():
            task = self._task(task_name_)
            feeds = {k: feed_values[k] for i in indices for k in parts[i].feed_index}
            finished, task.finished = task.finished, []
            refs[task.actor.run_step.remote(
                step_id, [parts[i].handle for i in indices], feeds, timeout, trace,
                task.incarnation, finished, gates.get(task_name_, GATE_NONE),
                holder)] = (task, indices)
        results = [None] * len(parts)
        try:
            self._collect(step, refs, results, timeout, observer)
        finally:
            for task, _ in refs.values():
                task.finished.append(step_id)  # dropped with its next step, or at close
        return step, results

    def _collect(self, step, refs, results, timeout, observer) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = list(refs)
        while pending:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            ready, pending = ray.wait(pending, num_returns=1, timeout=left)
            if not ready:
                self._timed_out(step, [refs[r][0] for r in pending], timeout)
                return
            task, indices = refs[ready[0]]
            try:
                values, info, stats, transfers = ray.get(ready[0])
            except TASK_GONE as e:
                self._fail(step, _unavailable(task.task, _why(e)), refs)
                continue
            except RayTaskError as e:
                self._fail(step, self._task_error(task, e), refs)
                continue
            if stats and observer is not None:
                observer.add_device_stats(stats)
            for key, nbytes, start, end in transfers:
                step.transfers.append((key, nbytes, start, end))
            if observer is not None and transfers:
                observer.add_transfers(transfers)
            if info is not None:
                self._fail(step, _error_from_info(info, self._origins), refs)
                continue
            for i, vals in zip(indices, values):
                results[i] = RemoteResult(vals)

    def _fail(self, step, error, refs) -> None:
        """The step's first error wins and aborts the step on every task."""
        if step.error is not None:
            return
        step.error = error
        why = f"Step {step.step_id} was cancelled: {str(error).splitlines()[0]}"
        for task, _ in refs.values():
            try:
                task.actor.abort_step.remote(step.step_id, why)
            except TASK_GONE:
                pass

    def _timed_out(self, step, silent, timeout) -> None:
        """No answer from ``silent`` tasks in time: those that do not answer a ping are
        unavailable; otherwise the step ran past its deadline."""
        dead = []
        for task in silent:
            try:
                ray.get(task.actor.ping.remote(), timeout=min(PING_TIMEOUT_S, timeout or 1))
            except (GetTimeoutError, *TASK_GONE):
                dead.append(task.task)
        if dead:
            error = _unavailable(", ".join(dead), "it did not answer within the step's "
                                 f"timeout of {timeout * 1000:.0f} ms")
        else:
            names = ", ".join(t.task for t in silent)
            error = errors.DeadlineExceededError(
                None, None, f"Timed out after {timeout * 1000:.0f} ms waiting for the step "
                f"to finish on {names}")
        self._fail(step, error, {t.task: (t, ()) for t in self._tasks.values()})

    # --- consistent checkpoints (dflab.distributed.task_gate) -------------------------------
    def _holder(self) -> str:
        return f"{self._token}/{threading.get_ident()}"

    def _admit(self, tasks: list, holder: str, timeout) -> dict:
        """Admit a step on every task of ``tasks`` at once (retried after a refusing task
        opens); returns task -> ``GATE_ADMITTED`` for those that counted it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        handles = [self._task(t) for t in tasks]
        while True:
            refs = [h.actor.gate_try_enter.remote(holder, h.incarnation) for h in handles]
            answers, failure = [], None
            for h, ref in zip(handles, refs):
                try:
                    answers.append(ray.get(ref))
                except TASK_GONE as e:
                    answers.append(None)
                    failure = failure or _unavailable(h.task, _why(e))
                except RayTaskError as e:
                    answers.append(None)
                    failure = failure or self._task_error(h, e)
            counted = [h for h, a in zip(handles, answers) if a]
            refused = next((h for h, a in zip(handles, answers) if a is False), None)
            if failure is None and refused is None:
                return {h.task: GATE_ADMITTED for h in counted}
            for h in counted:
                h.actor.gate_exit.remote()
            if failure is not None:
                raise failure
            left = None if deadline is None else deadline - time.monotonic()
            opened = left is None or left > 0
            if opened:
                try:
                    opened = ray.get(refused.actor.gate_wait_open.remote(left))
                except TASK_GONE as e:
                    raise _unavailable(refused.task, _why(e)) from None
            if not opened:
                raise errors.DeadlineExceededError(
                    None, None, f"On task {refused.task}, a step waited for a checkpoint "
                    f"longer than its timeout of {timeout * 1000:.0f} ms")

    @contextlib.contextmanager
    def consistent_snapshot(self, devices, timeout: float | None = None):
        """Held around a save or restore of variables on ``devices``: the step gates of their
        tasks closed, in task order, once every step admitted there has finished."""
        holder, closed = self._holder(), []
        try:
            for name in tasks_of_devices(devices, self.target_task, self.devices):
                task = self._task(name)
                try:
                    info = ray.get(task.actor.gate_close.remote(holder, timeout,
                                                                task.incarnation))
                except TASK_GONE as e:
                    raise _unavailable(task.task, _why(e)) from None
                except RayTaskError as e:
                    raise self._task_error(task, e) from None
                if info is not None:
                    raise _error_from_info(info)
                closed.append(task)
            yield
        finally:
            for task in reversed(closed):
                with contextlib.suppress(GetTimeoutError, *TASK_GONE):
                    ray.get(task.actor.gate_open.remote(holder), timeout=PING_TIMEOUT_S)

    def start_step(self, parts, feed_values, step_id, observer=None):
        raise errors.UnimplementedError(
            None, None, "Stepping through a step of a Ray cluster is not supported: step it on "
            "an in-process cluster (tf.train.Server without protocol='ray')")

    # --- state -------------------------------------------------------------------------
    def record_memory(self, summary: dict) -> None:
        """Memory is accounted in each task's process."""

    def forget_resources(self, op_names) -> Forgotten:
        for task in self._tasks.values():
            task.actor.forget.remote(list(op_names))
        return Forgotten()

    def close(self) -> None:
        for task in self._tasks.values():
            try:
                if task.handles:
                    task.actor.deregister_partitions.remote(list(task.handles))
                for step_id in task.finished:
                    task.actor.cleanup_step.remote(step_id)
            except TASK_GONE:
                pass
            task.handles.clear()
            task.finished.clear()
        super().close()


def session_worker(target: str, config, session) -> RayClusterWorker:
    """The worker of ``tf.Session("dflab+ray://<namespace>/<job>/<index>")``: every running
    task of the target's cluster, the target's devices first (unplaced ops go there)."""
    namespace, job, index = parse_target(target)
    ensure_ray()
    target_task = task_name(job, index)
    try:
        actor = ray.get_actor(actor_name(job, index), namespace=namespace)
        info = ray.get(actor.info.remote(), timeout=START_TIMEOUT_S)
    except (ValueError, GetTimeoutError, *TASK_GONE):
        raise errors.UnavailableError(
            None, None, f"No task serves {target}: start its tf.train.Server(..., "
            "protocol='ray') first") from None
    cluster = ClusterSpec(info["cluster"])
    infos = {target_task: (actor, info)}
    for other_job in cluster.jobs:
        for other in cluster.task_indices(other_job):
            name = task_name(other_job, other)
            if name in infos:
                continue
            try:
                a = ray.get_actor(actor_name(other_job, other), namespace=namespace)
                infos[name] = (a, ray.get(a.info.remote(), timeout=START_TIMEOUT_S))
            except (ValueError, GetTimeoutError, *TASK_GONE):
                continue  # not started: like an in-process cluster's stopped task
    tasks, devices = {}, []
    filters = [DeviceSpec.from_string(f) for f in config.device_filters]
    for name, (a, i) in infos.items():
        tasks[name] = TaskHandle(name, a, i["incarnation"])
        for d in i["devices"]:
            device = RemoteDevice(name, d)
            if not filters or any(spec_matches(f, device.spec) for f in filters):
                devices.append(device)
    if not devices:
        raise errors.InvalidArgumentError(
            None, None, f"No device of the cluster matches device_filters "
            f"{config.device_filters}")
    return RayClusterWorker(config, session, tasks, DeviceSet(devices), target_task)


def _cluster_of_target(target: str) -> tuple[str, ClusterSpec]:
    """The Ray namespace and the ``ClusterSpec`` of the task ``target`` names."""
    namespace, job, index = parse_target(target)
    ensure_ray()
    try:
        actor = ray.get_actor(actor_name(job, index), namespace=namespace)
        info = ray.get(actor.info.remote(), timeout=START_TIMEOUT_S)
    except (ValueError, GetTimeoutError, *TASK_GONE):
        raise errors.UnavailableError(None, None, f"No task serves {target}") from None
    return namespace, ClusterSpec(info["cluster"])


def _running_actor(namespace: str, job: str, index: int):
    """The actor of a task, or None when none is running."""
    try:
        return ray.get_actor(actor_name(job, index), namespace=namespace)
    except ValueError:
        return None


def reset(target: str, containers) -> None:
    """``Session.reset`` on a Ray target: clear the state every running task holds."""
    namespace, cluster = _cluster_of_target(target)
    actors = [_running_actor(namespace, j, i) for j, i, _ in cluster.tasks()]
    ray.get([a.reset.remote() for a in actors if a is not None])


def describe(target: str) -> list[dict]:
    """``describe_cluster`` for a Ray cluster: every task of the target's cluster."""
    namespace, cluster = _cluster_of_target(target)
    out = []
    for j, i, address in cluster.tasks():
        entry = {"task": task_name(j, i), "job": j, "index": i, "address": address,
                 "transport": "ray", "running": False, "devices": [], "variables": []}
        actor = _running_actor(namespace, j, i)
        if actor is not None:
            try:
                entry.update(ray.get(actor.state_summary.remote(), timeout=START_TIMEOUT_S))
                entry["running"] = True
            except (GetTimeoutError, *TASK_GONE):
                pass
        out.append(entry)
    return out

