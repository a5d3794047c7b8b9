"""``tf.train.Server``: one task of a cluster, and the sessions that run on a cluster.

A server owns its task's devices, named by the task (``/job:ps/replica:0/task:0/device:CPU:0``),
and the state on them: variables, queues and random streams live in the devices' resource
managers, so they outlive client sessions and every session on the cluster shares them (what
between-graph replication relies on). A session created with ``server.target`` is the master
(``dflab.runtime.master``): it places the graph across the devices of every started task of the
cluster, registers each partition with the worker of its task, and runs a step's partitions
concurrently.

This module is the *in-process* transport (see docs/distributed.md): all tasks live in this
Python process, found by the address the cluster gives them, so calls are direct and tensors
cross tasks without a copy, through the one rendezvous a step's partitions share. An address
serves one started server at a time, as a port does. ``stop()`` (a dflab addition: TF 1.x
servers only end with their process) frees it and drops the task's state.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time

from dflab.distributed.cluster import ClusterDef, ClusterSpec
from dflab.distributed.network import delay_line, network_at, network_key
from dflab.distributed.task_gate import admit_local, gate_of, tasks_of_devices, writing_tasks
from dflab.framework import errors
from dflab.framework.device_spec import DeviceSpec
from dflab.framework.rendezvous import parse_key
from dflab.runtime.config import ConfigProto
from dflab.runtime.devices import DeviceSet, spec_matches
from dflab.runtime.rendezvous import LocalRendezvous
from dflab.runtime.session import register_session_target
from dflab.runtime.worker import Worker

TARGET_PREFIX = "grpc://"
RAY_PROTOCOL = "ray"
RAY_TARGET_PREFIX = "dflab+ray://"  # dflab.distributed.ray_transport.TARGET_PREFIX

_servers: dict[str, Server] = {}  # address -> the started server listening there
_servers_lock = threading.Lock()
_local_ports = itertools.count(20000)


def task_name(job: str, index: int) -> str:
    return f"/job:{job}/replica:0/task:{index}"


class Server:
    """A server for one task of a cluster (TF's ``tf.train.Server``): in this process, or,
    with ``protocol="ray"``, a Ray actor (``dflab.distributed.ray_transport``) whose Ray
    namespace is ``ConfigProto(dflab={"ray_namespace": …})``, else ``$DFLAB_RAY_NAMESPACE``,
    else "dflab"."""

    def __init__(self, server_or_cluster_def, job_name: str | None = None,
                 task_index: int | None = None, protocol: str | None = None,
                 config: ConfigProto | None = None, start: bool = True):
        if protocol not in (None, "grpc", RAY_PROTOCOL):
            raise ValueError(f"Unknown protocol {protocol!r}: dflab servers speak 'grpc' (the "
                             f"in-process transport stands in for it) and {RAY_PROTOCOL!r}")
        if isinstance(server_or_cluster_def, (ClusterSpec, ClusterDef, dict)):
            cluster = ClusterSpec(server_or_cluster_def)
        else:
            raise TypeError("server_or_cluster_def must be a ClusterSpec, a dict of job name "
                            f"to addresses or a ClusterDef, not "
                            f"{type(server_or_cluster_def).__name__}")
        job_name = _job_of(cluster, job_name)
        task_index = _task_of(cluster, job_name, task_index)
        self._cluster = cluster
        self._job = job_name
        self._index = task_index
        self._task = task_name(job_name, task_index)
        self._address = cluster.task_address(job_name, task_index)
        self._config = config if config is not None else ConfigProto()
        self._protocol = protocol or "grpc"
        self._namespace = (self._config.dflab.get("ray_namespace")
                           or os.environ.get("DFLAB_RAY_NAMESPACE") or "dflab")
        self._worker: Worker | None = None
        self._actor = None  # the task's Ray actor (protocol "ray")
        self._stopped = threading.Event()
        if start:
            self.start()

    # --- TF's API ------------------------------------------------------------------------------
    @property
    def target(self) -> str:
        """What ``tf.Session(target)`` takes to run on this server's cluster."""
        if self._protocol == RAY_PROTOCOL:
            return f"{RAY_TARGET_PREFIX}{self._namespace}/{self._job}/{self._index}"
        return TARGET_PREFIX + self._address

    @property
    def server_def(self) -> dict:
        return {"cluster": self._cluster.as_cluster_def(), "job_name": self._job,
                "task_index": self._index, "protocol": self._protocol}

    def start(self) -> None:
        """Start serving at the task's address (a no-op when already started)."""
        if self._protocol == RAY_PROTOCOL:
            self._start_actor()
            return
        with _servers_lock:
            if self._worker is not None:
                return
            other = _servers.get(self._address)
            if other is not None:
                raise errors.UnknownError(
                    None, None, f"Could not start server for {self._task}: address "
                    f"{self._address} is in use by {other._task} (stop that server first)")
            self._worker = Worker(self._config, task=self._task)
            self._stopped.clear()
            _servers[self._address] = self

    def join(self, timeout: float | None = None) -> bool:
        """Block until the server stops (``timeout`` seconds at most: returns False then); a
        Ray task also ends when its actor dies."""
        if self._actor is None:
            return self._stopped.wait(timeout)
        from dflab.distributed import ray_transport

        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._stopped.is_set():
            if not ray_transport.alive(self._actor):
                self._stopped.set()
                break
            left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if left <= 0:
                return False
            self._stopped.wait(left)
        return True

    def _start_actor(self) -> None:
        from dflab.distributed import ray_transport

        if self._actor is not None:
            return
        self._actor = ray_transport.start_task(self._cluster, self._job, self._index,
                                               self._namespace, self._config)
        self._stopped.clear()

    @staticmethod
    def create_local_server(config: ConfigProto | None = None, start: bool = True) -> Server:
        """A single-task server on this machine, at an address no started server uses."""
        with _servers_lock:
            address = next(a for a in (f"localhost:{p}" for p in _local_ports)
                           if a not in _servers)
        return Server({"localhost": [address]}, job_name="localhost", task_index=0,
                      config=config, start=start)

    # --- dflab ---------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop serving: free the address and drop the task's state (variables, queues…)."""
        if self._actor is not None:
            import ray

            actor, self._actor = self._actor, None
            ray.kill(actor)
            self._stopped.set()
            return
        with _servers_lock:
            if self._worker is None:
                return
            if _servers.get(self._address) is self:
                del _servers[self._address]
            worker, self._worker = self._worker, None
        worker.close()
        self._stopped.set()

    @property
    def task(self) -> str:
        return self._task

    @property
    def cluster_spec(self) -> ClusterSpec:
        return self._cluster

    @property
    def worker(self) -> Worker:
        if self._worker is None:
            raise errors.UnavailableError(None, None, f"Server for {self._task} is not running")
        return self._worker

    def __repr__(self):
        state = "running" if self._worker is not None or self._actor is not None else "stopped"
        return f"<Server {self._task} at {self._address} ({state})>"


def _job_of(cluster: ClusterSpec, job_name):
    if job_name is None:
        if len(cluster.jobs) != 1:
            raise ValueError("Must specify an explicit `job_name`.")
        return cluster.jobs[0]
    if job_name not in cluster.jobs:
        raise ValueError(f"Job {job_name!r} is not in the cluster: jobs are {cluster.jobs}")
    return job_name


def _task_of(cluster: ClusterSpec, job_name: str, task_index):
    indices = cluster.task_indices(job_name)
    if task_index is None:
        if len(indices) != 1:
            raise ValueError("Must specify an explicit `task_index`.")
        return indices[0]
    if task_index not in indices:
        raise ValueError(f"Task {task_index} is not in job {job_name!r}: its tasks are "
                         f"{indices}")
    return task_index


def describe_cluster(where) -> list[dict]:
    """The tasks of a cluster and what each holds, as plain data (what ``ClusterView`` and
    ``%dflab cluster`` draw). ``where``: a ``Server``, a session on a cluster, or a target.

    One dict per task of the ``ClusterSpec``, in job then index order: ``task``, ``job``,
    ``index``, ``address``, ``transport``, ``running``, and for a running task its ``devices``
    (name, device_type, description) and ``variables`` (name, device, shape, dtype, bytes).
    """
    if isinstance(where, Server) and where._protocol == RAY_PROTOCOL:
        where = where.target
    target = getattr(where, "sess_str", where)
    if isinstance(target, str) and target.startswith(RAY_TARGET_PREFIX):
        from dflab.distributed import ray_transport

        return ray_transport.describe(target)
    server = _server_of(where)
    running = {s._task: s for s in _cluster_of(server)} if server._worker is not None else {}
    out = []
    for job in server._cluster.jobs:
        for index in server._cluster.task_indices(job):
            name = task_name(job, index)
            entry = {"task": name, "job": job, "index": index,
                     "address": server._cluster.task_address(job, index),
                     "transport": "in-process", "running": name in running,
                     "devices": [], "variables": []}
            if name in running:
                entry.update(running[name].worker.state_summary())
            out.append(entry)
    return out


def _server_of(where) -> Server:
    if isinstance(where, Server):
        return where
    target = getattr(where, "sess_str", where)
    if isinstance(target, str) and target.startswith(TARGET_PREFIX):
        with _servers_lock:
            server = _servers.get(target[len(TARGET_PREFIX):])
        if server is not None:
            return server
        raise errors.UnavailableError(None, None, f"No server is running at {target}")
    raise errors.InvalidArgumentError(
        None, None, f"Not a cluster: {where!r} (give a tf.train.Server, a session on a "
        "cluster target, or its target)")


class ClusterRendezvous(LocalRendezvous):
    """A step's rendezvous across the tasks of an in-process cluster: records each tensor
    that crosses tasks (``transfers``: key, bytes, sent and arrival ns) and, where a link is
    simulated (``dflab.distributed.network``), hands it over when the link delivers it."""

    __slots__ = ("_network", "transfers")

    def __init__(self, step_id: int, copy, network):
        super().__init__(step_id, copy)
        self._network = network
        self.transfers: list = []

    def send(self, key: str, value) -> None:
        parsed = parse_key(key)
        src = parsed.src_device.rsplit("/device:", 1)[0]
        dst = parsed.dst_device.rsplit("/device:", 1)[0]
        if src == dst:
            return super().send(key, value)
        nbytes = int(getattr(value, "nbytes", 0) or 0)
        sent, now = time.time_ns(), time.monotonic()
        arrival = None if self._network is None else \
            self._network.schedule(src, dst, nbytes, now)
        delay = 0.0 if arrival is None else max(arrival - now, 0.0)
        with self._lock:
            self.transfers.append((key, nbytes, sent, sent + int(delay * 1e9)))
        if delay <= 0:
            return super().send(key, value)
        delay_line.call_at(arrival, super().send, key, value)


# --- sessions on a cluster -------------------------------------------------------------------
class ClusterWorker(Worker):
    """A client session's worker over an in-process cluster.

    Its device set is every started task's devices, the target task's first (unplaced ops go
    there, as they go to the master's task in TF). A partition is registered with the worker
    of its device's task, which binds the kernels to that task's devices and state; steps run
    here, every partition sharing the step's rendezvous. Closing the session leaves the
    tasks' state alone: it belongs to their servers.
    """

    def __init__(self, config, owner, task_workers: dict, devices: DeviceSet, cluster=None):
        super().__init__(config, owner, devices=devices)
        self._task_workers = task_workers
        self._network_key = network_key(cluster) if cluster is not None else None
        self._task_of_device: dict = {}  # device name -> (task name, its worker)
        self._registered: list = []  # (task worker, handle): deregistered when the session ends
        # Partition -> the tasks whose variables it changes (admitted through their gates).
        self._writes: dict = {}
        self._target_task = next(iter(task_workers))

    def _check_tasks(self, parts) -> None:
        """A step may run only while every task it uses serves: a stopped (or restarted)
        task's devices and state are gone, so the step fails naming it."""
        for part in parts:
            if not part.device:
                continue
            found = self._task_of_device.get(part.device)
            if found is None:  # parsed once per device: this runs every step
                d = DeviceSpec.from_string(part.device)
                task = task_name(d.job, d.task)
                found = self._task_of_device[part.device] = (task, self._task_workers[task])
            if found[1].closed:
                raise errors.UnavailableError(
                    None, None, f"Task {found[0]} is unavailable: its server stopped (a "
                    "restarted task starts empty; create a new session to use it)")

    def run_partition(self, part, feed_values, step_id, timeout=None, observer=None):
        self._check_tasks([part])
        with self._admitted([part], timeout):
            return super().run_partition(part, feed_values, step_id, timeout, observer)

    def run_step(self, parts, feed_values, step_id, timeout=None, observer=None, main=0):
        self._check_tasks(parts)
        with self._admitted(parts, timeout):
            group, execs = super().run_step(parts, feed_values, step_id, timeout, observer,
                                            main)
        transfers = getattr(group.rendezvous, "transfers", None)
        if transfers and observer is not None and hasattr(observer, "add_transfers"):
            observer.add_transfers(transfers)
        return group, execs

    def create_rendezvous(self, step_id: int, traced: bool = False):
        """The plain rendezvous, unless tensors crossing tasks must be recorded (a traced
        step) or pay for a simulated link (``dflab.distributed.simulate_network``)."""
        network = network_at(self._network_key)
        if network is None and not traced:
            return super().create_rendezvous(step_id)
        return ClusterRendezvous(step_id, self._copy, network)

    def register_partition(self, spec, origins=None):
        writes = writing_tasks(spec, self._target_task)
        if not spec.device:  # one partition over several devices: kernels bound per node here
            part = super().register_partition(spec, origins)
        else:
            d = DeviceSpec.from_string(spec.device)
            worker = self._task_workers[task_name(d.job, d.task)]
            part = worker.register_partition(spec, origins)
            self._registered.append((worker, part.handle))
        if writes:
            self._writes[part] = writes
        return part

    # --- consistent checkpoints (dflab.distributed.task_gate) -------------------------------
    def _holder(self) -> str:
        return f"{id(self)}/{threading.get_ident()}"

    def _gate(self, task: str):
        worker = self._task_workers.get(task)
        if worker is None:
            raise errors.UnavailableError(None, None, f"Task {task} is not running")
        return gate_of(worker, task)

    @contextlib.contextmanager
    def _admitted(self, parts, timeout):
        """Held around a step: admitted by the gate of every task whose variables it changes."""
        tasks = set()
        for part in parts:
            tasks |= self._writes.get(part, frozenset())
        if not tasks:
            yield
            return
        counted = admit_local([self._gate(t) for t in sorted(tasks)], self._holder(), timeout)
        try:
            yield
        finally:
            for gate in counted:
                gate.exit()

    @contextlib.contextmanager
    def consistent_snapshot(self, devices, timeout: float | None = None):
        """Held around a save or restore of variables on ``devices``: the gates of their tasks
        closed, in task order, once every step admitted there has finished."""
        holder, closed = self._holder(), []
        try:
            for task in tasks_of_devices(devices, self._target_task, self.devices):
                gate = self._gate(task)
                gate.close(holder, timeout)
                closed.append(gate)
            yield
        finally:
            for gate in reversed(closed):
                gate.open(holder)

    def close(self) -> None:
        for worker, handle in self._registered:
            worker.deregister_partition(handle)
        self._registered.clear()
        super().close()


def _session_worker(target: str, config, session) -> ClusterWorker:
    address = target[len(TARGET_PREFIX):]
    with _servers_lock:
        server = _servers.get(address)
        if server is None:
            raise errors.UnavailableError(
                None, None, f"No server is running at {address} in this process: start a "
                f"tf.train.Server for that task first")
        tasks = _cluster_of(server)
        workers = {s._task: s._worker for s in tasks}
    filters = [DeviceSpec.from_string(f) for f in config.device_filters]
    devices = [d for w in workers.values() for d in w.devices
               if not filters or any(spec_matches(f, d.spec) for f in filters)]
    if not devices:
        raise errors.InvalidArgumentError(
            None, None, f"No device of the cluster matches device_filters "
            f"{config.device_filters}")
    return ClusterWorker(config, session, workers, DeviceSet(devices), server._cluster)


def _cluster_of(server: Server) -> list:
    """The started servers of ``server``'s cluster, ``server`` first."""
    return [server] + [s for s in _servers.values()
                       if s is not server and s._cluster == server._cluster]


def _reset(target: str, containers) -> None:
    """``Session.reset`` on a cluster target: clear the state every started task holds."""
    with _servers_lock:
        server = _servers.get(target[len(TARGET_PREFIX):])
        tasks = _cluster_of(server) if server is not None else []
    for s in tasks:
        s._worker.devices.close()


def _ray_session_worker(target: str, config, session):
    from dflab.distributed import ray_transport  # Ray is imported only when a cluster uses it

    return ray_transport.session_worker(target, config, session)


def _ray_reset(target: str, containers) -> None:
    from dflab.distributed import ray_transport

    ray_transport.reset(target, containers)


register_session_target(TARGET_PREFIX, _session_worker, _reset)
register_session_target(RAY_TARGET_PREFIX, _ray_session_worker, _ray_reset)
