"""Elementwise fusion: a graph optimization pass over one device's part of a plan.

The TensorFlow paper leaves open how to fuse ops "without writing custom C++ kernels". Here
fusion generates the kernel: the pass finds maximal groups of elementwise ops (broadcasting
allowed) whose intermediate results nobody else reads, optionally ending in a reduction, and
replaces each group by one ``_FusedElementwise`` node whose kernel evaluates the whole group
(``dflab.kernels.fused_kernels``: a CuPy kernel on GPUs, a NumPy evaluator on CPUs).

Grouping. Walking the nodes from the last to the first, each fusible node not yet in a group
starts one as its *sink*; a producer joins the group when it is elementwise, of the group's
floating dtype, not fetched, not fed, not a control input of anything, and every consumer of its
output is already in the group (so no intermediate value is needed outside). Joining repeats
until nothing more joins, which makes groups maximal DAGs, not only chains (``x * sigmoid(x)``).
A reduction (Sum, Mean, Max, Min, Prod) can only be a sink, fused with what computes its input.

The fused node takes the sink's name (as TF's remapper names a fused node after the last op it
replaces), its outputs (so consumers, fetches and ``_Send`` nodes read it unchanged) and its
creation site; it keeps the replaced ops in ``fused_ops`` so graph views can show and expand the
group and traces attribute its time to them. Control inputs of every member become control
inputs of the fused node. Groups never cross devices or loop frames: every member is connected
to the sink by data edges between elementwise ops, which never pass an ``Enter`` or ``Exit``.

When it runs (``RewriterConfig.remapping``, TF's switch for its fusing pass): by default on the
partitions of real GPU devices only; ``ON`` fuses on every device (CPU partitions then run the
NumPy evaluator, which is how the pass is tested and taught without a GPU); ``OFF`` never.
"""

from __future__ import annotations

from dflab.kernels.fused_kernels import ELEMENTWISE, FUSIBLE_DTYPES, REDUCTIONS, FusedExpression
from dflab.ops import fused_ops as _fused_ops  # noqa: F401 - registers _FusedElementwise
from dflab.runtime.node import FUSED, Node


def replacing_node(op_type: str, members, inputs, control_inputs, device: str,
                   attrs: dict) -> Node:
    """A node of ``op_type`` replacing ``members`` (in order, the sink last): named after the
    sink and producing its outputs (so consumers, fetches and ``_Send`` nodes read it
    unchanged), created where the sink was; ``attrs`` gain the members' names, types and
    creation sites (``fused_ops``, ``fused_types``, ``_fused_sites``), which graph views,
    traces and errors read."""
    sink = members[-1]
    attrs = {
        **attrs,
        "fused_ops": [m.name for m in members],
        "fused_types": [m.type for m in members],
        "_fused_sites": [getattr(m, "creation_site", "") or "" for m in members],
    }
    node = Node(op_type, sink.name, device, attrs, sink.creation_site, sink.graph, inputs,
                control_inputs, outputs=sink.outputs)
    node.fused_ops = list(members)
    return node


def fused_node(members, inputs, control_inputs, expression: FusedExpression,
               device: str) -> Node:
    """The ``_FusedElementwise`` node replacing ``members`` (the sink last), carrying their
    expression."""
    node = replacing_node(FUSED, members, inputs, control_inputs, device, {
        "T": expression.dtype,
        "expression": expression.describe(),
        # What a kernel is built from, in another process too (FusedExpression.from_attr).
        "_fused_expression": expression.to_attr(),
    })
    node.expression = expression
    return node


# --- which nodes can be fused ---------------------------------------------------------------------
def _dtype(t) -> str:
    return t.dtype.base_dtype.name


def _bias_add_is_trailing_add(node) -> bool:
    """BiasAdd is a broadcasting add only when the channel is the last axis and the bias
    matches it; otherwise its kernel's channel check (and NCHW layout) must run unfused."""
    x, b = node.inputs
    if node.attrs.get("data_format", "NHWC") != "NHWC" and x.shape.ndims != 2:
        return False
    xs, bs = x.shape, b.shape
    return (xs.ndims is not None and xs.ndims >= 1 and bs.ndims == 1
            and xs.dims[-1] is not None and xs.dims[-1] == bs.dims[0])


def _elementwise_dtype(node) -> str | None:
    """The floating dtype of a fusible elementwise node, or None."""
    if node.type not in ELEMENTWISE or len(node.outputs) != 1:
        return None
    dt = _dtype(node.outputs[0])
    if dt not in FUSIBLE_DTYPES or any(_dtype(t) != dt for t in node.inputs):
        return None
    if node.type == "BiasAdd" and not _bias_add_is_trailing_add(node):
        return None
    return dt


def _reduction_dtype(node) -> str | None:
    if node.type not in REDUCTIONS or len(node.inputs) != 2:
        return None
    dt = _dtype(node.inputs[0])
    return dt if dt in FUSIBLE_DTYPES and _dtype(node.outputs[0]) == dt else None


# --- the pass ----------------------------------------------------------------------------------
class NodeUses:
    """Who reads what in one node list (its ``nodes`` in topological order): consumers of each
    tensor, the nodes that are control inputs, and the tensors to ``keep`` (fetched or fed)."""

    def __init__(self, nodes, keep):
        self.position = {id(n): i for i, n in enumerate(nodes)}
        self.consumers: dict[int, set] = {}
        self.readers: dict[int, list] = {}
        self.controls: set[int] = set()
        for n in nodes:
            for t in n.inputs:
                self.consumers.setdefault(id(t), set()).add(id(n))
                self.readers.setdefault(id(t), []).append(n)
            for c in n.control_inputs:
                self.controls.add(id(c))
        self.keep = keep

    def sole_reader(self, t):
        """The one node of the list that reads ``t`` (once), where ``t`` is needed nowhere
        else: not kept, not read by another node; else None."""
        readers = self.readers.get(id(t), ())
        if id(t) in self.keep or len(readers) != 1:
            return None
        return readers[0]

    def replaceable(self, node) -> bool:
        """Whether ``node`` is in the list and may vanish into a fused node: it is no control
        input (a control edge from it would lose its source)."""
        return id(node) in self.position and id(node) not in self.controls

    def joinable(self, t, dtype, group: set) -> bool:
        p = t.op
        return (id(p) in self.position and id(p) not in group and id(t) not in self.keep
                and id(p) not in self.controls and _elementwise_dtype(p) == dtype
                and self.consumers.get(id(t), set()) <= group)


def _grow(g: NodeUses, sink, dtype, taken: set) -> list:
    """The sink and every producer that can join it, in node order."""
    members = {id(sink): sink}
    start = sink.inputs[:1] if sink.type in REDUCTIONS else sink.inputs  # not the axes
    changed = True
    while changed:
        changed = False
        for m in list(members.values()):
            ins = start if m is sink else m.inputs
            for t in ins:
                if id(t.op) in taken:
                    continue
                if g.joinable(t, dtype, set(members)):
                    members[id(t.op)] = t.op
                    changed = True
    return sorted(members.values(), key=lambda n: g.position[id(n)])


def _expression(members, dtype) -> tuple[FusedExpression, list]:
    """The group's expression and its external inputs (a reduction's axes last)."""
    sink = members[-1]
    reduction = sink if sink.type in REDUCTIONS else None
    steps_of = members[:-1] if reduction is not None else members
    step_index = {id(m): j for j, m in enumerate(steps_of)}
    inputs, input_index = [], {}

    def ref(t):
        j = step_index.get(id(t.op))
        if j is not None:
            return ("step", j)
        if id(t) not in input_index:
            input_index[id(t)] = len(inputs)
            inputs.append(t)
        return ("in", input_index[id(t)])

    raw = [(m.type, [ref(t) for t in m.inputs]) for m in steps_of]
    n = len(inputs)
    steps = tuple((op_type, tuple(k if kind == "in" else n + k for kind, k in args))
                  for op_type, args in raw)
    red = None
    if reduction is not None:
        inputs.append(reduction.inputs[1])
        red = (reduction.type, bool(reduction.attrs.get("keep_dims", False)))
    return FusedExpression(n, steps, dtype, red), inputs


def member_controls(members) -> list:
    """The control inputs of every member, each once: a fused node waits for all of them."""
    controls, seen = [], set()
    for m in members:
        for c in m.control_inputs:
            if id(c) not in seen:
                seen.add(id(c))
                controls.append(c)
    return controls


def _fused_node(members, dtype, device) -> Node:
    expr, inputs = _expression(members, dtype)
    return fused_node(members, inputs, member_controls(members), expr, device)


def fuse_elementwise(nodes, device: str, keep=()) -> tuple[list, list]:
    """Fuse the elementwise groups of ``nodes`` (``device``'s nodes in topological order).

    ``keep``: tensors that must stay computed as they are (fetched or fed ones). Returns the new
    node list, in topological order, and the fused nodes made.
    """
    g = NodeUses(nodes, {id(t) for t in keep})
    taken: set[int] = set()
    replaced: dict[int, Node] = {}
    fused = []
    for sink in reversed(nodes):
        if id(sink) in taken:
            continue
        dtype = _elementwise_dtype(sink) or _reduction_dtype(sink)
        if dtype is None:
            continue
        members = _grow(g, sink, dtype, taken)
        if len(members) < 2:
            continue
        node = _fused_node(members, dtype, device)
        taken.update(id(m) for m in members)
        replaced[id(sink)] = node
        fused.append(node)
    if not fused:
        return list(nodes), []
    out = []
    for n in nodes:
        if id(n) in replaced:
            out.append(replaced[id(n)])
        elif id(n) not in taken:
            out.append(n)
    fused.reverse()
    return out, fused

