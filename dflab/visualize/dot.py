"""DOT text of a view: every unit a node, every cluster a ``subgraph cluster_*``, every edge one.

Escaping is done here and only here: labels are Graphviz HTML-like labels built from text that
went through ``html.escape`` (so ``<img …>`` in a graph stays text), every other attribute is a
quoted DOT string with ``"`` and ``\\`` escaped, and DOT identifiers are our own ``n12``/``e3``
ids, never graph names. Graphviz copies ``id`` and ``class`` into the SVG (``<g id="n12"
class="node op fam-math">``), which is how a front-end finds and restyles nodes.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from dflab.visualize import style as _style
from dflab.visualize.model import Cluster, Edge, Unit, View

NODE_DEFAULTS = {"fontname": _style.FONT, "fontsize": "11", "height": "0.3",
                 "margin": "0.1,0.04", "fontcolor": _style.TEXT}
EDGE_DEFAULTS = {"fontname": _style.FONT, "fontsize": "8.5", "arrowsize": "0.6",
                 "fontcolor": _style.MUTED_TEXT}


@dataclass
class NodeLook:
    fill: str
    line: str
    text: str
    classes: list = field(default_factory=list)
    penwidth: float = 1.0
    peripheries: int = 1
    dashed: bool = False
    stripes: list | None = None  # [(colour, fraction)] for a scope spanning several devices
    lines: list = field(default_factory=list)  # extra small text lines under the name


@dataclass
class EdgeLook:
    color: str
    classes: list = field(default_factory=list)
    penwidth: float = 1.0
    style: str = "solid"
    label: str = ""


class HtmlLabel(str):
    """A Graphviz HTML-like label, written ``<...>`` instead of quoted; built only by
    ``unit_label``/``_cluster_label``/``_edge`` from escaped text."""


def html_text(text: str) -> str:
    """Text for inside a Graphviz HTML-like label: markup characters become entities."""
    return html.escape(text, quote=True)


def quoted(value) -> str:
    """A DOT quoted string."""
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _attrs(pairs: dict) -> str:
    out = []
    for k, v in pairs.items():
        if v is None:
            continue
        out.append(f"{k}={v}" if isinstance(v, HtmlLabel) else f"{k}={quoted(v)}")
    return "[" + " ".join(out) + "]"


def _font(text: str, size: float, color: str, bold: bool = False) -> str:
    body = html_text(text)
    if bold:
        body = f"<B>{body}</B>"
    return f'<FONT POINT-SIZE="{size:g}" COLOR="{color}">{body}</FONT>'


def unit_label(unit: Unit, look: NodeLook) -> str:
    sub = _style.MUTED_TEXT if look.text == _style.TEXT else look.text
    rows = [_font(unit.label, 11, look.text, bold=True)]
    rows += [_font(line, 9, sub) for line in look.lines if line]
    return HtmlLabel("<" + "<BR/>".join(rows) + ">")


def _node(unit: Unit, look: NodeLook, shape: str) -> str:
    styles = ["filled"]
    if look.stripes:
        styles = ["striped"]  # Graphviz draws stripes only on plain boxes
        shape = "box"
    elif shape == "box":
        styles.append("rounded")
    if look.dashed:
        styles.append("dashed")
    fill = (":".join(f"{c};{f:.3f}" for c, f in look.stripes) if look.stripes else look.fill)
    attrs = {
        "id": unit.id, "class": " ".join(look.classes), "label": unit_label(unit, look),
        "shape": shape, "margin": _style.SHAPE_MARGINS.get(shape),
        "style": ",".join(styles), "fillcolor": fill, "color": look.line,
        "penwidth": f"{look.penwidth:g}" if look.penwidth != 1 else None,
        "peripheries": str(look.peripheries) if look.peripheries != 1 else None,
    }
    return f"{unit.id} {_attrs(attrs)};"


_CLUSTER_TAILS = {"frame": " \u00b7 while-loop frame", "fused": " fused into one kernel",
                  "aux": " set aside \u00b7 edges hidden"}


def _cluster_label(c: Cluster) -> str:
    head = f"\u27f3 {c.label}" if c.kind == "frame" else c.label
    tail = f"{c.n_ops} ops" + _CLUSTER_TAILS.get(c.kind, "")
    return HtmlLabel("<" + _font(head, 11, _style.TEXT, bold=True) + "  "
                     + _font(tail, 9, _style.MUTED_TEXT) + ">")


def _cluster(view: View, c: Cluster, looks: dict, cluster_looks: dict, shapes: dict,
             out: list, depth: int) -> None:
    pad = "  " * depth
    look = cluster_looks[c.id]
    attrs = {"id": c.id, "class": " ".join(look.classes), "label": _cluster_label(c),
             "style": "rounded,filled" + (",dashed" if look.dashed else ""),
             "fillcolor": look.fill, "color": look.line,
             "penwidth": f"{look.penwidth:g}", "labeljust": "l", "margin": "10"}
    out.append(f"{pad}subgraph cluster_{c.id} {{")
    out.append(f"{pad}  graph {_attrs(attrs)};")
    _body(view, c.units, c.clusters, looks, cluster_looks, shapes, out, depth + 1)
    out.append(pad + "}")


def _body(view, unit_ids, cluster_ids, looks, cluster_looks, shapes, out, depth) -> None:
    pad = "  " * depth
    for uid in unit_ids:
        out.append(pad + _node(view.units[uid], looks[uid], shapes[uid]))
    for cid in cluster_ids:
        _cluster(view, view.clusters[cid], looks, cluster_looks, shapes, out, depth)


def _edge(e: Edge, look: EdgeLook, label_key: str = "label") -> str:
    attrs = {"id": e.id, "class": " ".join(look.classes), "color": look.color,
             "style": look.style, "penwidth": f"{look.penwidth:g}",
             label_key: HtmlLabel("<" + _font(look.label, 8.5, _style.MUTED_TEXT) + ">")
             if look.label else None,
             "constraint": "false" if e.back else None,
             "arrowhead": "odot" if e.kind == "control" else None}
    return f"{e.source} -> {e.target} {_attrs(attrs)};"


def _aux_columns(view: View) -> list:
    """Invisible edges stacking the auxiliary units of each parent into a column: they have no
    drawn edges to rank them, and side by side on one rank they would make a wide row."""
    by_parent: dict = {}
    for uid, unit in view.units.items():
        if unit.aux:
            by_parent.setdefault(unit.parent, []).append(uid)
    return [f"  {a} -> {b} [style=invis];" for ids in by_parent.values()
            for a, b in zip(ids, ids[1:])]


def _hub_ranks(view: View) -> list:
    """Hubs outside clusters go to the top rank when they mostly feed others (a shared input),
    else to the bottom (``gradients``, an optimizer): where their hidden edges would lead."""
    outgoing: dict = {}
    for e in view.edges:
        if e.hidden:
            if e.source in view.hubs:
                outgoing[e.source] = outgoing.get(e.source, 0) + 1
            if e.target in view.hubs:
                outgoing[e.target] = outgoing.get(e.target, 0) - 1
    free = [u for u in view.hubs if view.units[u].parent is None and not view.units[u].aux]
    sources = [u for u in free if outgoing.get(u, 0) > 0]
    sinks = [u for u in free if outgoing.get(u, 0) <= 0]
    return [f"  {{rank={kind}; {'; '.join(ids)};}}"
            for kind, ids in (("source", sources), ("sink", sinks)) if ids]


def to_dot(view: View, looks: dict, cluster_looks: dict, edge_looks: dict, shapes: dict,
           graph_attrs: dict, float_labels: bool = False) -> str:
    """The whole DOT document. ``looks``/``shapes``: per unit id; ``edge_looks``: per edge id.
    ``float_labels``: edge labels are placed beside the edges after the layout (``xlabel``)
    instead of taking a rank of their own, which makes tall graphs much shorter."""
    label_key = "xlabel" if float_labels else "label"
    out = ["digraph dflab {", f"  graph {_attrs(graph_attrs)};",
           f"  node {_attrs(NODE_DEFAULTS)};", f"  edge {_attrs(EDGE_DEFAULTS)};"]
    top_units = [i for i in view.top if i in view.units]
    top_clusters = [i for i in view.top if i in view.clusters]
    _body(view, top_units, top_clusters, looks, cluster_looks, shapes, out, 1)
    out += ["  " + _edge(e, edge_looks[e.id], label_key) for e in view.edges if not e.hidden]
    out += _aux_columns(view)
    out += _hub_ranks(view)
    out.append("}")
    return "\n".join(out)
