"""``TrainingMonitor``: a live view of a training loop — loss curve, step rate, progress bar.

``monitor.log(step, loss=..., **scalars)`` records a point (the full history stays in Python,
``monitor.history``); the view is updated through the shared throttle (at most 30 times a
second, all points of an interval in one update) with each curve thinned to at most
``max_points`` points, so a long loop costs the front-end no more than a short one.
``monitor.hook(loss=..., ...)`` gives a ``tf.train.SessionRunHook`` that logs from a
``MonitoredSession``. Its saved output (``SavedOutput``) is an SVG of the curves as they were
when the loop stopped logging.
"""

from __future__ import annotations

import math
import threading
import time

import anywidget
import numpy as np
import traitlets as t

from dflab.notebook import _assets
from dflab.notebook._saved import SavedOutput
from dflab.notebook._throttle import Throttle
from dflab.train import training_util
from dflab.train.session_run_hook import SessionRunArgs, SessionRunHook
from dflab.visualize import style as _style
from dflab.visualize import svg as _svg

RATE_WINDOW = 20  # steps over which the step rate is measured


def thin(points: list, max_points: int) -> list:
    """At most ``max_points`` of ``points``, evenly spaced, always keeping the last one."""
    n = len(points)
    if n <= max_points:
        return list(points)
    idx = np.linspace(0, n - 1, max_points).round().astype(int)
    return [points[i] for i in dict.fromkeys(idx.tolist())]


def _scalar(value) -> float:
    a = np.asarray(value)
    if a.size != 1:
        raise ValueError(f"monitor.log takes scalars; got a value of shape {a.shape}")
    return float(a.reshape(()))


def curves_svg(curves: dict, status: str, title: str = "") -> str:
    """A static chart of ``curves`` (name -> [[step, value], ...]): one small plot per curve,
    its last value and the status line, for where the live view cannot be shown."""
    plot_w, plot_h, pad, head = 320.0, 120.0, 28.0, 22.0
    names = list(curves) or [""]
    width = max(len(names), 1) * (plot_w + pad) + pad
    height = head + plot_h + 2 * pad
    root = _svg.document(width, height, "dflab-monitor-static")
    _svg.element(root, "rect", x=0, y=0, width=width, height=height, fill=_style.BACKGROUND)
    _svg.element(root, "text", " \u00b7 ".join(t for t in (title, status) if t), x=pad, y=16,
                 font_size=12, font_family=_style.FONT, fill=_style.TEXT)
    for k, name in enumerate(names):
        points = [(s, v) for s, v in curves.get(name, []) if v is not None]
        x0, y0 = pad + k * (plot_w + pad), head + pad
        _svg.element(root, "rect", x=x0, y=y0, width=plot_w, height=plot_h, fill="#f3f4f6")
        label = f"{name} {points[-1][1]:.4g}" if points else name
        _svg.element(root, "text", label, x=x0, y=y0 - 6, font_size=11,
                     font_family=_style.FONT, fill=_style.TEXT)
        if len(points) < 2:
            continue
        steps, values = [p[0] for p in points], [p[1] for p in points]
        s0, s1 = min(steps), max(steps) or 1
        v0, v1 = min(values), max(values)
        span_s, span_v = (s1 - s0) or 1, (v1 - v0) or 1
        path = " ".join(f"{'M' if i == 0 else 'L'}{x0 + (s - s0) / span_s * plot_w:.1f},"
                        f"{y0 + plot_h - (v - v0) / span_v * plot_h:.1f}"
                        for i, (s, v) in enumerate(points))
        _svg.element(root, "path", d=path, fill="none", stroke="#1976d2", stroke_width=1.5)
        for text, y in ((f"{v1:.3g}", y0 + 10), (f"{v0:.3g}", y0 + plot_h - 2)):
            _svg.element(root, "text", text, x=x0 + plot_w - 4, y=y, font_size=9,
                         text_anchor="end", font_family=_style.FONT, fill=_style.MUTED_TEXT)
    return _svg.serialize(root)


class TrainingMonitor(SavedOutput, anywidget.AnyWidget):
    """Live loss curve, step rate and progress of a training loop (see the module docstring).

    ``total_steps`` (optional) draws the progress bar; ``clock`` and ``schedule`` are for tests.
    """

    _esm = _assets.esm("monitor")
    _css = _assets.css()

    title = t.Unicode("").tag(sync=True)
    curves = t.Dict().tag(sync=True)  # name -> [[step, value], …] (thinned)
    step = t.Int(0).tag(sync=True)
    total = t.Int(0).tag(sync=True)
    rate = t.Float(0.0).tag(sync=True)  # steps per second, over the last RATE_WINDOW logs
    status = t.Unicode("").tag(sync=True)

    def __init__(self, total_steps: int | None = None, *, title: str = "",
                 max_points: int = 500, max_hz: float = 30.0, clock=None, schedule=None):
        super().__init__(title=title, total=int(total_steps or 0))
        self.max_points = max_points
        self.history: dict[str, list] = {}  # name -> [(step, value)], every point logged
        self._clock = clock or time.monotonic
        self._times: list[tuple[int, float]] = []  # (step, time) of recent logs
        self._lock = threading.Lock()
        kw = {"clock": self._clock} | ({"schedule": schedule} if schedule is not None else {})
        self._throttle = Throttle(self._flush, max_hz, **kw)
        self._status_text()

    def log(self, step: int, loss=None, **scalars) -> None:
        """Record scalars (``loss`` and any others) at ``step``; the view follows, throttled."""
        values = ({"loss": loss} if loss is not None else {}) | scalars
        step = int(step)
        with self._lock:
            for name, v in values.items():
                self.history.setdefault(name, []).append((step, _scalar(v)))
            self._times.append((step, self._clock()))
            del self._times[:-RATE_WINDOW]
            self._last_step = step
        self._throttle.push(step)

    def _steps_per_second(self) -> float:
        if len(self._times) < 2:
            return 0.0
        (s0, t0), (s1, t1) = self._times[0], self._times[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else 0.0

    def _flush(self, _batch) -> None:
        with self._lock:
            curves = {name: [[s, v if math.isfinite(v) else None] for s, v in
                             thin(points, self.max_points)]
                      for name, points in self.history.items()}
            step = getattr(self, "_last_step", 0)
            rate = self._steps_per_second()
        with self.hold_sync():
            self.curves = curves
            self.step = step
            self.rate = rate
            self._status_text()
        self._state_changed()

    def flush(self) -> None:
        """Send what is pending now (e.g. right after the loop ends), and leave it in the
        saved notebook."""
        self._throttle.flush()
        self.save_output()

    def _status_text(self) -> None:
        parts = [f"step {self.step}" + (f" / {self.total}" if self.total else "")]
        if self.rate:
            parts.append(f"{self.rate:.3g} steps/s")
        for name, points in self.history.items():
            parts.append(f"{name} {points[-1][1]:.4g}")
        self.status = " · ".join(parts)

    @property
    def throttle(self) -> Throttle:
        return self._throttle

    def hook(self, loss=None, every_n_steps: int = 1, **tensors) -> MonitorHook:
        """A ``SessionRunHook`` logging ``loss`` and other scalar tensors every ``every_n_steps``
        runs of a ``MonitoredSession``, at the graph's global step when it has one."""
        return MonitorHook(self, loss=loss, every_n_steps=every_n_steps, **tensors)

    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs)
        bundle, meta = data if isinstance(data, tuple) else (data, {})
        bundle = dict(bundle)
        bundle["text/plain"] = f"TrainingMonitor: {self.status}"
        bundle["image/svg+xml"] = curves_svg(self.curves, self.status, self.title)
        return bundle, meta


class MonitorHook(SessionRunHook):
    """Fetches the monitored tensors with the caller's run and logs them (see ``hook``)."""

    def __init__(self, monitor: TrainingMonitor, loss=None, every_n_steps: int = 1, **tensors):
        if every_n_steps < 1:
            raise ValueError(f"every_n_steps must be at least 1, got {every_n_steps}")
        self.monitor = monitor
        self.every_n_steps = every_n_steps
        self._tensors = ({"loss": loss} if loss is not None else {}) | tensors
        self._runs = 0

    def begin(self):
        self._global_step = training_util.get_global_step()
        self._runs = 0

    def before_run(self, run_context):
        self._runs += 1
        if (self._runs - 1) % self.every_n_steps:
            return None
        fetches = dict(self._tensors)
        if self._global_step is not None:
            fetches["__global_step"] = self._global_step
        return SessionRunArgs(fetches)

    def after_run(self, run_context, run_values):
        results = run_values.results
        if not results:
            return
        results = dict(results)
        # TF's logging hooks report the global step as read with the run (before its update).
        step = int(results.pop("__global_step")) if "__global_step" in results else self._runs
        self.monitor.log(step, **results)

    def end(self, session):
        self.monitor.flush()
