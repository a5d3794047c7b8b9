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

from dflab.framework import ops as _ops
from dflab.runtime.config import RunMetadata
from dflab.runtime.placer import PlacementReport
from dflab.visualize import svg as _svg
from dflab.visualize import text as _text
from dflab.visualize.document import GRAPH_MIME, HTML, SVG, TEXT, graph_document
from dflab.visualize.graph import GraphLayout, layout_graph
from dflab.visualize.timeline import timeline_svg


def neighbourhood(op) -> list:
    """``op``, the producers of its inputs, its control inputs, the consumers of its outputs and
    the ops it is a control input of."""
    ops = [op] + [t.op for t in op.inputs] + list(op.control_inputs)
    for t in op.outputs:
        ops += t.consumers()
    ops += list(getattr(op, "control_outputs", ()))
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
    return graph_document(layout.svg, layout.nodes, title=_title(obj), source=source,
                          selected=selected, graph=graph)


def _title(obj) -> str:
    """What a drawing shows, in words, above it (a graph needs none)."""
    if isinstance(obj, _ops.Operation):
        return f"op {obj.name} ({obj.type}) with its inputs and consumers"
    if isinstance(obj, _ops.Tensor):
        shape = _text.shape_text(obj.shape)
        return f"tensor {obj.name}: {_text.dtype_text(obj.dtype)} {shape}, where it flows"
    if isinstance(obj, PlacementReport):
        return f"where {len(obj.placement)} ops would run, coloured by device"
    return ""


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
