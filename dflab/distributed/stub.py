"""The task-stub protocol: everything a client's ``ClusterWorker`` asks of one task.

This is TF's worker interface (``worker_interface.h``) for dflab: one small set of calls, with
an in-process implementation (``dflab.distributed.local``: direct calls on the task's ``Task``)
and a Ray implementation (``dflab.distributed.ray.client``: actor calls). Nothing above a stub
knows which one it talks to; what differs between transports lives in the stubs and in the
one hook of ``dflab.distributed.task.Task`` (receive a key from a peer task).

Calls that the client issues to several tasks at once (a step, a gate admission) return a
``Pending``; the others block and raise ``OpError``s (a task that cannot answer is an
``UnavailableError`` naming it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

# How a task's step treats its step gate (``dflab.distributed.task_gate``): not at all (the step
# changes no variable there, or it is the gate holder's own), count out a step the client had
# admitted beforehand, or admit it there (the only task whose variables the step changes).
GATE_NONE, GATE_ADMITTED, GATE_ENTER = 0, 1, 2


@dataclass
class StepRequest:
    """One task's share of a step: its registered partitions (``handles``), the step's fed
    values they take (``feeds``: feed position -> value), ``main``: the position among
    ``handles`` of the partition the calling thread runs (None: none, all start at once),
    the step's ``timeout`` in seconds, whether it is traced, and the gate mode and holder."""

    step_id: int
    handles: list
    feeds: dict
    main: int | None = None
    timeout: float | None = None
    trace: bool = False
    gate: int = GATE_NONE
    holder: str = ""


@dataclass(slots=True)  # made per task and step: slots make it cheaper
class TaskOutcome:
    """What a task reports of its share of a step: ``values`` per partition in host memory
    (None when it failed), ``error``, ``progress`` per partition (how far it got),
    ``transfers`` (key, bytes, start ns, end ns) of the tensors it pulled from other tasks, and
    ``stats`` (device step stats, for a traced step run in another process)."""

    values: list | None
    error: BaseException | None = None
    progress: list = field(default_factory=list)
    transfers: list = field(default_factory=list)
    stats: list | None = None


class PendingTimeoutError(Exception):
    """A ``Pending`` did not complete within the time it was given."""


class Pending(Protocol):
    """The answer of a call in flight."""

    def result(self, timeout: float | None = None):
        """The answer (raising the call's ``OpError``), or ``PendingTimeoutError``."""


class Done:
    """A ``Pending`` already answered (in-process calls complete before they return)."""

    __slots__ = ("_value", "_error")

    def __init__(self, value=None, error: BaseException | None = None):
        self._value = value
        self._error = error

    def result(self, timeout: float | None = None):
        if self._error is not None:
            raise self._error
        return self._value


class TaskStub(Protocol):
    """One task as a client sees it (see the module docstring)."""

    task: str  # the task's name, /job:<job>/replica:0/task:<index>
    where: str  # how errors name it: the task, and its host where that says more
    transport: str  # "in-process" or "ray": for descriptions only, never for decisions
    supports_stepping: bool  # steps can be driven node by node through ``start_step``

    def devices(self) -> list:
        """The task's devices, for placement (remote ones as ``wire.RemoteDevice``)."""

    def check(self) -> None:
        """Raise ``UnavailableError`` if the task is known to be gone."""

    def runs_here(self) -> bool:
        """Whether the task's partitions may run in the client's own step group now: they are
        objects of this process, and no simulated link stands between the cluster's tasks."""

    def register_partition(self, spec, origins=None):
        """Register a ``PartitionSpec``; returns the task's handle for it."""

    def deregister_partitions(self, handles) -> None: ...

    def run_step(self, request: StepRequest, observer=None, on_error=None) -> Pending:
        """Start the task's share of a step; the pending answer is a ``TaskOutcome``.
        ``on_error(error)`` is called once if the share fails, as soon as it does."""

    def start_step(self, request: StepRequest, observer=None) -> list:
        """The executions of the task's share of a step, not started (stepping)."""

    def step_done(self, step_id: int) -> None:
        """The client is done with ``step_id``: the task may drop what it kept for it."""

    def abort_step(self, step_id: int, error: BaseException) -> None: ...

    def responsive(self) -> bool:
        """Whether the task answers at all (a step timed out: is it gone or just slow?)."""

    def gate_try_enter(self, holder: str) -> Pending: ...

    def gate_exit(self) -> None: ...

    def gate_wait_open(self, timeout: float | None) -> bool: ...

    def gate_close(self, holder: str, timeout: float | None) -> None: ...

    def gate_open(self, holder: str) -> None: ...

    def forget(self, op_names):
        """Drop the state ops named ``op_names`` hold; a ``Forgotten`` record to undo it."""

    def record_memory(self, summary: dict) -> None: ...

    def close(self) -> None:
        """The client is done with this task (its partitions are deregistered)."""
