"""How each drawn unit, cluster and edge looks, per colouring mode, and the legend that says so.

Modes (``color_by``): ``op`` (op family), ``device`` and ``partition`` (assigned device, one
colour each; a collapsed scope spanning devices is striped), ``task`` (devices grouped by the
cluster task that owns them: one hue per task, its devices shades of it; edges that cross tasks
drawn thick and dashed, with their bytes once a step was traced), ``time`` and ``memory`` (a
heat scale of op time and output bytes from a traced step). A collapsed fused node is a stacked
box with its own outline in every mode (and its own fill where fills say op families); ops that
ran inside one are marked so in ``time``/``memory``. States then override the fill: ops that
``Session.run(fetches)`` would not execute are faded, highlighted ops get an accent border,
fetched ops a double border, stale ops (reading what a re-run notebook cell replaced) a dashed
red border and a note. Every state is also a CSS class on the SVG element, and the legend lists
every look the drawing uses (the double border of fetches included).

Mode ``state`` is the stepper's: every op plain white, since the executor's node states (drawn
by the front-end, explained by its own legend) are what its colours mean; the legend lists only
edges and the marks above. A collapsed variable scope (``W`` around the variable ``W``) is drawn
as the variable, a series (``grouping``) as a stacked box, an auxiliary unit with the number of
nodes its hidden edges lead to.
"""

from __future__ import annotations

import functools

from dflab.framework.device_spec import DeviceSpec
from dflab.visualize import grouping as _grouping
from dflab.visualize import style as _style
from dflab.visualize import text as _text
from dflab.visualize.dot import EdgeLook, NodeLook
from dflab.visualize.model import SEND_TYPES
from dflab.visualize.svg import Legend

COLOR_MODES = ("op", "device", "partition", "task", "time", "memory")
# Modes for widgets whose own states colour the nodes (the Stepper): not offered to users.
INTERNAL_MODES = ("state",)
# Modes whose fills say where an op runs.
_PLACE_MODES = ("device", "partition", "task")
CROSS_TASK_EDGE = "#6b21a8"
SCOPE_FILL = "#e8ecf2"
_CAPTIONS = {"op": "op type", "device": "device", "partition": "partition (device)",
             "task": "task (device)", "time": "op time", "memory": "output bytes",
             "state": ""}
SERIES_SHAPE = "box3d"
AUX_LINE = "#9aa5b1"


def lighten(color: str, amount: float = 0.75) -> str:
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in (r, g, b))


@functools.lru_cache(maxsize=1024)
def task_of(device: str) -> str:
    """``/job:ps/replica:0/task:0`` for a device of that task, however it is spelled
    (``/job:ps/task:0/device:CPU:0``, ``/job:ps/task:0``); "" when it names no job."""
    try:
        spec = DeviceSpec.from_string(device or "")
    except (ValueError, TypeError):
        return ""
    if spec.job is None:
        return ""
    return f"/job:{spec.job}/replica:{spec.replica or 0}/task:{spec.task or 0}"


@functools.lru_cache(maxsize=1024)
def canonical_device(device: str) -> str:
    """One spelling per device, so that a request (``/device:GPU:0``, ``/gpu:0``) and the
    assigned name (``/job:localhost/replica:0/task:0/device:GPU:0``) share one colour and one
    legend entry. A spec naming no device type is kept as it is."""
    try:
        spec = DeviceSpec.from_string(device or "")
    except (ValueError, TypeError):
        return device
    if spec.device_type is None:
        return device
    return spec.replace(job=spec.job or "localhost", replica=spec.replica or 0,
                        task=spec.task or 0,
                        device_index=spec.device_index or 0).to_string()


# Shades of a task's hue for its devices, far enough apart to tell at a glance, all light
# enough for dark text; a request naming only the task gets the palest, with a strong outline.
_DEVICE_SHADES = (0.0, 0.55, -0.25, 0.75)
_TASK_ONLY_SHADE = 0.88


def _shade(color: str, amount: float) -> str:
    return lighten(color, amount) if amount >= 0 else _style.darker(color, -amount)


def task_palette(devices) -> dict:
    """Device -> fill colour: one hue per task (in name order), its devices clearly different
    shades of it, so a drawing groups the devices of each task by colour. A spec naming only
    a task (an op requested on ``/job:ps/task:0``, not placed) gets the palest shade, drawn
    with a strong outline (``Styler``)."""
    devices = sorted(set(devices))
    tasks = sorted({task_of(d) for d in devices})
    hue = {t: _style.DEVICE_COLORS[k % len(_style.DEVICE_COLORS)] for k, t in enumerate(tasks)}
    out, seen = {}, {}
    for d in devices:
        t = task_of(d)
        if _names_no_device(d):
            out[d] = lighten(hue[t], _TASK_ONLY_SHADE)
            continue
        k = seen[t] = seen.get(t, -1) + 1
        out[d] = _shade(hue[t], _DEVICE_SHADES[k % len(_DEVICE_SHADES)])
    return out


def _names_no_device(device: str) -> bool:
    try:
        return DeviceSpec.from_string(device or "").device_type is None
    except (ValueError, TypeError):
        return True


def device_legend_label(device: str, mode: str) -> str:
    """A legend entry for a device; in ``task`` mode a spec naming only a task says so."""
    short = _text.short_device(device)
    if mode == "task" and task_of(device) and _names_no_device(device):
        return f"{short} (task only, no device)"
    return short


def _carried(unit) -> list:
    """The ops whose tensors a ``_Send``/``_Recv`` unit moves: it is needed when they are."""
    out = []
    for r in unit.members:
        key = r.transfer_key() if r.is_comm else None
        if key is not None:
            out.append(key[0].lstrip("^").rsplit(":", 1)[0])
    return out


def _series_type(unit) -> str:
    """The op type a series repeats ("" for a series of scopes)."""
    types = {r.type for r in unit.members}
    return types.pop() if len(types) == 1 and len(unit.members) == unit.count else ""


def _fused_lines(r) -> list:
    """``fused ×4`` and the member types, in order: what the fused kernel computes."""
    types = r.fused_types
    return [f"fused \u00d7{len(types)}", _text.printable(" \u00b7 ".join(types), 36)]


class Styler:
    """Decides the looks of one drawing (see the module docstring)."""

    def __init__(self, view, facts, mode: str):
        self.view, self.facts, self.mode = view, facts, mode
        self.devices = self._devices()
        self.palette = (task_palette if mode == "task" else _style.device_palette)(
            d for d in self.devices if d)
        self.device_index = {d: k for k, d in enumerate(sorted(self.palette))}
        self.values = self._values() if mode in ("time", "memory") else {}
        self.top = max(self.values.values(), default=0.0)
        self.faded: set = set()
        self.used_families: list = []
        self.seen_states: set = set()

    # --- per-op facts ---------------------------------------------------------------------
    def device(self, rec) -> str:
        return canonical_device(rec.partition or self.facts.device_of(rec.name, rec.device))

    def _devices(self) -> set:
        return {self.device(r) for u in self.view.units.values() for r in u.members}

    def _values(self) -> dict:
        source = self.facts.time_us if self.mode == "time" else self.facts.out_bytes
        out = {}
        for uid, u in self.view.units.items():
            seen = [source[r.name] for r in u.members if r.name in source]
            if seen:
                out[uid] = float(sum(seen))
        return out

    def _ran_fused(self, recs) -> bool:
        return all(r.fused_into or r.name in self.facts.fused_into for r in recs)

    def amount_text(self, value: float) -> str:
        return _text.format_micros(value) if self.mode == "time" else _text.format_bytes(value)

    # --- units ----------------------------------------------------------------------------
    def _base(self, uid, unit) -> NodeLook:
        recs = unit.members
        if self.mode == "state":
            return NodeLook("#ffffff", "#7b8794", _style.TEXT,
                            penwidth=1.4 if unit.kind != "op" else 1.0)
        if self.mode == "op":
            if unit.kind == "scope" and not self._is_variable(unit):
                return NodeLook(SCOPE_FILL, "#7b8794", _style.TEXT, penwidth=1.4)
            if unit.kind == "fused":
                return NodeLook(_style.FUSED_FILL, _style.FUSED_LINE, _style.TEXT, penwidth=1.4)
            if unit.kind == "series" and not _series_type(unit):
                return NodeLook(SCOPE_FILL, "#7b8794", _style.TEXT, penwidth=1.4)
            fam = _style.family(self._variable_type(unit) or recs[0].type)
            if fam not in self.used_families:
                self.used_families.append(fam)
            fill = _style.family_fill(fam)
            return NodeLook(fill, _style.darker(fill), _style.TEXT)
        if self.mode in _PLACE_MODES:
            counts: dict = {}
            for r in recs:
                d = self.device(r)
                counts[d] = counts.get(d, 0) + 1
            fills = {self.palette.get(d, _style.UNKNOWN_DEVICE): n for d, n in counts.items()}
            if len(fills) == 1:
                fill = next(iter(fills))
                if self.mode == "task" and all(_names_no_device(d) for d in counts):
                    return NodeLook(fill, _style.darker(fill, 0.6), _style.TEXT, penwidth=2)
                return NodeLook(fill, _style.darker(fill), _style.TEXT)
            stripes = [(c, n / len(recs)) for c, n in sorted(fills.items())]
            return NodeLook(stripes[0][0], "#52606d", _style.TEXT, stripes=stripes)
        if uid not in self.values and self._ran_fused(recs):
            # It ran inside a fused node, whose time and bytes its last op's unit shows.
            self.seen_states.add("ran-fused")
            return NodeLook(_style.NOT_RUN_FILL, _style.FUSED_LINE, _style.MUTED_TEXT,
                            classes=["ran-fused"])
        if uid not in self.values:
            self.seen_states.add("not-run")
            return NodeLook(_style.NOT_RUN_FILL, _style.FADED_LINE, _style.MUTED_TEXT,
                            classes=["not-run"], dashed=True)
        fill, ink = _style.heat(self.values[uid], self.top)
        return NodeLook(fill, _style.darker(fill, 0.3), ink)

    def _is_variable(self, unit) -> bool:
        return unit.kind == "scope" and _grouping.is_variable_scope(unit.name, unit.members)

    def _variable_type(self, unit) -> str:
        """The variable op a collapsed variable scope is drawn as ("" for anything else)."""
        if not self._is_variable(unit):
            return ""
        return next(r.type for r in unit.members if r.name == unit.name)

    def _lines(self, uid, unit) -> list:
        r = unit.members[0]
        if unit.kind == "series":
            lines = [f"{unit.count} \u00d7 {_series_type(unit) or 'scopes'}"]
        elif self._is_variable(unit):
            lines = [f"variable \u00b7 {len(unit.members)} ops"]
        elif unit.kind == "scope":
            lines = [f"{len(unit.members)} ops" + (" \u00b7 while loop" if unit.loop else "")]
        elif unit.kind == "fused":
            lines = _fused_lines(r)
        elif r.is_comm and r.transfer_key() is not None:
            _, src, dst = r.transfer_key()
            lines = [f"to {_text.short_device(dst)}" if r.type in SEND_TYPES
                     else f"from {_text.short_device(src)}"]
        else:
            lines = [r.type] if r.type != unit.label else []
            if r.type in ("Const", "HostConst") and "value" in r.attrs:
                lines.append(_text.value_text(r.attrs["value"], 28))
        if uid in self.view.aux:
            lines.append(f"\u2194 {len(self.view.aux[uid])} nodes" if self.view.aux[uid]
                         else unit.aux)
        elif uid in self.view.hubs:
            lines.append(f"\u2194 {len(self.view.hubs[uid])} nodes, edges hidden")
        if self.mode in ("device", "task") and unit.kind in ("op", "fused"):
            lines.append(_text.short_device(self.device(r)) or "no device")
        elif uid in self.values:
            lines.append(self.amount_text(self.values[uid]))
        return lines

    def unit_look(self, uid, unit) -> NodeLook:
        look = self._base(uid, unit)
        names = [r.name for r in unit.members]
        look.classes = [unit.kind] + look.classes
        if unit.kind == "op":
            look.classes.append("fam-" + _style.family(unit.members[0].type))
        elif unit.loop:
            look.classes.append("loop")
        if unit.aux:
            look.classes.append("aux")
        if unit.kind == "fused":
            # Marked in every colouring: device and heat fills say nothing about fusion.
            look.line, look.penwidth = _style.FUSED_LINE, max(look.penwidth, 1.4)
            if unit.members[0].fused:
                look.classes.append("expandable")
        if unit.members[0].fused_into:
            look.classes.append("fused-member")
        if self.mode in _PLACE_MODES:
            devs = {self.device(r) for r in unit.members}
            look.classes += [f"dev-{self.device_index[d]}" for d in devs if d in self.device_index]
        look.lines = self._lines(uid, unit)
        if uid in self.view.hubs:
            look.classes.append("hub")
            look.dashed = not unit.aux  # set aside, it needs no second mark
        f = self.facts
        if f.needed is not None:
            if any(n in f.fed for n in names):
                look.classes.append("fed")
            if any(n in f.needed or n in f.fed for n in names + _carried(unit)):
                look.classes.append("needed")
            else:
                self.faded.add(uid)
                self.seen_states.add("faded")
                look.fill, look.line, look.text = (_style.FADED_FILL, _style.FADED_LINE,
                                                   _style.FADED_TEXT)
                look.stripes = None
                look.classes.append("faded")
        if any(n in f.fetched for n in names):
            self.seen_states.add("fetched")
            look.peripheries = 2
            look.classes.append("fetched")
        if any(n in f.highlighted for n in names):
            self.seen_states.add("highlighted")
            look.line, look.penwidth = _style.ACCENT, 2.6
            look.classes.append("highlighted")
        if any(n in f.stale for n in names):
            self.seen_states.add("stale")
            look.line, look.penwidth, look.dashed = _style.STALE_LINE, 2.6, True
            look.lines = [*look.lines, "stale: re-run its cell"]
            look.classes.append("stale")
        return look

    def shape(self, unit) -> str:
        if unit.kind == "fused":
            return _style.FUSED_SHAPE
        if unit.kind == "series":
            return SERIES_SHAPE
        if self._is_variable(unit):
            return _style.shape_of(self._variable_type(unit))
        return "box" if unit.kind == "scope" else _style.shape_of(unit.members[0].type)

    # --- clusters and edges ---------------------------------------------------------------
    def cluster_look(self, c) -> NodeLook:
        if c.kind == "partition":
            base = self.palette.get(c.name, _style.UNKNOWN_DEVICE)
            classes = ["partition"] + ([f"dev-{self.device_index[c.name]}"]
                                       if c.name in self.device_index else [])
            return NodeLook(lighten(base, 0.8), _style.darker(base, 0.2), _style.TEXT,
                            classes=classes, penwidth=1.6)
        if c.kind == "frame":
            return NodeLook("#fff8f2", "#e0a070", _style.TEXT, classes=["frame"], dashed=True)
        if c.kind == "fused":
            return NodeLook(lighten(_style.FUSED_FILL, 0.6), _style.FUSED_LINE, _style.TEXT,
                            classes=["fused"], penwidth=1.4)
        if c.kind == "aux":
            return NodeLook("#fbfcfd", AUX_LINE, _style.TEXT, classes=["aux"], dashed=True)
        return NodeLook("#f8f9fb", "#c5ccd6", _style.TEXT, classes=["scope"])

    def edge_look(self, e, labels: bool) -> EdgeLook:
        if e.kind == "control":
            look = EdgeLook(_style.CONTROL_EDGE, ["control"], style="dotted")
        elif e.kind == "transfer":
            look = EdgeLook(_style.TRANSFER_EDGE, ["transfer"], penwidth=1.6, style="dashed")
        elif self.mode == "task" and self._crosses_tasks(e):
            look = EdgeLook(CROSS_TASK_EDGE, ["data", "cross-task"], penwidth=2.6,
                            style="dashed")
            moved = self._bytes_of(e)
            if moved:
                look.label = _text.format_bytes(moved)
        else:
            look = EdgeLook(_style.EDGE, ["data"], penwidth=1.0 + min(e.count - 1, 4) * 0.35)
        if e.back:
            look.classes.append("back")
        if labels and e.kind != "control" and not look.label:
            if e.count == 1 or len(e.texts) == 1:
                text = e.texts[0] if e.texts else ""
                look.label = text if e.count == 1 else f"{e.count}\u00d7 {text}".strip()
            else:
                look.label = f"{e.count} tensors"
        elif labels and e.count > 1:
            look.label = f"{e.count}"
        if e.source in self.faded or e.target in self.faded:
            look.color = _style.FADED_LINE
            look.classes.append("faded")
        if self.facts.emphasized.intersection(e.tensors):
            look.color, look.penwidth = _style.ACCENT, 2.4
            look.classes.append("emph")
        return look

    def _tasks_of_unit(self, uid) -> set:
        unit = self.view.units.get(uid)
        if unit is None:
            return set()
        return {task_of(self.device(r)) for r in unit.members}

    def _crosses_tasks(self, e) -> bool:
        src, dst = self._tasks_of_unit(e.source), self._tasks_of_unit(e.target)
        return bool(src and dst and "" not in src | dst and not src & dst)

    def _bytes_of(self, e) -> int:
        """Bytes the edge's tensors carried in the traced step (0: not traced)."""
        out = self.facts.out_bytes
        return sum(out.get(t.split(":")[0], 0) for t in e.tensors)

    # --- legend ---------------------------------------------------------------------------
    def _has_fused(self) -> bool:
        return (any(u.kind == "fused" for u in self.view.units.values())
                or any(c.kind == "fused" for c in self.view.clusters.values()))

    def legend(self) -> Legend:
        lg = Legend(caption=_CAPTIONS[self.mode])
        units = self.view.units.values()
        if self.mode == "op":
            for fam in (f for f in _style.FAMILIES if f in self.used_families):
                fill = _style.family_fill(fam)
                lg.swatches.append((fill, _style.darker(fill), _style.FAMILIES[fam][0]))
            if any(u.kind == "scope" and not self._is_variable(u) for u in units):
                lg.swatches.append((SCOPE_FILL, "#7b8794", "name scope (click to open)"))
        elif self.mode in _PLACE_MODES:
            for d, c in sorted(self.palette.items()):
                task_only = self.mode == "task" and _names_no_device(d)
                lg.swatches.append((c, _style.darker(c, 0.6 if task_only else 0.35),
                                    device_legend_label(d, self.mode)))
            if "" in self.devices:
                lg.swatches.append((_style.UNKNOWN_DEVICE, "#7b8794", "no device"))
        elif self.mode == "state":
            pass  # the widget's own legend says what its node colours mean
        else:
            lg.heat = (_style.HEAT, "0", self.amount_text(self.top), "")
            if "not-run" in self.seen_states:
                lg.swatches.append((_style.NOT_RUN_FILL, _style.FADED_LINE, "not run"))
            if "ran-fused" in self.seen_states:
                lg.swatches.append((_style.NOT_RUN_FILL, _style.FUSED_LINE,
                                    "ran fused (see its last op)"))
        if self._has_fused():
            fill = _style.FUSED_FILL if self.mode == "op" else "#ffffff"
            lg.swatches.append((fill, _style.FUSED_LINE, "fused ops (one kernel)"))
        if any(u.kind == "series" for u in units):
            lg.swatches.append(("#ffffff", "#7b8794", "series: alike siblings as one",
                                "stacked"))
        if self.view.aux:
            lg.swatches.append(("#fbfcfd", AUX_LINE, "auxiliary: \u2194 its edges are hidden",
                                "dashed"))
        if any(u not in self.view.aux for u in self.view.hubs):
            lg.swatches.append(("#ffffff", "#7b8794", "\u2194 hub: its edges are hidden",
                                "dashed"))
        if "fetched" in self.seen_states:
            lg.swatches.append(("#ffffff", "#52606d", "fetched", "double"))
        if "faded" in self.seen_states:
            lg.swatches.append((_style.FADED_FILL, _style.FADED_LINE, "not needed by fetches"))
        if "highlighted" in self.seen_states:
            lg.swatches.append(("#ffffff", _style.ACCENT, "highlighted"))
        if "stale" in self.seen_states:
            lg.swatches.append(("#ffffff", _style.STALE_LINE,
                                "stale: reads what a re-run cell replaced", "dashed"))
        kinds = {e.kind for e in self.view.edges}
        if "data" in kinds:
            lg.edges.append((_style.EDGE, "", "data"))
        if "control" in kinds:
            lg.edges.append((_style.CONTROL_EDGE, "1,3", "control"))
        if "transfer" in kinds:
            lg.edges.append((_style.TRANSFER_EDGE, "5,2", "send \u2192 recv"))
        if self.mode == "task" and any(e.kind == "data" and self._crosses_tasks(e)
                                       for e in self.view.edges):
            lg.edges.append((CROSS_TASK_EDGE, "6,3", "crosses tasks (bytes of a traced step)"))
        return lg
