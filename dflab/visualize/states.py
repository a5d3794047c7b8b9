"""Node states drawn into a static SVG: the stepper's drawing as a saved notebook shows it.

A live stepper colours its nodes in the browser (CSS on ``data-state``); nbviewer, GitHub and
other places that show only the SVG need the colours in the drawing itself. ``paint_states``
gives every node with a state the look the widget gives it (the same colours as
``extension/src/widgets.css``) and adds what each colour means to the drawing's legend.

Invariant: only presentation attributes of existing node shapes change, plus one legend row;
ids, classes and texts stay as laid out, so the result is the same drawing, coloured.
"""

from __future__ import annotations

from dflab.visualize import style as _style
from dflab.visualize import svg as _svg

# state -> (fill, stroke, stroke width, legend label); as the widgets' stylesheet draws them
STATE_LOOKS = {
    "done": ("#c8e6c9", "#43a047", 1.0, "ran"),
    "ready": ("#fff3c4", "#f2b705", 3.0, "ready"),
    "running": ("#ffe0b2", "#ef6c00", 3.0, "running"),
    "failed": ("#ffcdd2", "#d32f2f", 3.0, "failed"),
    "dead": ("#eeeeee", "#9e9e9e", 1.0, "dead (branch not taken)"),
    "pending": ("#ffffff", "#9e9e9e", 1.0, "pending"),
}
_OPACITY = {"pending": "0.55", "dead": "0.35"}
_SHAPES = ("polygon", "ellipse", "path")


def paint_states(svg: str, states: dict, caption: str = "state") -> str:
    """``svg`` (a laid-out drawing) with the nodes in ``states`` (node id -> state) coloured as
    the stepper colours them, and a legend row, headed ``caption`` (the stepper's status line),
    of the states drawn."""
    if not states and caption == "state":
        return svg
    root = _svg.parse(svg)
    seen = []
    for g in root.iter(_svg.q("g")):
        state = states.get(g.get("id"))
        if state not in STATE_LOOKS or "node" not in (g.get("class") or "").split():
            continue
        fill, stroke, width, _ = STATE_LOOKS[state]
        for shape in g:
            if shape.tag.rsplit("}", 1)[-1] in _SHAPES and shape.get("fill") != "none":
                shape.set("fill", fill)
                shape.set("stroke", stroke)
                shape.set("stroke-width", f"{width:g}")
                if state == "dead":
                    shape.set("stroke-dasharray", "3,3")
        if state in _OPACITY:
            g.set("opacity", _OPACITY[state])
        g.set("data-state", state)
        if state not in seen:
            seen.append(state)
    _add_state_row(root, seen, caption)
    return _svg.serialize(root)


def _add_state_row(root, states: list, caption: str) -> None:
    """A legend row under the drawing saying where the step is and what its colours mean."""
    legend = _svg.Legend(caption=caption, swatches=[
        (STATE_LOOKS[s][0], STATE_LOOKS[s][1], STATE_LOOKS[s][3],
         "dashed" if s == "dead" else "") for s in STATE_LOOKS if s in states])
    x0, y0, w, h = (float(v) for v in root.get("viewBox", "0 0 0 0").split())
    group, _, row_h = _svg.draw_legend(legend, max(w, 420.0))
    group.set("transform", f"translate({x0:.2f} {y0 + h:.2f})")
    root.set("viewBox", f"{x0:.2f} {y0:.2f} {w:.2f} {h + row_h:.2f}")
    for key in ("width", "height"):
        if root.get(key):
            size = _svg.length_px(root.get(key)) * 3 / 4  # points, as Graphviz writes them
            grown = size + row_h if key == "height" else size
            root.set(key, f"{grown:.0f}pt")
    background = _svg.element(None, "rect", x=x0, y=y0 + h, width=w, height=row_h,
                              fill=_style.BACKGROUND)
    root.append(background)
    root.append(group)
