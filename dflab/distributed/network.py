"""Simulated links between the tasks of an in-process cluster, so that lessons show what the
network costs: every tensor crossing from one task to another waits for its link.

A link is one direction between two tasks, modelled store-and-forward: a tensor occupies the
link for ``bytes / bandwidth`` seconds (tensors on one link queue behind each other, as on a
real wire), then arrives ``latency`` seconds later. The sender never waits (its ``_Send``
completes at once, as TF's); the receiver's ``_Recv`` completes when the tensor arrives.
Nothing is simulated unless ``simulate_network`` is called; the Ray transport's links are the
real network.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from dataclasses import dataclass

from dflab.distributed.cluster import ClusterSpec
from dflab.framework.device_spec import DeviceSpec


@dataclass(frozen=True)
class Link:
    """One direction's cost: ``latency_s`` per tensor, ``bandwidth_bytes_per_s`` (None:
    unlimited)."""

    latency_s: float = 0.0
    bandwidth_bytes_per_s: float | None = None

    def __post_init__(self):
        if self.latency_s < 0:
            raise ValueError(f"latency_s must be >= 0, got {self.latency_s}")
        if self.bandwidth_bytes_per_s is not None and self.bandwidth_bytes_per_s <= 0:
            raise ValueError(f"bandwidth_bytes_per_s must be > 0, got "
                             f"{self.bandwidth_bytes_per_s}")

    def wire_time(self, nbytes: int) -> float:
        bw = self.bandwidth_bytes_per_s
        return 0.0 if bw is None else nbytes / bw


class Network:
    """The simulated links of one cluster: a default link and per task pair overrides."""

    def __init__(self):
        self.default: Link | None = None
        self.pairs: dict[tuple[str, str], Link] = {}
        self._busy_until: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def link(self, src_task: str, dst_task: str) -> Link | None:
        return self.pairs.get((src_task, dst_task), self.default)

    def schedule(self, src_task: str, dst_task: str, nbytes: int, now: float) -> float | None:
        """When a tensor of ``nbytes`` sent at ``now`` arrives (None: no link simulated)."""
        link = self.link(src_task, dst_task)
        if link is None:
            return None
        with self._lock:
            start = max(now, self._busy_until.get((src_task, dst_task), now))
            free = start + link.wire_time(nbytes)
            self._busy_until[(src_task, dst_task)] = free
        return free + link.latency_s


_networks: dict[tuple, Network] = {}
_networks_lock = threading.Lock()


def network_key(cluster) -> tuple:
    """What identifies ``cluster``'s network (its tasks and addresses)."""
    return _key(cluster)


def network_at(key: tuple) -> Network | None:
    """The simulated network of the cluster ``network_key`` named (a dict read: sessions ask
    every step)."""
    return _networks.get(key)


def _key(cluster) -> tuple:
    spec = ClusterSpec(cluster.cluster_spec if hasattr(cluster, "cluster_spec") else cluster)
    return tuple(sorted(spec.tasks()))


def _task(name: str) -> str:
    d = DeviceSpec.from_string(name)
    if d.job is None or d.task is None:
        raise ValueError(f"Name a task as /job:<name>/task:<index>, not {name!r}")
    return f"/job:{d.job}/replica:0/task:{d.task}"


def simulate_network(cluster, latency_s: float = 0.0,
                     bandwidth_bytes_per_s: float | None = None, between=None) -> None:
    """Make tensors crossing tasks of ``cluster`` (a ``ClusterSpec``, its dict, or a
    ``Server``) pay a link's cost. ``between``: a pair of tasks (``("/job:ps/task:0",
    "/job:worker/task:1")``, both directions) for that pair only; else every pair."""
    link = Link(float(latency_s), bandwidth_bytes_per_s)
    # Checked before the network is made: a refused call leaves the cluster's links as they
    # were (an empty network would still be asked about every tensor).
    pair = None if between is None else tuple(_task(t) for t in between)
    with _networks_lock:
        net = _networks.setdefault(_key(cluster), Network())
    if pair is None:
        net.default = link
        return
    a, b = pair
    net.pairs[(a, b)] = net.pairs[(b, a)] = link


def clear_network(cluster) -> None:
    """Tensors cross ``cluster``'s tasks for free again."""
    with _networks_lock:
        _networks.pop(_key(cluster), None)


def network_of(cluster) -> Network | None:
    with _networks_lock:
        return _networks.get(_key(cluster))


class DelayLine:
    """One daemon thread calling functions at given times (``time.monotonic`` seconds)."""

    def __init__(self):
        self._heap: list = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._thread = None

    def call_at(self, when: float, fn, *args) -> None:
        with self._cond:
            heapq.heappush(self._heap, (when, next(self._order), fn, args))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dflab-links",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    wait = None if not self._heap else self._heap[0][0] - time.monotonic()
                    self._cond.wait(wait)
                _, _, fn, args = heapq.heappop(self._heap)
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - an aborted step refuses late tensors
                pass


delay_line = DelayLine()
