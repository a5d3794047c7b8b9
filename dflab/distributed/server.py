"""``tf.train.Server``: one task of a cluster, and ``describe_cluster``.

A server owns its task's devices, named by the task (``/job:ps/replica:0/task:0/device:CPU:0``),
and the state on them: variables, queues and random streams live in the devices' resource
managers, so they outlive client sessions and every session on the cluster shares them (what
between-graph replication relies on). A session created with ``server.target`` is the master
(``dflab.runtime.master``): it places the graph across the devices of every started task of the
cluster, registers each partition with its task, and runs a step's partitions concurrently
(``dflab.distributed.cluster_worker``).

Two transports serve a task (docs/distributed.md): in this process (protocol "grpc", the
default: ``dflab.distributed.local``), or as a Ray actor (protocol "ray":
``dflab.distributed.ray``). ``stop()`` (a dflab addition: TF 1.x servers only end with their
process) frees the task's address and drops its state.
"""

from __future__ import annotations

import itertools
import os
import threading
import time

from dflab.distributed import local
from dflab.distributed.cluster import ClusterDef, ClusterSpec
from dflab.distributed.names import task_name
from dflab.distributed.ray.targets import TARGET_PREFIX as RAY_TARGET_PREFIX
from dflab.distributed.ray.targets import target_of
from dflab.framework import errors
from dflab.runtime.config import ConfigProto
from dflab.runtime.session import register_session_target
from dflab.runtime.worker import Worker

RAY_PROTOCOL = "ray"
TARGET_PREFIX = local.TARGET_PREFIX

_local_ports = itertools.count(20000)


class Server:
    """A server for one task of a cluster (TF's ``tf.train.Server``): in this process, or,
    with ``protocol="ray"``, a Ray actor whose Ray namespace is
    ``ConfigProto(dflab={"ray_namespace": …})``, else ``$DFLAB_RAY_NAMESPACE``, else "dflab"."""

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
                            "to addresses or a ClusterDef, not "
                            f"{type(server_or_cluster_def).__name__}")
        job_name = _job_of(cluster, job_name)
        task_index = _task_of(cluster, job_name, task_index)
        self._cluster = cluster
        self._job = job_name
        self._index = task_index
        self._task_name = task_name(job_name, task_index)
        self._address = cluster.task_address(job_name, task_index)
        self._config = config if config is not None else ConfigProto()
        self._protocol = protocol or "grpc"
        self._namespace = (self._config.dflab.ray_namespace
                           or os.environ.get("DFLAB_RAY_NAMESPACE") or "dflab")
        self._task = None  # the running Task (in-process)
        self._actor = None  # the task's Ray actor (protocol "ray")
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        if start:
            self.start()

    # --- TF's API ------------------------------------------------------------------------------
    @property
    def target(self) -> str:
        """What ``tf.Session(target)`` takes to run on this server's cluster."""
        if self._protocol == RAY_PROTOCOL:
            return target_of(self._namespace, self._job, self._index)
        return TARGET_PREFIX + self._address

    @property
    def server_def(self) -> dict:
        return {"cluster": self._cluster.as_cluster_def(), "job_name": self._job,
                "task_index": self._index, "protocol": self._protocol}

    def start(self) -> None:
        """Start serving at the task's address (a no-op when already started)."""
        with self._lock:
            if self._task is not None or self._actor is not None:
                return
            if self._protocol == RAY_PROTOCOL:
                from dflab.distributed.ray import launcher  # Ray is imported only when used

                self._actor = launcher.start_task(self._cluster, self._job, self._index,
                                                  self._namespace, self._config)
            else:
                self._task = local.start_task(self._cluster, self._job, self._index,
                                              self._config)
            self._stopped.clear()

    def join(self, timeout: float | None = None) -> bool:
        """Block until the server stops (``timeout`` seconds at most: returns False then); a
        Ray task also ends when its actor dies."""
        if self._actor is None:
            return self._stopped.wait(timeout)
        from dflab.distributed.ray import launcher

        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._stopped.is_set():
            if not launcher.alive(self._actor):
                self._stopped.set()
                break
            left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if left <= 0:
                return False
            self._stopped.wait(left)
        return True

    @staticmethod
    def create_local_server(config: ConfigProto | None = None, start: bool = True) -> Server:
        """A single-task server on this machine, at an address no started server uses."""
        address = local.free_address(f"localhost:{p}" for p in _local_ports)
        return Server({"localhost": [address]}, job_name="localhost", task_index=0,
                      config=config, start=start)

    # --- dflab ---------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop serving: free the address and drop the task's state (variables, queues…)."""
        with self._lock:
            task, self._task = self._task, None
            actor, self._actor = self._actor, None
        if actor is not None:
            from dflab.distributed.ray import launcher

            launcher.kill(actor)
        if task is not None:
            local.stop_task(self._address, task)
        self._stopped.set()

    @property
    def task(self) -> str:
        return self._task_name

    @property
    def protocol(self) -> str:
        return self._protocol

    @property
    def running(self) -> bool:
        return self._task is not None or self._actor is not None

    @property
    def cluster_spec(self) -> ClusterSpec:
        return self._cluster

    @property
    def worker(self) -> Worker:
        """The task's worker (an in-process server's devices and state)."""
        if self._task is None:
            raise errors.UnavailableError(None, None,
                                          f"Server for {self._task_name} is not running")
        return self._task.worker

    def __repr__(self):
        state = "running" if self.running else "stopped"
        return f"<Server {self._task_name} at {self._address} ({state})>"


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
    ``index``, ``address``, ``transport``, ``running``, ``node`` (the Ray node a task runs on;
    "" in-process) and ``gpu_ids`` (the GPUs Ray gave it), and for a running task its
    ``devices`` (name, device_type, description) and ``variables`` (name, device, shape, dtype,
    bytes).
    """
    if isinstance(where, Server):
        if where.protocol != RAY_PROTOCOL:
            return local.describe(where.cluster_spec)
        where = where.target
    target = getattr(where, "sess_str", where)
    if isinstance(target, str) and target.startswith(RAY_TARGET_PREFIX):
        from dflab.distributed.ray import client

        return client.describe(target)
    if isinstance(target, str) and target.startswith(TARGET_PREFIX):
        return local.describe(local.cluster_at(target[len(TARGET_PREFIX):]))
    raise errors.InvalidArgumentError(
        None, None, f"Not a cluster: {where!r} (give a tf.train.Server, a session on a "
        "cluster target, or its target)")


def _ray_session_worker(target: str, config, session):
    from dflab.distributed.ray import client  # Ray is imported only when a cluster uses it

    return client.session_worker(target, config, session)


def _ray_reset(target: str, containers) -> None:
    from dflab.distributed.ray import client

    client.reset(target, containers)


register_session_target(RAY_TARGET_PREFIX, _ray_session_worker, _ray_reset)
