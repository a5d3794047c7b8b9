"""Grouping an optimizer's updates: a graph pass over one GPU partition's node defs.

An optimizer's ``apply_gradients`` makes one ``ResourceApply*`` node per variable, all reading
the same scalars (learning rate, decay powers, ...), each through reads and casts of its own of
one variable or constant: scalars are the same when they come from the same source through the
same chain of ``ReadVariableOp``, ``Cast`` and ``Identity`` nodes. On a device with a
``_MultiApply`` kernel
(a real GPU: ``dflab.kernels.cuda.multi_apply``) the pass replaces every such set of two or
more nodes, of one type and attributes and one dtype, by one ``_MultiApply`` node that updates
them all in one launch: its inputs are each member's handles and gradient, then the first
member's scalars; its control inputs are the members' (their union); a node that waited for a
member waits for it. The other members' scalar reads, now read by nothing, are dropped (unless
fetched or waited for).

The group takes the place of its last member in the node order. A group is left as it is when
a node between its first and last member waits for one of them (the group would then run
after that node), which an optimizer's graph never does: what waits for its updates (the
decay-power updates, ``finish``) comes after all of them.

Invariant: the pass changes which nodes run, never what they compute; it runs after the
elementwise fusion pass, on node defs that are registered as they are.
"""

from __future__ import annotations

from dflab.framework.graph_io import NodeDef
from dflab.kernels.cuda.multi_apply import GROUPS, MULTI_APPLY, layout

_MEMBER_ATTRS = ("use_nesterov", "update_slots", "use_locking")


# Pure nodes a scalar reaches an update through, and which can be dropped once unread.
_PASS_THROUGH = frozenset({"ReadVariableOp", "Cast", "Identity"})


def group_updates(node_defs: list[NodeDef], keep=()) -> list[NodeDef]:
    """``node_defs`` (a partition's, in order) with each optimizer's updates grouped; ``keep``:
    names of nodes that must stay (fetched ones)."""
    position = {d.name: i for i, d in enumerate(node_defs)}
    by_name = {d.name: d for d in node_defs}
    groups: dict[tuple, list[NodeDef]] = {}
    for d in node_defs:
        key = _group_key(d, by_name)
        if key is not None:
            groups.setdefault(key, []).append(d)
    replaced: dict[str, NodeDef] = {}  # member name -> its group's node
    for members in groups.values():
        if len(members) < 2 or _waited_for_inside(members, node_defs, position):
            continue
        group = _group_node(members, {d.name for d in node_defs} | set(replaced))
        for m in members:
            replaced[m.name] = group
    if not replaced:
        return node_defs
    node_defs = _unread_dropped(node_defs, replaced, set(keep))
    position = {d.name: i for i, d in enumerate(node_defs)}
    out = []
    last = {g.name: max(position[n] for n in g.attr["members"])
            for g in set(replaced.values())}
    for i, d in enumerate(node_defs):
        group = replaced.get(d.name)
        if group is not None:
            if last[group.name] == i:
                out.append(_rewired(group, replaced))
            continue
        out.append(_rewired(d, replaced))
    return out


def _source(name: str, by_name: dict) -> tuple:
    """Where a tensor comes from, through reads, casts and identities: equal for tensors
    that hold the same value in a step (reads of one variable before anything writes it)."""
    node, _, index = name.partition(":")
    d = by_name.get(node)
    if d is None or d.op not in _PASS_THROUGH:
        return (name,)
    data = [i for i in d.input if not i.startswith("^")]
    if len(data) != 1 or any(i.startswith("^") for i in d.input):
        return (name,)
    attrs = tuple(sorted((k, str(v)) for k, v in d.attr.items() if not k.startswith("_")))
    return (d.op, attrs) + _source(data[0], by_name)


def _group_key(d: NodeDef, by_name: dict):
    if d.op not in GROUPS or not d.input_types:
        return None
    n_refs, n_scalars = layout(d.op)
    data = [i for i in d.input if not i.startswith("^")]
    if len(data) != n_refs + n_scalars + 1:
        return None
    values = data[n_refs:]
    grad_at = _grad_position(d.op)
    scalars = tuple(_source(v, by_name) for j, v in enumerate(values) if j != grad_at)
    dtype = d.input_types[n_refs + grad_at]
    attrs = tuple((k, d.attr.get(k)) for k in _MEMBER_ATTRS)
    return d.op, attrs, scalars, dtype.name, d.device


def _grad_position(op: str) -> int:
    from dflab.ops.training_ops import signature

    _, values = signature(op.removeprefix("Resource"))
    return values.index("delta" if "delta" in values else "grad")


def _waited_for_inside(members, node_defs, position) -> bool:
    names = {m.name for m in members}
    first = min(position[n] for n in names)
    last = max(position[n] for n in names)
    for d in node_defs[first + 1:last]:
        if d.name in names:
            continue
        if any(i.lstrip("^").split(":")[0] in names for i in d.input):
            return True
    return False


def _group_node(members, taken: set) -> NodeDef:
    op = members[0].op
    n_refs, _ = layout(op)
    grad_at = _grad_position(op)
    inputs, types = [], []
    for m in members:
        data = [i for i in m.input if not i.startswith("^")]
        inputs += data[:n_refs] + [data[n_refs + grad_at]]
        types += list(m.input_types[:n_refs]) + [m.input_types[n_refs + grad_at]]
    first = members[0]
    data0 = [i for i in first.input if not i.startswith("^")]
    scalars = [v for j, v in enumerate(data0[n_refs:]) if j != grad_at]
    scalar_types = [t for j, t in enumerate(first.input_types[n_refs:]) if j != grad_at]
    controls = []
    for m in members:
        for i in m.input:
            if i.startswith("^") and i not in controls:
                controls.append(i)
    prefix = members[0].name.split("/")[0]
    name, k = f"{prefix}/{MULTI_APPLY}", 1
    while name in taken:
        k += 1
        name = f"{prefix}/{MULTI_APPLY}_{k}"
    attr = {"apply_type": op, "members": [m.name for m in members],
            "member_attr": {k: v for k, v in first.attr.items() if k in _MEMBER_ATTRS},
            "_fused_sites": [m.site for m in members]}
    return NodeDef(name, MULTI_APPLY, inputs + scalars + controls, first.device, attr,
                   members[-1].site, tuple(types + scalar_types), (), ())


def _unread_dropped(node_defs, replaced, keep) -> list[NodeDef]:
    """``node_defs`` without the scalar reads only grouped members read (their group reads
    the first member's), repeatedly: a cast's read goes when the cast does."""
    groups = {id(g): g for g in replaced.values()}.values()
    used = set()
    for g in groups:
        used.update(i.split(":")[0] for i in g.input if not i.startswith("^"))
    readers: dict[str, int] = {}
    for d in node_defs:
        if d.name in replaced:
            continue
        for i in d.input:
            readers[i.lstrip("^").split(":")[0]] = readers.get(
                i.lstrip("^").split(":")[0], 0) + 1
    for name in used:
        readers[name] = readers.get(name, 0) + 1
    by_name = {d.name: d for d in node_defs}
    dropped: set = set()
    # Candidates: what the members read besides their group's inputs.
    todo = [i.split(":")[0] for m in replaced for i in by_name[m].input
            if not i.startswith("^")]
    while todo:
        name = todo.pop()
        d = by_name.get(name)
        if d is None or name in dropped or name in keep or d.op not in _PASS_THROUGH or \
                readers.get(name, 0):
            continue
        dropped.add(name)
        for i in d.input:
            src = i.lstrip("^").split(":")[0]
            readers[src] = readers.get(src, 0) - 1
            todo.append(src)
    return [d for d in node_defs if d.name not in dropped]


def _rewired(d: NodeDef, replaced: dict) -> NodeDef:
    """``d`` waiting for groups instead of their members (each group once)."""
    if not any(i.startswith("^") and i[1:] in replaced for i in d.input):
        return d
    inputs = []
    for i in d.input:
        if i.startswith("^") and i[1:] in replaced:
            i = "^" + replaced[i[1:]].name
            if i in inputs:
                continue
        inputs.append(i)
    return NodeDef(d.name, d.op, inputs, d.device, d.attr, d.site, d.input_types,
                   d.output_types, d.output_shapes)
