"""One throttle for every live widget: updates batched and sent at most ``max_hz`` times a second.

A training loop can call ``push`` thousands of times a second; the front-end needs at most ~30
frames. ``push`` collects items; the first push after a quiet period is delivered at once
(the view reacts without delay), later ones are batched and delivered together by one deferred
flush at the end of the current interval, so the last update is never lost. ``flush(batch)``
receives every item pushed since the previous call, in order.

The clock and the scheduler are injectable so the rate logic is tested with a fake clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def _thread_timer(delay: float, fn: Callable[[], None]):
    timer = threading.Timer(delay, fn)
    timer.daemon = True  # a pending redraw must never keep the interpreter alive
    timer.start()
    return timer


class Throttle:
    """Batches ``push``-ed items into calls of ``flush(batch)``, at most ``max_hz`` per second.

    ``clock()`` returns seconds (monotonic); ``schedule(delay, fn)`` runs ``fn`` after ``delay``
    seconds and returns an object with ``cancel()``. Thread-safe: pushes may come from a training
    thread while the deferred flush runs on a timer thread.
    """

    def __init__(self, flush: Callable[[list], None], max_hz: float = 30.0, *,
                 clock: Callable[[], float] = time.monotonic,
                 schedule: Callable[[float, Callable[[], None]], object] = _thread_timer):
        if not max_hz > 0:
            raise ValueError(f"max_hz must be positive, got {max_hz!r}")
        self._flush = flush
        self.interval = 1.0 / max_hz
        self._clock = clock
        self._schedule = schedule
        self._lock = threading.RLock()
        self._pending: list = []
        self._last: float | None = None  # when the last flush happened
        self._timer = None
        self.flushes = 0  # how many batches were delivered (for tests and diagnostics)

    def push(self, item) -> None:
        with self._lock:
            self._pending.append(item)
            if self._timer is not None:
                return  # a deferred flush is already due and will take this item along
            now = self._clock()
            wait = 0.0 if self._last is None else self._last + self.interval - now
            if wait <= 0:
                self._deliver(now)
            else:
                self._timer = self._schedule(wait, self._deferred)

    def _deferred(self) -> None:
        with self._lock:
            self._timer = None
            if self._pending:
                self._deliver(self._clock())

    def _deliver(self, now: float) -> None:
        batch, self._pending = self._pending, []
        self._last = now
        self.flushes += 1
        self._flush(batch)

    def flush(self) -> None:
        """Deliver what is pending now (e.g. when a loop ends), whatever the rate."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._pending:
                self._deliver(self._clock())

    @property
    def pending(self) -> int:
        return len(self._pending)
