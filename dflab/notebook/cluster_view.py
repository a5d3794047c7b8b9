"""``ClusterView``: the tasks of a cluster, their devices, the variables each holds, and live
step activity per task (``%dflab cluster`` shows one).

The facts come from ``dflab.distributed.describe_cluster`` (either transport); the activity from
the step listeners of the sessions it watches: every step's ``RunMetadata`` is folded per task —
steps that used the task, the time its devices spent in ops during the last step, and the bytes
that crossed into and out of it (``RunMetadata.transfers``). Redraws go through the shared
throttle, so a fast training loop costs the front-end a few updates a second.

A view outlives its cluster (the servers stopped, the session closed): it then keeps the table
as last read and says, calmly, that the cluster has stopped; it never raises and never shows an
error. Its saved output (``SavedOutput``) is that table, so a saved notebook shows it too.
"""

from __future__ import annotations

import html
import threading

import ipywidgets as widgets

from dflab.distributed import describe_cluster
from dflab.notebook._saved import SavedOutput
from dflab.notebook._throttle import Throttle
from dflab.visualize import text as _text

_STYLE = ("border-collapse:collapse;font:13px/1.4 system-ui,sans-serif;text-align:left;"
          "min-width:32em")
_CELL = "padding:3px 10px;border-bottom:1px solid #e4e7eb;vertical-align:top;text-align:left"
_NOTE = "color:#52606d;font:12px/1.4 system-ui,sans-serif;padding:4px 10px"


def _task_of(device: str) -> str:
    return device.split("/device:")[0]


class TaskActivity:
    """What the watched sessions' steps did on one task."""

    __slots__ = ("steps", "busy_us", "bytes_in", "bytes_out", "ops")

    def __init__(self):
        self.steps = 0
        self.busy_us = 0
        self.ops = 0
        self.bytes_in = 0
        self.bytes_out = 0


def fold_step(activity: dict, run_metadata) -> None:
    """Add one traced step (``RunMetadata``) to ``activity`` (task name -> TaskActivity)."""
    last: dict = {}  # task -> (microseconds in ops, ops run) in this step
    for ds in run_metadata.step_stats.dev_stats:
        task = _task_of(ds.device)
        busy, ops = last.get(task, (0, 0))
        last[task] = (busy + sum(n.all_end_rel_micros for n in ds.node_stats),
                      ops + len(ds.node_stats))
    for task, (busy, ops) in last.items():
        a = activity.setdefault(task, TaskActivity())
        a.steps += 1
        a.busy_us, a.ops = busy, ops
    for t in getattr(run_metadata, "transfers", ()):
        activity.setdefault(_task_of(t.src_device), TaskActivity()).bytes_out += t.bytes
        activity.setdefault(_task_of(t.dst_device), TaskActivity()).bytes_in += t.bytes


def cluster_html(tasks: list, activity: dict | None = None) -> str:
    """A table of ``describe_cluster``'s tasks: devices, variables (bytes), and activity."""
    activity = activity or {}
    head = ("<tr>" + "".join(f"<th style='{_CELL}'>{h}</th>" for h in
                             ("task", "address", "devices", "variables", "activity")) + "</tr>")
    rows = []
    for t in tasks:
        name = html.escape(t["task"])
        state = "" if t["running"] else " <span style='color:#b54708'>(not running)</span>"
        devices = "<br>".join(html.escape(_text.short_device(d["name"]) or d["name"])
                              for d in t["devices"]) or "—"
        held = list(t["variables"])
        total = sum(v["bytes"] for v in held)
        listed = "<br>".join(
            f"{html.escape(v['name'])} <span style='color:#52606d'>"
            f"{html.escape(str(list(v['shape'])) if v['shape'] is not None else 'uninit.')} "
            f"{_text.format_bytes(v['bytes'])}</span>" for v in held[:8])
        if len(held) > 8:
            listed += f"<br>… {len(held) - 8} more"
        variables = (f"<b>{len(held)}</b> ({_text.format_bytes(total)})<br>{listed}"
                     if held else "—")
        a = activity.get(t["task"])
        act = "—" if a is None else (
            f"{a.steps} steps; last: {a.ops} ops, {_text.format_micros(a.busy_us)}<br>"
            f"in {_text.format_bytes(a.bytes_in)}, out {_text.format_bytes(a.bytes_out)} "
            "(all steps)")
        rows.append(f"<tr><td style='{_CELL}'><b>{name}</b>{state}<br>"
                    f"<span style='color:#52606d'>{html.escape(t['transport'])}</span></td>"
                    f"<td style='{_CELL}'>{html.escape(t['address'])}</td>"
                    f"<td style='{_CELL}'>{devices}</td><td style='{_CELL}'>{variables}</td>"
                    f"<td style='{_CELL}'>{act}</td></tr>")
    return f"<table class='dflab-cluster' style='{_STYLE}'>{head}{''.join(rows)}</table>"


def stopped_note(error: BaseException) -> str:
    """The calm line a view shows once its cluster cannot be read any more."""
    why = html.escape(str(error).splitlines()[0] if str(error) else type(error).__name__)
    return (f"<div class='dflab-cluster-stopped' style='{_NOTE}' title='{why}'>"
            "\u25fc The cluster has stopped (its servers were stopped or its session closed): "
            "this is the cluster as last seen.</div>")


class ClusterView(SavedOutput, widgets.VBox):
    """A live table of a cluster's tasks (see the module docstring).

    ``where``: a ``tf.train.Server``, a session on a cluster, or its target. ``sessions``: the
    sessions whose steps show as activity (a session given as ``where`` is watched too).
    """

    def __init__(self, where, sessions=(), max_hz: float = 4.0):
        self._where = where
        self.activity: dict = {}
        self._lock = threading.Lock()
        self._html = widgets.HTML()
        self._note = widgets.HTML()
        self._listeners = []
        self._throttle = Throttle(lambda batch: self.refresh(), max_hz=max_hz)
        self.stopped = False  # the cluster could not be read at the last refresh
        super().__init__([self._html, self._note])
        self.add_class("dflab-cluster-view")
        watched = list(sessions)
        if hasattr(where, "add_step_listener"):
            watched.append(where)
        for s in watched:
            self.watch(s)
        self.refresh()

    @property
    def tasks(self) -> list:
        return describe_cluster(self._where)

    def watch(self, session) -> None:
        """Show ``session``'s steps as activity (each step is then traced)."""
        self._listeners.append(session.add_step_listener(self._on_step))

    def _on_step(self, run_metadata) -> None:
        with self._lock:
            fold_step(self.activity, run_metadata)
        self._throttle.push(None)

    def refresh(self) -> None:
        """Read the cluster again and redraw. A cluster that cannot be read any more (stopped
        servers, a closed session) is said calmly in the view, the table kept as last read;
        nothing is raised."""
        try:
            tasks = describe_cluster(self._where)
        except Exception as e:  # noqa: BLE001 - a stopped cluster: say so in the view
            self.stopped = True
            self._note.value = stopped_note(e)
            self._state_changed()
            return
        self.stopped = False
        with self._lock:
            self._html.value = cluster_html(tasks, self.activity)
        self._note.value = ""
        self._state_changed()

    def unwatch(self) -> None:
        """Stop following the watched sessions' steps (their steps are no longer traced); the
        view keeps showing what it has."""
        for handle in self._listeners:
            handle.remove()
        self._listeners.clear()

    def close(self) -> None:
        self.unwatch()
        super().close()

    def _repr_html_(self) -> str:
        return self._html.value + self._note.value

    def _repr_mimebundle_(self, **kwargs):
        """The widget view, and its last table for where the widget cannot be shown."""
        bundle = dict(super()._repr_mimebundle_(**kwargs))
        bundle["text/html"] = self._repr_html_()
        tasks = self._html.value.count("<tr>") - 1
        state = "stopped" if self.stopped else "live"
        bundle["text/plain"] = f"ClusterView: {tasks} tasks ({state})"
        return bundle
