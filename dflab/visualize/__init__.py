"""Drawing: graphs, partitions and timelines as SVG, shared by rich display and the widgets.

* ``layout_graph`` (``graph.py``): graph -> DOT -> Graphviz layout -> SVG plus node metadata;
* ``timeline_data`` / ``timeline_svg`` (``timeline.py``): a traced step as lanes, bars, arrows;
* ``mimebundle`` (``mimebundle.py``): what ``_repr_mimebundle_`` of graphs, ops, tensors, run
  metadata and placement reports returns;
* ``graph_document`` (``document.py``): the graph document (``application/vnd.dflab.graph+json``)
  that dflab's JupyterLab renderer draws without a kernel.

Graphviz (through pygraphviz, the ``notebook`` extra) is imported only when a graph is laid out,
so timelines draw without it. All graph text is escaped; the SVGs carry no scripts.
"""

from dflab.visualize.graph import COLOR_MODES, GraphLayout, layout_graph
from dflab.visualize.mimebundle import mimebundle
from dflab.visualize.timeline import timeline_data, timeline_svg

__all__ = ["COLOR_MODES", "GraphLayout", "layout_graph", "mimebundle", "timeline_data",
           "timeline_svg"]
