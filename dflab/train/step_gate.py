"""Consistent snapshots: a per-session reader/writer *step gate* (TF has no such guarantee).

Steps that change variables (their plan holds an op with a ref input: ``Assign*``, ``Scatter*``,
the optimizers' ``Apply*``) pass the gate as *readers* and may overlap one another freely; a
consistent save or restore holds it as the *writer*, so it runs with no variable-changing step in
flight, i.e. at one point between training steps. Writers have priority (new steps wait while a
save waits), so a save is never starved by a busy training loop. Steps that change no variable
(input pipelines, evaluation) never touch the gate, so a queue runner blocked on a full queue
cannot hold a save up.

The gate is installed on a session without touching ``session.py``: ``step_gate(sess)`` wraps the
session instance's ``_run_plan`` (the one place every ``run`` and ``make_callable`` goes through)
once. Steps started before the gate was installed are not tracked, so install it before starting
training threads (``Saver(consistent=True)`` does so on its first ``save``/``restore``; the
``MonitoredSession`` does so when it creates its session).

Caveat: a variable-changing step that blocks (say, on a queue another gated step must fill)
holds the gate as a reader; a consistent save waits for it.
"""

from __future__ import annotations

import contextlib
import threading

_install_lock = threading.Lock()


class StepGate:
    """A writer-preferring reader/writer lock, re-entrant for its writer thread."""

    def __init__(self):
        self._cond = threading.Condition()
        self._steps = 0
        self._writer = None  # ident of the thread holding the gate exclusively
        self._depth = 0
        self._writers_waiting = 0

    @property
    def steps_in_flight(self) -> int:
        return self._steps

    @contextlib.contextmanager
    def step(self):
        """Held around one variable-changing step."""
        if self._writer == threading.get_ident():
            yield  # the writer's own runs (the save step itself) pass through
            return
        with self._cond:
            while self._writer is not None or self._writers_waiting:
                self._cond.wait()
            self._steps += 1
        try:
            yield
        finally:
            with self._cond:
                self._steps -= 1
                if self._steps == 0:
                    self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self):
        """Held around a consistent save/restore: no variable-changing step runs meanwhile."""
        me = threading.get_ident()
        with self._cond:
            if self._writer == me:
                self._depth += 1
            else:
                self._writers_waiting += 1
                try:
                    while self._writer is not None or self._steps:
                        self._cond.wait()
                finally:
                    self._writers_waiting -= 1
                self._writer, self._depth = me, 1
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if self._depth == 0:
                    self._writer = None
                    self._cond.notify_all()


def _changes_variables(plan) -> bool:
    flag = getattr(plan, "_dflab_changes_variables", None)
    if flag is None:
        ops = getattr(plan, "ops", None)
        # Without a list of ops (a future plan type) be safe: gate every step.
        flag = True if ops is None else any(op._op_def.ref_inputs for op in ops)
        try:
            plan._dflab_changes_variables = flag
        except AttributeError:
            pass
    return flag


def raw_session(sess):
    """The ``Session`` under a wrapper (MonitoredSession and friends expose ``_tf_sess``)."""
    seen = 0
    while not hasattr(sess, "_run_plan") and hasattr(sess, "_tf_sess") and seen < 10:
        sess = sess._tf_sess()
        seen += 1
    return sess


def step_gate(sess) -> StepGate:
    """The session's step gate, installed on first use."""
    sess = raw_session(sess)
    gate = sess.__dict__.get("_dflab_step_gate")
    if gate is not None:
        return gate
    with _install_lock:
        gate = sess.__dict__.get("_dflab_step_gate")
        if gate is None:
            gate = StepGate()
            inner = sess._run_plan

            def gated_run_plan(plan, *args, **kwargs):
                if not _changes_variables(plan):
                    return inner(plan, *args, **kwargs)
                with gate.step():
                    return inner(plan, *args, **kwargs)

            sess._run_plan = gated_run_plan
            sess._dflab_step_gate = gate
    return gate
