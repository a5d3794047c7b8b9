"""``tf.train.Coordinator``: stop a group of threads together and report their first error.

Threads poll ``should_stop()``; any of them (or the main thread) calls ``request_stop(ex)``;
``join`` waits for all registered threads, gives stragglers ``stop_grace_period_secs``, and
re-raises the first exception reported (except the "clean stop" kinds, ``OutOfRangeError`` by
default: an input pipeline running dry is the normal end of training, as in TF).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time

from dflab.framework import errors

logger = logging.getLogger("dflab.train")


class Coordinator:
    def __init__(self, clean_stop_exception_types=None):
        if clean_stop_exception_types is None:
            clean_stop_exception_types = (errors.OutOfRangeError,)
        self._clean_stop_exception_types = tuple(clean_stop_exception_types)
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exc_info_to_raise = None
        self._joined = False
        self._registered_threads: set = set()

    def _filter_exception(self, ex):
        """exc_info to remember, or None for a clean stop."""
        if isinstance(ex, tuple):
            ex2 = ex[1]
        else:
            ex2 = ex
        if ex2 is None or isinstance(ex2, self._clean_stop_exception_types):
            return None
        if isinstance(ex, tuple):
            return ex
        return (type(ex2), ex2, ex2.__traceback__)

    def request_stop(self, ex=None) -> None:
        """Ask every thread to stop; ``ex`` (an exception or exc_info) is raised by ``join``."""
        with self._lock:
            ex = self._filter_exception(ex)
            if self._joined:
                if ex is not None and self._exc_info_to_raise is None:
                    # Too late to report through join: say so rather than lose it.
                    print(f"Coordinator: error after join: {ex[1]!r}", file=sys.stderr)
                return
            if ex is not None and self._exc_info_to_raise is None:
                self._exc_info_to_raise = ex
            self._stop_event.set()

    def clear_stop(self) -> None:
        with self._lock:
            self._joined = False
            self._exc_info_to_raise = None
            self._stop_event.clear()

    def should_stop(self) -> bool:
        return self._stop_event.is_set()

    @contextlib.contextmanager
    def stop_on_exception(self):
        """``with coord.stop_on_exception():`` — any exception inside requests a stop."""
        try:
            yield
        except BaseException:  # noqa: BLE001 - reported through join
            self.request_stop(ex=sys.exc_info())

    def wait_for_stop(self, timeout=None) -> bool:
        return self._stop_event.wait(timeout)

    def register_thread(self, thread) -> None:
        with self._lock:
            self._registered_threads.add(thread)

    def join(self, threads=None, stop_grace_period_secs=120, ignore_live_threads=False) -> None:
        """Wait for the threads to finish after a stop was requested; re-raise their error."""
        with self._lock:
            threads = set(threads or ()) | self._registered_threads
        # Wait for a stop request, or for every thread to end on its own.
        while any(t.is_alive() for t in threads) and not self.wait_for_stop(0.05):
            pass
        deadline = time.time() + stop_grace_period_secs
        while any(t.is_alive() for t in threads) and time.time() < deadline:
            time.sleep(0.01)
        stragglers = [t.name for t in threads if t.is_alive()]
        with self._lock:
            self._joined = True
            self._registered_threads = set()
            exc_info = self._exc_info_to_raise
        if exc_info is not None:
            raise exc_info[1].with_traceback(exc_info[2])
        if stragglers:
            message = f"Coordinator stopped with threads still running: {' '.join(stragglers)}"
            if not ignore_live_threads:
                raise RuntimeError(message)
            logger.warning(message)

    @property
    def joined(self) -> bool:
        return self._joined

    def raise_requested_exception(self) -> None:
        with self._lock:
            if self._exc_info_to_raise is not None:
                raise self._exc_info_to_raise[1].with_traceback(self._exc_info_to_raise[2])


class LooperThread(threading.Thread):
    """A thread that calls ``target`` every ``timer_interval_secs`` until the coordinator
    stops (TF's ``LooperThread``)."""

    def __init__(self, coord, timer_interval_secs, target=None, args=None, kwargs=None):
        if not isinstance(coord, Coordinator):
            raise ValueError("'coord' argument must be a Coordinator")
        super().__init__(daemon=True)
        self._coord = coord
        self._timer_interval_secs = timer_interval_secs
        self._target = target
        self._args = args or ()
        self._kwargs = kwargs or {}
        self._coord.register_thread(self)

    @staticmethod
    def loop(coord, timer_interval_secs, target, args=None, kwargs=None):
        looper = LooperThread(coord, timer_interval_secs, target, args, kwargs)
        looper.start()
        return looper

    def run(self):
        with self._coord.stop_on_exception():
            self.start_loop()
            if self._timer_interval_secs is None:
                while not self._coord.should_stop():
                    self.run_loop()
            else:
                next_time = time.time()
                while not self._coord.wait_for_stop(max(next_time - time.time(), 0)):
                    next_time += self._timer_interval_secs
                    self.run_loop()
            self.stop_loop()

    def start_loop(self):
        pass

    def stop_loop(self):
        pass

    def run_loop(self):
        if self._target:
            self._target(*self._args, **self._kwargs)
