"""``GraphView``: an interactive drawing of a dataflow graph in a notebook.

Layout happens in the kernel (``dflab.visualize.graph.layout_graph``, Graphviz); the front-end
(``extension/src/graph_view.js``) pans and zooms the SVG, asks the kernel to re-lay out when a
collapsed name scope (or a fused node) is clicked, and shows a clicked node's details. Data
edges are solid, control edges dotted, edges carry dtype and shape; after a run
(``GraphView.from_run``) the partitions are drawn as device clusters joined by
``_Send``/``_Recv``, fused nodes as stacked boxes that open into the ops they replaced.
"""

from __future__ import annotations

from dflab.framework import ops as _ops
from dflab.notebook import _assets
from dflab.notebook._graph_widget import GraphWidget
from dflab.notebook._summaries import summarize_outputs

COLOR_BY = ("op", "device", "partition", "task", "time", "memory")


def _op_name(key) -> str:
    """The op name of an Operation, a Tensor, a Variable or a name (``x:0`` -> ``x``)."""
    op = getattr(key, "op", None)
    if isinstance(key, _ops.Operation):
        return key.name
    if op is not None and isinstance(op, _ops.Operation):
        return op.name
    if isinstance(key, str):
        return key.split(":")[0] if ":" in key and key.rsplit(":", 1)[1].isdigit() else key
    raise TypeError(f"cannot name an op from {key!r}")


class GraphView(GraphWidget):
    """Draw ``graph_or_ops`` (a Graph, an op, a tensor or a list of them; default: the default
    graph), coloured by ``color_by`` ("op", "device", "partition", "task", "time" or
    "memory"), with the subgraph that ``fetches`` needs highlighted and the rest faded.

    ``run_metadata`` (from a traced run) adds device partitions, Send/Recv and the timings and
    memory that "time" and "memory" colour by; ``values`` maps ops or tensors to values shown
    as "last value" in the node details.
    """

    _esm = _assets.esm("graph_view")

    def __init__(self, graph_or_ops=None, color_by: str = "op", fetches=None, *, feeds=None,
                 highlight=None, expanded=(), run_metadata=None, placement=None,
                 partition_graphs=None, values=None, title: str = ""):
        if color_by not in COLOR_BY:
            raise ValueError(f"color_by must be one of {', '.join(COLOR_BY)}; got {color_by!r}")
        self._source = graph_or_ops if graph_or_ops is not None else _ops.get_default_graph()
        self._options = dict(fetches=fetches, feeds=feeds, highlight=highlight,
                             placement=placement, run_metadata=run_metadata,
                             partition_graphs=partition_graphs)
        super().__init__(color_by=color_by, expanded=[str(s) for s in expanded], title=title)
        if values:
            self._op_values.update(
                {_op_name(k): summarize_outputs((v,)) for k, v in values.items()})
        self.relayout()
        self._ready_to_layout = True

    @classmethod
    def from_run(cls, session_or_run_metadata, fetches=None, feed_dict=None, *,
                 graph=None, color_by: str = "device", **kwargs) -> GraphView:
        """The graph as a step ran it: partitions per device, ``_Send``/``_Recv`` pairs.

        Given ``RunMetadata`` from a traced ``Session.run`` (``FULL_TRACE`` and
        ``output_partition_graphs=True``), draws that step. Given a ``Session`` and ``fetches``,
        runs them once, traced (a real step: variables are updated as by any run), and draws
        it with the fetched values as the fetches' last values.
        """
        from dflab.runtime.config import RunMetadata, RunOptions

        if isinstance(session_or_run_metadata, RunMetadata):
            return cls(graph, color_by=color_by, fetches=fetches,
                       run_metadata=session_or_run_metadata, **kwargs)
        session = session_or_run_metadata
        if fetches is None:
            raise ValueError("GraphView.from_run(session, fetches): say what to run")
        run_metadata = RunMetadata()
        options = RunOptions(trace_level=RunOptions.FULL_TRACE, output_partition_graphs=True)
        result = session.run(fetches, feed_dict, options=options, run_metadata=run_metadata)
        values = dict(_flat_fetch_values(fetches, result))
        return cls(graph if graph is not None else session.graph, color_by=color_by,
                   fetches=fetches, feeds=list(feed_dict or ()), run_metadata=run_metadata,
                   values=values, **kwargs)

    def _layout_source(self):
        return self._source, dict(self._options)

    def show_values(self, values: dict) -> None:
        """Show values (op, tensor or name -> value) as the nodes' last values."""
        self._op_values.update(
            {_op_name(k): summarize_outputs((v,)) for k, v in values.items()})
        self._send_node_state()

    def _text(self) -> str:
        ops = sum(1 for n in self.nodes.values() if n.get("kind") == "op")
        scopes = sum(1 for n in self.nodes.values() if n.get("kind") == "scope")
        fused = sum(1 for n in self.nodes.values() if n.get("kind") == "fused")
        also = f", {fused} fused nodes" if fused else ""
        return (f"GraphView: {ops} ops{also} and {scopes} collapsed scopes drawn, "
                f"coloured by {self.color_by}")


def _flat_fetch_values(fetches, result):
    """(fetch, value) pairs of a possibly nested fetch structure and its result."""
    if isinstance(fetches, dict):
        for k, f in fetches.items():
            yield from _flat_fetch_values(f, result[k])
    elif isinstance(fetches, (list, tuple)):
        for f, r in zip(fetches, result):
            yield from _flat_fetch_values(f, r)
    elif result is not None:
        yield fetches, result
