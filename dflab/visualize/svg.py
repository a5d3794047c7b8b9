"""SVG plumbing shared by graphs and timelines: parse, sanitise, annotate, add a legend, stack.

Everything goes through ``xml.etree``: text set on elements is escaped when serialised, so graph
text can never become markup. ``sanitize`` removes what a drawing never needs and a page must
never run (scripts, foreign objects, images, ``on*`` handlers, ``javascript:`` links) — a second
line of defence behind the escaping done when the DOT is written.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from dflab.visualize import style as _style

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
ET.register_namespace("", SVG_NS)
ET.register_namespace("xlink", XLINK_NS)

_FORBIDDEN = {"script", "foreignObject", "image", "iframe", "object", "embed", "use"}
_LENGTH = re.compile(r"^\s*([0-9.]+)\s*(pt|px)?\s*$")
LEGEND_FONT_SIZE = 10


def q(tag: str) -> str:
    """``tag`` in the SVG namespace, as ElementTree spells it."""
    return f"{{{SVG_NS}}}{tag}"


def parse(svg) -> ET.Element:
    return ET.fromstring(svg)


_ROOT_TAG = re.compile(r"<svg\b[^>]*>")
_SIZE = re.compile(r'\b(width|height)="([0-9.]+)(pt|px)?"')
# A notebook cell shows about this many pixels; a wider static drawing is scaled down to it,
# but not below three quarters of its size, where node names (11 pt) are 11 px on screen (a
# drawing wider still is cut off: its GraphView pans and zooms).
CELL_WIDTH_PX, MIN_SCALE = 900.0, 0.75
_PX_PER = {"pt": 4 / 3, "px": 1.0, None: 1.0}


def fit_to_width(svg: str) -> str:
    """A static drawing sized for a notebook cell: one wider than ``CELL_WIDTH_PX`` gets its
    displayed size scaled down (its ``viewBox`` keeps the content), at most by ``MIN_SCALE``.
    Notebooks show static SVG as an image of its intrinsic size, which a cell cuts off."""
    root = _ROOT_TAG.search(svg)
    if root is None:
        return svg
    sizes = {m.group(1): float(m.group(2)) * _PX_PER[m.group(3)]
             for m in _SIZE.finditer(root.group(0))}
    width, height = sizes.get("width"), sizes.get("height")
    if not width or not height or width <= CELL_WIDTH_PX:
        return svg
    scale = max(CELL_WIDTH_PX / width, MIN_SCALE)

    def resize(m):
        return f'{m.group(1)}="{sizes[m.group(1)] * scale:.0f}px"'

    tag = _SIZE.sub(resize, root.group(0))
    return svg[:root.start()] + tag + svg[root.end():]


def serialize(root: ET.Element) -> str:
    return ET.tostring(root, encoding="unicode")


def element(parent, tag: str, text: str | None = None, **attrs) -> ET.Element:
    """A child element; ``class_`` stands for ``class``; numbers are formatted compactly."""
    attrs = {k.rstrip("_").replace("_", "-") if k != "class_" else "class":
             (f"{v:.2f}".rstrip("0").rstrip(".") if isinstance(v, float) else str(v))
             for k, v in attrs.items() if v is not None}
    el = ET.SubElement(parent, q(tag), attrs) if parent is not None else ET.Element(q(tag), attrs)
    if text is not None:
        el.text = text
    return el


def sanitize(root: ET.Element) -> None:
    for parent in list(root.iter()):
        for child in list(parent):
            if child.tag.rsplit("}", 1)[-1] in _FORBIDDEN:
                parent.remove(child)
        for name in list(parent.attrib):
            local = name.rsplit("}", 1)[-1].lower()
            value = parent.attrib[name].strip().lower()
            if local.startswith("on") or (local == "href" and value.startswith("javascript:")):
                del parent.attrib[name]


def set_titles(root: ET.Element, titles: dict) -> None:
    """Replace the ``<title>`` (the browser's tooltip) of each ``<g id=…>`` found in
    ``titles``; Graphviz writes our opaque ids there."""
    title_tag = q("title")
    for g in root.iter(q("g")):
        text = titles.get(g.get("id"))
        if text is None:
            continue
        t = g.find(title_tag)
        if t is None:
            t = ET.Element(title_tag)
            g.insert(0, t)
        t.text = text


def text_width(text: str, size: float = LEGEND_FONT_SIZE) -> float:
    """Rough width of sans-serif text (enough to lay out a legend without font metrics)."""
    return len(text) * size * 0.56


def length_px(value: str | None) -> float:
    m = _LENGTH.match(value or "")
    if m is None:
        return 0.0
    return float(m.group(1)) * (4 / 3 if m.group(2) == "pt" else 1)


# --- legend --------------------------------------------------------------------------------
@dataclass
class Legend:
    """What the colours mean: filled swatches, an optional heat scale, and edge kinds."""

    caption: str = ""
    # (fill, line, label) or (fill, line, label, style): style "double" (two outlines, as
    # fetched ops have), "dashed" or "stacked" (a series' box); plain otherwise.
    swatches: list = field(default_factory=list)
    heat: tuple | None = None  # (colours, low label, high label, what)
    edges: list = field(default_factory=list)  # (colour, dasharray or "", label)

    def to_json(self) -> dict:
        return {"caption": self.caption,
                "swatches": [{"fill": sw[0], "line": sw[1], "label": sw[2],
                              "style": sw[3] if len(sw) > 3 else ""} for sw in self.swatches],
                "heat": None if self.heat is None else {
                    "colors": list(self.heat[0]), "low": self.heat[1], "high": self.heat[2],
                    "what": self.heat[3]},
                "edges": [{"color": c, "dash": d, "label": t} for c, d, t in self.edges]}


def _swatch(g, x, y, fill, line, style) -> None:
    """A 14 x 12 legend swatch drawn as the nodes it explains are drawn."""
    if style == "stacked":
        element(g, "rect", x=x + 3, y=y - 9, width=11, height=10, rx=2, fill=fill, stroke=line)
        element(g, "rect", x=x, y=y - 6, width=11, height=10, rx=2, fill=fill, stroke=line)
        return
    element(g, "rect", x=x, y=y - 6, width=14, height=12, rx=3, fill=fill, stroke=line,
            stroke_dasharray="3,2" if style == "dashed" else None)
    if style == "double":
        element(g, "rect", x=x + 2.5, y=y - 3.5, width=9, height=7, rx=2, fill="none",
                stroke=line)


def _legend_items(legend: Legend) -> list[tuple[float, callable]]:
    """(width, draw(group, x, y)) per legend item, in reading order."""
    items = []
    fs = LEGEND_FONT_SIZE

    def label_at(g, x, y, label):
        element(g, "text", label, x=x, y=y + 4, font_size=fs, font_family=_style.FONT,
                fill=_style.TEXT)

    if legend.caption:
        def cap(g, x, y, t=legend.caption):
            element(g, "text", t, x=x, y=y + 4, font_size=fs, font_weight="bold",
                    font_family=_style.FONT, fill=_style.TEXT)
        items.append((text_width(legend.caption) + 18, cap))
    for swatch in legend.swatches:
        fill, line, label = swatch[:3]
        style = swatch[3] if len(swatch) > 3 else ""

        def sw(g, x, y, fill=fill, line=line, label=label, style=style):
            _swatch(g, x, y, fill, line, style)
            label_at(g, x + 19, y, label)
        items.append((19 + text_width(label) + 14, sw))
    if legend.heat is not None:
        colors, low, high, what = legend.heat

        def ht(g, x, y):
            label_at(g, x, y, what)
            x0 = x + text_width(what) + 6
            label_at(g, x0, y, low)
            x1 = x0 + text_width(low) + 4
            for k, c in enumerate(colors):
                element(g, "rect", x=x1 + 12 * k, y=y - 6, width=12, height=12, fill=c,
                        stroke="none")
            label_at(g, x1 + 12 * len(colors) + 4, y, high)
        w = text_width(what) + text_width(low) + text_width(high) + 12 * len(colors) + 30
        items.append((w, ht))
    for color, dash, label in legend.edges:
        def ed(g, x, y, color=color, dash=dash, label=label):
            element(g, "line", x1=x, y1=y, x2=x + 24, y2=y, stroke=color, stroke_width=1.4,
                    stroke_dasharray=dash or None)
            label_at(g, x + 29, y, label)
        items.append((29 + text_width(label) + 14, ed))
    return items


def draw_legend(legend: Legend, width: float) -> tuple[ET.Element, float, float]:
    """(group, width, height) of the legend laid out in rows no wider than ``width``."""
    g = element(None, "g", class_="legend")
    row_h, pad = 18, 8
    x, y, widest = pad, pad + row_h / 2, 0.0
    for w, draw in _legend_items(legend):
        if x > pad and x + w > width - pad:
            x, y = pad, y + row_h
        draw(g, x, y)
        x += w
        widest = max(widest, x)
    return g, max(widest + pad, width), y + row_h / 2 + pad / 2


def add_legend(root: ET.Element, legend: Legend) -> None:
    """Put ``legend`` above a Graphviz drawing, growing the canvas to make room."""
    vb = [float(v) for v in root.get("viewBox", "0 0 0 0").split()]
    x0, y0, w, h = vb
    g, lw, lh = draw_legend(legend, max(w, 420.0))
    new_w, new_h = max(w, lw), h + lh
    root.set("viewBox", f"{x0:.2f} {y0 - lh:.2f} {new_w:.2f} {new_h:.2f}")
    root.set("width", f"{new_w:.0f}pt")
    root.set("height", f"{new_h:.0f}pt")
    g.set("transform", f"translate({x0:.2f} {y0 - lh:.2f})")
    background = element(None, "rect", x=x0, y=y0 - lh, width=new_w, height=new_h,
                         fill=_style.BACKGROUND, class_="background")
    root.insert(0, background)
    root.append(g)


# --- small documents ------------------------------------------------------------------------
def document(width: float, height: float, css_class: str) -> ET.Element:
    return element(None, "svg", width=f"{width:.0f}px", height=f"{height:.0f}px",
                   viewBox=f"0 0 {width:.0f} {height:.0f}", class_=css_class)


def message_svg(message: str, css_class: str = "dflab-graph empty") -> str:
    """A small framed note, e.g. for a graph without ops."""
    w = max(160.0, text_width(message, 12) + 40)
    root = document(w, 48, css_class)
    element(root, "rect", x=0.5, y=0.5, width=w - 1, height=47, rx=6, fill="#fafbfc",
            stroke=_style.FADED_LINE, stroke_dasharray="4,3")
    element(root, "text", message, x=w / 2, y=29, text_anchor="middle", font_size=12,
            font_family=_style.FONT, fill=_style.MUTED_TEXT)
    return serialize(root)


def stack(svgs: list[str], gap: float = 12.0, across: bool = False) -> str:
    """One SVG showing several SVG documents one below the other, or side by side with
    ``across`` (sizes kept)."""
    parts = [parse(s) for s in svgs]
    sizes = [(length_px(p.get("width")), length_px(p.get("height"))) for p in parts]
    along = [w if across else h for w, h in sizes]
    wide = [h if across else w for w, h in sizes]
    total = sum(along) + gap * (len(parts) - 1)
    width, height = (total, max(wide)) if across else (max(wide), total)
    root = document(width, height, "dflab-stack")
    at = 0.0
    for part, (w, h) in zip(parts, sizes):
        part.set("x", f"{at:.1f}" if across else "0")
        part.set("y", "0" if across else f"{at:.1f}")
        part.set("width", f"{w:.1f}")
        part.set("height", f"{h:.1f}")
        root.append(part)
        at += (w if across else h) + gap
    return serialize(root)
