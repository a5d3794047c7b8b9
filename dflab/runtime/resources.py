"""Per-device resource containers: variable state, queues, tables and other kernel state.

Resources live in named containers, as TF's: an op's ``container`` attr (set by
``tf.container``) names it, an empty one means the default container (TF's "localhost"), and
``clear_containers`` (what ``Session.reset(target, containers)`` does on a task) drops the
resources of the containers it names, or of the default one when it names none.

A ``VarState`` is what a ref-typed tensor carries at run time: the variable's current value and
its lock. Values are immutable by convention (stored read-only; updates install a new array), so
a reader that got the old array keeps a consistent snapshot, and fetched values can never alias
mutable state. The updates that write into the variable's own buffer instead (scatters, sparse
optimizer rows, a resource variable's unshared dense update) unfreeze it only for the length of
their write (``unfrozen``).

The locking rule: an update of a reference variable built with ``use_locking=True``, and every
update of a resource variable, holds ``lock`` across its whole read-modify-write, as TF's
kernels hold the variable's mutex; resource reads take it too. Reference variables' reads and
their updates without ``use_locking`` take none: they may interleave (TF promises nothing about
their totals), but never fail or change the variable's shape.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from dflab.framework import errors


class VarState:
    __slots__ = ("name", "value", "lock", "device", "_writers", "_writers_lock")

    def __init__(self, name: str, device: str = ""):
        self.name = name
        self.value = None
        self.lock = threading.Lock()
        self.device = device
        self._writers: dict[int, int] = {}  # id of an unfrozen buffer -> writers in it
        self._writers_lock = threading.Lock()

    @property
    def initialized(self) -> bool:
        return self.value is not None

    def read(self):
        v = self.value
        if v is None:
            raise errors.FailedPreconditionError(
                None, None, f"Attempting to use uninitialized value {self.name}"
            )
        return v

    def set(self, value) -> None:
        """Install ``value`` (which the caller owns and will not mutate again)."""
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
        self.value = value

    @contextlib.contextmanager
    def unfrozen(self, buffer):
        """Let an update write into ``buffer`` (an array this variable holds; NumPy ones are
        frozen while held) and freeze it again when the last update writing into it is done:
        updates without ``use_locking`` hold no lock and may overlap, and the first one done
        must not freeze the buffer under the others. Device buffers have no read-only flag."""
        if not isinstance(buffer, np.ndarray):
            yield
            return
        key = id(buffer)  # ``buffer`` is alive while any writer holds it: the key is its own
        with self._writers_lock:
            self._writers[key] = self._writers.get(key, 0) + 1
            buffer.flags.writeable = True
        try:
            yield
        finally:
            with self._writers_lock:
                left = self._writers.pop(key) - 1
                if left:
                    self._writers[key] = left
                else:
                    buffer.flags.writeable = False

    def __repr__(self):
        state = "uninitialized" if self.value is None else f"shape={np.shape(self.value)}"
        return f"<VarState {self.name} {state}>"


class Forgotten:
    """State dropped by ``ResourceMgr.forget``: ``undo()`` puts it back."""

    def __init__(self):
        self.values: list = []  # (VarState, the value it had)
        self.others: list = []  # (table, key, resource)

    @property
    def variables(self) -> list[str]:
        return sorted({state.name for state, _ in self.values})

    def extend(self, other: Forgotten) -> None:
        self.values.extend(other.values)
        self.others.extend(other.others)

    def undo(self) -> None:
        for state, value in self.values:
            state.value = value
        for table, key, resource in self.others:
            table[key] = resource


DEFAULT_CONTAINER = "localhost"  # where an op with an empty ``container`` attr keeps its state


def _container(name: str) -> str:
    return name or DEFAULT_CONTAINER


class ResourceMgr:
    """Named resources of one device, per container: variables (keyed ``(container, name)``),
    and any stateful kernel's private state (keyed ``(kind, name, container)``)."""

    def __init__(self, device: str):
        self.device = device
        self._lock = threading.Lock()
        self._vars: dict[tuple[str, str], VarState] = {}
        self._other: dict[tuple[str, str, str], object] = {}
        # Variables dropped while the lock was held (see destroy_variable), removed by the
        # next caller that takes it.
        self._doomed: list[str] = []

    def variable(self, name: str, container: str = "") -> VarState:
        key = (_container(container), name)
        v = self._vars.get(key)
        if v is None:
            with self._lock:
                v = self._vars.get(key)
                if v is None:
                    v = self._vars[key] = VarState(name, self.device)
                self._remove_doomed()
        return v

    def variables(self) -> dict[str, VarState]:
        """The variables by name (one of the default container where names repeat)."""
        if self._doomed:
            with self._lock:
                self._remove_doomed()
        items = sorted(self._vars.items(), key=lambda kv: kv[0][0] == DEFAULT_CONTAINER)
        return {name: state for (_, name), state in items}

    def destroy_variable(self, name: str) -> None:
        """Remove the variable ``name`` and its value (TF's ``DestroyResourceOp``: an eager
        variable's state goes when Python drops the variable). Called from a finalizer, which
        the garbage collector runs wherever an allocation triggers it, possibly on a thread
        inside ``variable`` holding the lock: then the removal is left to the lock's holder
        rather than waiting for it (which would wait forever)."""
        if self._lock.acquire(blocking=False):
            try:
                self._vars.pop((DEFAULT_CONTAINER, name), None)
                self._remove_doomed()
            finally:
                self._lock.release()
        else:
            self._doomed.append(name)

    def _remove_doomed(self) -> None:
        while self._doomed:  # list.pop is atomic: a finalizer may append meanwhile
            self._vars.pop((DEFAULT_CONTAINER, self._doomed.pop()), None)

    def lookup_or_create(self, kind: str, name: str, create, container: str = ""):
        key = (kind, name, _container(container))
        r = self._other.get(key)
        if r is None:
            with self._lock:
                r = self._other.get(key)
                if r is None:
                    r = self._other[key] = create()
        return r

    def kernel_states(self, op_names) -> list[tuple[str, str, object]]:
        """``(kind, key, state)`` of the kernel state the ops named ``op_names`` keep here
        (keyed by the op's name, as ``forget`` finds it): e.g. a random op's generator."""
        names = set(op_names)
        with self._lock:
            return [(kind, key, r) for (kind, key, _), r in self._other.items()
                    if key.split(":")[0] in names]

    def kind_of(self, resource) -> tuple[str, str] | None:
        """``(kind, key)`` under which ``resource`` is kept here, or None if it is not ours."""
        with self._lock:
            for (kind, key, _), r in self._other.items():
                if r is resource:
                    return kind, key
        return None

    def forget(self, op_names) -> Forgotten:
        """Drop the state that the ops named ``op_names`` hold here (variable values, and kernel
        state keyed by the op's name, e.g. ``"op"`` or ``"op:seed:seed2"``), so new ops of the
        same names start afresh; the returned record can put it back (``undo``)."""
        names = set(op_names)
        record = Forgotten()
        with self._lock:
            for (_, name), state in self._vars.items():
                if name in names and state.value is not None:
                    record.values.append((state, state.value))
                    state.value = None
            for key in list(self._other):
                if key[1].split(":")[0] in names:
                    record.others.append((self._other, key, self._other.pop(key)))
        return record

    def clear(self) -> None:
        with self._lock:
            self._vars.clear()
            self._other.clear()

    def drop_kind(self, kind: str) -> None:
        """Drop every kernel state of ``kind`` (``"rng"``: every random op's generator)."""
        with self._lock:
            for key in [k for k in self._other if k[0] == kind]:
                del self._other[key]

    def clear_containers(self, containers) -> None:
        """Drop every resource of ``containers`` (names as ops give them; none: the default
        container), as TF's ``ResourceMgr::Cleanup`` of each: a variable there is
        uninitialized when next used, a queue or table empty, resources elsewhere untouched."""
        doomed = set(containers) if containers else {DEFAULT_CONTAINER}
        with self._lock:
            for key in [k for k in self._vars if k[0] in doomed]:
                self._vars.pop(key).value = None
            for key in [k for k in self._other if k[2] in doomed]:
                del self._other[key]
