"""Starting a cluster's tasks as Ray actors.

Two ways, as in TF: ``tf.train.Server(cluster, job_name=…, task_index=…, protocol="ray")`` in
one OS process per task (``start_task``; ``RAY_ADDRESS`` or an earlier ``ray.init`` says which
Ray cluster), and ``launch(main, cluster={"ps": 1, "worker": 2})``, which starts every task as
an actor and runs ``main(task)`` on each worker task (between-graph replication).
"""

from __future__ import annotations

import sys
import uuid

import ray
from ray.exceptions import GetTimeoutError, RayTaskError

from dflab.distributed.cluster import ClusterSpec
from dflab.distributed.names import task_name
from dflab.distributed.ray.actor import TaskActor
from dflab.distributed.ray.client import TASK_GONE, ensure_ray
from dflab.distributed.ray.placement import Placement, TaskPlacements, server_options
from dflab.distributed.ray.targets import actor_name, target_of
from dflab.distributed.wire import error_from_info
from dflab.framework import errors

# How long a silent actor may take to answer a ping before it counts as gone.
PING_TIMEOUT_S = 5.0

_ACTOR_CLASS = None


def _actor_class():
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        _ACTOR_CLASS = ray.remote(TaskActor)
    return _ACTOR_CLASS


def alive(actor, timeout: float = PING_TIMEOUT_S) -> bool:
    """False once the actor is dead; a busy or still-starting actor counts as alive."""
    try:
        ray.get(actor.ping.remote(), timeout=timeout)
    except GetTimeoutError:
        return True
    except TASK_GONE:
        return False
    return True


def kill(actor) -> None:
    ray.kill(actor)


def start_task(cluster: ClusterSpec, job: str, index: int, namespace: str, config=None,
               max_restarts: int = 0, actor_options: dict | None = None):
    """Start the actor of one task (its process starts in the background: the first call to
    it waits for it); UnknownError if a live actor already serves the task. Where it runs and
    what it asks for: ``actor_options`` (``launch``'s placement), else the config's
    ``ray_task`` option, else the node its address names, else this process's node
    (``dflab.distributed.ray.placement``)."""
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
    if actor_options is None:
        task_options = config.dflab.ray_task if config is not None else {}
        actor_options = server_options(cluster.task_address(job, index), task_options,
                                       restartable=max_restarts != 0)
    options = {"name": name, "namespace": namespace, "max_restarts": max_restarts,
               "max_task_retries": 0, **actor_options}
    return _actor_class().options(**options).remote(cluster.as_dict(), job, index, namespace,
                                                    config)


def launch(main, cluster: dict, *, namespace: str | None = None, config=None,
           max_restarts: int = 0, placement: Placement | str | None = None,
           resources: dict | None = None, pins: dict | None = None,
           timeout: float | None = None, client_job: str = "worker") -> list:
    """Start a cluster's tasks as Ray actors and run ``main(task)`` on every task of
    ``client_job`` (each its own client, as between-graph replication has it); returns their
    results in task order and stops the tasks.

    ``cluster``: job -> number of tasks (``{"ps": 1, "worker": 2}``), or any form
    ``ClusterSpec`` takes. ``task`` is a ``TaskContext``: ``job_name``, ``task_index``,
    ``target`` (for ``tf.Session``), ``cluster_spec``, ``node`` (where it runs). ``namespace``:
    the Ray namespace of the tasks' actors (a fresh one by default, so that launches never
    meet). Where tasks run (``dflab.distributed.ray.placement``): ``placement`` (a policy —
    "spread", the default, "strict_spread", "pack", "strict_pack", "here" — or a
    ``Placement``), ``pins`` (task or job -> node id, node name or labels) and ``resources``
    (job -> num_cpus, num_gpus, memory, custom resources); a task whose ClusterSpec address
    names a Ray node runs there."""
    spec = _cluster_of_counts(cluster)
    if client_job not in spec.jobs:
        raise ValueError(f"The cluster has no {client_job!r} job to run clients on: jobs are "
                         f"{spec.jobs}")
    namespace = namespace or f"dflab-{uuid.uuid4().hex[:8]}"
    ensure_ray()
    _ship_by_value(main)
    if not isinstance(placement, Placement):
        placement = Placement(placement or "spread", dict(pins or {}), dict(resources or {}))
    places = TaskPlacements(spec, placement, restartable=max_restarts != 0)
    actors = {}
    try:
        for job in spec.jobs:
            for index in spec.task_indices(job):
                actors[(job, index)] = start_task(spec, job, index, namespace, config,
                                                  max_restarts, places.options[(job, index)])
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
                error = error_from_info(info)
                error.message = f"In the client of {task_name(client_job, index)}: " \
                                f"{error.message}"
                raise type(error)(None, None, error.message)
        return [result for result, _ in outcomes]
    finally:
        for actor in actors.values():
            ray.kill(actor)
        places.release()


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
