"""The graph document: ``application/vnd.dflab.graph+json``, what dflab's JupyterLab renderer
(``extension/lab``) draws without a kernel.

A document is the laid-out SVG plus, per drawn node, what the interactive view shows about it
(GraphView's node infos, the op's name scope and its wiring: inputs, outputs, control inputs and
consumers with dtypes and shapes). Rich display (``mimebundle``), static layouts
(``GraphLayout``) and the graph widgets all build theirs here.
"""

from __future__ import annotations

import json

from dflab.visualize import text as _text

SVG, TEXT, HTML = "image/svg+xml", "text/plain", "text/html"
GRAPH_MIME = "application/vnd.dflab.graph+json"
DOCUMENT_VERSION = 1
# A bigger document is left out of the bundle (the SVG alone is kept): saved notebooks stay
# small, and a drawing that large is better explored with a kernel and GraphView.
MAX_DOCUMENT_BYTES = 4_000_000
MAX_LISTED_TENSORS = 32  # inputs/outputs listed per op in a document's node details


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
