"""The actor of one task on a Ray cluster: a ``Task`` behind actor methods (TF's worker
service: ``RegisterGraph``, ``RunGraph``, ``RecvTensor``, ``AbortStep``, ``CleanupGraph``).

It is an asyncio actor. Work that computes or waits on a lock (a step, registering a
partition, closing a step gate) runs on threads of the actor's own pool; a peer's pull of a
tensor (``recv_tensor``) is a coroutine waiting for the tensor to be sent, so pulls in flight
hold no thread. Arguments and answers are plain data (``dflab.distributed.wire``).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import ray

from dflab.distributed.cluster import ClusterSpec
from dflab.distributed.names import task_name
from dflab.distributed.ray.placement import host_of
from dflab.distributed.ray.targets import actor_name
from dflab.distributed.stub import StepRequest
from dflab.distributed.task import Task
from dflab.distributed.wire import device_info, error_from_info, error_info, unavailable
from dflab.framework import errors
from dflab.framework.device_spec import DeviceSpec
from dflab.framework.rendezvous import parse_key

# Threads of one task's actor for steps and other work that computes or waits (pulls need
# none): steps of several clients run at once on one task.
ACTOR_THREADS = 64
PEER_INFO_TIMEOUT_S = 30.0


class TaskActor:
    """The actor of one task (made remote by ``dflab.distributed.ray.launcher``)."""

    def __init__(self, cluster_def: dict, job: str, index: int, namespace: str, config=None):
        from dflab.kernels.control_flow_kernels import DEAD
        from dflab.runtime.config import ConfigProto

        self.cluster = ClusterSpec(cluster_def)
        self.namespace = namespace
        self.gpu_ids = [str(g) for g in ray.get_gpu_ids()]
        config = _with_ray_gpus(config if config is not None else ConfigProto(), self.gpu_ids)
        self.task = Task(job, index, config, self._pull)
        self._threads = ThreadPoolExecutor(ACTOR_THREADS, thread_name_prefix="dflab-task")
        self._peers: dict = {}
        self._peer_where: dict = {}  # peer task -> how errors name it (with its node)
        self._dead = DEAD
        self._finished: set = set()

    async def _blocking(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._threads, fn, *args)

    # --- what clients ask ----------------------------------------------------------------------
    async def info(self) -> dict:
        node = ray.get_runtime_context().get_node_id()
        here = next((n for n in ray.nodes() if n["NodeID"] == node), {})
        return {"task": self.task.name, "incarnation": self.task.incarnation,
                "cluster": self.cluster.as_dict(), "pid": os.getpid(), "node": node,
                "node_name": here.get("NodeName", ""),
                "node_address": here.get("NodeManagerAddress", ""),
                "gpu_ids": self.gpu_ids,
                "devices": [device_info(d) for d in self.task.worker.devices]}

    async def ping(self) -> int:
        return self.task.incarnation

    async def register_partition(self, spec_json: dict, incarnation: int) -> int:
        self.task.check_incarnation(incarnation)
        return await self._blocking(self.task.worker.register_partition_json, spec_json)

    async def deregister_partitions(self, handles) -> None:
        for h in handles:
            self.task.worker.deregister_partition(h)

    async def run_step(self, request: dict, incarnation: int, finished=()):
        """This task's share of one step (a ``StepRequest`` as a dict): ``(fetched values per
        partition or None, error info or None, device step stats or None, transfers,
        progress)``. ``finished``: earlier steps whose rendezvous can go."""
        for old in finished:
            self.task.drop_rendezvous(old)
        try:
            self.task.check_incarnation(incarnation)
        except errors.OpError as e:
            return None, error_info(e), None, [], []
        return await self._blocking(self._run_step, StepRequest(**request))

    def _run_step(self, request: StepRequest):
        tracer = None
        if request.trace:
            from dflab.runtime.tracing import StepTracer

            tracer = StepTracer()
        outcome = self.task.run_step(request, tracer)
        stats = _device_stats(tracer) if tracer is not None else None
        if outcome.error is not None:
            return None, error_info(outcome.error), stats, outcome.transfers, outcome.progress
        values = [[None if v is self._dead else v for v in vals] for vals in outcome.values]
        return values, None, stats, outcome.transfers, outcome.progress

    async def recv_tensor(self, step_id: int, key: str, timeout: float):
        """A peer's pull of a tensor this task sent (or will send) in step ``step_id``:
        ``(value in host memory, dead, error info or None)``."""
        loop = asyncio.get_running_loop()
        arrived = loop.create_future()

        def done(value, error):
            loop.call_soon_threadsafe(_settle, arrived, (value, error))

        self.task.serve_pull(step_id, key, done)
        try:
            value, error = await asyncio.wait_for(arrived, timeout)
        except asyncio.TimeoutError:
            error = errors.DeadlineExceededError(
                None, None, f"{self.task.name} waited {timeout:.1f} s for tensor {key} to be "
                "sent")
            self.task.rendezvous(step_id).abort(error)
            return None, False, error_info(error)
        if error is not None:
            return None, False, error_info(error)
        if value is self._dead:
            return None, True, None
        device = self.task.worker.devices[parse_key(key).src_device]
        return device.to_host(value), False, None

    async def abort_step(self, step_id: int, message: str) -> None:
        self.task.abort_step(step_id, errors.CancelledError(None, None, message))

    async def cleanup_step(self, step_id: int) -> None:
        self.task.drop_rendezvous(step_id)

    # --- the step gate -------------------------------------------------------------------------
    async def gate_try_enter(self, holder: str, incarnation: int):
        self.task.check_incarnation(incarnation)
        return self.task.gate.try_enter(holder)

    async def gate_exit(self) -> None:
        self.task.gate.exit()

    async def gate_wait_open(self, timeout) -> bool:
        return await self._blocking(self.task.gate.wait_open, timeout)

    async def gate_close(self, holder: str, timeout, incarnation: int):
        """Close the gate for ``holder`` once its steps drained: error info or None."""
        try:
            self.task.check_incarnation(incarnation)
            await self._blocking(self.task.gate.close, holder, timeout)
        except errors.OpError as e:
            return error_info(e)
        return None

    async def gate_open(self, holder: str) -> None:
        self.task.gate.open(holder)

    # --- state ---------------------------------------------------------------------------------
    async def reset(self, containers=()) -> None:
        self.task.worker.devices.clear_containers(containers)

    async def forget(self, op_names) -> None:
        self.task.worker.forget_resources(op_names)

    async def state_summary(self) -> dict:
        return self.task.worker.state_summary()

    async def run_client(self, fn, task_info: dict):
        """The launcher's client function for this task, run here (between-graph
        replication: each worker task runs its own client): ``(result, error info)``, as a TF
        error holds ops of this process's graph."""
        info = await self.info()
        task_info = {**task_info, "node": info["node_name"] or info["node"]}

        def run():
            try:
                return fn(TaskContext(**task_info)), None
            except errors.OpError as e:
                return None, error_info(e)

        return await self._blocking(run)

    # --- pulls from peers ----------------------------------------------------------------------
    def _pull(self, src_task: str, step_id: int, key: str, done) -> None:
        """The task's pull hook: ask ``src_task``'s actor for ``key``; ``done(value, error)``
        is called on a Ray thread when it arrives, on the receiving device."""
        try:
            peer = self._peer(src_task)
            ref = peer.recv_tensor.remote(step_id, key, self._pull_timeout())
        except Exception as e:  # noqa: BLE001 - the peer's actor is gone or unknown
            done(None, unavailable(self._peer_where.get(src_task, src_task), why(e)))
            return

        def finished(future):
            try:
                value, dead, info = future.result()
            except Exception as e:  # noqa: BLE001 - the peer died during the pull
                done(None, unavailable(self._peer_where.get(src_task, src_task), why(e)))
                return
            if info is not None:
                done(None, error_from_info(info))
            elif dead:
                done(self._dead, None)
            else:
                done(self.task.to_receiver(key, value), None)

        ref.future().add_done_callback(finished)

    def _pull_timeout(self) -> float:
        ms = self.task.config.operation_timeout_in_ms
        return ms / 1000.0 if ms else 24 * 3600.0

    def _peer(self, task: str):
        actor = self._peers.get(task)
        if actor is None:
            job, index = _job_and_index(task)
            actor = ray.get_actor(actor_name(job, index), namespace=self.namespace)
            # Where it runs, once, so that an error of a peer whose node went away names it.
            with contextlib.suppress(Exception):
                info = ray.get(actor.info.remote(), timeout=PEER_INFO_TIMEOUT_S)
                self._peer_where[task] = f"{task} (on {host_of(info)})"
            self._peers[task] = actor
        return actor


def _with_ray_gpus(config, gpu_ids: list):
    """The task's config, seeing the GPUs Ray gave its actor: CUDA sees only those (Ray sets
    ``CUDA_VISIBLE_DEVICES``), as ``/gpu:0``, ``/gpu:1``…; where no CUDA GPU is usable (Ray's
    logical GPUs on a machine without one), as many simulated GPUs, labelled so."""
    if not gpu_ids or "GPU" in config.dflab.simulated_devices:
        return config
    from dflab.runtime.gpu import cupy_gpu_count

    try:
        usable = cupy_gpu_count()
    except Exception:  # noqa: BLE001 - CuPy without a working CUDA: no usable GPU
        usable = 0
    if usable >= len(gpu_ids):
        return config
    config = copy.copy(config)
    config.dflab = dataclasses.replace(
        config.dflab, simulated_devices={**config.dflab.simulated_devices, "GPU": len(gpu_ids)})
    return config


def _settle(future, value) -> None:
    if not future.done():
        future.set_result(value)


def _job_and_index(task: str) -> tuple[str, int]:
    d = DeviceSpec.from_string(task)
    return d.job, d.task


def why(error: BaseException) -> str:
    """What a Ray failure says about the task, in a few words."""
    from ray.exceptions import ActorUnavailableError, RayActorError

    if isinstance(error, ActorUnavailableError):
        return "its actor is restarting (its state is lost)"
    if isinstance(error, RayActorError):
        return "its actor died"
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"


def _device_stats(tracer) -> list:
    from dflab.runtime.config import RunMetadata, RunOptions

    md = RunMetadata()
    tracer.fill(md, RunOptions(trace_level=RunOptions.FULL_TRACE))
    return list(md.step_stats.dev_stats)


@dataclass
class TaskContext:
    """What the launcher gives a client function: its task and the session target."""

    job_name: str
    task_index: int
    target: str
    cluster: dict
    namespace: str
    node: str = ""  # the name (else the id) of the Ray node the task runs on

    @property
    def cluster_spec(self) -> ClusterSpec:
        return ClusterSpec(self.cluster)

    @property
    def task(self) -> str:
        return task_name(self.job_name, self.task_index)
