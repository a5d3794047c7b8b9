"""``Node``: the one representation of a node in a plan, whatever made it.

A plan runs nodes of four origins: the user's ops (one device's view of them, inputs rewired to
that partition's tensors), the ``_Send``/``_Recv`` pairs the partitioner adds, the nodes of a
partition's control loop, and the fused nodes of the rewrite passes (``_FusedElementwise``,
``_FusedMatMul``, ``_FusedConv2D``, ``_FusedMatMulSum``: a node that records ``fused_ops``).
All four are ``Node`` objects, and a node converts to and from a typed ``NodeDef`` (name, op
type, inputs by name, device, attributes, input and output dtypes, output shapes, creation
site) — the plain data a worker registers and rebuilds, in this process or another
(``nodes_from_node_defs``).

What a node keeps that is not data: ``original``, the user's ``Operation`` it stands for (None
for nodes the runtime made, and for nodes rebuilt where the user's graph does not exist), used
to name the user's op in errors, traces and the stepper; ``fused_ops``, the ops a fused node
replaced (user ops where known, else their node defs); and ``expression``, a fused node's
``FusedExpression``.

A node satisfies ``NodeLike`` (``dflab.framework.node_protocol``), the read interface it shares
with the user's ``Operation``, with plain public attributes: ``name``, ``type``, ``device`` (the
device it runs on), ``graph``, ``inputs`` and ``control_inputs`` (tuples), ``outputs`` (a list of
``NodeOutput``), ``attrs`` (the mapping it was built with, never copied nor edited), ``op_def``
and ``creation_site``. Its outputs are ``NodeOutput`` objects (``OutputLike``); consumers hold
them as inputs, so ``t.op`` is the producing node.

Invariant: a node's type, name, device, attributes and outputs never change once built; the
partitioner, the fusion pass and the rebuild from node defs (re)wire only the inputs of nodes
they are still building, with ``set_inputs``/``set_input``.
"""

from __future__ import annotations

from dflab.framework import errors
from dflab.framework.graph_io import NodeDef
from dflab.framework.op_kinds import TRANSFER_OPS
from dflab.framework.registry import get_op_def
from dflab.framework.tensor_shape import unknown_shape
from dflab.kernels.fused_kernels import FusedExpression, fused_members

FUSED = "_FusedElementwise"


class NodeOutput:
    """Output ``value_index`` of node ``op``: its dtype and static shape."""

    __slots__ = ("op", "value_index", "dtype", "shape")

    def __init__(self, op, value_index: int, dtype, shape):
        self.op = op
        self.value_index = value_index
        self.dtype = dtype
        self.shape = shape

    @property
    def name(self) -> str:
        return f"{self.op.name}:{self.value_index}"

    @property
    def device(self) -> str:
        return self.op.device

    @property
    def graph(self):
        return self.op.graph

    @property
    def original(self):
        """The user's tensor this output stands for, where the node stands for a user op."""
        op = self.op.original
        return op.outputs[self.value_index] if op is not None else None

    def get_shape(self):
        return self.shape

    def __repr__(self):
        return f"<NodeOutput {self.name} {self.dtype.name}{self.shape}>"


class Node:
    """One node of a plan (see the module docstring)."""

    __slots__ = ("name", "type", "device", "attrs", "creation_site", "graph", "op_def",
                 "inputs", "control_inputs", "outputs", "original", "fused_ops", "expression",
                 "_node_def", "__weakref__")

    def __init__(self, op_type: str, name: str, device: str, attrs, site: str = "",
                 graph=None, inputs=(), control_inputs=(), output_types=(),
                 output_shapes=None, original=None, outputs=None):
        """``outputs``: existing outputs the node produces instead of new ones of
        ``output_types`` and ``output_shapes`` (a fused node produces its sink's)."""
        self.type = op_type
        self.name = name
        self.device = device
        self.attrs = attrs
        self.creation_site = site or ""
        self.graph = graph
        self.op_def = get_op_def(op_type)
        self.inputs = tuple(inputs)
        self.control_inputs = tuple(control_inputs)
        if outputs is None:
            shapes = output_shapes if output_shapes is not None else [None] * len(output_types)
            outputs = [NodeOutput(self, i, dt, s if s is not None else unknown_shape())
                       for i, (dt, s) in enumerate(zip(output_types, shapes))]
        self.outputs = list(outputs)
        self.original = original
        self.fused_ops = ()
        self.expression = None
        self._node_def = None

    @classmethod
    def of_op(cls, op, device: str) -> Node:
        """A node standing for the user's ``op`` on ``device``; its inputs are wired by the
        caller (the partitioner), or left as the op's own tensors for an unpartitioned plan."""
        outputs = op.outputs
        return cls(op.type, op.name, device, op.attrs, op.creation_site, op.graph, op.inputs,
                   op.control_inputs, [t.dtype for t in outputs], [t.shape for t in outputs],
                   original=op)

    def set_inputs(self, inputs=None, control_inputs=None) -> None:
        """Wire a node that is still being built: its data inputs and/or its control inputs
        (None leaves them as they are)."""
        if inputs is not None:
            self.inputs = tuple(inputs)
        if control_inputs is not None:
            self.control_inputs = tuple(control_inputs)

    def set_input(self, index: int, t) -> None:
        """Wire data input ``index`` of a node still being built to ``t`` (a loop Merge's
        back edge, once the NextIteration that feeds it exists)."""
        inputs = list(self.inputs)
        inputs[index] = t
        self.inputs = tuple(inputs)

    # --- the rest of the read interface ---------------------------------------------------------
    @property
    def assigned_device(self) -> str:
        """The device the node runs on (``device``), by the name TF's placer gives it."""
        return self.device

    @property
    def traceback(self) -> str:
        return self.creation_site

    def values(self) -> tuple:
        return tuple(self.outputs)

    def get_attr(self, name):
        if name not in self.attrs:
            raise ValueError(f"Operation {self.name!r} has no attr named {name!r}.")
        return self.attrs[name]

    @property
    def tensor_name(self) -> str:
        """What a ``_Send``/``_Recv`` carries (the sent tensor's name)."""
        return self.attrs["tensor_name"]

    # --- plain data ----------------------------------------------------------------------------
    @property
    def node_def(self) -> NodeDef:
        """The typed node def this node was rebuilt from (what its kernel is built from)."""
        if self._node_def is None:
            self._node_def = self.to_node_def()
        return self._node_def

    def to_node_def(self) -> NodeDef:
        """This node as a typed ``NodeDef`` on its device."""
        inputs = [_input_name(t) for t in self.inputs]
        inputs += ["^" + c.name for c in self.control_inputs]
        return NodeDef(self.name, self.type, inputs, self.device, self.attrs,
                       self.creation_site, input_types=tuple(t.dtype for t in self.inputs),
                       output_types=tuple(t.dtype for t in self.outputs),
                       output_shapes=tuple(t.shape for t in self.outputs))

    def __repr__(self):
        if self.type in TRANSFER_OPS:
            a = self.attrs
            return f"<{self.type} {a['tensor_name']} {a['send_device']} -> {a['recv_device']}>"
        if self.fused_ops:
            return f"<Node {self.name}: {' -> '.join(self.attrs.get('fused_types', ()))}>"
        return f"<Node {self.name} ({self.type}) on {self.device}>"


def _input_name(t) -> str:
    return t.op.name if t.value_index == 0 else f"{t.op.name}:{t.value_index}"


def split_input(name: str) -> tuple[str, int]:
    """``"a"`` -> ("a", 0), ``"a:2"`` -> ("a", 2), as TF names tensors in a NodeDef's input."""
    op, sep, index = name.rpartition(":")
    if sep and index.isdigit():
        return op, int(index)
    return name, 0


def nodes_from_node_defs(node_defs, feeds=(), origins=None, graph=None):
    """Rebuild a partition's nodes from its typed node defs (in topological order, loop back
    edges aside), and the ``NodeOutput`` that stands for each fed tensor name in ``feeds``.

    ``origins`` maps op names to the user's ops where this process has the user's graph (the
    local worker): nodes then keep their ``original`` and fused nodes their member ops.
    Returns ``(nodes, feed_outputs)``.
    """
    origins = origins or {}
    by_name: dict[str, Node] = {}
    # Stand-ins for fed tensors: the executor gives them the step's fed values. Their dtype is
    # what their first consumer declares it takes.
    fed: dict[tuple, NodeOutput] = {}
    for name in feeds:
        op_name, index = split_input(name)
        stand_in = Node("Placeholder", op_name, "", {}, graph=graph,
                        original=origins.get(op_name))
        fed[(op_name, index)] = NodeOutput(stand_in, index, None, unknown_shape())
    feed_outputs = list(fed.values())
    nodes, pending = [], []
    for nd in node_defs:
        # A fused node took its sink's name: it stands for no single user op.
        original = None if nd.attr.get("fused_ops") else origins.get(nd.name)
        node = Node(nd.op, nd.name, nd.device, nd.attr, nd.site, graph, (), (),
                    nd.output_types, nd.output_shapes, original=original)
        node._node_def = nd
        by_name[nd.name] = node
        nodes.append(node)
        pending.append((node, nd))
    for node, nd in pending:
        inputs, controls = [], []
        for i, name in enumerate(nd.input):
            if name.startswith("^"):
                src = by_name.get(name[1:])
                if src is None:
                    raise errors.InvalidArgumentError(
                        None, nd, f"Node {nd.name}: control input {name} is not in the "
                        "partition")
                controls.append(src)
                continue
            key = split_input(name)
            out = fed.get(key)
            if out is not None and out.dtype is None and i < len(nd.input_types):
                out.dtype = nd.input_types[i]
            if out is None:
                src = by_name.get(key[0])
                if src is None or key[1] >= len(src.outputs):
                    raise errors.InvalidArgumentError(
                        None, nd, f"Node {nd.name}: input {i} ({name}) is not produced in the "
                        "partition nor fed to it")
                out = src.outputs[key[1]]
            inputs.append(out)
        node.set_inputs(inputs, controls)
        try:
            _restore_fused(node, origins)
        except ValueError as e:
            raise errors.InvalidArgumentError(None, nd, f"Node {nd.name}: {e}") from None
    return nodes, feed_outputs


def _restore_fused(node: Node, origins) -> None:
    """A rebuilt fused node's members (the user's ops where known) and expression."""
    if not node.attrs.get("fused_ops"):
        return
    node.fused_ops = [origins.get(m.name) or m for m in fused_members(node.attrs)]
    data = node.attrs.get("_fused_expression")
    if data is not None:
        # from_attr validates every step: a malformed definition fails here, not later.
        node.expression = FusedExpression.from_attr(data)
