"""What GraphView and Stepper share: a Graphviz layout made in the kernel and a front-end that
receives the SVG once per layout, then small updates (node states, value texts, badges).

Invariants: node ids are the layout's opaque ids and change with every layout, so everything the
widgets remember is keyed by *op name* and mapped to ids when sent; an op hidden in a collapsed
name scope is represented by its scope's node. The first layout chooses what is open so that the
drawing fits its canvas readably (``layout_graph(collapse="auto")``); ``expanded`` then lists
exactly what is open, and every later layout draws that. Messages from the front-end are plain dicts
(``{"type": "click", "id": "n12"}``) handled by ``_handle_message``, which tests call directly.

A fused node (elementwise ops the fusion pass runs as one kernel) opens and closes like a name
scope: its name goes into ``expanded``, a click on it opens it, a click on its cluster closes it.
"""

from __future__ import annotations

import anywidget
import traitlets as t

from dflab.notebook import _assets
from dflab.notebook._saved import SavedOutput
from dflab.visualize import graph as _vgraph
from dflab.visualize.document import GRAPH_MIME, graph_document, jsonable

# State of a collapsed scope from its members' states: the most "active" one wins, so a scope
# with a ready op inside shows as ready; all done (or dead) shows as done.


def scope_state(member_states) -> str | None:
    states = set(member_states)
    if not states:
        return None
    if "failed" in states:
        return "failed"  # the step ended at a member: that is what the group shows
    if "running" in states:
        return "running"
    if "ready" in states:
        return "ready"
    if states <= {"dead"}:
        return "dead"
    if states <= {"done", "dead"}:
        return "done"
    if "done" in states or "dead" in states:
        return "running"  # partly executed: work in progress inside the scope
    return "pending"


def scopes_of_names(names) -> list[str]:
    """Every name scope of the given op names (``a/b/c`` -> ``a``, ``a/b``)."""
    out = set()
    for name in names:
        parts = name.split("/")
        out.update("/".join(parts[:k]) for k in range(1, len(parts)))
    return sorted(out)


class GraphWidget(SavedOutput, anywidget.AnyWidget):
    """Base of GraphView and Stepper (see the module docstring); not used on its own. Its
    saved output (``SavedOutput``) is its drawing, as an SVG and as a graph document."""

    _css = _assets.css()

    title = t.Unicode("").tag(sync=True)
    svg = t.Unicode("").tag(sync=True)
    nodes = t.Dict().tag(sync=True)  # node id -> info (name, kind, op_type, devices, …)
    states = t.Dict().tag(sync=True)  # node id -> pending|ready|running|done|dead
    values = t.Dict().tag(sync=True)  # node id -> value summary (text)
    selected = t.Unicode("").tag(sync=True)  # node id
    detail = t.Dict().tag(sync=True)  # the selected node's info, plus "value"
    color_by = t.Unicode("op").tag(sync=True)
    expanded = t.List(t.Unicode()).tag(sync=True)  # open name scopes and fused nodes
    # Canvas height in pixels; 0 lets the front-end follow the drawing's shape (names stay
    # readable, the canvas at most about a screen tall; the user can drag it taller).
    height = t.Int(0).tag(sync=True)

    def __init__(self, **kwargs):
        self._layout = None
        self._compact = False  # the first layout's choice, kept by the later ones
        self._clicked = False  # handling a message from the front-end (see _note_change)
        self._op_values: dict[str, str] = {}  # op name -> value text
        self._selected_name = ""
        self._ready_to_layout = False
        super().__init__(**kwargs)
        self.on_msg(self._on_custom_msg)

    # --- layout ---------------------------------------------------------------------------
    def _layout_source(self):
        """(graph_or_ops, keyword arguments of layout_graph) for the current view."""
        raise NotImplementedError

    @t.validate("height")
    def _valid_height(self, proposal):
        if not 0 <= proposal["value"] <= 10_000:
            raise t.TraitError(f"height must be 0 (automatic) or a number of pixels up to "
                               f"10000; got {proposal['value']}")
        return proposal["value"]

    # The space the first drawing is fitted to (drawing units): a cell's width, most of a
    # window's height.
    _fit = _vgraph.FIT
    _first_collapse = "auto"  # how the first layout chooses what is open

    def relayout(self) -> None:
        """Lay the graph out again (new scopes opened, new colouring) and send the drawing."""
        source, kwargs = self._layout_source()
        first = self._layout is None
        layout = _vgraph.layout_graph(
            source, expanded=tuple(self.expanded),
            collapse=self._first_collapse if first else True,
            fit=self._fit, compact=None if first else self._compact, color_by=self.color_by,
            **kwargs)
        self._layout = layout
        if first:  # what the automatic choice opened is what stays open (observed: no relayout)
            self._compact = layout.compact
            self.expanded = list(layout.expanded)
        with self.hold_sync():
            self.nodes = jsonable(layout.nodes)
            self.svg = layout.svg
            self._send_node_state()
            self._reselect()
        self._note_change()

    def _note_change(self) -> None:
        """A change the saved output should show, unless a click in the widget made it (the
        widget shows it already; replacing its output would redraw it under the user)."""
        if not self._clicked:
            self._state_changed()

    @t.observe("expanded", "color_by")
    def _view_changed(self, change):
        if self._ready_to_layout and change["old"] != change["new"]:
            self.relayout()

    @property
    def layout(self):
        """The current ``dflab.visualize`` layout (``.svg``, ``.nodes``, ``.name_to_id``)."""
        return self._layout

    def node_id(self, name: str) -> str | None:
        """The id of the node drawing op ``name`` (its scope's node when collapsed)."""
        if self._layout is None:
            return None
        if name in self._layout.nodes:
            return name
        return self._layout.name_to_id.get(name)

    def _ids_by_name(self) -> dict:
        return dict(self._layout.name_to_id) if self._layout is not None else {}

    # --- node state sent to the front-end ---------------------------------------------------
    def _op_states(self) -> dict:
        """Op name -> state; GraphView has none, the Stepper overrides this."""
        return {}

    def _send_node_state(self) -> None:
        ids = self._ids_by_name()
        states: dict[str, list] = {}
        for name, state in self._op_states().items():
            nid = ids.get(name)
            if nid is not None:
                states.setdefault(nid, []).append(state)
        values: dict[str, list] = {}
        for name, text in self._op_values.items():
            nid = ids.get(name)
            if nid is not None and self._shows_value(nid, name):
                values.setdefault(nid, []).append(text)
        with self.hold_sync():
            self.states = {nid: scope_state(s) if len(s) > 1 else s[0]
                           for nid, s in states.items()}
            self.values = {nid: "\n".join(v) for nid, v in values.items()}
            self._send_extra_state(ids)
            if self.selected:
                self.detail = self._detail(self.selected)
        self._note_change()

    def _shows_value(self, node_id: str, name: str) -> bool:
        """A scope shows no member's value; a collapsed fused node shows its own (its sink's),
        not the values of the ops it replaced."""
        info = self._layout.nodes.get(node_id, {})
        return info.get("kind") == "op" or (info.get("kind") == "fused"
                                            and info.get("name") == name)

    def _send_extra_state(self, ids: dict) -> None:
        """Hook for subclasses: more per-node state under the same hold_sync."""

    # --- selection and details ----------------------------------------------------------------
    def _detail(self, node_id: str) -> dict:
        info = dict(self.nodes.get(node_id, {}))
        if not info:
            return {}
        info["id"] = node_id
        value = self._op_values.get(info.get("name", ""))
        if value is not None:
            info["value"] = value
        state = self.states.get(node_id)
        if state:
            info["state"] = state
        return jsonable(info)

    def select(self, name_or_id: str) -> dict:
        """Show a node's details (by op name or node id); returns them. An op hidden in a
        collapsed scope or fused node is shown by opening them first."""
        nid = name_or_id if name_or_id in self.nodes else self.node_id(name_or_id)
        if nid is None:
            raise KeyError(f"no node named {name_or_id!r} in this drawing")
        if name_or_id not in self.nodes:
            self._selected_name = name_or_id
            nid = self._open_to(name_or_id, nid)
        info = self.nodes[nid]
        self._selected_name = info.get("name", "")
        with self.hold_sync():
            self.selected = nid
            self.detail = self._detail(nid)
        self._note_change()
        return self.detail

    def _open_to(self, name: str, nid: str) -> str:
        """Open what hides op ``name`` (drawn by ``nid``): its name scopes, or the fused node it
        was fused into, then what that shows. Returns the id drawing ``name`` then."""
        for _ in range(3):  # a scope, a fused node inside it, its member
            info = self.nodes[nid]
            if info.get("name") == name or not info.get("expandable"):
                break
            opening = set(scopes_of_names([name])) - set(self.expanded) \
                if info.get("kind") == "scope" else set()
            # A fused member is hidden by the node it was fused into, whose scopes are that
            # node's, not the member's: open the node drawing it.
            self.expanded = sorted(set(self.expanded) | (opening or {info["name"]}))
            nid = self.node_id(name) or nid
        return nid

    def _node_named(self, name: str) -> str | None:
        """The id of the drawn node (op or scope) called ``name``."""
        nid = self.node_id(name)
        if nid is not None and self.nodes.get(nid, {}).get("name") == name:
            return nid
        return next((i for i, n in self.nodes.items()
                     if n.get("name") == name and n.get("kind") == "scope"), None)

    def _reselect(self) -> None:
        """After a new layout, keep the same node selected under its new id (if still drawn)."""
        nid = self._node_named(self._selected_name) if self._selected_name else None
        if nid is not None:
            self.selected = nid
            self.detail = self._detail(nid)
        else:
            self.selected = ""
            self.detail = {}

    # --- scopes and fused nodes ---------------------------------------------------------------
    def expand(self, scope: str) -> None:
        """Open a collapsed name scope or fused node (the graph is laid out again)."""
        scope = scope.strip("/")
        if scope not in self.expanded:
            self.expanded = [*self.expanded, scope]

    def collapse(self, scope: str = "") -> None:
        """Close a scope and the scopes inside it; no argument closes all."""
        scope = scope.strip("/")
        self.expanded = [s for s in self.expanded
                         if scope and not (s == scope or s.startswith(scope + "/"))]

    def _cluster_scope(self, cluster_id: str) -> str | None:
        """The name scope an open-scope (or loop frame) cluster stands for, or the name of the
        fused node an expanded-fused cluster stands for."""
        info = self.nodes.get(cluster_id) or {}
        if info.get("kind") == "cluster" and info.get("cluster_kind") in ("scope", "frame",
                                                                          "fused"):
            return info.get("name")
        return None

    # --- messages from the front-end ----------------------------------------------------------
    def _on_custom_msg(self, _widget, content, _buffers) -> None:
        self._clicked = True
        try:
            self._handle_message(content)
        finally:
            self._clicked = False

    def _handle_message(self, content: dict) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "click":
            self._node_clicked(str(content.get("id", "")))
        elif kind == "cluster-click":
            scope = self._cluster_scope(str(content.get("id", "")))
            if scope:
                self.collapse(scope)

    def _node_clicked(self, node_id: str) -> None:
        info = self.nodes.get(node_id)
        if info is None:
            return  # a stale click from a previous layout
        if info.get("expandable"):  # a collapsed scope, or a fused node the graph explains
            self.expand(info["name"])
        else:
            self.select(node_id)

    # --- static fallback ------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs)
        bundle, meta = data if isinstance(data, tuple) else (data, {})
        bundle = dict(bundle)
        bundle["text/plain"] = self._text()
        if self.svg:
            # Shown where the widget cannot be (nbviewer, GitHub, a closed kernel).
            bundle["image/svg+xml"] = self._static_svg()
            # The same drawing for dflab's JupyterLab renderer: explorable without the kernel.
            doc = graph_document(
                self.svg, self._document_nodes(), title=self._document_title(),
                source=type(self).__name__, selected=self.selected, graph=self._graph())
            if doc is not None:
                bundle[GRAPH_MIME] = doc
        return bundle, meta

    def _static_svg(self) -> str:
        """The drawing as a saved notebook shows it where only the SVG is shown."""
        return self.svg

    def _document_title(self) -> str:
        """The title a saved drawing shows above it: the widget's own, if it has one."""
        return self.title

    def _document_nodes(self) -> dict:
        """The node infos, with each node's last value and state as its details show them."""
        return {nid: {**info, **self._detail(nid)} if info.get("kind") != "cluster" else info
                for nid, info in self.nodes.items()}

    def _graph(self):
        """The Graph the drawing comes from (for the ops' wiring), or None."""
        source = self._layout_source()[0]
        if source is None or hasattr(source, "get_operation_by_name"):
            return source
        first = next(iter(source), None) if isinstance(source, list | tuple) else source
        return getattr(first, "graph", None)

    def _text(self) -> str:
        return f"<{type(self).__name__}: {len(self.nodes)} nodes>"
