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

The user's ``Graph`` is never touched. Partitions are built from lightweight nodes: a
``NodeView`` per original op (the op's kernel, attributes, name and site, with its inputs rewired
to the partition's own tensors) and ``CommNode`` objects for ``_Send``/``_Recv``. Each node knows
its ``assigned_device``; a view knows its ``original`` op. ``verify`` checks the invariants of a
partitioning (used by the tests after every partitioning).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.framework.device_spec import DeviceSpec
from dflab.framework.registry import get_op_def
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import comm_ops as _comm_ops  # noqa: F401 - registers _Send/_Recv

SEND, RECV = "_Send", "_Recv"


# --- partition nodes ---------------------------------------------------------------------------
class ViewTensor:
    """An output of a ``NodeView``: the original tensor, produced by the view."""

    __slots__ = ("_t", "_op")

    def __init__(self, t, view):
        self._t = t
        self._op = view

    @property
    def op(self):
        return self._op

    @property
    def original(self):
        return self._t

    def __getattr__(self, name):
        return getattr(self._t, name)

    def __repr__(self):
        return f"<ViewTensor {self._t.name} on {self._op.assigned_device}>"


class NodeView:
    """An original op as seen by one partition: its inputs and control inputs rewired to the
    partition's tensors and nodes, everything else (type, name, attributes, site, op def) the
    original's. Kernels are bound to the view exactly as they would be to the op."""

    __slots__ = ("original", "assigned_device", "_inputs", "_outputs", "_control_inputs")

    def __init__(self, op, device: str):
        self.original = op
        self.assigned_device = device
        self._inputs: tuple = ()
        self._outputs = [ViewTensor(t, self) for t in op._outputs]
        self._control_inputs: list = []

    def __getattr__(self, name):
        # Only reached for what the view does not hold itself: delegate to the original op.
        return getattr(object.__getattribute__(self, "original"), name)

    @property
    def inputs(self) -> tuple:
        return self._inputs

    @property
    def outputs(self) -> list:
        return list(self._outputs)

    def values(self) -> tuple:
        return tuple(self._outputs)

    @property
    def control_inputs(self) -> list:
        return list(self._control_inputs)

    def __repr__(self):
        return f"<NodeView {self.original.name} ({self.original.type}) on {self.assigned_device}>"


class CommTensor:
    """The output of a ``_Recv``: the received tensor's dtype and static shape."""

    __slots__ = ("_op", "_dtype", "_shape")

    def __init__(self, op, dtype, shape):
        self._op = op
        self._dtype = dtype
        self._shape = shape

    op = property(lambda self: self._op)
    dtype = property(lambda self: self._dtype)
    shape = property(lambda self: self._shape)
    value_index = property(lambda self: 0)
    _value_index = value_index
    name = property(lambda self: f"{self._op.name}:0")
    device = property(lambda self: self._op.assigned_device)
    graph = property(lambda self: self._op.graph)

    def get_shape(self):
        return self._shape

    def __repr__(self):
        return f"<CommTensor {self.name} {self._dtype.name}{self._shape}>"


class CommNode:
    """A ``_Send`` or ``_Recv`` node of a partition (not an op of any ``Graph``)."""

    _colocation = ()
    _control_flow_context = None
    _cf_info = None
    _id = 0

    def __init__(self, op_type, name, device, attrs, site, graph, inputs=(), control_inputs=()):
        self._type = op_type
        self._name = name
        self.assigned_device = device
        self._attrs = attrs
        self._site = site
        self._graph = graph
        self._op_def = get_op_def(op_type)
        self._inputs = tuple(inputs)
        self._control_inputs = list(control_inputs)
        self._outputs: list = []

    name = property(lambda self: self._name)
    type = property(lambda self: self._type)
    graph = property(lambda self: self._graph)
    inputs = property(lambda self: self._inputs)
    outputs = property(lambda self: list(self._outputs))
    control_inputs = property(lambda self: list(self._control_inputs))
    device = property(lambda self: self.assigned_device)
    creation_site = property(lambda self: self._site)
    traceback = creation_site
    op_def = property(lambda self: self._op_def)
    attrs = property(lambda self: dict(self._attrs))
    original = None

    def values(self) -> tuple:
        return tuple(self._outputs)

    def get_attr(self, name):
        if name not in self._attrs:
            raise ValueError(f"Operation {self._name!r} has no attr named {name!r}.")
        return self._attrs[name]

    @property
    def tensor_name(self) -> str:
        return self._attrs["tensor_name"]

    def __repr__(self):
        a = self._attrs
        return (f"<{self._type} {a['tensor_name']} {short_device_name(a['send_device'])} -> "
                f"{short_device_name(a['recv_device'])}>")


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
        from dflab.framework.graph_io import GraphDef, node_def_of

        out = []
        for part in self.partitions.values():
            nodes = []
            for node in part.nodes:
                nd = node_def_of(node)
                nd.device = part.device
                nodes.append(nd)
            out.append(GraphDef(nodes))
        return out


# --- partitioning ----------------------------------------------------------------------------
def short_device_name(device: str) -> str:
    """``CPU_1`` for a local device, ``ps_0_CPU_1`` for one of another job or task: used in the
    names of ``_Send``/``_Recv`` nodes."""
    spec = DeviceSpec.from_string(device)
    base = f"{spec.device_type}_{spec.device_index}"
    if spec.job in (None, "localhost") and spec.task in (None, 0):
        return base
    return f"{spec.job}_{spec.task}_{base}"


class _Partitioner:
    def __init__(self, placement, feeds, incarnation):
        self.placement = placement
        self.fed = {id(t): k for k, t in enumerate(feeds)}
        self.incarnation = incarnation
        self.parts: dict[str, Partition] = {}
        self.views: dict[int, NodeView] = {}
        self.recv_of: dict[tuple, CommNode] = {}  # (id(tensor) or ("^", id(op)), dst) -> Recv

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

    def add_send(self, src, dst, tensor_name, name, site, graph, data=None, after=None):
        attrs = self.comm_attrs(tensor_name, src, dst)
        if data is not None:
            attrs["T"] = data.dtype.base_dtype
        send = CommNode(SEND, name, src, attrs, site, graph,
                        inputs=() if data is None else (data,),
                        control_inputs=() if after is None else (after,))
        p = self.part(src)
        p.nodes.append(send)
        p.sends.append(send)
        return send

    def add_recv(self, src, dst, tensor_name, name, site, graph, dtype, shape):
        attrs = self.comm_attrs(tensor_name, src, dst)
        attrs["tensor_type"] = dtype
        attrs["shape"] = shape.as_list() if shape.ndims is not None else None
        recv = CommNode(RECV, name, dst, attrs, site, graph)
        recv._outputs = [CommTensor(recv, dtype, shape)]
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
            sent = producer._outputs[t.value_index]
            op_name, idx = t.op.name, t.value_index
            dst_s, src_s = short_device_name(dst), short_device_name(src)
            self.add_send(src, dst, t.name, f"_send/{op_name}/{idx}/to/{dst_s}", t.op._site,
                          t.op.graph, data=sent)
            # A reference (variable) crosses as its value, read when the _Send runs (the
            # executor reads it: _Send takes no reference inputs), as in TF.
            recv = self.add_recv(src, dst, t.name, f"_recv/{op_name}/{idx}/from/{src_s}",
                                 t.op._site, t.op.graph, t.dtype.base_dtype, t.shape)
            self.recv_of[key] = recv
        return recv._outputs[0]

    def control_received(self, u, dst):
        """The node that stands for "``u`` has run" on ``dst``."""
        key = (("^", id(u)), dst)
        recv = self.recv_of.get(key)
        if recv is not None:
            return recv
        for t in u._outputs:  # an output of u already received proves that u ran
            recv = self.recv_of.get((id(t), dst))
            if recv is not None:
                return recv
        src = self.device_of(u)
        dst_s, src_s = short_device_name(dst), short_device_name(src)
        tensor_name = f"^{u.name}"
        self.add_send(src, dst, tensor_name, f"_send/{u.name}/control/to/{dst_s}", u._site,
                      u.graph, after=self.views[id(u)])
        recv = self.add_recv(src, dst, tensor_name, f"_recv/{u.name}/control/from/{src_s}",
                             u._site, u.graph, _dt.float32, TensorShape([0]))
        self.recv_of[key] = recv
        return recv

    def add_op(self, op) -> None:
        device = self.device_of(op)
        view = NodeView(op, device)
        part = self.part(device)
        inputs = []
        for t in op._inputs:
            k = self.fed.get(id(t))
            if k is not None:
                if k not in part.feed_index:
                    part.feed_index.append(k)
                    part.feeds.append(t)
                inputs.append(t)
            elif self.device_of(t.op) == device:
                inputs.append(self.views[id(t.op)]._outputs[t.value_index])
            else:
                if len(inputs) in op._op_def.ref_inputs:
                    raise errors.InvalidArgumentError(
                        None, op, f"{op.name} on {device} takes {t.name} by reference, but "
                        f"{t.op.name} is on {self.device_of(t.op)}: an op that updates a "
                        "variable must be on the variable's device (colocate it with the "
                        "variable).")
                inputs.append(self.received(t, device))
        control = []
        for c in op._control_inputs:
            if id(c) not in self.views:
                continue  # not part of this plan (the executor ignores it too)
            node = self.views[id(c)] if self.device_of(c) == device else \
                self.control_received(c, device)
            if node not in control:
                control.append(node)
        view._inputs = tuple(inputs)
        view._control_inputs = control
        self.views[id(op)] = view
        part.nodes.append(view)


def partition(ops_in_order, placement, feeds, fetches, incarnation=None,
              device_order=None) -> Partitioning:
    """Split ``ops_in_order`` (topologically ordered, placed by ``placement``: op -> object with
    ``.device``) into per-device partitions joined by ``_Send``/``_Recv`` pairs.

    ``incarnation(device) -> int`` fills ``send_device_incarnation``; ``device_order`` lists
    device names in the order partitions should come in (default: sorted by name).
    """
    ordered = list(ops_in_order)
    pt = _Partitioner(placement, feeds, incarnation or (lambda d: 0))
    # In topological order every producer and control input has its view (and its partition
    # its place) before any consumer needs it (partitioned plans have no loop back edges).
    for op in ordered:
        pt.add_op(op)
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
            part.fetches.append(pt.views[id(t.op)]._outputs[t.value_index])
            where = local[id(t)] = (device, len(part.fetches) - 1)
        fetch_map.append(where)
    rank = {d: i for i, d in enumerate(device_order or ())}
    devices = sorted(pt.parts, key=lambda d: (rank.get(d, len(rank)), d))
    return Partitioning({d: pt.parts[d] for d in devices}, fetch_map, pt.views)


# --- verification ----------------------------------------------------------------------------
def verify(partitioning: Partitioning) -> None:
    """Check a partitioning's invariants; raise ``InternalError`` naming the first violation.

    Every node's inputs are produced earlier in its own partition (or fed to it), every control
    input precedes it in its partition, every ``_Send`` has exactly one matching ``_Recv`` on its
    destination and the other way round, and no tensor is sent twice to one device.
    """
    def fail(msg):
        raise errors.InternalError(None, None, f"Invalid partitioning: {msg}")

    sends: dict[tuple, CommNode] = {}
    recvs: dict[tuple, CommNode] = {}
    for device, part in partitioning.partitions.items():
        fed = {id(t) for t in part.feeds}
        seen: set[int] = set()
        for node in part.nodes:
            if node.assigned_device != device:
                fail(f"{node.name} is assigned to {node.assigned_device}, not {device}")
            for t in node._inputs:
                if id(t) not in fed and id(t.op) not in seen:
                    fail(f"{node.name} on {device} reads {t.name} before it is produced there")
            for c in node._control_inputs:
                if id(c) not in seen:
                    fail(f"{node.name} on {device} has a control input {c.name} from elsewhere")
            seen.add(id(node))
            if node.type in (SEND, RECV):
                a = node._attrs
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
