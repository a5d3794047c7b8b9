"""Rich display: the MIME bundle of a Graph, Operation, Tensor, RunMetadata or PlacementReport.

``dflab.framework.display`` calls ``mimebundle(obj, include, exclude)`` from each object's
``_repr_mimebundle_``. Every bundle has ``text/plain`` (the repr) and ``image/svg+xml``: a static
drawing that survives in saved notebooks (GitHub, nbviewer). Only the MIME types asked for are
computed, so excluding the SVG skips the layout.

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
from dflab.visualize.graph import layout_graph
from dflab.visualize.timeline import timeline_svg

SVG, TEXT, HTML = "image/svg+xml", "text/plain", "text/html"


def neighbourhood(op) -> list:
    """``op``, the producers of its inputs, its control inputs, the consumers of its outputs and
    the ops it is a control input of."""
    ops = [op] + [t.op for t in op.inputs] + list(op.control_inputs)
    for t in op.outputs:
        ops += t.consumers()
    ops += list(getattr(op, "_control_outputs", ()))
    return ops


def _graph_svg(graph) -> str:
    return layout_graph(graph).svg


def _op_svg(op) -> str:
    return layout_graph(neighbourhood(op), highlight=[op]).svg


def _tensor_svg(tensor) -> str:
    return layout_graph(neighbourhood(tensor.op), highlight=[tensor.op],
                        emphasize=[tensor]).svg


def _run_metadata_svg(md) -> str:
    timeline = timeline_svg(md)
    if not md.partition_graphs:
        return timeline
    partitions = layout_graph(None, color_by="partition", run_metadata=md).svg
    return _svg.stack([timeline, partitions])


def _placement_svg(report) -> str:
    return layout_graph(list(report.placement), color_by="device", placement=report).svg


_DRAWERS = (
    (_ops.Graph, _graph_svg),
    (_ops.Operation, _op_svg),
    (_ops.Tensor, _tensor_svg),
    (RunMetadata, _run_metadata_svg),
    (PlacementReport, _placement_svg),
)


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
    if draw is not None and _wanted(SVG, include, exclude):
        bundle[SVG] = _svg.fit_to_width(draw(obj))
    if isinstance(obj, PlacementReport) and _wanted(HTML, include, exclude):
        bundle[HTML] = obj._repr_html_()
    return bundle
