"""Colours, shapes and fonts of the drawings: one calm palette shared by graphs and timelines.

An op's *family* is the op module that registered its schema (``math_ops.py`` -> ``math``), so a
newly registered op is coloured with its family without touching this file. Node fills are
light (dark text stays readable on every one of them); borders are a darker shade of the fill.
Device colours come from Paul Tol's "light" scheme, made for filled areas with black text and
chosen to stay distinguishable for colour-blind readers.
"""

from __future__ import annotations

import colorsys
import functools
import math
import os

from dflab.framework.op_kinds import (
    CONTROL_FLOW_OPS,
    PLACEHOLDER_OPS,
    TRANSFER_OPS,
    VARIABLE_OPS,
    ControlFlowKind,
    control_flow_kind,
)
from dflab.framework.registry import registered_ops

FONT = "Helvetica,Arial,sans-serif"
TEXT = "#1f2933"
MUTED_TEXT = "#52606d"
EDGE = "#8a94a6"
CONTROL_EDGE = "#a7b0be"
TRANSFER_EDGE = "#c2410c"
ACCENT = "#d1495b"  # highlighted ops and emphasised edges
STALE_LINE = "#b71c1c"  # ops that read what a re-run notebook cell replaced
FADED_FILL, FADED_LINE, FADED_TEXT = "#f5f6f8", "#d5d9e0", "#a0a8b4"
NOT_RUN_FILL = "#ffffff"
BACKGROUND = "#ffffff"
# A fused node (many elementwise ops run as one kernel): its own fill, outline and a stacked box.
FUSED_FILL, FUSED_LINE, FUSED_SHAPE = "#e6f4c9", "#6f8f2f", "box3d"

# Family -> (legend label, fill). Order is the legend's order.
FAMILIES = {
    "input": ("input", "#fde7c4"),
    "constant": ("constant", "#eceff3"),
    "variable": ("variable", "#cfe9d3"),
    "math": ("math", "#d8e6f6"),
    "nn": ("neural net", "#e4daf1"),
    "array": ("array", "#f3efcc"),
    "random": ("random", "#f8d9e6"),
    "control": ("control flow", "#fbd6c8"),
    "training": ("training", "#cdebe7"),
    "data": ("queues, arrays", "#e9dfcf"),
    "io": ("save / restore", "#dcdcec"),
    "transfer": ("send / recv", "#f7cf7e"),
    "other": ("other", "#ffffff"),
}
_MODULE_FAMILY = {
    "constant_op": "constant", "array_ops": "array", "math_ops": "math", "nn_ops": "nn",
    "conv_ops": "nn", "random_ops": "random", "state_ops": "variable",
    "resource_variable_ops": "variable",
    "training_ops": "training", "control_flow_ops": "control", "tensor_array_ops": "data",
    "data_flow_ops": "data", "io_ops": "io", "comm_ops": "transfer",
    "slicing_ops": "array", "indexing_ops": "array", "manip_ops": "array",
    "reduction_ops": "math", "sequence_ops": "math", "linalg_ops": "math",
}
_TYPE_FAMILY = {**{t: "input" for t in PLACEHOLDER_OPS},
                "_HostSend": "transfer", "_HostRecv": "transfer"}

# Distinct shapes: dynamic control flow, transfers, inputs and state. Everything else is a box.
_CONTROL_FLOW_SHAPES = {
    ControlFlowKind.SWITCH: "invtrapezium", ControlFlowKind.MERGE: "trapezium",
    ControlFlowKind.ENTER: "rarrow", ControlFlowKind.EXIT: "larrow",
    ControlFlowKind.NEXT_ITERATION: "octagon", ControlFlowKind.LOOP_COND: "diamond",
}
SHAPES = {
    **{t: _CONTROL_FLOW_SHAPES[control_flow_kind(t)] for t in CONTROL_FLOW_OPS},
    **{t: "cds" for t in TRANSFER_OPS},
    **{t: "invhouse" for t in PLACEHOLDER_OPS},
    **{t: "cylinder" for t in VARIABLE_OPS},
}
# Graphviz sizes these arrow shapes from the label's width only: give two-line labels room.
SHAPE_MARGINS = {"cds": "0.18,0.1", "rarrow": "0.18,0.1", "larrow": "0.18,0.1"}

# Tol "light", then a few calm extras for more than eight devices.
DEVICE_COLORS = ("#77aadd", "#ee8866", "#eedd88", "#ffaabb", "#99ddff", "#44bb99",
                 "#bbcc33", "#aaaa00", "#c9b3e6", "#dddddd")
UNKNOWN_DEVICE = "#ffffff"

# Sequential heat for time and memory (ColorBrewer OrRd): light = little, dark = much.
HEAT = ("#fff7ec", "#fee8c8", "#fdd49e", "#fdbb84", "#fc8d59", "#e34a33", "#b30000")
HEAT_LIGHT_TEXT_FROM = 5  # index from which the fill is dark enough for white text


@functools.lru_cache(maxsize=1024)
def family(op_type: str) -> str:
    """The op's family: from its type for a few, else from the module that registered it."""
    if op_type in _TYPE_FAMILY:
        return _TYPE_FAMILY[op_type]
    opdef = registered_ops().get(op_type)
    if opdef is None:
        return "other"
    module = os.path.splitext(os.path.basename(opdef.site.rsplit(":", 1)[0]))[0]
    return _MODULE_FAMILY.get(module, "other")


def family_fill(fam: str) -> str:
    return FAMILIES.get(fam, FAMILIES["other"])[1]


def shape_of(op_type: str) -> str:
    return SHAPES.get(op_type, "box")


@functools.lru_cache(maxsize=256)
def darker(color: str, amount: float = 0.35) -> str:
    """A darker shade of ``#rrggbb`` (for borders and legend outlines)."""
    r, g, b = (int(color[i:i + 2], 16) / 255 for i in (1, 3, 5))
    h, lum, s = colorsys.rgb_to_hls(r, g, b)
    r, g, b = colorsys.hls_to_rgb(h, max(lum * (1 - amount), 0.0), min(s * 0.9, 1.0))
    return "#" + "".join(f"{round(c * 255):02x}" for c in (r, g, b))


def device_palette(devices) -> dict:
    """Device -> fill colour, stable for a given set of devices (sorted by name)."""
    return {d: DEVICE_COLORS[k % len(DEVICE_COLORS)] for k, d in enumerate(sorted(set(devices)))}


def heat(value: float, top: float) -> tuple[str, str]:
    """(fill, text colour) of ``value`` on a logarithmic scale from 0 to ``top``.

    Op times and sizes span orders of magnitude; a log scale keeps small ones distinguishable.
    """
    if top <= 0 or value <= 0:
        return HEAT[0], TEXT
    frac = math.log1p(value) / math.log1p(top)
    k = min(int(frac * (len(HEAT) - 1) + 0.5), len(HEAT) - 1)
    return HEAT[k], ("#ffffff" if k >= HEAT_LIGHT_TEXT_FROM else TEXT)
