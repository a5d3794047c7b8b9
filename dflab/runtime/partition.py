"""The partitioner: split a placed, pruned plan into one subgraph per device.

TF's design (``graph_partition.cc``; DESIGN.md §3.4). Walking the plan's ops in topological
order, each op goes to the partition of its assigned device, and every edge whose two ends are on
different devices is cut:

* a **data edge** ``t -> consumer`` gets a ``_Send`` of ``t`` in the producer's partition and a
  ``_Recv`` in the consumer's; the consumer reads the ``_Recv``'s output instead of ``t``. There is
  one ``_Send``/``_Recv`` pair per tensor per destination device: a second consumer of ``t`` on
  the same device reuses the ``_Recv`` already made;
* a **control edge** ``u -> v`` gets a ``_Send`` that runs after ``u`` and sends a token, and a
  ``_Recv`` that ``v`` takes as a control input. If an output of ``u`` is already received on
  ``v``'s device, that ``_Recv`` proves ``u`` ran, and ``v`` takes it as its control input instead.

Fed tensors are never sent: every partition with a consumer of a fed tensor gets the fed value
directly. A fetched tensor is fetched from its producer's partition (a fetched *fed* tensor is
answered from the feed itself).

The user's ``Graph`` is never touched. Partitions are built from ``Node`` objects
(``dflab.runtime.node``): one per original op on its device (the op's type, attributes, name and
site, with its inputs rewired to the partition's own tensors; ``original`` is the op), and
nodes the partitioner makes for ``_Send``/``_Recv`` and control loops. Each node knows its
``device``. ``Partition.spec()`` is a partition as plain data (typed node defs, feed
and fetch names) for a worker to register. ``verify`` checks the invariants of a partitioning
(used by the tests after every partitioning).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.framework.device_spec import DeviceSpec
from dflab.framework.op_kinds import BACK_EDGE_OPS, ENTER_OPS, EXIT_OPS, MERGE_OPS
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import comm_ops as _comm_ops  # noqa: F401 - registers _Send/_Recv
from dflab.runtime.node import Node

SEND, RECV = "_Send", "_Recv"


# Partition nodes are ``dflab.runtime.node.Node`` objects: a view of a user op (``original`` set,
# inputs rewired to the partition's tensors), a _Send/_Recv pair, or a control loop's node
# (``original`` None).


# --- the result ------------------------------------------------------------------------------
@dataclass
class Partition:
    """One device's subgraph: nodes in topological order, its feeds and its fetches."""

    device: str
    nodes: list = field(default_factory=list)
    feeds: list = field(default_factory=list)  # original fed tensors consumed here
    feed_index: list = field(default_factory=list)  # their positions in the step's feeds
    fetches: list = field(default_factory=list)  # tensors of this partition that are fetched
    sends: list = field(default_factory=list)
    recvs: list = field(default_factory=list)

    def __repr__(self):
        return (f"<Partition {self.device}: {len(self.nodes)} nodes, {len(self.sends)} sends, "
                f"{len(self.recvs)} recvs>")


@dataclass
class Partitioning:
    """All partitions of a plan, and where each fetch of the step comes from."""

    partitions: dict  # device -> Partition, in device order
    # Per fetch of the step: ("feed", k) for a fed tensor, else (device, local fetch index).
    fetch_map: list
    views: dict  # id(original op) -> NodeView

    def graph_defs(self) -> list:
        """One ``GraphDef`` per partition, ``_Send``/``_Recv`` nodes included (TF's
        ``RunMetadata.partition_graphs``)."""
        return graph_defs_of({d: part.nodes for d, part in self.partitions.items()})


def graph_defs_of(nodes_by_device: dict) -> list:
    """One ``GraphDef`` per device of the nodes it runs, each node placed on that device."""
    from dflab.framework.graph_io import GraphDef, node_def_of

    out = []
    for device, nodes in nodes_by_device.items():
        defs = []
        for node in nodes:
            nd = node_def_of(node)
            nd.device = device
            defs.append(nd)
        out.append(GraphDef(defs))
    return out


def user_op(node):
    """The user's op behind a plan node: a partition view's ``original``, else the node itself
    (a user op, or a node the runtime made: ``_Send``/``_Recv``, a fused node)."""
    return getattr(node, "original", None) or node


# --- partitioning ----------------------------------------------------------------------------
def short_device_name(device: str) -> str:
    """``CPU_1`` for a local device, ``ps_0_CPU_1`` for one of another job or task: used in the
    names of ``_Send``/``_Recv`` nodes."""
    spec = DeviceSpec.from_string(device)
    base = f"{spec.device_type}_{spec.device_index}"
    if spec.job in (None, "localhost") and spec.task in (None, 0):
        return base
    return f"{spec.job}_{spec.task}_{base}"


class LoopNotPartitionableError(Exception):
    """A while loop whose back edge (``NextIteration`` -> ``Merge``) crosses devices."""


@dataclass
class _FrameInfo:
    """A static loop frame of the plan: its ``frame_name`` and its ``LoopCond``."""

    key: tuple  # frame names from the outermost loop in
    parallel_iterations: int = 10
    loop_cond: object = None


def _static_frames(ordered, fed) -> tuple[dict, dict]:
    """Each op's *in* frame (where it reads its inputs) and out frame, as keys of frames: the
    tuple of frame names from the root (``()``) in. Mirrors the executor's frame assignment."""
    in_frame, out_frame, frames = {}, {}, {(): _FrameInfo(())}
    for op in ordered:
        producers = [t.op for t in op.inputs if id(t) not in fed and id(t.op) in out_frame]
        if op.type in MERGE_OPS:
            producers = [p for p in producers if p.type not in BACK_EDGE_OPS]
        if not producers:
            producers = [c for c in op.control_inputs if id(c) in out_frame]
        f = out_frame[id(producers[0])] if producers else ()
        in_frame[id(op)] = f
        if op.type in ENTER_OPS:
            child = f + (op.attrs.get("frame_name", ""),)
            if child not in frames:
                frames[child] = _FrameInfo(child, int(op.attrs.get("parallel_iterations", 10)))
            out_frame[id(op)] = child
        elif op.type in EXIT_OPS:
            out_frame[id(op)] = f[:-1]
        else:
            out_frame[id(op)] = f
            if op.type == "LoopCond" and f:
                frames[f].loop_cond = op
    return in_frame, out_frame, frames


class _Partitioner:
    def __init__(self, placement, feeds, incarnation):
        self.placement = placement
        self.fed = {id(t): k for k, t in enumerate(feeds)}
        self.incarnation = incarnation
        self.parts: dict[str, Partition] = {}
        self.views: dict[int, Node] = {}
        self.recv_of: dict[tuple, Node] = {}  # (id(tensor) or ("^", id(op)), dst) -> Recv
        self.entered_of: dict[tuple, Node] = {}  # (id(Enter op), dst) -> its copy on dst
        self.out_frame: dict = {}  # id(op) -> the op's out frame key (() outside loops)
        self.frames: dict = {(): _FrameInfo(())}
        self.loops: dict[tuple, dict] = {}  # (frame key, device) -> that control loop's nodes
        self.back_edges: list = []  # (Merge view, input position, NextIteration op)

    def part(self, device) -> Partition:
        p = self.parts.get(device)
        if p is None:
            p = self.parts[device] = Partition(device)
        return p

    def device_of(self, op) -> str:
        return self.placement[op].device

    # The helpers the algorithm is made of: add a Send, add a Recv, reuse a Recv.
    def comm_attrs(self, tensor_name, src, dst) -> dict:
        return {"tensor_name": tensor_name, "send_device": src,
                "send_device_incarnation": int(self.incarnation(src)), "recv_device": dst,
                "client_terminated": False}

    def add_send(self, src, dst, tensor_name, name, site, graph, data=None, after=None,
                 frame=()):
        attrs = self.comm_attrs(tensor_name, src, dst)
        if frame:  # one value per iteration: the key gets the frame and iteration at run time
            attrs["_frame_tagged"] = True
        if data is not None:
            attrs["T"] = data.dtype.base_dtype
        send = Node(SEND, name, src, attrs, site, graph,
                    inputs=() if data is None else (data,),
                    control_inputs=() if after is None else (after,))
        p = self.part(src)
        p.nodes.append(send)
        p.sends.append(send)
        return send

    def add_recv(self, src, dst, tensor_name, name, site, graph, dtype, shape, frame=()):
        attrs = self.comm_attrs(tensor_name, src, dst)
        attrs["tensor_type"] = dtype
        attrs["shape"] = shape.as_list() if shape.ndims is not None else None
        # Inside a loop, the Recv runs once per iteration of the destination's copy of the frame:
        # its control loop's Merge puts it there (and gives it the iteration).
        control = (self.control_loop(frame, dst)["merge"],) if frame else ()
        if frame:
            attrs["_frame_tagged"] = True
        recv = Node(RECV, name, dst, attrs, site, graph, control_inputs=control,
                    output_types=(dtype,), output_shapes=(shape,))
        p = self.part(dst)
        p.nodes.append(recv)
        p.recvs.append(recv)
        return recv

    def received(self, t, dst):
        """The tensor that stands for ``t`` on ``dst``: a Recv's output, made on first use."""
        key = (id(t), dst)
        recv = self.recv_of.get(key)
        if recv is None:
            src = self.device_of(t.op)
            producer = self.views[id(t.op)]
            sent = producer.outputs[t.value_index]
            op_name, idx = t.op.name, t.value_index
            dst_s, src_s = short_device_name(dst), short_device_name(src)
            frame = self.out_frame[id(t.op)]
            site = t.op.creation_site
            self.add_send(src, dst, t.name, f"_send/{op_name}/{idx}/to/{dst_s}", site,
                          t.op.graph, data=sent, frame=frame)
            # A reference (variable) crosses as its value, read when the _Send runs (the
            # executor reads it: _Send takes no reference inputs), as in TF.
            recv = self.add_recv(src, dst, t.name, f"_recv/{op_name}/{idx}/from/{src_s}",
                                 site, t.op.graph, t.dtype.base_dtype, t.shape, frame)
            self.recv_of[key] = recv
        return recv.outputs[0]

    def control_received(self, u, dst):
        """The node that stands for "``u`` has run" on ``dst``."""
        key = (("^", id(u)), dst)
        recv = self.recv_of.get(key)
        if recv is not None:
            return recv
        for t in u.outputs:  # an output of u already received proves that u ran
            recv = self.recv_of.get((id(t), dst))
            if recv is not None:
                return recv
        src = self.device_of(u)
        dst_s, src_s = short_device_name(dst), short_device_name(src)
        tensor_name = f"^{u.name}"
        frame = self.out_frame[id(u)]
        self.add_send(src, dst, tensor_name, f"_send/{u.name}/control/to/{dst_s}",
                      u.creation_site, u.graph, after=self.views[id(u)], frame=frame)
        recv = self.add_recv(src, dst, tensor_name, f"_recv/{u.name}/control/from/{src_s}",
                             u.creation_site, u.graph, _dt.float32, TensorShape([0]), frame)
        self.recv_of[key] = recv
        return recv

    def add_op(self, op) -> None:
        device = self.device_of(op)
        view = Node.of_op(op, device)
        inputs = []
        for t in op.inputs:
            if op.type in MERGE_OPS and t.op.type in BACK_EDGE_OPS and id(t) not in self.fed:
                if self.device_of(t.op) != device:  # a back edge: wired in finish()
                    raise LoopNotPartitionableError(
                        f"{t.op.name} and {op.name} (a while loop's back edge) are on "
                        f"{self.device_of(t.op)} and {device}")
                self.back_edges.append((view, len(inputs), t))
                inputs.append(None)
                continue
            if len(inputs) in op.op_def.ref_inputs and id(t) not in self.fed \
                    and self.device_of(t.op) != device:
                raise errors.InvalidArgumentError(
                    None, op, f"{op.name} on {device} takes {t.name} by reference, but "
                    f"{t.op.name} is on {self.device_of(t.op)}: an op that updates a "
                    "variable must be on the variable's device (colocate it with the "
                    "variable).")
            if t.op.type == "VarHandleOp" and id(t) not in self.fed \
                    and self.device_of(t.op) != device:
                # A variable's handle names state on its own device: as a reference, it is
                # used there (the placer's rule; other handles, such as queues', may travel).
                raise errors.InvalidArgumentError(
                    None, op, f"{op.name} on {device} uses the resource handle {t.name}, but "
                    f"{t.op.name} is on {self.device_of(t.op)}: an op that reads or updates "
                    "a resource variable must be on the variable's device (colocate it with "
                    "the variable).")
            inputs.append(self.tensor_on(t, device))
        control = []
        for c in op.control_inputs:
            if id(c) not in self.views:
                continue  # not part of this plan (the executor ignores it too)
            if self.device_of(c) == device:
                node = self.views[id(c)]
            elif c.type in ENTER_OPS:
                node = self.entered(c, device)
            else:
                node = self.control_received(c, device)
            if node not in control:
                control.append(node)
        view.set_inputs(inputs, control)
        self.views[id(op)] = view
        self.part(device).nodes.append(view)

    def tensor_on(self, t, device):
        """What stands for tensor ``t`` on ``device``: the feed, the local producer's output,
        a copy of the ``Enter`` that made it, or a ``_Recv``."""
        k = self.fed.get(id(t))
        if k is not None:
            part = self.part(device)
            if k not in part.feed_index:
                part.feed_index.append(k)
                part.feeds.append(t)
            return t
        if self.device_of(t.op) == device:
            return self.views[id(t.op)].outputs[t.value_index]
        if t.op.type in ENTER_OPS:
            return self.entered(t.op, device).outputs[0]
        return self.received(t, device)

    def entered(self, enter, device):
        """A copy of ``enter`` on ``device``, fed with what ``enter`` takes there.

        An ``Enter`` produces its value once per frame (every iteration sees it when it is a
        loop invariant), so its output cannot cross as one value per iteration: the value
        crosses *before* entering, in the enclosing frame, and enters on both devices (TF's
        partitioner does the same)."""
        key = (id(enter), device)
        copy = self.entered_of.get(key)
        if copy is None:
            copy = Node.of_op(enter, device)
            copy.set_inputs((self.tensor_on(enter.inputs[0], device),))
            self.part(device).nodes.append(copy)
            self.entered_of[key] = copy
        return copy

    # --- loops across devices (Yu et al., EuroSys 2018, section 4.3; TF's AddControlFlow) ------
    def control_loop(self, frame: tuple, device: str) -> dict:
        """The control loop of ``frame`` on ``device``, made on first use.

        A partition that receives values inside a loop needs its own copy of the loop's frame,
        iterating in lockstep with the partition that holds the ``LoopCond``: ``Enter`` ->
        ``Merge`` -> ``Switch(pred)`` -> ``Identity`` (the *pivot*) -> ``NextIteration`` -> back
        to the ``Merge``, where ``pred`` is the ``LoopCond``'s value of each iteration (received
        from its device, or read locally). Receives of the frame hang off the ``Merge``; a nested
        loop's control loop enters from the pivot. The nodes are made here and wired in
        ``finish_control_loops``, once every op (the ``LoopCond`` included) has its view.
        """
        key = (frame, device)
        loop = self.loops.get(key)
        if loop is not None:
            return loop
        info = self.frames[frame]
        graph = info.loop_cond.graph if info.loop_cond is not None else None
        name = f"_control/{short_device_name(device)}/{frame[-1]}"
        site = info.loop_cond.creation_site if info.loop_cond is not None else ""

        def node(op_type, suffix, attrs=None, dtypes=(_dt.bool,)):
            n = _control_node(op_type, f"{name}/{suffix}", device, attrs or {}, site, graph,
                              dtypes)
            part = self.part(device)
            part.nodes.append(n)
            return n

        loop = self.loops[key] = {
            "enter": node("Enter", "Enter", {"T": _dt.bool, "frame_name": frame[-1],
                                            "is_constant": False,
                                            "parallel_iterations": info.parallel_iterations}),
            "merge": node("Merge", "Merge", {"T": _dt.bool, "N": 2}, (_dt.bool, _dt.int32)),
        }
        return loop

    def finish_control_loops(self) -> None:
        """Wire the control loops (see ``control_loop``) and the loops' back edges."""
        done: set = set()
        while len(done) < len(self.loops):
            for key in [k for k in self.loops if k not in done]:
                done.add(key)
                if "pivot" not in self.loops[key]:  # a nested loop may have wired it already
                    self._wire_control_loop(*key)
        for view, pos, t in self.back_edges:
            view.set_input(pos, self.views[id(t.op)].outputs[t.value_index])

    def _wire_control_loop(self, frame, device) -> None:
        loop = self.loops[(frame, device)]
        info = self.frames[frame]
        if info.loop_cond is None:
            raise LoopNotPartitionableError(f"the loop {frame[-1]} has no LoopCond in this plan")
        enter, merge = loop["enter"], loop["merge"]
        if len(frame) == 1:
            start = _control_node("Const", f"{enter.name[:-len('Enter')]}start", device,
                                  {"value": np.True_, "dtype": _dt.bool}, enter.creation_site,
                                  enter.graph)
            self.part(device).nodes.append(start)
            enter.set_inputs((start.outputs[0],))
        else:  # nested: enter once per iteration of the enclosing loop's copy on this device
            enter.set_inputs((self._pivot(frame[:-1], device),))
        cond = info.loop_cond
        if self.device_of(cond) == device:
            pred = self.views[id(cond)].outputs[0]
        else:
            pred = self.received(cond.outputs[0], device)
        part = self.part(device)
        prefix, site, graph = merge.name[:-len("Merge")], merge.creation_site, merge.graph
        switch = _control_node("Switch", f"{prefix}Switch", device, {"T": _dt.bool}, site,
                               graph, (_dt.bool, _dt.bool))
        switch.set_inputs((merge.outputs[0], pred))
        pivot = _control_node("Identity", f"{prefix}pivot", device, {"T": _dt.bool}, site, graph)
        pivot.set_inputs((switch.outputs[1],))
        nxt = _control_node("NextIteration", f"{prefix}NextIteration", device, {"T": _dt.bool},
                            site, graph)
        nxt.set_inputs((pivot.outputs[0],))
        merge.set_inputs((enter.outputs[0], nxt.outputs[0]))
        part.nodes.extend([switch, pivot, nxt])
        loop["pivot"] = pivot

    def _pivot(self, frame, device):
        loop = self.control_loop(frame, device)
        if "pivot" not in loop:
            self._wire_control_loop(frame, device)
        return loop["pivot"].outputs[0]


def _control_node(op_type, name, device, attrs, site, graph, dtypes=(_dt.bool,)) -> Node:
    """A node of a partition's control loop: scalar outputs of ``dtypes``."""
    return Node(op_type, name, device, attrs, site, graph, output_types=dtypes,
                output_shapes=[TensorShape([])] * len(dtypes))


def partition(ops_in_order, placement, feeds, fetches, incarnation=None,
              device_order=None) -> Partitioning:
    """Split ``ops_in_order`` (topologically ordered, placed by ``placement``: op -> object with
    ``.device``) into per-device partitions joined by ``_Send``/``_Recv`` pairs.

    ``incarnation(device) -> int`` fills ``send_device_incarnation``; ``device_order`` lists
    device names in the order partitions should come in (default: sorted by name).
    """
    ordered = list(ops_in_order)
    pt = _Partitioner(placement, feeds, incarnation or (lambda d: 0))
    in_frame, pt.out_frame, pt.frames = _static_frames(ordered, pt.fed)
    # In topological order every producer and control input has its view (and its partition
    # its place) before any consumer needs it; a loop's back edge is wired afterwards.
    for op in ordered:
        pt.add_op(op)
    if len(pt.parts) > 1:
        # Every partition that runs ops inside a loop iterates in lockstep with the LoopCond,
        # through its control loop: even an op fed only by loop invariants runs per iteration.
        for op in ordered:
            if in_frame[id(op)]:
                pt.control_loop(in_frame[id(op)], pt.device_of(op))
    pt.finish_control_loops()
    if pt.loops or pt.back_edges:
        for part in pt.parts.values():
            part.nodes = _topological(part.nodes)
    fetch_map = []
    local: dict[int, tuple] = {}
    for t in fetches:
        k = pt.fed.get(id(t))
        if k is not None:
            fetch_map.append(("feed", k))
            continue
        where = local.get(id(t))
        if where is None:
            device = pt.device_of(t.op)
            part = pt.parts[device]
            part.fetches.append(pt.views[id(t.op)].outputs[t.value_index])
            where = local[id(t)] = (device, len(part.fetches) - 1)
        fetch_map.append(where)
    rank = {d: i for i, d in enumerate(device_order or ())}
    devices = sorted(pt.parts, key=lambda d: (rank.get(d, len(rank)), d))
    return Partitioning({d: pt.parts[d] for d in devices}, fetch_map, pt.views)


def _topological(nodes) -> list:
    """Order a partition's nodes topologically (control loops are made after the ops that use
    them), keeping the given order where it is free; loop back edges do not order."""
    import heapq

    rank = {id(n): i for i, n in enumerate(nodes)}
    succ: dict[int, list] = {}
    indeg = {}
    for n in nodes:
        preds = [t.op for t in n.inputs if t.op.type not in BACK_EDGE_OPS and id(t.op) in rank]
        preds += [c for c in n.control_inputs if id(c) in rank]
        indeg[id(n)] = len(preds)
        for p in preds:
            succ.setdefault(id(p), []).append(n)
    heap = [(rank[id(n)], n) for n in nodes if indeg[id(n)] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, n = heapq.heappop(heap)
        out.append(n)
        for s in succ.get(id(n), ()):
            indeg[id(s)] -= 1
            if indeg[id(s)] == 0:
                heapq.heappush(heap, (rank[id(s)], s))
    if len(out) != len(nodes):
        raise errors.InternalError(None, None, "a partition's nodes form a cycle")
    return out


# --- verification ----------------------------------------------------------------------------
def verify(partitioning: Partitioning) -> None:
    """Check a partitioning's invariants; raise ``InternalError`` naming the first violation.

    Node names are unique in a partition, every node's inputs are produced earlier in its own
    partition (or fed to it), every control
    input precedes it in its partition, every ``_Send`` has exactly one matching ``_Recv`` on its
    destination and the other way round, and no tensor is sent twice to one device.
    """
    def fail(msg):
        raise errors.InternalError(None, None, f"Invalid partitioning: {msg}")

    sends: dict[tuple, Node] = {}
    recvs: dict[tuple, Node] = {}
    for device, part in partitioning.partitions.items():
        fed = {id(t) for t in part.feeds}
        seen: set[int] = set()
        names: set[str] = set()
        for node in part.nodes:
            if node.name in names:  # a partition travels as node defs that name each other
                fail(f"two nodes named {node.name} on {device}")
            names.add(node.name)
            if node.device != device:
                fail(f"{node.name} is assigned to {node.device}, not {device}")
            for t in node.inputs:
                if node.type in MERGE_OPS and t.op.type in BACK_EDGE_OPS:
                    continue  # a loop's back edge
                if id(t) not in fed and id(t.op) not in seen:
                    fail(f"{node.name} on {device} reads {t.name} before it is produced there")
            for c in node.control_inputs:
                if id(c) not in seen:
                    fail(f"{node.name} on {device} has a control input {c.name} from elsewhere")
            seen.add(id(node))
            seen.update(id(t.op) for t in node.outputs)  # a fused node makes its sink's outputs
            if node.type in (SEND, RECV):
                a = node.attrs
                key = (a["tensor_name"], a["send_device"], a["recv_device"])
                table, side = (sends, "send_device") if node.type == SEND else (recvs,
                                                                                 "recv_device")
                if a[side] != device:
                    fail(f"{node.name} on {device} has {side} {a[side]}")
                if key in table:
                    fail(f"two {node.type} nodes for {key}")
                table[key] = node
    for key in sends.keys() | recvs.keys():
        if key not in sends or key not in recvs:
            fail(f"unpaired {'_Send' if key in sends else '_Recv'} for {key}")
