"""``Timeline``: a Gantt chart of traced steps, per device and thread, with Send→Recv arrows.

The data is ``dflab.visualize.timeline.timeline_data(run_metadata)`` (plain JSON), drawn by
``extension/src/timeline.js`` (wheel zooms the time axis, dragging pans). ``follow(session)``
attaches a session step listener: every ``Session.run`` of that session is traced and the chart
follows the loop live, through the shared throttle (at most 30 updates a second, the steps of
one interval batched into one update showing the most recent ``max_steps`` steps).
"""

from __future__ import annotations

import threading

import anywidget
import traitlets as t

from dflab.notebook import _assets
from dflab.notebook._graph_widget import jsonable
from dflab.notebook._saved import SavedOutput
from dflab.notebook._throttle import Throttle
from dflab.visualize import style as _style
from dflab.visualize import text as _text
from dflab.visualize import timeline as _vtimeline


def _step_start_us(run_metadata) -> float:
    """Wall-clock start of a traced step (µs since the epoch): where its bars begin."""
    stats = getattr(run_metadata, "step_stats", run_metadata)
    starts = [ns.all_start_nanos / 1000 if ns.all_start_nanos else ns.all_start_micros
              for ds in stats.dev_stats for ns in ds.node_stats]
    return min(starts) if starts else 0.0


def _colour(bars: list) -> None:
    """Bars filled like the graph drawing colours ops: by family."""
    for b in bars:
        fill = _style.family_fill(b.get("family", "other"))
        b["color"], b["stroke"] = fill, _style.darker(fill)


def merge_steps(steps: list) -> dict:
    """One chart of several steps, given as ``(start_us, timeline_data)`` pairs.

    Times are shifted so each step sits where it ran relative to the first; lanes of the same
    device and thread are merged (ids renumbered), arrows re-pointed at the merged bars.
    """
    t_first = min(start for start, _ in steps)
    lanes: dict = {}
    bars, arrows = [], []
    for start, d in steps:
        shift = start - t_first
        lane_ids = {}
        for lane in d.get("lanes", []):
            key = (lane["device"], lane["thread_id"])
            if key not in lanes:
                lanes[key] = dict(lane, id=f"l{len(lanes)}")
            lanes[key]["rows"] = max(lanes[key].get("rows", 1), lane.get("rows", 1))
            lane_ids[lane["id"]] = lanes[key]["id"]
        base = len(bars)
        for b in d.get("bars", []):
            bars.append(dict(b, lane=lane_ids[b["lane"]], start_us=b["start_us"] + shift,
                             end_us=b["end_us"] + shift))
        for a in d.get("arrows", []):
            arrows.append(dict(a, start_us=a["start_us"] + shift, end_us=a["end_us"] + shift,
                               **{"from": a["from"] + base, "to": a["to"] + base}))
    _colour(bars)
    last = steps[-1][1]
    return {"step_id": last.get("step_id", 0), "steps": [d.get("step_id", 0) for _, d in steps],
            "duration_us": max((b["end_us"] for b in bars), default=0.0),
            "devices": sorted({lane["device"] for lane in lanes.values()}),
            "lanes": list(lanes.values()), "bars": bars, "arrows": arrows}


class Timeline(SavedOutput, anywidget.AnyWidget):
    """The Gantt chart of ``run_metadata`` (from a traced ``Session.run``), or of a live loop
    with ``Timeline.follow(session)``."""

    _esm = _assets.esm("timeline")
    _css = _assets.css()

    title = t.Unicode("").tag(sync=True)
    data = t.Dict().tag(sync=True)  # timeline_data: lanes, bars, arrows
    summary = t.Unicode("").tag(sync=True)
    following = t.Bool(False).tag(sync=True)

    def __init__(self, run_metadata=None, *, max_steps: int = 1, max_hz: float = 30.0,
                 title: str = "", clock=None, schedule=None):
        super().__init__(title=title)
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.max_steps = max_steps
        self._recent: list = []  # the RunMetadata of the latest max_steps steps
        self.steps_seen = 0  # not synced: counted per step, shown at the throttled rate
        self._lock = threading.Lock()
        self._handle = None
        kw = {k: v for k, v in (("clock", clock), ("schedule", schedule)) if v is not None}
        self._throttle = Throttle(self._flush, max_hz, **kw)
        if run_metadata is not None:
            self.update(run_metadata)

    # --- data in ----------------------------------------------------------------------------
    def update(self, run_metadata) -> None:
        """Show ``run_metadata`` now (appended to the recent steps when max_steps > 1)."""
        self._remember(run_metadata)
        self._throttle.flush()
        self._show(self._recent_copy())

    def push(self, run_metadata) -> None:
        """Add a step for display at the throttled rate (what ``follow`` calls per run)."""
        self._remember(run_metadata)
        self._throttle.push(None)

    def _remember(self, run_metadata) -> None:
        # Only a reference is kept per step: the chart data is computed when the throttle
        # flushes (at most max_hz times a second), never per training step. A RunMetadata the
        # caller reuses for every run is one step, shown with its latest contents.
        with self._lock:
            self._recent = [m for m in self._recent if m is not run_metadata]
            self._recent.append(run_metadata)
            del self._recent[: -self.max_steps]
            self.steps_seen += 1

    def _recent_copy(self) -> list:
        with self._lock:
            return list(self._recent)

    def _flush(self, _batch) -> None:
        self._show(self._recent_copy())

    def _show(self, recent: list) -> None:
        if not recent:
            return
        merged = jsonable(merge_steps(
            [(_step_start_us(m), _vtimeline.timeline_data(m)) for m in recent]))
        ids = merged["steps"]
        with self.hold_sync():
            self.data = merged
            self.summary = " · ".join(
                [f"step {ids[0]}" if len(ids) == 1 else f"steps {ids[0]}–{ids[-1]}",
                 f"{len(merged['bars'])} node executions",
                 f"{len(merged['lanes'])} lanes", _text.format_micros(merged["duration_us"])]
                + ([f"{self.steps_seen} steps seen"] if self.following else []))
        self._state_changed()

    # --- live -------------------------------------------------------------------------------
    def follow(self, session) -> Timeline:
        """Follow every run of ``session`` live (each run is traced while following)."""
        self.stop()
        self._handle = session.add_step_listener(self.push)
        self.following = True
        return self

    def stop(self) -> None:
        """Stop following; the last step stays shown."""
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        self._throttle.flush()
        self.following = False
        self.save_output()

    @property
    def throttle(self) -> Throttle:
        return self._throttle

    # --- display ------------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs)
        bundle, meta = data if isinstance(data, tuple) else (data, {})
        bundle = dict(bundle)
        bundle["text/plain"] = f"Timeline: {self.summary or 'no step yet'}"
        recent = self._recent_copy()
        if recent:
            bundle["image/svg+xml"] = _vtimeline.timeline_svg(recent[-1])
        return bundle, meta
