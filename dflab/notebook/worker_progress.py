"""``WorkerProgress``: a live per-worker view of replicated training.

One row per worker: gradients computed, a bar of them against the busiest worker (or the
planned total), the last and the recent median step time, how many gradients arrived stale
and were dropped, and a strip of the latest steps (a dot for a gradient used, a cross for one
dropped). The worker whose recent steps are clearly the slowest is marked as the straggler.

Training threads call ``record(worker, seconds, stale=...)`` after each step; records are
folded under a lock and the view is redrawn through the shared throttle (a few times a
second), so a fast loop on several threads costs the front-end no more than a slow one. Only
escaped HTML crosses the wire (an ``ipywidgets.HTML``), so the view needs no front-end code,
and that table is also its saved output (``SavedOutput``): a saved notebook shows the last one.
"""

from __future__ import annotations

import html
import threading
from collections import deque

import ipywidgets as widgets
import numpy as np

from dflab.notebook._saved import SavedOutput
from dflab.notebook._throttle import Throttle
from dflab.visualize import text as _text

WINDOW = 10  # recent steps behind the median step time and the straggler call
STRIP = 40  # steps shown in a worker's strip
STRAGGLER_RATIO = 1.25  # slowest recent median / median of the other workers' medians

_STYLE = ("border-collapse:collapse;font:13px/1.4 system-ui,sans-serif;text-align:left;"
          "min-width:36em")
_CELL = "padding:3px 10px;border-bottom:1px solid #e4e7eb;vertical-align:middle;text-align:left"
_SLOW = "background:#fff4e5"


class WorkerStats:
    """What one worker's recorded steps add up to."""

    __slots__ = ("steps", "stale", "last_s", "recent", "marks")

    def __init__(self):
        self.steps = 0
        self.stale = 0
        self.last_s = 0.0
        self.recent: deque = deque(maxlen=WINDOW)  # seconds of the latest steps
        self.marks: deque = deque(maxlen=STRIP)  # True where a step's gradient was dropped

    @property
    def median_s(self) -> float:
        return float(np.median(self.recent)) if self.recent else 0.0


def find_straggler(stats: dict) -> object | None:
    """The worker whose recent median step is >= STRAGGLER_RATIO x the others' (else None)."""
    timed = {w: s.median_s for w, s in stats.items() if s.recent}
    if len(timed) < 2:
        return None
    slowest = max(timed, key=timed.get)
    others = float(np.median([t for w, t in timed.items() if w != slowest]))
    return slowest if timed[slowest] >= STRAGGLER_RATIO * others > 0 else None


def _strip(marks) -> str:
    return "".join("<span style='color:#b42318;font-weight:bold'>x</span>" if dropped
                   else "<span style='color:#52606d'>·</span>" for dropped in marks)


def progress_html(stats: dict, total: int = 0, title: str = "") -> str:
    """The view's table for ``stats`` (worker name -> WorkerStats)."""
    straggler = find_straggler(stats)
    scale = total or max((s.steps for s in stats.values()), default=0) or 1
    head = "".join(f"<th style='{_CELL}'>{h}</th>" for h in (
        "worker", "gradients", "last step", f"median of last {WINDOW}", "stale (dropped)",
        f"last {STRIP} steps"))
    rows = []
    for worker, s in stats.items():
        slow = worker == straggler
        name = html.escape(str(worker)) + (
            " <span style='color:#b54708;font-weight:bold'>straggler</span>" if slow else "")
        bar = (f"<div style='display:inline-block;vertical-align:middle;width:8em;height:0.7em;"
               f"background:#e4e7eb'><div style='height:100%;background:#2e90fa;"
               f"width:{min(100.0, 100.0 * s.steps / scale):.0f}%'></div></div>")
        stale = (f"<span style='color:#b42318;font-weight:bold'>{s.stale}</span>" if s.stale
                 else "0")
        cells = (f"<b>{name}</b>", f"{s.steps} {bar}", _text.format_micros(s.last_s * 1e6),
                 _text.format_micros(s.median_s * 1e6), stale,
                 f"<span style='font-family:monospace'>{_strip(s.marks)}</span>")
        style = f" style='{_SLOW}'" if slow else ""
        rows.append(f"<tr{style}>" + "".join(f"<td style='{_CELL}'>{c}</td>" for c in cells)
                    + "</tr>")
    computed = sum(s.steps for s in stats.values())
    dropped = sum(s.stale for s in stats.values())
    caption = (f"<caption style='text-align:left;padding:2px 10px'>"
               f"{html.escape(title) + ': ' if title else ''}{computed} gradients, "
               f"{dropped} dropped as stale</caption>")
    return (f"<table class='dflab-worker-progress' style='{_STYLE}'>{caption}"
            f"<tr>{head}</tr>{''.join(rows)}</table>")


class WorkerProgress(SavedOutput, widgets.VBox):
    """Live per-worker progress of replicated training (see the module docstring).

    ``workers``: how many (named ``worker 0`` …) or their names. ``total_steps`` (optional):
    the steps each worker is expected to run, the bars' full length.
    """

    def __init__(self, workers, total_steps: int | None = None, *, title: str = "",
                 max_hz: float = 4.0, clock=None, schedule=None):
        names = ([f"worker {i}" for i in range(workers)] if isinstance(workers, int)
                 else [str(w) for w in workers])
        if not names:
            raise ValueError("WorkerProgress needs at least one worker")
        self.names = names
        self.total = int(total_steps or 0)
        self.title = title
        self.stats: dict = {name: WorkerStats() for name in names}
        self._lock = threading.Lock()
        self._html = widgets.HTML()
        kw = {k: v for k, v in (("clock", clock), ("schedule", schedule)) if v is not None}
        self._throttle = Throttle(lambda batch: self.refresh(), max_hz=max_hz, **kw)
        super().__init__([self._html])
        self.add_class("dflab-worker-progress")
        self.refresh()

    def _name(self, worker) -> str:
        if isinstance(worker, int) and not isinstance(worker, bool):
            if not 0 <= worker < len(self.names):
                raise IndexError(f"WorkerProgress has workers 0..{len(self.names) - 1}, "
                                 f"got {worker}")
            return self.names[worker]
        if str(worker) not in self.stats:
            raise KeyError(f"WorkerProgress has no worker named {worker!r}")
        return str(worker)

    def record(self, worker, seconds: float, stale: bool = False) -> None:
        """One step of ``worker`` (index or name) that took ``seconds``; ``stale`` when its
        gradient arrived after its step had been taken and was dropped."""
        s = self.stats[self._name(worker)]
        with self._lock:
            s.steps += 1
            s.stale += bool(stale)
            s.last_s = float(seconds)
            s.recent.append(float(seconds))
            s.marks.append(bool(stale))
        self._throttle.push(None)

    @property
    def straggler(self) -> str | None:
        """The worker currently marked as the straggler, or None."""
        with self._lock:
            return find_straggler(self.stats)

    def refresh(self) -> None:
        with self._lock:
            self._html.value = progress_html(self.stats, self.total, self.title)
        self._state_changed()

    def flush(self) -> None:
        """Redraw now with everything recorded (e.g. when training ends), and leave that in
        the saved notebook."""
        self._throttle.flush()
        self.refresh()
        self.save_output()

    @property
    def throttle(self) -> Throttle:
        return self._throttle

    def _repr_html_(self) -> str:
        return self._html.value

    def _repr_mimebundle_(self, **kwargs):
        """The widget view, and its last table for where the widget cannot be shown."""
        bundle = dict(super()._repr_mimebundle_(**kwargs))
        bundle["text/html"] = self._repr_html_()
        computed = sum(s.steps for s in self.stats.values())
        dropped = sum(s.stale for s in self.stats.values())
        bundle["text/plain"] = (f"WorkerProgress: {len(self.stats)} workers, {computed} "
                                f"gradients, {dropped} dropped as stale")
        return bundle
