"""``Master``: from a run signature to partitions registered with a worker (the paper's master).

For each signature (fetches, targets, fed tensors, the graph's plan epoch) the master builds a
``Plan`` once and caches it (TF's ``DirectSession::GetOrCreateExecutors``): prune the graph to
what the fetches need, cutting at fed tensors; order it (a cycle is an error naming its nodes);
place every op on a device (``runtime/placer.py``; stateful ops keep the device an earlier plan
gave them); if the plan spans devices, partition it into one subgraph per device joined by
``_Send``/``_Recv`` pairs (``runtime/partition.py``); fuse contractions with their bias and
activation (``runtime/remapper.py``) and elementwise groups (``runtime/fusion.py``) where the
device's policy or ``RewriterConfig.remapping`` asks for it. Each resulting
partition becomes plain data — a ``PartitionSpec`` of typed node defs — registered with the
worker that owns its device, which rebuilds it and binds kernels there.

The master holds no device state and runs nothing: the worker does (``runtime/worker.py``), and
the client session (``runtime/session.py``) turns feeds and fetches into a signature and values.
"""

from __future__ import annotations

import threading
import weakref

from dflab.framework import errors
from dflab.framework import ops as _ops
from dflab.framework.graph_io import GraphDef
from dflab.kernels.registry import has_kernel
from dflab.runtime import remapper
from dflab.runtime.config import RewriterConfig
from dflab.runtime.executor import to_client_value
from dflab.runtime.fusion import fuse_elementwise
from dflab.runtime.node import Node
from dflab.runtime.partition import partition, user_op
from dflab.runtime.placer import place
from dflab.runtime.plan_node import CONTROL_FLOW_OPS
from dflab.runtime.subgraph import prune, topological_order
from dflab.runtime.worker import PartitionSpec


class Plan:
    """A cached, placed, registered plan for one run signature.

    ``placement`` maps each user op to its ``Placement`` (``.device``, ``.reason``); ``ops`` are
    the pruned ops in topological order; ``specs`` the partitions as plain data and ``parts``
    the worker's registered partitions, one per device (one in all for a plan on one device or
    run unpartitioned); ``fetch_map`` says per fetch where its value comes from: (partition
    position, local fetch index), or (-1, k) for fed tensor k; ``main`` is the partition the
    calling thread runs.
    """

    def __init__(self, placement: dict, ops, specs, parts, fetch_map, main: int = 0,
                 partitioning=None, unpartitioned_reason: str | None = None, nodes=None):
        self.placement = placement
        self.ops = ops
        self.specs = list(specs)
        self.parts = list(parts)
        self.fetch_map = list(fetch_map)
        self.main_partition = main
        self.partitioning = partitioning
        self.unpartitioned_reason = unpartitioned_reason
        self._nodes = nodes  # a plan on one device: its nodes (fused ones included)
        self._changes_variables = None
        self.partitioned = len(self.parts) > 1  # fixed: a plan never changes once built

    @property
    def executor_plan(self):
        """The executor plan of a plan that runs as one partition in this process (None when
        partitioned)."""
        return None if self.partitioned else self.parts[0].executor_plan

    @property
    def partition_runs(self) -> list:
        return self.parts

    @property
    def partitions(self) -> dict:
        """Each device the plan runs on -> the nodes it runs there, ``_Send``/``_Recv`` and
        fused nodes included (for a plan run unpartitioned: each device -> the user's ops
        placed there). Read from the master's partitioning, wherever the partitions run."""
        if self.partitioning is not None:
            return {d: list(part.nodes) for d, part in self.partitioning.partitions.items()}
        if self._nodes is not None:
            return {self.specs[0].device: list(self._nodes)}
        out: dict = {}
        for op in self.ops:
            out.setdefault(self.placement[op].device, []).append(op)
        return out

    @property
    def changes_variables(self) -> bool:
        """Whether the step may change a variable (it has an op with a ref input: ``Assign*``,
        ``Scatter*``, the optimizers' ``Apply*``): such steps pass the step gate."""
        if self._changes_variables is None:
            self._changes_variables = any(op.op_def.writes_variables for op in self.ops)
        return self._changes_variables

    def fetched_values(self, part_values, feed_values) -> list:
        """The step's fetched values, in fetch order, from each partition's fetched values
        and the feeds (a fetched fed tensor is answered from the feed)."""
        return [to_client_value(feed_values[k]) if src < 0 else part_values[src][k]
                for src, k in self.fetch_map]

    def partition_graph_defs(self) -> list:
        """One ``GraphDef`` per partition (``_Send``/``_Recv`` included, every node with its
        device): TF's ``RunMetadata.partition_graphs``."""
        return [spec.graph_def for spec in self.specs]


class Master:
    """Builds, caches and registers the plans of one client session's graph."""

    def __init__(self, graph, config, worker):
        self.graph = graph
        self.config = config
        self.worker = worker
        self._plans: dict = {}
        self._plans_lock = threading.Lock()
        # Where plans put stateful ops (variables, queues…): later plans keep them there. Weak,
        # so an op a re-run notebook cell replaced (same name, new object) is placed afresh.
        self._stateful_placements: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @property
    def devices(self):
        return self.worker.devices

    def get_plan(self, fetch_tensors, targets, feed_tensors) -> Plan:
        key = (tuple(map(id, fetch_tensors)), tuple(map(id, targets)),
               tuple(map(id, feed_tensors)), self.graph.plan_epoch)
        plan = self._plans.get(key)
        if plan is None:
            with self._plans_lock:
                plan = self._plans.get(key)
                if plan is None:
                    plan = self.build_plan(fetch_tensors, targets, feed_tensors)
                    self._plans[key] = plan
        return plan

    def build_plan(self, fetch_tensors, targets, feed_tensors, partition: bool = True) -> Plan:
        """A new plan (not cached). ``partition=False``: one partition even across devices
        (partial runs step one execution)."""
        for t in fetch_tensors:
            if not self.graph.is_fetchable(t):
                raise ValueError(f"Operation {t.op.name!r} has been marked as not fetchable.")
        ops = prune(fetch_tensors, targets, feed_tensors)
        _ops.check_not_stale(self.graph, ops)  # ops whose inputs a re-run cell replaced
        ordered = topological_order(ops, feed_tensors)
        placement = place(ordered, self.devices, self.config, self._stateful_placements)
        for op, p in placement.items():
            if op.op_def is not None and op.op_def.stateful:
                self._stateful_placements.setdefault(op, p.device)
        used = {placement[op].device for op in ordered}
        reason = None
        if len(used) > 1:
            if not partition:
                reason = "partial runs execute unpartitioned"
            else:
                from dflab.runtime.partition import LoopNotPartitionableError

                cf = any(op.type in CONTROL_FLOW_OPS for op in ordered)
                try:
                    return self._partitioned_plan(ordered, placement, feed_tensors,
                                                  fetch_tensors, cf)
                except LoopNotPartitionableError as e:
                    reason = f"a while loop cannot be partitioned ({e}): the plan runs in one " \
                        "execution"
        device = next(iter(used)) if len(used) == 1 else ""
        nodes = list(ordered)
        if device:
            nodes = self._rewritten(nodes, device, list(fetch_tensors) + list(feed_tensors))
        in_plan = {id(op) for op in ordered}
        nodes = [_plan_node(n, placement[n].device if not isinstance(n, Node) else "", in_plan)
                 for n in nodes]
        keep = [t.op.name for t in list(fetch_tensors) + list(feed_tensors)]
        spec = PartitionSpec(device, GraphDef(self._grouped([n.to_node_def() for n in nodes],
                                                            device, keep)),
                             [t.name for t in feed_tensors], list(range(len(feed_tensors))),
                             [t.name for t in fetch_tensors])
        part = self._register(spec, ordered)
        fetch_map = [(0, k) for k in range(len(fetch_tensors))]
        return Plan(placement, ordered, [spec], [part], fetch_map,
                    unpartitioned_reason=reason, nodes=nodes if device else None)

    def fuses_on(self, device: str) -> bool:
        """Whether elementwise fusion runs on ``device``'s part of a plan (``RewriterConfig``:
        by default where the device's kernel type fuses, i.e. on real GPUs)."""
        mode = self.config.graph_options.rewrite_options.remapping
        if mode == RewriterConfig.DEFAULT:
            return self.devices[device].fuses_by_default
        return mode == RewriterConfig.ON

    def remapped_contractions(self, device: str) -> tuple:
        """The contractions the remapper fuses on ``device``'s part of a plan
        (``RewriterConfig.remapping``: by default on CPU devices whose kernels run on oneDNN,
        see ``dflab.runtime.remapper``); empty where it does not run."""
        mode = self.config.graph_options.rewrite_options.remapping
        dev = self.devices[device]
        if mode == RewriterConfig.OFF or dev.kernel_device_type != "CPU":
            return ()
        if mode == RewriterConfig.ON:
            return tuple(remapper.CONTRACTIONS)
        pool = dev.context.intra_op
        if dev.device_type != "CPU" or not pool.onednn:  # a simulated GPU is left as written
            return ()
        from dflab.kernels import onednn  # loads the library: only asked when it may help

        if onednn.library() is None:
            return ()
        return ("Conv2D", "MatMul") if pool.onednn_products else ("Conv2D",)

    def _rewritten(self, nodes, device, keep) -> list:
        """``device``'s nodes after the graph rewrites that run there: contraction fusion,
        then elementwise fusion (what runs is what the partition graphs show)."""
        if remapper.has_contraction(nodes):
            contractions = self.remapped_contractions(device)
            if contractions:
                nodes = remapper.fuse_contractions(nodes, device, keep, contractions)[0]
        if self.fuses_on(device):
            nodes = fuse_elementwise(nodes, device, keep)[0]
        return nodes

    def _grouped(self, node_defs, device: str, keep=()) -> list:
        """``node_defs`` with each optimizer's updates grouped into one node, on a device that
        has the grouped kernel and fuses (a real GPU: ``runtime/gpu_passes.py``)."""
        if not device or not self.fuses_on(device) or \
                not has_kernel("_MultiApply", self.devices[device].kernel_device_type):
            return node_defs
        from dflab.runtime.gpu_passes import group_updates

        return group_updates(node_defs, keep)

    def _partitioned_plan(self, ordered, placement, feed_tensors, fetch_tensors,
                          control_flow=False) -> Plan:
        """``control_flow``: the plan has conds, so every partition tracks deadness (a dead
        value may arrive through a ``_Recv`` even where no Switch or Merge runs)."""
        devices = self.devices
        pt = partition(ordered, placement, feed_tensors, fetch_tensors,
                       incarnation=lambda name: devices[name].incarnation,
                       device_order=[d.name for d in devices])
        specs, parts, position = [], [], {}
        for device, part in pt.partitions.items():
            # What runs is what the partition graphs show: the fused nodes, not the groups.
            nodes = part.nodes = self._rewritten(part.nodes, device, part.fetches + part.feeds)
            keep = [t.op.name for t in part.fetches + part.feeds]
            spec = PartitionSpec(device, GraphDef(self._grouped(
                [_node_def(n, device) for n in nodes], device, keep)),
                                 [t.name for t in part.feeds], list(part.feed_index),
                                 [t.name for t in part.fetches], control_flow)
            position[device] = len(parts)
            specs.append(spec)
            parts.append(self._register(spec, ordered))
        fetch_map = [(-1, where[1]) if where[0] == "feed" else (position[where[0]], where[1])
                     for where in pt.fetch_map]
        # The calling thread runs the biggest partition itself; the others go to the pool.
        main = max(range(len(specs)), key=lambda i: len(specs[i].graph_def.node))
        return Plan(placement, ordered, specs, parts, fetch_map, main, pt)

    def _register(self, spec: PartitionSpec, ordered):
        """Register ``spec`` with the worker; the plan's ops are its origins (same process)."""
        origins = {op.name: op for op in ordered}
        try:
            return self.worker.register_partition(spec, origins=origins)
        except errors.OpError as e:
            if e.op is not None and not isinstance(e.op, _ops.Operation):
                # A node def or plan node: name the user's op it stands for, where there is one.
                e.op = origins.get(e.op.name) or user_op(e.op)
            raise


def _plan_node(node, device: str, in_plan: set | None = None) -> Node:
    """A plan node: a ``Node`` as it is, or the ``Node`` of a user op on ``device``.

    ``in_plan`` (ids of the plan's ops) drops control inputs the plan left out, as the
    partitioner does: a fed placeholder's control edges are satisfied by its feed."""
    if not isinstance(node, Node):
        node = Node.of_op(node, device)
    if in_plan is not None:
        node.set_inputs(control_inputs=[c for c in node.control_inputs
                                        if isinstance(c, Node) or id(c) in in_plan])
    return node


def _node_def(node, device: str):
    """The typed node def of a plan node (see ``_plan_node``)."""
    return _plan_node(node, device).to_node_def()
