"""Rich display for notebooks without a layering inversion.

Graphs, ops, tensors, run metadata and placement reports are displayed by Jupyter through
``_repr_mimebundle_`` (an SVG drawn by Graphviz plus ``text/plain``), so saved notebooks render on
GitHub and nbviewer without a kernel. Drawing lives above the framework (``dflab.visualize``), so
the framework only holds a slot for the renderer; ``import dflab`` fills it. Without a renderer,
or without the drawing extra (pygraphviz), objects fall back to ``repr``; other drawing errors
propagate (IPython reports them and shows the text).
"""

from __future__ import annotations

_renderer = None


def set_renderer(fn) -> None:
    """``fn(obj, include, exclude) -> dict`` of MIME type to data; None clears it."""
    global _renderer
    _renderer = fn


def mimebundle(obj, include=None, exclude=None) -> dict:
    """What ``obj._repr_mimebundle_`` returns: the renderer's bundle, always with text/plain."""
    bundle = {}
    if _renderer is not None:
        try:
            bundle = dict(_renderer(obj, include, exclude) or {})
        except ImportError:  # the drawing extra (pygraphviz) is not installed: text only
            bundle = {}
    bundle.setdefault("text/plain", repr(obj))
    return bundle


class RichDisplay:
    """Mixin giving a class ``_repr_mimebundle_`` through the installed renderer."""

    __slots__ = ()

    def _repr_mimebundle_(self, include=None, exclude=None):
        return mimebundle(self, include, exclude)
