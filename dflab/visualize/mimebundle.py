"""Rich display: the MIME bundle of a Graph, Operation, Tensor, RunMetadata or PlacementReport.

``dflab.framework.display`` calls ``mimebundle(obj, include, exclude)`` from each object's
``_repr_mimebundle_``. Every bundle has ``text/plain`` (the repr) and ``image/svg+xml``: a static
drawing that survives in saved notebooks (GitHub, nbviewer). Graphs, ops, tensors and placement
reports also carry ``GRAPH_MIME``, a JSON document (see ``graph_document``) that dflab's
JupyterLab renderer (``extension/lab``) draws as the interactive graph, with no kernel. Front-ends
that do not know that type show the SVG. Only the MIME types asked for are computed, so
excluding both drawings skips the layout.

* Graph: the whole graph (scopes collapsed when large);
* Operation: the op and its one-hop neighbourhood (inputs, consumers, control edges), the op
  highlighted;
* Tensor: its producer's neighbourhood, the tensor's edges emphasised;
* RunMetadata: the step's timeline, and below it the partition graphs when the run recorded them;
* PlacementReport: the placed ops coloured by assigned device, plus the report's HTML table.
"""

from __future__ import annotations

import json

from dflab.framework import ops as _ops
from dflab.runtime.config import RunMetadata
from dflab.runtime.placer import PlacementReport
from dflab.visualize import svg as _svg
from dflab.visualize import text as _text
from dflab.visualize.graph import GraphLayout, layout_graph
from dflab.visualize.timeline import timeline_svg

SVG, TEXT, HTML = "image/svg+xml", "text/plain", "text/html"
GRAPH_MIME = "application/vnd.dflab.graph+json"
DOCUMENT_VERSION = 1
# A bigger document is left out of the bundle (the SVG alone is kept): saved notebooks stay
# small, and a drawing that large is better explored with a kernel and GraphView.
MAX_DOCUMENT_BYTES = 4_000_000
MAX_LISTED_TENSORS = 32  # inputs/outputs listed per op in a document's node details


def neighbourhood(op) -> list:
    """``op``, the producers of its inputs, its control inputs, the consumers of its outputs and
    the ops it is a control input of."""
    ops = [op] + [t.op for t in op.inputs] + list(op.control_inputs)
    for t in op.outputs:
        ops += t.consumers()
    ops += list(getattr(op, "_control_outputs", ()))
    return ops


# Each drawer returns a GraphLayout (its SVG and node metadata) or, for a drawing that is not
# one graph, the SVG alone.
def _graph_layout(graph) -> GraphLayout:
    return layout_graph(graph)


def _op_layout(op) -> GraphLayout:
    return layout_graph(neighbourhood(op), highlight=[op])


def _tensor_layout(tensor) -> GraphLayout:
    return layout_graph(neighbourhood(tensor.op), highlight=[tensor.op], emphasize=[tensor])


def _run_metadata_svg(md) -> str:
    timeline = timeline_svg(md)
    if not md.partition_graphs:
        return timeline
    partitions = layout_graph(None, color_by="partition", run_metadata=md).svg
    return _svg.stack([timeline, partitions])


def _placement_layout(report) -> GraphLayout:
    return layout_graph(list(report.placement), color_by="device", placement=report)


_DRAWERS = (
    (_ops.Graph, _graph_layout),
    (_ops.Operation, _op_layout),
    (_ops.Tensor, _tensor_layout),
    (RunMetadata, _run_metadata_svg),
    (PlacementReport, _placement_layout),
)


# --- the graph document ---------------------------------------------------------------------
def _tensor_list(tensors) -> list[dict]:
    """Name, dtype and shape of up to MAX_LISTED_TENSORS tensors (a note says how many more)."""
    tensors = list(tensors)
    out = [{"name": t.name, "dtype": _text.dtype_text(t.dtype), "shape": _text.shape_text(t.shape)}
           for t in tensors[:MAX_LISTED_TENSORS]]
    if len(tensors) > MAX_LISTED_TENSORS:
        out.append({"name": f"\u2026 {len(tensors) - MAX_LISTED_TENSORS} more", "dtype": "",
                    "shape": ""})
    return out


def _wiring(graph, name: str) -> dict:
    """The inputs and outputs (with dtypes and shapes) of op ``name`` in ``graph``, or {}."""
    try:
        op = graph.get_operation_by_name(name)
    except (KeyError, ValueError, TypeError):
        return {}
    consumers = sorted({c.name for t in op.outputs for c in t.consumers()})
    return {"inputs": _tensor_list(op.inputs), "outputs": _tensor_list(op.outputs),
            "control_inputs": [c.name for c in op.control_inputs][:MAX_LISTED_TENSORS],
            "consumers": consumers[:MAX_LISTED_TENSORS]}


def document_nodes(nodes: dict, graph=None) -> dict:
    """The layout's node infos plus, per op, its name scope and (given its graph) wiring."""
    out = {}
    for nid, info in nodes.items():
        info = dict(info)
        name = info.get("name") or ""
        if info.get("kind") in ("op", "fused", "scope"):
            info["scope"] = name.rpartition("/")[0]
        if graph is not None and info.get("kind") in ("op", "fused"):
            info.update(_wiring(graph, name))
        out[nid] = info
    return out


def graph_document(svg: str, nodes: dict, *, title: str = "", source: str = "graph",
                   selected: str = "", graph=None) -> dict | None:
    """The ``GRAPH_MIME`` document: ``{"version", "source", "title", "svg", "nodes",
    "selected"}``: the laid-out SVG (node groups ``<g id=..>``), what each drawn id stands for
    (GraphView's node infos plus scope and wiring), and the id to select first. None when it
    would exceed MAX_DOCUMENT_BYTES. Plain JSON: every string is data the renderer escapes."""
    doc = {"version": DOCUMENT_VERSION, "source": source, "title": title, "svg": svg,
           "nodes": jsonable(document_nodes(nodes, graph)), "selected": selected}
    if len(json.dumps(doc)) > MAX_DOCUMENT_BYTES:
        return None
    return doc


def jsonable(value):
    """A copy of ``value`` that json can encode (anything unusual becomes its str)."""
    return json.loads(json.dumps(value, default=str))


def _layout_document(obj, layout: GraphLayout) -> dict | None:
    graph = getattr(obj, "graph", None)
    selected = ""
    if isinstance(obj, _ops.Operation | _ops.Tensor):
        op = obj if isinstance(obj, _ops.Operation) else obj.op
        selected = layout.name_to_id.get(op.name, "")
    if isinstance(obj, PlacementReport):
        ops = list(obj.placement)
        graph = ops[0].graph if ops and hasattr(ops[0], "graph") else None
    kind = {_ops.Graph: "graph", _ops.Operation: "operation", _ops.Tensor: "tensor",
            PlacementReport: "placement"}
    source = next((v for k, v in kind.items() if isinstance(obj, k)), "graph")
    graph = obj if isinstance(obj, _ops.Graph) else graph
    return graph_document(layout.svg, layout.nodes, title=repr(obj), source=source,
                          selected=selected, graph=graph)


def _wanted(mime: str, include, exclude) -> bool:
    if include is not None and mime not in include:
        return False
    return exclude is None or mime not in exclude


def mimebundle(obj, include=None, exclude=None) -> dict:
    """``{mime: data}`` for ``obj``; an object dflab does not draw gets only ``text/plain``."""
    bundle = {}
    if _wanted(TEXT, include, exclude):
        bundle[TEXT] = repr(obj)
    draw = next((fn for kind, fn in _DRAWERS if isinstance(obj, kind)), None)
    want_svg, want_doc = _wanted(SVG, include, exclude), _wanted(GRAPH_MIME, include, exclude)
    if draw is not None and (want_svg or want_doc):
        drawing = draw(obj)
        layout = drawing if isinstance(drawing, GraphLayout) else None
        if want_svg:
            bundle[SVG] = _svg.fit_to_width(layout.svg if layout else drawing)
        doc = _layout_document(obj, layout) if want_doc and layout and layout.nodes else None
        if doc is not None:
            bundle[GRAPH_MIME] = doc
    if isinstance(obj, PlacementReport) and _wanted(HTML, include, exclude):
        bundle[HTML] = obj._repr_html_()
    return bundle
