"""The per-step rendezvous: where a ``_Send`` leaves a tensor and its ``_Recv`` picks it up.

One ``Rendezvous`` exists per step (per ``Session.run`` of a partitioned plan), shared by the
executions of all partitions of that step, so concurrent steps never see each other's values and
keys need no step id. Within a step each key is sent once and received once (the partitioner makes
one ``_Send``/``_Recv`` pair per tensor per destination device).

Either side may come first: a value sent before anyone asks waits in the table; a receiver that
asks first leaves a callback, which the sender calls (on the sender's thread, outside the lock).
``abort(error)`` ends the step's traffic: pending and later receives get ``error``, later sends
raise it. Waiting never holds a thread: ``recv_async`` is what the asynchronous ``_Recv`` kernel
uses; the blocking ``recv`` is for tests and tools.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from dflab.framework import errors
from dflab.ops.comm_ops import rendezvous_key

create_key = rendezvous_key

# callback(value, error): exactly one of them is meaningful (error is None on success).
RecvCallback = Callable[[object, BaseException | None], None]


class Rendezvous:
    """A thread-safe table of tensors in flight between the partitions of one step."""

    __slots__ = ("_lock", "_values", "_waiters", "_error")

    def __init__(self):
        self._lock = threading.Lock()
        self._values: dict[str, object] = {}
        self._waiters: dict[str, RecvCallback] = {}
        self._error: BaseException | None = None

    def send(self, key: str, value) -> None:
        """Deliver ``value`` under ``key``: to a waiting receiver, or into the table."""
        with self._lock:
            if self._error is not None:
                raise self._error
            waiter = self._waiters.pop(key, None)
            if waiter is None:
                if key in self._values:
                    raise errors.InternalError(
                        None, None, f"Send of an already sent tensor: rendezvous key {key}")
                self._values[key] = value
                return
        waiter(value, None)

    def recv_async(self, key: str, callback: RecvCallback) -> None:
        """Call ``callback(value, None)`` once ``key`` is sent (at once if it already was), or
        ``callback(None, error)`` if the rendezvous is aborted first."""
        with self._lock:
            error = self._error
            if error is None:
                if key in self._values:
                    value = self._values.pop(key)
                else:
                    if key in self._waiters:
                        error = errors.InternalError(
                            None, None, f"Two receives of one tensor: rendezvous key {key}")
                    else:
                        self._waiters[key] = callback
                        return
        if error is not None:
            callback(None, error)
        else:
            callback(value, None)

    def recv(self, key: str, timeout: float | None = None):
        """Block until ``key`` arrives (tests and tools; kernels use ``recv_async``)."""
        got = threading.Event()
        box: list = []

        def done(value, error):
            box.append((value, error))
            got.set()

        self.recv_async(key, done)
        if not got.wait(timeout):
            raise errors.DeadlineExceededError(
                None, None, f"Timed out waiting for rendezvous key {key}")
        value, error = box[0]
        if error is not None:
            raise error
        return value

    def abort(self, error: BaseException) -> None:
        """Fail every pending and future receive (and future send) with ``error``."""
        with self._lock:
            if self._error is not None:
                return
            self._error = error
            waiters = list(self._waiters.values())
            self._waiters.clear()
            self._values.clear()
        for callback in waiters:
            callback(None, error)

    @property
    def aborted(self) -> bool:
        return self._error is not None

    def pending_keys(self) -> list[str]:
        """Keys sent and not yet received, then keys awaited and not yet sent (diagnostics)."""
        with self._lock:
            return list(self._values) + list(self._waiters)
