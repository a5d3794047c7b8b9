"""What a graph drawing shows, as plain data: ops become *records*, records become a *view*.

A record is one op described by name (from a live ``Operation`` or from a ``NodeDef`` of a
partition graph), so that graphs and partition graphs are drawn by the same code. A view decides
what is drawn: which ops are shown alone, which name scopes are collapsed into one metanode
(TensorBoard's rule: in a large graph every scope starts collapsed, ``expanded`` opens some), which
open scopes, while-loop frames and device partitions become clusters, and which edges join the
drawn units, aggregated with a count when several tensors run between the same two units.

A fused node (``_FusedElementwise``, ``_FusedMatMul``, ``_FusedConv2D``, ``_FusedMatMulSum``:
made by the fusion and remapper passes in partition graphs) is drawn as one unit of kind
``fused`` standing for the ops it replaced; naming it in ``expanded`` (as a scope is opened)
draws a ``fused`` cluster holding one unit per replaced op instead, wired as the partition
runs them. That needs the user's graph (the ops' own records); without it a fused node stays
collapsed.

In a big drawing, a unit joined to very many others (a ``gradients`` or ``Adam`` metanode, a
constant read everywhere) is a *hub*: as TensorBoard does with its auxiliary nodes, its edges to
non-hubs are kept in the data but not drawn, which keeps the layout readable and fast. Repeated
siblings are grouped into a *series* and auxiliary units (gradients, optimizer, initializers,
savers, summaries, the global step, hubs) are set aside (``dflab.visualize.grouping``).

Invariants: every record belongs to exactly one unit (``View.unit_of``), where an expanded fused
node's record is replaced by its members' records (the sink's under the fused node's name); an
edge never joins a unit to itself; clusters nest strictly (a cluster's parent is a cluster or
None).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dflab.framework.op_kinds import BACK_EDGE_OPS, ENTER_OPS
from dflab.framework.op_kinds import RECV_OPS as RECV_TYPES
from dflab.framework.op_kinds import SEND_OPS as SEND_TYPES
from dflab.visualize import grouping as _grouping
from dflab.visualize import text as _text

_COMM_PREFIXES = ("_send/", "_recv/")


@dataclass
class OpRecord:
    """One op as the drawing needs it; ``outputs`` holds ``(dtype, shape)`` text per slot."""

    name: str
    type: str
    device: str = ""
    site: str = ""
    attrs: dict = field(default_factory=dict)
    outputs: list = field(default_factory=list)
    inputs: list = field(default_factory=list)  # (producer name, output slot)
    control_inputs: list = field(default_factory=list)  # producer names
    frame: str = ""  # the innermost while-loop frame the op runs in ("" outside loops)
    partition: str = ""  # the partition's device, in a drawing of partition graphs
    fused: list = field(default_factory=list)  # a fused node's members (OpRecords), if known
    fused_into: str = ""  # the fused node a member was replaced by

    @property
    def is_fused(self) -> bool:
        """A node a rewrite made of several ops (elementwise or contraction fusion)."""
        return bool(self.attrs.get("fused_ops"))

    @property
    def fused_ops(self) -> list[str]:
        """Names of the ops a fused node replaced, in order, sink last (its ``fused_ops``)."""
        return _names_attr(self.attrs.get("fused_ops")) if self.is_fused else []

    @property
    def fused_types(self) -> list[str]:
        return _names_attr(self.attrs.get("fused_types")) if self.is_fused else []

    @property
    def is_comm(self) -> bool:
        return self.type in SEND_TYPES or self.type in RECV_TYPES

    def transfer_key(self):
        """(tensor, send device, recv device) of a _Send/_Recv, else None."""
        a = self.attrs
        if not self.is_comm or "tensor_name" not in a:
            return None
        return (a["tensor_name"], a.get("send_device", ""), a.get("recv_device", ""))


# --- records -------------------------------------------------------------------------------
def _names_attr(value) -> list[str]:
    """A list-of-strings attr as a list ([] when absent or not a list)."""
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def _frame_of(op) -> str:
    ctx = getattr(op, "control_flow_context", None)  # a runtime Node has none
    while ctx is not None and not hasattr(ctx, "frame_name"):
        ctx = getattr(ctx, "outer_context", None)
    return getattr(ctx, "frame_name", "") or ""


def record_of_op(op) -> OpRecord:
    return OpRecord(
        name=op.name, type=op.type, device=op.device or "",
        site=_text.readable_site(op.creation_site or ""),
        attrs=dict(op.attrs),
        outputs=[(_text.dtype_text(t.dtype), _text.shape_text(t.shape)) for t in op.outputs],
        inputs=[(t.op.name, t.value_index) for t in op.inputs],
        control_inputs=[c.name for c in op.control_inputs],
        frame=_frame_of(op))


def records_of_ops(ops) -> list[OpRecord]:
    return [record_of_op(op) for op in ops]


def _parse_input(name: str) -> tuple[str, int, bool]:
    """(producer, slot, is_control) of a NodeDef input: ``x``, ``x:1`` or ``^x``."""
    if name.startswith("^"):
        return name[1:], 0, True
    base, _, slot = name.rpartition(":")
    if base and slot.isdigit():
        return base, int(slot), False
    return name, 0, False


def _static(op) -> list:
    return [(_text.dtype_text(t.dtype), _text.shape_text(t.shape)) for t in op.outputs]


def _node_def_outputs(nd, by_name, observed) -> list:
    """Output descriptions of a partition node: static ones when the graph is known (for a
    _Recv, those of the tensor it receives), else what the traced step observed, else (for a
    _Recv) its declared type and shape."""
    op = by_name.get(nd.name)
    if op is not None and (op.type == nd.op or nd.attr.get("fused_ops")):
        return _static(op)  # a fused node produces its sink's outputs, under its name
    if nd.op in RECV_TYPES and "tensor_name" in nd.attr:
        src, slot, is_control = _parse_input(nd.attr["tensor_name"])
        sent = by_name.get(src)
        if sent is not None and not is_control and slot < len(sent.outputs):
            return [_static(sent)[slot]]
    if nd.name in observed:
        return observed[nd.name]
    if nd.op in RECV_TYPES and "tensor_type" in nd.attr:
        return [(_text.dtype_text(nd.attr["tensor_type"]), _text.shape_text(nd.attr.get("shape")))]
    return []


def records_of_graph_defs(graph_defs, graph=None, observed=None) -> list[OpRecord]:
    """Records of partition graphs (one ``GraphDef`` per device, ``_Send``/``_Recv`` included).

    ``graph`` (the user's graph) supplies static shapes and loop frames of the original ops, and
    the members of fused nodes; ``observed`` maps node names to output descriptions seen in a
    traced step.
    """
    by_name = {op.name: op for op in graph.get_operations()} if graph is not None else {}
    observed = observed or {}
    records = []
    for gd in graph_defs:
        for nd in gd.node:
            op = by_name.get(nd.name)
            inputs, controls = [], []
            for name in nd.input:
                src, slot, is_control = _parse_input(name)
                (controls.append(src) if is_control else inputs.append((src, slot)))
            frame = _frame_of(op) if op is not None else nd.attr.get("frame_name", "")
            rec = OpRecord(
                name=nd.name, type=nd.op, device=op.device if op is not None else "",
                site=_text.readable_site(getattr(nd, "site", "") or ""), attrs=dict(nd.attr),
                outputs=_node_def_outputs(nd, by_name, observed), inputs=inputs,
                control_inputs=controls, frame=frame, partition=nd.device)
            if rec.is_fused:
                rec.fused = _fused_members(rec, by_name)
            records.append(rec)
    return records


# --- fused nodes ---------------------------------------------------------------------------
def _external(members, names: set, wiring) -> list:
    """What ``members`` read from outside the group, first seen first: the order in which the
    fusion pass lists a fused node's inputs. ``wiring(m)`` gives one member's references.

    A reduction sink needs no special case: its first input is made by a member (the group
    computes what it reduces) and its axes are seen last, as the pass puts them last."""
    out = []
    for m in members:
        for ref in wiring(m):
            src = ref[0] if isinstance(ref, tuple) else ref
            if src not in names and ref not in out:
                out.append(ref)
    return out


def _rewire(members, fused: OpRecord) -> bool:
    """Point the members' external inputs (the user's tensors) at what the fused node reads in
    its partition (a ``_Recv``, say), by position. False when the counts disagree: then the
    group is not what the graph says it is, and drawing it expanded would mislead."""
    names = {m.name for m in members}
    data = _external(members, names, lambda m: m.inputs)
    controls = _external(members, names, lambda m: m.control_inputs)
    # A fused contraction reads its operands by position, a tensor twice in ``x @ x``.
    inputs = list(dict.fromkeys(fused.inputs))
    if len(data) != len(inputs) or len(controls) != len(fused.control_inputs):
        return False
    to_node = dict(zip(data, inputs))
    to_control = dict(zip(controls, fused.control_inputs))
    for m in members:
        m.inputs = [to_node.get(ref, ref) for ref in m.inputs]
        m.control_inputs = [to_control.get(c, c) for c in m.control_inputs]
    return True


def _fused_members(fused: OpRecord, by_name: dict) -> list[OpRecord]:
    """Records of the ops ``fused`` replaced, taken from the user's graph and wired as the
    partition runs them; [] when they cannot be (no graph, or ops it does not have)."""
    ops = [by_name.get(n) for n in fused.fused_ops]
    if len(ops) < 2 or any(op is None for op in ops) or ops[-1].name != fused.name:
        return []
    members = [record_of_op(op) for op in ops]
    if not _rewire(members, fused):
        return []
    for m in members:  # the group runs where the fused node runs
        m.device, m.partition, m.frame = fused.device, fused.partition, fused.frame
        m.fused_into = fused.name
    return members


# --- the view ------------------------------------------------------------------------------
@dataclass
class Unit:
    """A drawn node: one op (``kind="op"``), a collapsed name scope (``kind="scope"``), a
    collapsed fused node (``kind="fused"``, its one member the fused node's record) or a series
    of alike siblings (``kind="series"``)."""

    id: str
    kind: str
    name: str
    label: str
    parent: str | None
    members: list = field(default_factory=list)  # OpRecords
    loop: bool = False  # a collapsed scope holding a while loop
    aux: str = ""  # why it is set aside as auxiliary ("" for the main structure)
    count: int = 1  # units a series stands for


@dataclass
class Cluster:
    """A drawn box around units: an open scope, a while-loop frame, a device partition or an
    expanded fused node."""

    id: str
    kind: str  # "scope" | "frame" | "partition" | "fused" | "aux"
    name: str
    label: str
    parent: str | None
    units: list = field(default_factory=list)
    clusters: list = field(default_factory=list)
    n_ops: int = 0


@dataclass
class Edge:
    id: str
    source: str
    target: str
    kind: str  # "data" | "control" | "transfer"
    tensors: list = field(default_factory=list)  # tensor names (or transfer keys) carried
    texts: list = field(default_factory=list)  # distinct "dtype [shape]" texts carried
    back: bool = False  # a loop's back edge (drawn without ranking its ends)
    hidden: bool = False  # an edge between a hub and a non-hub: listed, not drawn

    @property
    def count(self) -> int:
        return len(self.tensors)


@dataclass
class View:
    units: dict  # id -> Unit (insertion order = creation order of their first op)
    clusters: dict  # id -> Cluster
    edges: list
    unit_of: dict  # op name -> unit id
    top: list  # ids of the units and clusters outside every cluster, in order
    hubs: dict = field(default_factory=dict)  # hub unit id -> ids of its hidden neighbours
    aux: dict = field(default_factory=dict)  # auxiliary unit id -> ids of hidden neighbours
    expanded: list = field(default_factory=list)  # the scopes (and series) drawn open


def _scopes_of(rec: OpRecord, scope_names: set) -> list[str]:
    """The name scopes ``rec`` sits in, outermost first. An op named like a scope (TF's
    ``Variable`` next to ``Variable/read``) belongs to that scope, as in TensorBoard."""
    if rec.is_comm and rec.name.startswith(_COMM_PREFIXES):
        return []  # partitioner-made names: never group all transfers into one "_send" box
    parts = rec.name.split("/")
    scopes = ["/".join(parts[:k]) for k in range(1, len(parts))]
    if rec.name in scope_names:
        scopes.append(rec.name)
    return scopes


def _all_scope_names(records) -> set:
    names = set()
    for r in records:
        if r.is_comm and r.name.startswith(_COMM_PREFIXES):
            continue
        parts = r.name.split("/")
        names.update("/".join(parts[:k]) for k in range(1, len(parts)))
    return names


def scope_members(records) -> dict:
    """Scope name -> the records in it (at any depth), scopes in the order their first op was
    made."""
    names = _all_scope_names(records)
    members: dict = {}
    for r in records:
        for s in _scopes_of(r, names):
            members.setdefault(s, []).append(r)
    return members


def closure(expanded) -> set:
    """Opening ``a/b`` opens ``a`` as well."""
    out = set()
    for name in expanded or ():
        parts = str(name).strip("/").split("/")
        out.update("/".join(parts[:k]) for k in range(1, len(parts) + 1))
    return out


def _comm_label(rec: OpRecord) -> str:
    """``send h:0`` / ``recv h:0``: what a transfer node moves, not its generated name."""
    key = rec.transfer_key()
    if key is None:
        return rec.name.rsplit("/", 1)[-1]
    return ("send " if rec.type in SEND_TYPES else "recv ") + _text.printable(key[0], 40)


def _relative(name: str, scope: str | None) -> str:
    if scope and name.startswith(scope + "/"):
        return name[len(scope) + 1:]
    return name if scope is None else name.rsplit("/", 1)[-1]


class _Builder:
    def __init__(self, records, collapse: bool, expanded, partitioned: bool):
        self.records = records
        self.collapse = collapse
        self.opened = closure(expanded)
        self.partitioned = partitioned
        self.scope_names = _all_scope_names(records)
        self.frames = {r.frame for r in records if r.frame} | {
            r.attrs.get("frame_name") for r in records if r.type in ENTER_OPS}
        self.ids = 0
        self.units: dict = {}
        self.clusters: dict = {}
        self.top: list = []
        self.unit_of: dict = {}
        self.drawn: list = []  # the records as drawn: an expanded fused node's are its members
        self.by_key: dict = {}  # group key -> unit or cluster id
        self.scopes = {r.name: _scopes_of(r, self.scope_names) for r in records}
        self.by_name = {r.name: r for r in records}
        self.counts = self._count_members()

    def new_id(self) -> str:
        i = f"n{self.ids}"
        self.ids += 1
        return i

    def _count_members(self) -> dict:
        counts: dict = {}
        for r in self.records:
            for s in self.scopes[r.name]:
                counts[(r.partition, s)] = counts.get((r.partition, s), 0) + 1
        return counts

    def is_open(self, scope: str) -> bool:
        return not self.collapse or scope in self.opened

    def counts_any(self, scope: str) -> bool:
        """Whether ``scope`` holds two or more ops in some partition (a scope of one op is
        never drawn as a box or a metanode)."""
        return any(n >= 2 for (_, s), n in self.counts.items() if s == scope)

    def series_names(self) -> set:
        """The names of the series this drawing's siblings would make if grouped."""
        parents = [self.top] + [c.units for c in self.clusters.values()]
        return {name for ids in parents
                for name, _ in _grouping.find_series(
                    [self.units[i] for i in ids if i in self.units], set(), self.by_name)}

    def group_series(self) -> None:
        """Merge each series of alike siblings (``grouping.find_series``) into one unit, drawn
        where its first member was."""
        parents = [(None, self.top)] + [(cid, c.units) for cid, c in self.clusters.items()]
        for parent, ids in parents:
            units = [self.units[i] for i in ids if i in self.units]
            for name, members in _grouping.find_series(units, self.opened, self.by_name):
                uid = self.new_id()
                records = [r for u in members for r in u.members]
                label = name.rsplit("/", 1)[-1]
                self.units[uid] = Unit(uid, "series", name, label, parent, records,
                                       count=len(members))
                gone = {u.id for u in members}
                first = ids.index(members[0].id)
                ids[first] = uid
                ids[:] = [i for i in ids if i not in gone]
                for u in members:
                    del self.units[u.id]
                for name_ in self.unit_of:
                    if self.unit_of[name_] in gone:
                        self.unit_of[name_] = uid

    def attach(self, item_id: str, parent: str | None, is_cluster: bool) -> None:
        if parent is None:
            self.top.append(item_id)
        elif is_cluster:
            self.clusters[parent].clusters.append(item_id)
        else:
            self.clusters[parent].units.append(item_id)

    def cluster(self, key, kind, name, label, parent) -> str:
        cid = self.by_key.get(key)
        if cid is None:
            cid = self.by_key[key] = self.new_id()
            self.clusters[cid] = Cluster(cid, kind, name, label, parent)
            self.attach(cid, parent, True)
        return cid

    def count(self, enclosing: list) -> None:
        for cid in enclosing:
            self.clusters[cid].n_ops += 1

    def metanode(self, r: OpRecord, scope: str, parent, parent_scope) -> str:
        """The unit standing for collapsed ``scope`` (made on its first op)."""
        uid = self.by_key.get(("u", r.partition, scope))
        if uid is None:
            uid = self.by_key[("u", r.partition, scope)] = self.new_id()
            self.units[uid] = Unit(uid, "scope", scope, _relative(scope, parent_scope), parent,
                                   loop=scope + "/while_context" in self.frames)
            self.attach(uid, parent, False)
        return uid

    def place(self, r: OpRecord) -> None:
        """Walk ``r``'s scopes outermost first: the first closed one is its unit; open ones
        become clusters on the way."""
        parent, parent_scope = None, None
        if self.partitioned:
            parent = self.cluster(("p", r.partition), "partition", r.partition,
                                  _text.short_device(r.partition) or "unplaced", None)
        enclosing = [parent] if parent else []
        for s in self.scopes[r.name]:
            n = self.counts[(r.partition, s)]
            if not self.is_open(s) and n >= 2:  # a box standing for one op would hide it
                uid = self.metanode(r, s, parent, parent_scope)
                self.units[uid].members.append(r)
                self.own(r, uid)
                self.count(enclosing)
                return
            parent_n = self.counts.get((r.partition, parent_scope), 0) if parent_scope else 0
            if n >= 2 and n != parent_n:  # a box around one op, or around the same ops, is noise
                kind = "frame" if s + "/while_context" in self.frames else "scope"
                parent = self.cluster(("c", r.partition, s), kind, s, _relative(s, parent_scope),
                                      parent)
                parent_scope = s
                enclosing.append(parent)
        if r.is_fused and r.fused and r.name in self.opened:
            self.open_fused(r, parent, parent_scope, enclosing)
            return
        uid = self.new_id()
        label = _comm_label(r) if r.is_comm else _relative(r.name, parent_scope)
        self.units[uid] = Unit(uid, "fused" if r.is_fused else "op", r.name, label, parent, [r])
        self.attach(uid, parent, False)
        self.own(r, uid)
        self.count(enclosing)

    def own(self, r: OpRecord, uid: str) -> None:
        """``uid`` draws ``r``, and the ops a fused ``r`` replaced: their names find it, as an
        op inside a collapsed scope finds the scope's node."""
        self.drawn.append(r)
        self.unit_of[r.name] = uid
        for name in r.fused_ops:
            self.unit_of[name] = uid

    def open_fused(self, r: OpRecord, parent, parent_scope, enclosing: list) -> None:
        """An expanded fused node: a cluster where its unit would be, one op unit per member.
        The sink's unit takes the fused node's name, so its consumers' edges end there."""
        cid = self.cluster(("f", r.partition, r.name), "fused", r.name,
                           _relative(r.name, parent_scope), parent)
        for m in r.fused:
            uid = self.new_id()
            self.units[uid] = Unit(uid, "op", m.name, _relative(m.name, parent_scope), cid, [m])
            self.attach(uid, cid, False)
            self.drawn.append(m)
            self.unit_of[m.name] = uid
            self.count([*enclosing, cid])


def _joined(desc) -> str:
    """``float32 [?,784]`` from an output's (dtype, shape) texts; empty when unknown."""
    return f"{desc[0]} {desc[1]}" if desc[0] else ""


def _sent(send: OpRecord, by_name: dict):
    """Description of the tensor a _Send sends, as its producer describes it (so a transfer
    edge reads like the data edges around it), or None."""
    if not send.inputs:
        return None
    src, slot = send.inputs[0]
    p = by_name.get(src)
    return p.outputs[slot] if p is not None and slot < len(p.outputs) else None


def _edges(records, unit_of) -> list[Edge]:
    by_name = {r.name: r for r in records}
    edges: dict = {}

    def add(src: str, dst: str, kind: str, tensor: str, text: str, back=False) -> None:
        u, v = unit_of.get(src), unit_of.get(dst)
        if u is None or v is None or u == v:
            return
        e = edges.get((u, v, kind))
        if e is None:
            e = edges[(u, v, kind)] = Edge(f"e{len(edges)}", u, v, kind)
        e.tensors.append(tensor)
        if text and text not in e.texts:
            e.texts.append(text)
        e.back = e.back or back

    for r in records:
        for src, slot in r.inputs:
            p = by_name.get(src)
            if p is None:
                continue
            desc = p.outputs[slot] if slot < len(p.outputs) else ("", "")
            tensor = f"{src}:{slot}"
            back = p.type in BACK_EDGE_OPS
            add(src, r.name, "data", tensor, _joined(desc), back)
        for src in r.control_inputs:
            if src in by_name:
                add(src, r.name, "control", "^" + src, "")
    sends = {r.transfer_key(): r for r in records if r.type in SEND_TYPES}
    for r in records:
        key = r.transfer_key()
        if r.type in RECV_TYPES and key in sends:
            control = key[0].startswith("^")  # a token proving an op ran: nothing to describe
            desc = _sent(sends[key], by_name) or (r.outputs[:1] or [("", "")])[0]
            add(sends[key].name, r.name, "transfer", key[0], "" if control else _joined(desc))
    return list(edges.values())


HUB_MIN_UNITS = 30  # drawings with fewer units show every edge
HUB_DEGREE = 10  # distinct neighbours that make a unit a hub


def mark_hubs(view: View, keep=frozenset()) -> None:
    """Find the hubs of ``view`` and hide their edges to non-hubs (see the module docstring).
    Units in ``keep`` (ids) are never hubs: a highlighted op keeps its edges."""
    if len(view.units) < HUB_MIN_UNITS:
        return
    neighbours: dict = {}
    for e in view.edges:
        if e.kind != "transfer":
            neighbours.setdefault(e.source, set()).add(e.target)
            neighbours.setdefault(e.target, set()).add(e.source)
    hubs = {u for u, n in neighbours.items() if len(n) >= HUB_DEGREE and u not in keep}
    for e in view.edges:
        e.hidden = e.kind != "transfer" and ((e.source in hubs) != (e.target in hubs))
    view.hubs = {u: sorted(n - hubs, key=lambda v: int(v[1:])) for u, n in neighbours.items()
                 if u in hubs}


def layout_size(view: View, labels: bool) -> int:
    """Roughly how many nodes Graphviz's ``dot`` will lay out: the drawn units plus one virtual
    node per rank an edge skips (``dot`` routes a long edge through a chain of them; an edge
    label doubles the ranks and adds a node of its own). Ranks are longest paths from the
    sources, as ``dot`` ranks them; a loop's back edges do not rank."""
    succ: dict = {u: [] for u in view.units}
    indeg = dict.fromkeys(view.units, 0)
    ranked = [e for e in view.edges if not e.back and not e.hidden]
    for e in ranked:
        succ[e.source].append(e.target)
        indeg[e.target] += 1
    rank = dict.fromkeys(view.units, 0)
    ready = [u for u, n in indeg.items() if n == 0]
    while ready:
        u = ready.pop()
        for v in succ[u]:
            rank[v] = max(rank[v], rank[u] + 1)
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    factor = 2 if labels else 1
    virtual = sum(max(factor * (rank[e.target] - rank[e.source]) - 1, 0) for e in ranked)
    return len(view.units) + virtual


def build_view(records, *, collapse: bool, expanded=(), partitioned: bool = False,
               keep_edges=frozenset(), group: bool = True) -> View:
    """Units, clusters and edges of ``records``; ``collapse`` closes every scope not in
    ``expanded`` (names; opening a scope opens its parents). Fused nodes are collapsed unless
    named in ``expanded``, whatever ``collapse`` says. ``group``: alike siblings of a collapsed
    drawing become series and auxiliary units are set aside (``dflab.visualize.grouping``).
    The units of the ops named in ``keep_edges`` never become hubs nor auxiliary."""
    b = _Builder(records, collapse, expanded, partitioned)
    for r in records:
        b.place(r)
    if group and collapse:
        b.group_series()
    view = View(b.units, b.clusters, _edges(b.drawn, b.unit_of), b.unit_of, b.top)
    view.expanded = sorted(s for s in b.scope_names if b.is_open(s) and b.counts_any(s))
    if not collapse:  # drawn one by one: the series it has are open too
        view.expanded = sorted(set(view.expanded) | b.series_names())
    keep = {view.unit_of[n] for n in keep_edges if n in view.unit_of}
    mark_hubs(view, keep)
    if group:
        _grouping.set_aside(view, keep, b.new_id, Cluster)
    return view
