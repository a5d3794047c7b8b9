"""``Node``: the one representation of a node in a plan, whatever made it.

A plan runs nodes of four origins: the user's ops (one device's view of them, inputs rewired to
that partition's tensors), the ``_Send``/``_Recv`` pairs the partitioner adds, the nodes of a
partition's control loop, and the ``_FusedElementwise`` nodes of the fusion pass. All four are
``Node`` objects, and a node converts to and from a typed ``NodeDef`` (name, op type, inputs by
name, device, attributes, input and output dtypes, output shapes, creation site) — the plain
data a worker registers and rebuilds, in this process or another (``nodes_from_node_defs``).

What a node keeps that is not data: ``original``, the user's ``Operation`` it stands for (None
for nodes the runtime made, and for nodes rebuilt where the user's graph does not exist), used
to name the user's op in errors, traces and the stepper; ``fused_ops``, the ops a fused node
replaced (user ops where known, else their node defs); and ``expression``, a fused node's
``FusedExpression``.

A node's outputs are ``NodeOutput`` objects; consumers hold them as inputs, so ``t.op`` is the
producing node. Invariant: a node's type, name, device and outputs never change once built; the
partitioner and the fusion pass only (re)wire inputs of nodes they are still building.
"""

from __future__ import annotations

from dflab.framework import errors
from dflab.framework.graph_io import NodeDef
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
    def _value_index(self) -> int:
        return self.value_index

    @property
    def device(self) -> str:
        return self.op.assigned_device

    @property
    def graph(self):
        return self.op.graph

    @property
    def original(self):
        """The user's tensor this output stands for, where the node stands for a user op."""
        op = self.op.original
        return op._outputs[self.value_index] if op is not None else None

    def get_shape(self):
        return self.shape

    def __repr__(self):
        return f"<NodeOutput {self.name} {self.dtype.name}{self.shape}>"


class Node:
    """One node of a plan (see the module docstring)."""

    __slots__ = ("name", "type", "assigned_device", "_attrs", "_site", "_graph", "_op_def",
                 "_inputs", "_control_inputs", "_outputs", "original", "fused_ops",
                 "expression", "_node_def", "__weakref__")

    def __init__(self, op_type: str, name: str, device: str, attrs: dict, site: str = "",
                 graph=None, inputs=(), control_inputs=(), output_types=(),
                 output_shapes=None, original=None):
        self.type = op_type
        self.name = name
        self.assigned_device = device
        self._attrs = attrs
        self._site = site or ""
        self._graph = graph
        self._op_def = get_op_def(op_type)
        self._inputs = tuple(inputs)
        self._control_inputs = list(control_inputs)
        shapes = output_shapes if output_shapes is not None else [None] * len(output_types)
        self._outputs = [NodeOutput(self, i, dt, s if s is not None else unknown_shape())
                         for i, (dt, s) in enumerate(zip(output_types, shapes))]
        self.original = original
        self.fused_ops = ()
        self.expression = None
        self._node_def = None

    @classmethod
    def of_op(cls, op, device: str) -> Node:
        """A node standing for the user's ``op`` on ``device``; its inputs are wired by the
        caller (the partitioner), or left as the op's own tensors for an unpartitioned plan."""
        return cls(op.type, op.name, device, op._attrs, op._site, op.graph, op._inputs,
                   op._control_inputs, [t.dtype for t in op._outputs],
                   [t.shape for t in op._outputs], original=op)

    # --- the Operation-like read interface (errors, traces, drawings read these) -------------
    graph = property(lambda self: self._graph)
    inputs = property(lambda self: self._inputs)
    outputs = property(lambda self: list(self._outputs))
    control_inputs = property(lambda self: list(self._control_inputs))
    device = property(lambda self: self.assigned_device)
    creation_site = property(lambda self: self._site)
    traceback = creation_site
    op_def = property(lambda self: self._op_def)
    attrs = property(lambda self: dict(self._attrs))

    def values(self) -> tuple:
        return tuple(self._outputs)

    def get_attr(self, name):
        if name not in self._attrs:
            raise ValueError(f"Operation {self.name!r} has no attr named {name!r}.")
        return self._attrs[name]

    @property
    def tensor_name(self) -> str:
        """What a ``_Send``/``_Recv`` carries (the sent tensor's name)."""
        return self._attrs["tensor_name"]

    # --- plain data ----------------------------------------------------------------------------
    @property
    def node_def(self) -> NodeDef:
        """The typed node def this node was rebuilt from (what its kernel is built from)."""
        if self._node_def is None:
            self._node_def = self.to_node_def()
        return self._node_def

    def to_node_def(self) -> NodeDef:
        """This node as a typed ``NodeDef`` on its device."""
        inputs = [_input_name(t) for t in self._inputs]
        inputs += ["^" + c.name for c in self._control_inputs]
        return NodeDef(self.name, self.type, inputs, self.assigned_device, self._attrs, self._site,
                       input_types=tuple(t.dtype for t in self._inputs),
                       output_types=tuple(t.dtype for t in self._outputs),
                       output_shapes=tuple(t.shape for t in self._outputs))

    def __repr__(self):
        if self.type in ("_Send", "_Recv"):
            a = self._attrs
            return f"<{self.type} {a['tensor_name']} {a['send_device']} -> {a['recv_device']}>"
        if self.fused_ops:
            return f"<Node {self.name}: {' -> '.join(self._attrs.get('fused_types', ()))}>"
        return f"<Node {self.name} ({self.type}) on {self.assigned_device}>"


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
        original = None if nd.op == FUSED else origins.get(nd.name)
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
                if src is None or key[1] >= len(src._outputs):
                    raise errors.InvalidArgumentError(
                        None, nd, f"Node {nd.name}: input {i} ({name}) is not produced in the "
                        "partition nor fed to it")
                out = src._outputs[key[1]]
            inputs.append(out)
        node._inputs = tuple(inputs)
        node._control_inputs = controls
        try:
            _restore_fused(node, origins)
        except ValueError as e:
            raise errors.InvalidArgumentError(None, nd, f"Node {nd.name}: {e}") from None
    return nodes, feed_outputs


def _restore_fused(node: Node, origins) -> None:
    """A rebuilt fused node's members (the user's ops where known) and expression."""
    if not node._attrs.get("fused_ops"):
        return
    node.fused_ops = [origins.get(m.name) or m for m in fused_members(node._attrs)]
    data = node._attrs.get("_fused_expression")
    if data is not None:
        # from_attr validates every step: a malformed definition fails here, not later.
        node.expression = FusedExpression.from_attr(data)
