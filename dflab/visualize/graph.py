"""Graph -> DOT -> Graphviz ``dot`` layout -> SVG, plus the metadata a front-end needs.

``layout_graph`` is the one entry point: rich display, the graph widget and the ``%%dflab``
magic all call it. The SVG names every drawn node with an opaque id (``<g id="n12"
class="node op fam-math needed">``); ``GraphLayout.nodes`` says what each id stands for and
``name_to_id`` maps op names to ids (an op inside a collapsed scope maps to the scope's node), so
a front-end can recolour or annotate nodes without laying the graph out again.

Which name scopes are open is chosen to keep the drawing readable, as TensorBoard's graph
dashboard does: by default (``collapse="auto"``) a scope is opened only while the whole drawing
still fits ``fit`` (drawing units, i.e. points: at one screen pixel per point node names are
11 px), scopes are otherwise collapsed into metanodes, alike siblings grouped into series and
auxiliary units (gradients, optimizer, initializers, savers, the global step, hubs) set aside
with their edges hidden (``dflab.visualize.grouping``); the user opens what they want.
``GraphLayout.expanded`` says which scopes ended up open, so a widget can go on from there.

Large graphs stay quick: hubs hide their edges (``model.mark_hubs``), and the effort is chosen
from how many nodes ``dot`` would
lay out (drawn ones plus the virtual nodes long edges and edge labels run through, see
``model.layout_size``): up to ``FAST_ABOVE`` with edge labels, else without them (they stay in
the tooltips), else with Graphviz's iterative phases capped and straight edges. Spline routing
around thousands of virtual nodes is what makes ``dot`` slow: a 2,000-op graph takes over a
minute with Graphviz's defaults and about a second this way (benchmarks/bench_graph_layout.py).
"""

from __future__ import annotations

import threading

from dflab.framework import ops as _ops
from dflab.visualize import dot as _dot
from dflab.visualize import facts as _facts
from dflab.visualize import grouping as _grouping
from dflab.visualize import model as _model
from dflab.visualize import style as _style
from dflab.visualize import svg as _svg
from dflab.visualize import text as _text
from dflab.visualize.document import GRAPH_MIME, SVG, TEXT, graph_document
from dflab.visualize.looks import COLOR_MODES, INTERNAL_MODES, Styler
from dflab.visualize.quiet_stderr import first_call_without_fontconfig_warnings

__all__ = ["COLOR_MODES", "GraphLayout", "layout_graph", "render_svg"]

# The space a default drawing is fitted to, in drawing units (points): about a notebook cell's
# width and three quarters of a projector's height, at one pixel per point (names 11 px).
FIT = (900.0, 620.0)
ALL_OPEN_UP_TO = 200  # ops; a bigger graph is never tried with every scope open
FIT_TRIES = 8  # layouts tried (besides the first) while choosing which scopes to open
# The least area a node takes in a drawing (Graphviz's smallest default node, 0.75 x 0.5 in,
# without the space between nodes): a view of more nodes than FIT holds at that size cannot
# fit, and is not laid out to find that out (a 2,000-op layout takes seconds).
MIN_UNIT_AREA = 54.0 * 36.0
FAST_ABOVE = 600  # nodes dot lays out (virtual ones included); above: capped effort
EXPRESSION_LIMIT = 600  # characters of a fused node's expression kept in its details
FUSED_TITLE_OPS = 16  # fused ops listed one per line in a fused node's tooltip
_GRAPHVIZ = threading.Lock()  # Graphviz keeps global state: one layout at a time


class GraphLayout:
    """A laid-out drawing: ``svg`` plus per-node metadata (see the module docstring)."""

    def __init__(self, svg: str, nodes: dict, name_to_id: dict, edges: list, clusters: list,
                 legend: dict, color_by: str, dot: str, graph=None, expanded=(),
                 compact: bool = False):
        self.svg = svg
        self.graph = graph  # the drawn ops' graph: their wiring for the graph document
        self.nodes = nodes
        self.name_to_id = name_to_id
        self.edges = edges
        self.clusters = clusters
        self.legend = legend
        self.color_by = color_by
        self.dot = dot
        self.expanded = list(expanded)  # the name scopes (and series) drawn open
        self.compact = compact  # edge labels beside their edges, ranks closer

    def to_json(self) -> dict:
        """Everything but the SVG and the DOT, as JSON-able data."""
        return {"nodes": self.nodes, "name_to_id": self.name_to_id, "edges": self.edges,
                "clusters": self.clusters, "legend": self.legend, "color_by": self.color_by}

    def _repr_svg_(self) -> str:
        # Shown as a static image (the %%dflab magic): sized for a notebook cell like rich
        # display's drawings, instead of cut off at the cell's right edge.
        return _svg.fit_to_width(self.svg)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """The SVG, plus the graph document that dflab's JupyterLab renderer draws with pan
        and zoom: a drawing too wide for the cell is then readable there, not cut off."""
        bundle = {TEXT: self.summary(), SVG: self._repr_svg_()}
        doc = graph_document(self.svg, self.nodes, graph=self.graph) if self.nodes else None
        if doc is not None:
            bundle[GRAPH_MIME] = doc
        return {k: v for k, v in bundle.items()
                if (include is None or k in include) and (exclude is None or k not in exclude)}

    def summary(self) -> str:
        """One line a reader can read: what the drawing shows."""
        drawn = [v for v in self.nodes.values() if v["kind"] != "cluster"]
        n_ops = sum(1 for v in drawn if v["kind"] == "op")
        grouped = len(drawn) - n_ops
        also = f", {grouped} groups of ops (click to open)" if grouped else ""
        return f"graph of {len(self.name_to_id)} ops: {n_ops} drawn one by one{also}"

    def __repr__(self):
        n_ops = sum(1 for v in self.nodes.values() if v["kind"] == "op")
        return (f"<GraphLayout {len(self.nodes)} nodes ({n_ops} ops shown, "
                f"{len(self.name_to_id)} ops in all), color_by={self.color_by!r}>")


# --- input ---------------------------------------------------------------------------------
def _source(graph_or_ops):
    """(graph, ops) of a Graph, an Operation, a Tensor or an iterable of ops (None: no graph,
    for drawing partition graphs alone)."""
    if graph_or_ops is None:
        return None, []
    if isinstance(graph_or_ops, _ops.Graph):
        return graph_or_ops, graph_or_ops.get_operations()
    if isinstance(graph_or_ops, _ops.Operation):
        return graph_or_ops.graph, [graph_or_ops]
    if isinstance(graph_or_ops, _ops.Tensor):
        return graph_or_ops.graph, [graph_or_ops.op]
    ops, seen = [], set()
    for x in graph_or_ops:
        op = x.op if isinstance(x, _ops.Tensor) else x
        if not isinstance(op, _ops.Operation):
            raise TypeError(f"layout_graph takes a Graph or Operations, not {type(x).__name__}")
        if id(op) not in seen:
            seen.add(id(op))
            ops.append(op)
    ops.sort(key=lambda op: op.creation_index)
    return (ops[0].graph if ops else None), ops


def _records(graph, ops, color_by, facts, run_metadata, partition_graphs):
    """(records, partitioned). Partition mode draws the partition graphs when there are any,
    else the ops grouped by their assigned device."""
    if color_by != "partition":
        return _model.records_of_ops(ops), False
    defs = partition_graphs
    if defs is None and run_metadata is not None:
        defs = getattr(run_metadata, "partition_graphs", None)
    if defs:
        return _model.records_of_graph_defs(defs, graph, facts.observed), True
    records = _model.records_of_ops(ops)
    for r in records:
        r.partition = facts.device_of(r.name, r.device)
    return records, True


# --- metadata ------------------------------------------------------------------------------
def _attrs(rec) -> dict:
    return {k: _text.attr_text(v) for k, v in sorted(rec.attrs.items()) if k != "_class"}


def _assigned(r, facts) -> str:
    """The device ``r`` was assigned (placement, traced step, partition), "" when unknown."""
    return facts.assigned.get(r.name) or facts.ran_on.get(r.name) or r.partition


def _op_info(uid, unit, styler, facts) -> dict:
    r = unit.members[0]
    return {
        "id": uid, "kind": "op", "name": r.name, "label": unit.label, "op_type": r.type,
        "family": _style.family(r.type), "device": r.device, "assigned_device": _assigned(r, facts),
        "placement_reason": facts.reasons.get(r.name, ""),
        "dtypes": [d for d, _ in r.outputs], "output_shapes": [s for _, s in r.outputs],
        "attrs": _attrs(r), "site": r.site, "frame": r.frame, "n_ops": 1,
    }


def _series_info(uid, unit, styler, facts) -> dict:
    """A series of alike siblings: a scope's facts, plus how many units it stands for."""
    info = _scope_info(uid, unit, styler, facts)
    info.update(kind="series", count=unit.count, loop=False)
    return info


def _scope_info(uid, unit, styler, facts) -> dict:
    devices: dict = {}  # ops per device: assigned where known, else requested
    types: dict = {}
    for r in unit.members:
        d = styler.device(r)
        devices[d] = devices.get(d, 0) + 1
        types[r.type] = types.get(r.type, 0) + 1
    requested = {r.device for r in unit.members}
    assigned = {_assigned(r, facts) for r in unit.members}
    return {
        "id": uid, "kind": "scope", "name": unit.name, "label": unit.label, "op_type": None,
        "device": requested.pop() if len(requested) == 1 else "",
        "assigned_device": assigned.pop() if len(assigned) == 1 else "",
        "devices": devices, "placement_reason": "", "dtypes": [], "output_shapes": [],
        "attrs": {}, "site": unit.members[0].site, "n_ops": len(unit.members),
        "op_types": types, "loop": unit.loop, "expandable": True,
    }


def _fused_info(uid, unit, styler, facts) -> dict:
    """A collapsed fused node: its facts as an op, plus the ops it stands for, in order, and the
    expression its kernel computes."""
    info = _op_info(uid, unit, styler, facts)
    r = unit.members[0]
    names, types = r.fused_ops, r.fused_types
    counts: dict = {}
    for t in types:
        counts[t] = counts.get(t, 0) + 1
    expression = _text.printable(r.attrs.get("expression", ""), EXPRESSION_LIMIT)
    info.update(kind="fused", n_ops=len(names), op_types=counts, expression=expression,
                fused_ops=[{"name": n, "op_type": t} for n, t in zip(names, types)],
                expandable=bool(r.fused))
    # The expression is the one fact that says what the kernel does: keep it whole in the
    # attributes a details panel lists, not cut at the usual attribute length.
    info["attrs"]["expression"] = expression
    return info


_INFOS = {"op": _op_info, "scope": _scope_info, "fused": _fused_info, "series": _series_info}


def _node_infos(view, styler, facts) -> dict:
    nodes = {}
    for uid, unit in view.units.items():
        info = _INFOS[unit.kind](uid, unit, styler, facts)
        names = [r.name for r in unit.members]
        info["parent"] = unit.parent
        info["in_fetch_subgraph"] = bool(facts.needed is not None and
                                         any(n in facts.needed for n in names))
        info["fetched"] = any(n in facts.fetched for n in names)
        info["fed"] = any(n in facts.fed for n in names)
        info["highlighted"] = any(n in facts.highlighted for n in names)
        if uid in styler.values:
            info["time_us" if styler.mode == "time" else "output_bytes"] = styler.values[uid]
        if uid in view.hubs:  # its edges to these nodes are not drawn
            info["hub_neighbours"] = list(view.hubs[uid])
        if unit.aux:
            info["auxiliary"] = unit.aux
            info["hidden_neighbours"] = list(view.aux.get(uid, ()))
        nodes[uid] = info
    for cid, c in view.clusters.items():
        nodes[cid] = {"id": cid, "kind": "cluster", "cluster_kind": c.kind, "name": c.name,
                      "label": c.label, "parent": c.parent, "n_ops": c.n_ops,
                      "in_fetch_subgraph": False, "highlighted": False}
    return nodes


def _hub_note(info: dict, nodes: dict) -> str:
    hidden = info.get("hidden_neighbours") or info.get("hub_neighbours", ())
    names = [nodes[u]["name"] for u in hidden]
    if not names:
        return ""
    more = f", \u2026 ({len(names)} in all)" if len(names) > 8 else ""
    return "\nedges hidden to: " + ", ".join(names[:8]) + more


def _title(info: dict) -> str:
    """The tooltip of a node: everything worth knowing, one fact per line."""
    if info["kind"] == "cluster":
        if info["cluster_kind"] == "aux":
            return (f"auxiliary: {info['n_ops']} ops of plumbing (gradients, updates, "
                    "initializers, ...) set aside; their edges to the rest are hidden, hover a "
                    "node for them, click it to open it")
        fused = " fused into one kernel" if info["cluster_kind"] == "fused" else ""
        return f"{info['name']} ({info['n_ops']} ops{fused})"
    if info["kind"] == "series":
        kinds = ", ".join(f"{t} \u00d7{n}" for t, n in sorted(info["op_types"].items(),
                                                               key=lambda kv: -kv[1])[:6])
        return (f"{info['name']} \u2014 a series of {info['count']} alike, {info['n_ops']} ops"
                f"\n{kinds}\nclick to draw them one by one")
    if info["kind"] == "scope":
        kinds = ", ".join(f"{t} \u00d7{n}" for t, n in sorted(info["op_types"].items(),
                                                               key=lambda kv: -kv[1])[:6])
        return f"{info['name']}/ \u2014 {info['n_ops']} ops\n{kinds}"
    if info["kind"] == "fused":
        return _fused_title(info)
    return "\n".join([f"{info['name']} ({info['op_type']})", *_op_lines(info, info["attrs"])])


def _fused_title(info: dict) -> str:
    ops = [f"  {o['name']} ({o['op_type']})" for o in info["fused_ops"][:FUSED_TITLE_OPS]]
    if len(info["fused_ops"]) > FUSED_TITLE_OPS:
        ops.append("  \u2026")
    lines = [f"{info['name']} \u2014 {info['n_ops']} ops fused into one kernel:", *ops,
             info["expression"], *_op_lines(info, {})]
    if info["expandable"]:
        lines.append("expand it to draw its ops")
    return "\n".join(lines)


def _op_lines(info: dict, attrs: dict) -> list:
    """An op's tooltip below its name: outputs, devices, ``attrs``, creation site."""
    lines = []
    outs = [f"{d} {s}" for d, s in zip(info["dtypes"], info["output_shapes"])]
    if outs:
        lines.append("outputs: " + "; ".join(outs))
    if info["device"]:
        lines.append(f"requested: {info['device']}")
    if info["assigned_device"]:
        reason = f" ({info['placement_reason']})" if info["placement_reason"] else ""
        lines.append(f"assigned: {info['assigned_device']}{reason}")
    for k, v in list(attrs.items())[:12]:
        lines.append(f"{k} = {v}")
    if info["site"]:
        lines.append(f"created at {info['site']}")
    return lines


def _edge_infos(view, looks) -> list:
    return [{"id": e.id, "source": e.source, "target": e.target, "kind": e.kind,
             "count": e.count, "tensors": list(e.tensors), "label": "; ".join(e.texts),
             "back": e.back, "drawn": not e.hidden, "classes": looks[e.id].classes}
            for e in view.edges]


def _edge_title(e, view) -> str:
    src, dst = view.units[e.source].name, view.units[e.target].name
    shown = ", ".join(e.tensors[:6]) + (", \u2026" if e.count > 6 else "")
    texts = f"\n{'; '.join(e.texts[:4])}" if e.texts else ""
    return f"{src} \u2192 {dst} ({e.kind}): {shown}{texts}"


def _cluster_infos(view) -> list:
    return [{"id": c.id, "kind": c.kind, "name": c.name, "label": c.label, "parent": c.parent,
             "units": list(c.units), "clusters": list(c.clusters), "n_ops": c.n_ops}
            for c in view.clusters.values()]


# --- Graphviz -------------------------------------------------------------------------------
def layout_effort(view) -> tuple[bool, bool]:
    """(edge labels, capped effort) for ``view`` (see the module docstring)."""
    if _model.layout_size(view, labels=True) <= FAST_ABOVE:
        return True, False
    return False, _model.layout_size(view, labels=False) > FAST_ABOVE


def has_loops(view) -> bool:
    """Whether ``view`` draws a while-loop frame (see ``graph_attributes``)."""
    return any(c.kind == "frame" for c in view.clusters.values())


def graph_attributes(capped: bool, loops: bool = False) -> dict:
    """Graphviz attributes of the whole drawing. ``loops`` (a compact drawing): the drawing
    has while-loop frames, whose control machinery (Enter, Merge, Switch, Exit, NextIteration
    per loop variable) makes it many ranks deep, or would not fit its space otherwise: ranks
    are packed closer and edge labels float beside their edges (``to_dot(float_labels=True)``),
    which makes it about a quarter shorter and fits a canvas with readable names."""
    attrs = {"rankdir": "TB", "nodesep": "0.3", "ranksep": "0.42", "fontname": _style.FONT,
             "bgcolor": _style.BACKGROUND, "outputorder": "edgesfirst", "pad": "0.15"}
    if loops:
        attrs.update({"ranksep": "0.3", "nodesep": "0.22", "forcelabels": "true"})
    if capped:
        # Network simplex and mincross iterate until stable: capping them costs some crossings.
        # Capped positions make spline routing far slower (long edges wind around many
        # virtual nodes), so edges go straight.
        attrs.update({"nslimit": "0.2", "nslimit1": "0.2", "mclimit": "0.1",
                      "remincross": "false", "searchsize": "10", "splines": "line"})
    return attrs


def render_svg(dot: str) -> str:
    """Lay ``dot`` out with Graphviz ``dot`` and return the SVG text."""
    import pygraphviz  # the drawing extra: an ImportError here means text-only display

    def lay_out() -> bytes:
        g = pygraphviz.AGraph(string=dot)
        g.layout(prog="dot")
        return g.draw(format="svg")

    with _GRAPHVIZ:
        data = first_call_without_fontconfig_warnings(lay_out)
    return data.decode("utf-8")


def _finish(raw: str, titles: dict, legend, caption: str) -> str:
    root = _svg.parse(raw)
    _svg.sanitize(root)
    graph_group = root.find(_svg.q("g"))
    if graph_group is not None:
        titles = {**titles, graph_group.get("id"): caption}
    _svg.set_titles(root, titles)
    _svg.add_legend(root, legend)
    root.set("class", "dflab-graph")
    return _svg.serialize(root)


def empty_layout(color_by: str, message: str = "empty graph") -> GraphLayout:
    svg = _svg.message_svg(message)
    return GraphLayout(svg, {}, {}, [], [], {}, color_by, "digraph dflab {}")


class _Drawing:
    """One view of the records, styled and written as DOT (laid out by ``render_svg``)."""

    def __init__(self, records, partitioned, facts, color_by, *, collapse, expanded,
                 compact=False, measuring=False):
        view = self.view = _model.build_view(records, collapse=collapse, expanded=expanded,
                                             partitioned=partitioned,
                                             keep_edges=facts.highlighted)
        styler = self.styler = Styler(view, facts, color_by)
        self.looks = {uid: styler.unit_look(uid, u) for uid, u in view.units.items()}
        shapes = {uid: styler.shape(u) for uid, u in view.units.items()}
        cluster_looks = {cid: styler.cluster_look(c) for cid, c in view.clusters.items()}
        labels, capped = layout_effort(view)
        self.edge_looks = {e.id: styler.edge_look(e, labels) for e in view.edges}
        compact = compact or has_loops(view)
        attrs = graph_attributes(capped, compact)
        if measuring:
            attrs["splines"] = "line"  # where nodes go is what counts, and found far faster
        self.dot = _dot.to_dot(view, self.looks, cluster_looks, self.edge_looks, shapes, attrs,
                               float_labels=compact)
        self.legend = styler.legend()

    def size(self) -> tuple[float, float]:
        """(width, height) of the drawing with its legend, in drawing units."""
        w, h = measure(self.dot)
        _, legend_w, legend_h = _svg.draw_legend(self.legend, max(w, 420.0))
        return max(w, legend_w), h + legend_h


def measure(dot: str) -> tuple[float, float]:
    """(width, height) in points of ``dot`` laid out by Graphviz (its padding included)."""
    import pygraphviz

    def lay_out():
        g = pygraphviz.AGraph(string=dot)
        g.layout(prog="dot")
        return g.graph_attr["bb"], g.graph_attr.get("pad") or "0"

    with _GRAPHVIZ:
        bb, pad = first_call_without_fontconfig_warnings(lay_out)
    x0, y0, x1, y1 = (float(v) for v in bb.split(","))
    pad_pt = 2 * 72 * float(str(pad).split(",")[0])
    return x1 - x0 + pad_pt, y1 - y0 + pad_pt


def _candidates(records) -> list[str]:
    """The scopes a default drawing may open, parents before children, in the order the graph
    made them: not the plumbing (``grouping.plumbing``), not a variable's own scope, none
    holding fewer than two ops."""
    members = _model.scope_members(records)  # in the order the graph made them
    out = [s for s, rs in members.items() if len(rs) >= 2 and not _grouping.plumbing(s, rs)
           and not _grouping.is_variable_scope(s, rs)]
    return sorted(out, key=lambda s: s.count("/"))  # stable: made-first stays first


def _lone_scopes(records) -> set:
    """Scopes that hold everything around them (``rnn`` around a whole ``dynamic_rnn`` step):
    collapsed, they would be a drawing of one node. Outermost first, down to the first scope
    that shares its level with something else."""
    members = _model.scope_members(records)
    opened, around, level = set(), len(records), ""
    while True:
        inner = [s for s in members if s.rpartition("/")[0] == level]
        if len(inner) != 1 or len(members[inner[0]]) != around:
            return opened
        level = inner[0]
        opened.add(level)


def _open_by_default(records, partitioned, facts, color_by, expanded, fit):
    """(scopes to open, compact) so that the drawing fits ``fit`` (see the module docstring):
    every op drawn (None instead of scopes) when that fits, else, from everything collapsed,
    each candidate scope in turn that still lets it fit (at most FIT_TRIES tried).
    ``expanded`` is always open. ``compact`` (edge labels beside their edges, ranks closer) is
    chosen when the drawing fits only that way."""
    base = _model.closure(expanded) | _lone_scopes(records)

    def fits(opened, compact) -> bool:
        drawing = _Drawing(records, partitioned, facts, color_by, collapse=opened is not None,
                           expanded=base if opened is None else opened, compact=compact,
                           measuring=True)
        if len(drawing.view.units) * MIN_UNIT_AREA > fit[0] * fit[1]:
            return False  # more nodes than the area holds: no layout needed to know
        w, h = drawing.size()
        return w <= fit[0] and h <= fit[1]

    candidates = _candidates(records)
    if len(records) <= ALL_OPEN_UP_TO:
        for compact in (False, True):
            if fits(None, compact):
                return None, compact
    compact = not fits(base, False)
    if not candidates or (compact and not fits(base, True)):
        return base, compact
    opened, tries = set(base), 0
    for scope in candidates:
        parent = scope.rpartition("/")[0]
        if scope in opened or (parent and parent not in opened) or tries >= FIT_TRIES:
            continue
        tries += 1
        if fits(opened | {scope}, compact):
            opened.add(scope)
    return opened, compact


def layout_graph(graph_or_ops, *, expanded=(), collapse="auto", fit=FIT, compact=None,
                 fetches=None, feeds=None, highlight=None, color_by: str = "op",
                 placement=None, run_metadata=None, partition_graphs=None,
                 emphasize=None) -> GraphLayout:
    """Lay out a graph (or some of its ops) and draw it as SVG.

    ``collapse``: ``"auto"`` (default) opens the name scopes that keep the drawing within
    ``fit`` (width, height in drawing units) plus those named in ``expanded``; ``True`` opens
    only ``expanded``; ``False`` opens every scope. ``compact`` (edge labels beside the edges,
    ranks closer; always so for loops): None lets ``"auto"`` choose it when it makes the
    drawing fit. The layout's ``expanded`` and ``compact`` say what was chosen.
    ``fetches``/``feeds``: fade what ``Session.run(fetches, feeds)`` would not execute.
    ``highlight``: ops (or names) drawn with an accent border; ``emphasize``: tensors whose
    edges are drawn in the accent colour.
    ``color_by``: one of ``COLOR_MODES``. ``placement``: a ``PlacementReport`` or a dict of op
    (or name) to ``Placement``/device; ``run_metadata``: a traced step (times, bytes, devices,
    partition graphs); ``partition_graphs``: ``GraphDef`` per device, drawn in
    ``color_by="partition"`` with each partition a cluster and ``_Send``->``_Recv`` edges
    between them.
    """
    if color_by not in COLOR_MODES + INTERNAL_MODES:
        raise ValueError(f"color_by must be one of {', '.join(COLOR_MODES)}; got {color_by!r}")
    if collapse not in ("auto", True, False):
        raise ValueError(f"collapse must be 'auto', True or False; got {collapse!r}")
    graph, ops = _source(graph_or_ops)
    facts = _facts.gather(graph, placement=placement, run_metadata=run_metadata,
                          fetches=fetches, feeds=feeds, highlight=highlight,
                          emphasize=emphasize)
    records, partitioned = _records(graph, ops, color_by, facts, run_metadata,
                                    partition_graphs)
    if not records:
        return empty_layout(color_by)
    if collapse == "auto":
        opened, chosen = _open_by_default(records, partitioned, facts, color_by, expanded,
                                          fit)
        compact = chosen if compact is None else compact
        collapse = opened is not None
        expanded = expanded if opened is None else opened  # fused nodes open only if named
    drawing = _Drawing(records, partitioned, facts, color_by, collapse=collapse,
                       expanded=expanded, compact=bool(compact))
    view = drawing.view
    nodes = _node_infos(view, drawing.styler, facts)
    titles = {uid: _title(info) + _hub_note(info, nodes) for uid, info in nodes.items()}
    titles.update({e.id: _edge_title(e, view) for e in view.edges})
    legend = drawing.legend
    caption = f"{len(records)} ops \u00b7 colour: {legend.caption}"
    svg = _finish(render_svg(drawing.dot), titles, legend, caption)
    return GraphLayout(svg, nodes, dict(view.unit_of), _edge_infos(view, drawing.edge_looks),
                       _cluster_infos(view), legend.to_json(), color_by, drawing.dot, graph,
                       expanded=view.expanded, compact=bool(compact) or has_loops(view))
