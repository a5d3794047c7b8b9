"""``tf.train.QueueRunner`` and ``start_queue_runners``: threads that keep a queue filled.

Each enqueue op gets one thread that runs it in a loop until the queue is closed
(``OutOfRangeError``/``CancelledError``) or the coordinator asks to stop. When the last thread of
a runner ends, the runner closes the queue so that consumers drain it and then see
``OutOfRangeError``. When the coordinator stops, the runner runs its ``cancel_op`` (close with
``cancel_pending_enqueues=True``) so threads parked on a full queue end at once, and cancels the
steps its threads are running (``StepCanceller``), so that a thread waiting anywhere else — a
dequeue of another queue, an accumulator's take that no replica will feed any more — ends too
instead of holding ``Coordinator.join`` for its grace period; a thread treats the
``CancelledError`` as its end. Other errors are reported to the coordinator (or kept in
``exceptions_raised``).
"""

from __future__ import annotations

import threading

from dflab.framework import errors
from dflab.framework import ops as _ops
from dflab.framework.ops import GraphKeys
from dflab.runtime.session import StepCanceller
from dflab.train import meta_graph

_STOP_ERRORS = (errors.OutOfRangeError, errors.CancelledError)


class QueueRunner:
    _META_KIND = "queue_runner"

    def __init__(self, queue=None, enqueue_ops=None, close_op=None, cancel_op=None,
                 queue_closed_exception_types=None, queue_runner_def=None, import_scope=None):
        if queue_runner_def is not None:
            self._init_from_def(queue_runner_def, import_scope)
            return
        if queue is None or not enqueue_ops:
            raise ValueError("QueueRunner needs a queue and at least one enqueue op")
        self._queue = queue
        self._enqueue_ops = list(enqueue_ops)
        self._close_op = close_op if close_op is not None else queue.close()
        self._cancel_op = cancel_op if cancel_op is not None else \
            queue.close(cancel_pending_enqueues=True)
        self._queue_closed_exception_types = tuple(queue_closed_exception_types or
                                                   (errors.OutOfRangeError,))
        self._queue_name = queue.name
        self._lock = threading.Lock()
        self._runs_per_session: dict = {}
        self._exceptions_raised: list = []

    def _init_from_def(self, d, import_scope):
        g = _ops.get_default_graph()
        # TF's prepend_name_scope: names of a graph imported under ``import_scope``.
        prefix = f"{import_scope}/" if import_scope else ""
        _check_def(d)

        def op(name):
            return meta_graph.lookup(g, prefix + name, "queue runner def", want_op=True)

        self._queue = None
        self._queue_name = prefix + d["queue_name"]
        self._enqueue_ops = [op(n) for n in d["enqueue_op_name"]]
        self._close_op = op(d["close_op_name"])
        self._cancel_op = op(d["cancel_op_name"])
        self._queue_closed_exception_types = (errors.OutOfRangeError,)
        self._lock = threading.Lock()
        self._runs_per_session = {}
        self._exceptions_raised = []

    # --- TF properties --------------------------------------------------------------------------
    @property
    def queue(self):
        return self._queue

    @property
    def name(self) -> str:
        return self._queue_name

    @property
    def enqueue_ops(self):
        return list(self._enqueue_ops)

    @property
    def close_op(self):
        return self._close_op

    @property
    def cancel_op(self):
        return self._cancel_op

    @property
    def queue_closed_exception_types(self):
        return self._queue_closed_exception_types

    @property
    def exceptions_raised(self) -> list:
        return list(self._exceptions_raised)

    # --- threads --------------------------------------------------------------------------------
    def _run(self, sess, enqueue_op, coord, canceller=None):
        decremented = False
        try:
            while coord is None or not coord.should_stop():
                try:
                    if canceller is None:
                        sess.run(enqueue_op)
                    else:
                        with canceller.active():
                            sess.run(enqueue_op)
                except (self._queue_closed_exception_types + _STOP_ERRORS):
                    break
            with self._lock:
                self._runs_per_session[sess] -= 1
                decremented = True
                last = self._runs_per_session[sess] == 0
            if last:
                self._close(sess, self._close_op)
        except Exception as e:  # noqa: BLE001 - reported to the coordinator
            if _session_closed(sess):
                return
            if coord is not None:
                coord.request_stop(e)
            else:
                with self._lock:
                    self._exceptions_raised.append(e)
            raise
        finally:
            if not decremented:
                with self._lock:
                    self._runs_per_session[sess] -= 1

    @staticmethod
    def _close(sess, op):
        try:
            sess.run(op)
        except (errors.OpError, RuntimeError):
            pass  # the session or queue is already gone: nothing to close

    def _close_on_stop(self, sess, cancel_op, coord, canceller):
        coord.wait_for_stop()
        self._close(sess, cancel_op)
        canceller.cancel(errors.CancelledError(
            None, None, f"QueueRunner {self.name}: its coordinator stopped"))

    def create_threads(self, sess, coord=None, daemon=False, start=False) -> list:
        """One thread per enqueue op (plus one that cancels on ``coord`` stop)."""
        with self._lock:
            if self._runs_per_session.get(sess, 0) > 0:
                return []  # already running for this session
            self._runs_per_session[sess] = len(self._enqueue_ops)
            self._exceptions_raised = []
        canceller = StepCanceller() if coord is not None else None
        threads = [threading.Thread(target=self._run, args=(sess, op, coord, canceller),
                                    daemon=daemon, name=f"QueueRunner-{self.name}-{k}")
                   for k, op in enumerate(self._enqueue_ops)]
        if coord is not None:
            threads.append(threading.Thread(target=self._close_on_stop,
                                            args=(sess, self._cancel_op, coord, canceller),
                                            daemon=True, name=f"QueueRunnerCancel-{self.name}"))
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            if start:
                t.start()
        return threads

    # --- serialization --------------------------------------------------------------------------
    def to_proto(self, export_scope=None) -> dict:
        return {"queue_name": self._queue_name,
                "enqueue_op_name": [op.name for op in self._enqueue_ops],
                "close_op_name": self._close_op.name, "cancel_op_name": self._cancel_op.name}

    @staticmethod
    def from_proto(queue_runner_def, graph=None, import_scope=None):
        with (graph or _ops.get_default_graph()).as_default():
            return QueueRunner(queue_runner_def=queue_runner_def, import_scope=import_scope)


meta_graph.register_proto_function(
    "queue_runner",
    lambda value, graph, scope: QueueRunner.from_proto(value, graph=graph, import_scope=scope))


def _check_def(d) -> None:
    """A queue runner def read from a file: every field present, of its JSON type."""
    for field in ("queue_name", "close_op_name", "cancel_op_name"):
        if not isinstance(d.get(field), str):
            raise errors.DataLossError(None, None, f"queue runner def field {field!r} must be "
                                       "a string")
    names = d.get("enqueue_op_name")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise errors.DataLossError(None, None, "queue runner def field 'enqueue_op_name' must "
                                   "be a non-empty list of strings")


def _session_closed(sess) -> bool:
    return bool(getattr(sess, "_closed", False))


def add_queue_runner(qr, collection=GraphKeys.QUEUE_RUNNERS) -> None:
    _ops.add_to_collection(collection, qr)


def start_queue_runners(sess=None, coord=None, daemon=True, start=True,
                        collection=GraphKeys.QUEUE_RUNNERS) -> list:
    """Start the threads of every QueueRunner in ``collection``; returns them."""
    if sess is None:
        sess = _ops.get_default_session()
        if sess is None:
            raise ValueError("Cannot start queue runners: No default session is registered. "
                             "Use `with sess.as_default()` or pass an explicit session.")
    graph = getattr(sess, "graph", None) or _ops.get_default_graph()
    threads = []
    for qr in graph.get_collection(collection):
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads
