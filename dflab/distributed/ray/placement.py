"""Where a cluster's task actors run on a Ray cluster, and what each asks of it.

A task goes, in this order of precedence:

1. where it is **pinned**: a Ray node (its id or its name) or node labels
   (``{"zone": "b"}``, Ray's label selector);
2. where its **ClusterSpec address** says: the task's host resolved to a Ray node by node name,
   node id, IP address or host name (several nodes on one address take the tasks in turn);
3. by the **policy**: ``"spread"`` / ``"strict_spread"`` (a Ray placement group with one bundle
   per task, over as many nodes as there are, or on distinct nodes or not at all), ``"pack"`` /
   ``"strict_pack"`` (together), ``"here"`` (the node of the starting process, where a
   ``tf.train.Server`` runs in TF).

Each job's **resources** (``{"worker": {"num_gpus": 1}, "ps": {"num_cpus": 2}}``: num_cpus,
num_gpus, memory, custom resources) are its actors' Ray resources; a task given GPUs sees them as
its ``/gpu:0``, ``/gpu:1`` … (Ray sets ``CUDA_VISIBLE_DEVICES`` in its process). Tasks ask for no
CPU unless told to: a task's threads are its own business, and a task waiting for steps must not
hold a slot that another task needs to start.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ray
from ray.util import placement_group, remove_placement_group
from ray.util.scheduling_strategies import (
    NodeAffinitySchedulingStrategy,
    PlacementGroupSchedulingStrategy,
)

from dflab.distributed.cluster import ClusterSpec
from dflab.distributed.names import task_name

POLICIES = ("spread", "strict_spread", "pack", "strict_pack", "here")
RESOURCE_KEYS = ("num_cpus", "num_gpus", "memory", "resources")
# A placement group's bundles must ask for something: a task that asks for no CPU reserves this
# sliver of one on its node, which keeps the bundle's place without taking a slot.
BUNDLE_CPU = 0.001
PLACEMENT_TIMEOUT_S = 120.0
NODE_ID_LABEL = "ray.io/node-id"  # the label Ray gives every node


@dataclass
class Placement:
    """How ``launch`` places a cluster's tasks (see the module docstring). ``pins``: a task
    (``"/job:ps/task:0"``, ``"ps:0"``) or a whole job (``"ps"``) -> a node id or name, or a
    dict of labels; ``resources``: job -> Ray resources; ``policy``: for tasks that neither a
    pin nor their address places (default ``"spread"``)."""

    policy: str = "spread"
    pins: dict = field(default_factory=dict)
    resources: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.policy not in POLICIES:
            raise ValueError(f"Unknown placement policy {self.policy!r}: one of {POLICIES}")
        for job, res in self.resources.items():
            unknown = sorted(set(res) - set(RESOURCE_KEYS))
            if unknown:
                raise ValueError(f"Unknown resources {unknown} for job {job!r}: the keys are "
                                 f"{RESOURCE_KEYS}")


def nodes() -> list[dict]:
    """The alive nodes of the Ray cluster: id, name, address, labels."""
    out = []
    for n in ray.nodes():
        if n.get("Alive", True):
            out.append({"id": n["NodeID"], "name": n.get("NodeName") or "",
                        "address": n.get("NodeManagerAddress") or "",
                        "hostname": n.get("NodeManagerHostname") or "",
                        "labels": dict(n.get("Labels") or {})})
    return out


class _Resolver:
    """Host names and node names to Ray node ids; several nodes on one address in turn."""

    def __init__(self, alive: list[dict]):
        self._alive = alive
        self._turn: dict = {}

    def node(self, host: str) -> str | None:
        for key in ("name", "id"):
            for n in self._alive:
                if n[key] and n[key] == host:
                    return n["id"]
        same = [n["id"] for n in self._alive if host in (n["address"], n["hostname"])
                or (host in ("localhost", "127.0.0.1") and n["id"] == _here())]
        if not same:
            return None
        k = self._turn.get(host, 0)
        self._turn[host] = k + 1
        return same[k % len(same)]


def _here() -> str:
    return ray.get_runtime_context().get_node_id()


def _pin_of(pins: dict, job: str, index: int):
    for key in (task_name(job, index), f"/job:{job}/task:{index}", f"{job}:{index}", job):
        if key in pins:
            return pins[key]
    return None


def actor_resources(res: dict) -> dict:
    """Ray actor options for a task's resources (no CPU unless asked)."""
    out = {"num_cpus": res.get("num_cpus", 0)}
    for key in ("num_gpus", "memory", "resources"):
        if res.get(key):
            out[key] = res[key]
    return out


def _bundle(res: dict) -> dict:
    bundle = {"CPU": res.get("num_cpus") or BUNDLE_CPU}
    if res.get("num_gpus"):
        bundle["GPU"] = res["num_gpus"]
    if res.get("memory"):
        bundle["memory"] = res["memory"]
    bundle.update(res.get("resources") or {})
    return bundle


def pinned(pin, resolver: _Resolver, what: str) -> dict:
    """Scheduling options for a pin: a node id or name, or a dict of labels."""
    if isinstance(pin, dict):
        return {"label_selector": {str(k): str(v) for k, v in pin.items()}}
    node = resolver.node(str(pin))
    if node is None:
        raise ValueError(f"{what} is pinned to {pin!r}, which is no node of the Ray cluster: "
                         f"its nodes are {[n['name'] or n['id'] for n in nodes()]}")
    return on_node(node)


class TaskPlacements:
    """The actor options of every task of a cluster; ``release()`` frees the placement group
    the policy made, if any."""

    def __init__(self, spec: ClusterSpec, placement: Placement, restartable: bool = False):
        resolver = _Resolver(nodes())
        self.options: dict = {}
        self.group = None
        unplaced = []
        for job, index, address in spec.tasks():
            res = placement.resources.get(job, {})
            opts = actor_resources(res)
            pin = _pin_of(placement.pins, job, index)
            if pin is not None:
                opts.update(pinned(pin, resolver, task_name(job, index)))
            else:
                node = resolver.node(address.rsplit(":", 1)[0])
                if node is not None:  # the ClusterSpec names the task's host
                    opts.update(on_node(node, prefer_only=restartable))
                else:
                    unplaced.append((job, index, res))
            self.options[(job, index)] = opts
        if unplaced:
            self._apply_policy(placement.policy, unplaced)

    def _apply_policy(self, policy: str, tasks: list) -> None:
        if policy == "here":
            for job, index, _ in tasks:
                self.options[(job, index)].update(on_node(_here(), prefer_only=True))
            return
        self.group = placement_group([_bundle(res) for _, _, res in tasks],
                                     strategy=policy.upper())
        try:
            ray.get(self.group.ready(), timeout=PLACEMENT_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 - Ray's timeout and scheduling errors
            self.release()
            raise RuntimeError(
                f"Ray could not place the {len(tasks)} tasks {policy.upper()} within "
                f"{PLACEMENT_TIMEOUT_S:.0f} s ({type(e).__name__}): the cluster has "
                f"{len(nodes())} alive nodes") from None
        for k, (job, index, _) in enumerate(tasks):
            self.options[(job, index)]["scheduling_strategy"] = \
                PlacementGroupSchedulingStrategy(self.group, placement_group_bundle_index=k)

    def release(self) -> None:
        if self.group is not None:
            group, self.group = self.group, None
            remove_placement_group(group)


def server_options(address: str, task_options: dict, restartable: bool = False) -> dict:
    """Actor options of one ``tf.train.Server(..., protocol="ray")`` task: its
    ``DflabOptions.ray_task`` (resources, a node or labels), else the node its address names
    (preferred only, when the task may be restarted elsewhere), else the node of the process
    starting it (where a TF server runs)."""
    resolver = _Resolver(nodes())
    opts = actor_resources(task_options)
    if task_options.get("node") is not None or task_options.get("labels"):
        pin = task_options.get("labels") or task_options["node"]
        return {**opts, **pinned(pin, resolver, "this task")}
    node = resolver.node(address.rsplit(":", 1)[0]) if address else None
    return {**opts, **on_node(node or _here(), prefer_only=node is None or restartable)}


def on_node(node: str, prefer_only: bool = False) -> dict:
    """Scheduling options that put an actor on ``node``; ``prefer_only``: elsewhere when that
    node is gone, so that Ray can restart a restartable task on another node. (By the node's
    id label with a fallback: Ray's soft node affinity may place an actor that asks for no
    resources on another node although its own is alive.)"""
    if not prefer_only:
        return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}
    return {"label_selector": {NODE_ID_LABEL: node}, "fallback_strategy": [{"label_selector": {}}]}


def host_of(info: dict) -> str:
    """A task's host as errors name it: its node's name, else its address."""
    return info.get("node_name") or info.get("node_address") or info.get("node", "")[:12]
