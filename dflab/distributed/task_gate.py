"""Consistent checkpoints across tasks: a step gate on every task of a cluster.

A session's own step gate (``dflab.train.step_gate``) orders *its* steps against *its* saves.
On a cluster, variables live on several ps tasks and every worker's client updates them, so a
save must also exclude the other clients' steps, on every task it reads. Each task therefore
keeps a ``TaskGate``: a reader/writer gate counting the variable-changing steps in flight on
that task, whichever client runs them.

* A step is *admitted* by every task whose partitions of it change a variable before any of
  them runs (``admit``): tried on all at once, and if one refuses (a save holds or waits for
  it) the others are let go again and the step waits for the refusing task to open. A step
  therefore never waits for a gate while holding another, so steps and saves cannot deadlock.
  A task counts the step out when its partitions of the step have finished.
* A save *closes* the gates of the tasks holding its variables one by one in task order
  (waiting for each task's admitted steps to drain), reads, and opens them again. With every
  gate closed, no step is half applied: each step's updates on every task are wholly before or
  wholly after the snapshot.
* The closing client (``holder``: its session and thread) passes through its own gates, so its
  save and restore ops run while it holds them.

Writers have priority: a task with a save waiting admits no new step. The gate lives with the
task's state (its ``Task``, in-process or inside its Ray actor), so a restarted task starts
open. Clients reach it through their task stubs (``ClusterWorker.admit``).
"""

from __future__ import annotations

import threading
import time

from dflab.distributed.names import task_or
from dflab.framework import errors
from dflab.framework.device_spec import DeviceSpec
from dflab.framework.registry import get_op_def
from dflab.runtime.devices import spec_matches


class TaskGate:
    """A writer-preferring gate of one task; writers are named by a ``holder`` token."""

    def __init__(self, task: str):
        self.task = task
        self._cond = threading.Condition()
        self._steps = 0
        self._writer: str | None = None
        self._depth = 0
        self._writers_waiting = 0

    @property
    def steps_in_flight(self) -> int:
        return self._steps

    @property
    def closed(self) -> bool:
        return self._writer is not None

    def _refuses(self, holder: str) -> bool:
        return (self._writer is not None or self._writers_waiting > 0) and \
            self._writer != holder

    def try_enter(self, holder: str = "") -> bool | None:
        """Admit one step now: True (counted: ``exit`` it later), None (the holder's own step
        passes uncounted), False (refused: a save holds or waits for the gate)."""
        with self._cond:
            if holder and self._writer == holder:
                return None
            if self._refuses(holder):
                return False
            self._steps += 1
            return True

    def enter(self, holder: str = "", timeout: float | None = None) -> bool:
        """Admit one step, waiting while the gate is closed; True when counted."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if holder and self._writer == holder:
                return False
            while self._refuses(holder):
                if not self._wait(deadline):
                    raise self._timed_out("a step waited", timeout)
            self._steps += 1
            return True

    def exit(self) -> None:
        """Count an admitted step out."""
        with self._cond:
            self._steps = max(self._steps - 1, 0)
            if self._steps == 0:
                self._cond.notify_all()

    def wait_open(self, timeout: float | None = None) -> bool:
        """Wait until the gate would admit a step (False if ``timeout`` passed first)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._writer is not None or self._writers_waiting:
                if not self._wait(deadline):
                    return False
        return True

    def close(self, holder: str, timeout: float | None = None) -> None:
        """Hold the gate for ``holder``: no new step is admitted, and this returns once the
        admitted ones have drained (DeadlineExceededError after ``timeout`` seconds)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if self._writer == holder:
                self._depth += 1
                return
            self._writers_waiting += 1
            try:
                while self._writer is not None or self._steps:
                    if not self._wait(deadline):
                        raise self._timed_out("a checkpoint waited for steps to drain",
                                              timeout)
            finally:
                self._writers_waiting -= 1
                if self._writer is None:
                    self._cond.notify_all()  # steps refused while this waited may go on
            self._writer, self._depth = holder, 1

    def open(self, holder: str) -> None:
        """Release a ``close`` by ``holder`` (a no-op for anyone else)."""
        with self._cond:
            if self._writer != holder:
                return
            self._depth -= 1
            if self._depth == 0:
                self._writer = None
                self._cond.notify_all()

    def _wait(self, deadline) -> bool:
        if deadline is None:
            self._cond.wait()
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        self._cond.wait(left)
        return True

    def _timed_out(self, what: str, timeout) -> errors.DeadlineExceededError:
        return errors.DeadlineExceededError(
            None, None, f"On task {self.task}, {what} longer than its timeout of "
            f"{timeout * 1000:.0f} ms")


# --- which tasks a partition changes ---------------------------------------------------------
def _writes(op_type: str) -> bool:
    try:
        return get_op_def(op_type).writes_variables
    except KeyError:  # runtime-only node types (_Send, _Recv, ...) change no variable
        return False


def writing_tasks(spec, default: str = "") -> frozenset:
    """The tasks on which a partition (``PartitionSpec``) changes a variable."""
    return frozenset(task_or(n.device or spec.device, default)
                     for n in spec.graph_def.node if _writes(n.op))


def tasks_of_devices(devices, default: str, device_set=None) -> list[str]:
    """The tasks of ``devices`` in the order gates are closed (sorted: every closer agrees).
    A partial name (``/job:ps``) stands for every task of ``device_set`` it matches."""
    tasks = set()
    for name in devices:
        spec = DeviceSpec.from_string(name) if name else None
        if spec is None or not spec.job:
            tasks.add(default)
        elif spec.task is not None or device_set is None:
            tasks.add(task_or(name, default))
        else:
            tasks.update(task_or(d.name, default) for d in device_set
                         if spec_matches(spec, d.spec))
    return sorted(tasks)


def admit(stubs: list, holder: str, timeout: float | None) -> list:
    """Admit a step on the gate of every task of ``stubs`` (task stubs, or anything with their
    ``gate_try_enter`` / ``gate_exit`` / ``gate_wait_open``): each is asked at once, and if one
    refuses (a save holds or waits for its gate) the others are let go again and the step
    waits for that one to open, so a step never waits for a gate while holding another.
    Returns the stubs whose gates counted it, to count it out when the step ends."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        pendings = [s.gate_try_enter(holder) for s in stubs]
        answers, failure = [], None
        for pending in pendings:
            try:
                answers.append(pending.result())
            except errors.OpError as e:
                answers.append(None)
                failure = failure or e
        counted = [s for s, a in zip(stubs, answers) if a]
        refused = next((s for s, a in zip(stubs, answers) if a is False), None)
        if failure is None and refused is None:
            return counted
        for s in counted:
            s.gate_exit()
        if failure is not None:
            raise failure
        left = None if deadline is None else deadline - time.monotonic()
        if (left is not None and left <= 0) or not refused.gate_wait_open(left):
            raise errors.DeadlineExceededError(
                None, None, f"On task {refused.task}, a step waited for a checkpoint longer "
                f"than its timeout of {timeout * 1000:.0f} ms")
