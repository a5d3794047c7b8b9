"""Undo records of a stepped step: what each node changed in state that outlives the step.

Before a stepped node runs, ``before_node`` looks at what it can change and keeps the old state:

* a variable it writes (an op whose OpDef ``writes_variables``: ref inputs such as ``Assign``'s
  and the ``Apply*`` optimizers', or a resource handle such as ``AssignVariableOp``'s and the
  ``ResourceApply*`` optimizers'): a copy of the variable's buffer (None if uninitialized);
* a queue it takes as input (enqueue, dequeue, close): the queue's elements, closed flag and
  shuffle generator state (``QueueState.contents``);
* a random op's generator (kept by the op's name in its device's ``ResourceMgr``): its bit
  generator state, so a replay draws the same numbers, seeded or not.

Ops that only look (``IsVariableInitialized``, a queue's size, a reader's count) record
nothing: restoring what they only read would undo other runs' writes.

After the node, ``after_node`` records the new state of the same things, which is how a later
rewind notices that someone else (another run, another thread) changed them in the meantime.

Some effects cannot be taken back and the record says so (``irreversible``): a checkpoint file
written (``SaveV2``), Python run by ``py_func``, and any other kernel state kept across steps
that is not a variable, a queue or a generator (a reader's position, an iterator, an
accumulator). Per-step state (TensorArrays, loop stacks, the rendezvous) needs no record: a
rewind rebuilds the step's executions, which recreates it.

``undo(records)`` restores the state from before the first record, refusing (before changing
anything) when a record is irreversible or a queue was changed by someone else; a variable
someone else wrote is restored anyway, with a warning (the stepped step's own history wins:
rewinding is what the user asked for).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from dflab.framework import errors
from dflab.runtime.resources import VarState

# Op types with effects outside the session's state: nothing here can take them back.
IRREVERSIBLE_TYPES = {
    "SaveV2": "it wrote a checkpoint file",
    "MergeV2Checkpoints": "it wrote a checkpoint file",
    "PyFunc": "it ran Python code (py_func) whose effects are unknown",
    "PyFuncStateless": "it ran Python code (py_func) whose effects are unknown",
}
# Ops that take a variable by reference, or a queue, without changing it: nothing to record
# (restoring what they only read would undo other runs' writes).
READ_ONLY_TYPES = frozenset({"IsVariableInitialized", "QueueSizeV2", "QueueIsClosedV2",
                             "ReaderNumRecordsProducedV2", "AccumulatorNumAccumulated"})


@dataclass(eq=False)  # kept in dicts by identity
class StateRecord:
    """One thing a node changed: ``kind`` is "variable", "queue" or "generator"."""

    kind: str
    name: str
    target: object  # the VarState, QueueState or numpy Generator
    before: object
    after: object = None


@dataclass
class NodeRecord:
    """The records of one node run: what it changed, or why that cannot be undone."""

    states: list[StateRecord] = field(default_factory=list)
    irreversible: str = ""  # why the node's effects cannot be undone ("" if they can)


@dataclass
class UndoReport:
    """What ``undo`` did: the things it restored and what it warns about."""

    variables: list[str] = field(default_factory=list)
    queues: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    values_before: dict = field(default_factory=dict)  # VarState -> value before the undo


def before_node(op, args, resources) -> NodeRecord:
    """The record of op's effects, taken before it runs on ``args`` (its input values).
    ``resources``: the session's ``ResourceMgr``s (for generators and other kernel state)."""
    record = NodeRecord()
    if op.type in READ_ONLY_TYPES:
        return record
    reason = IRREVERSIBLE_TYPES.get(op.type)
    if reason:
        record.irreversible = reason
        return record
    writes = op.op_def.writes_variables
    for arg in args:
        if isinstance(arg, VarState):
            if writes:
                record.states.append(StateRecord("variable", arg.name, arg, _copy(arg.value)))
        elif _is_queue(arg):
            record.states.append(StateRecord("queue", arg.name, arg, arg.contents()))
        elif not _plain_value(arg):
            kept = _kind_of(arg, resources)
            if kept is not None:
                record.irreversible = (f"it changed the {kept[0]} '{kept[1]}', whose state "
                                       "is not recorded")
                return record
    for mgr in resources:
        for _kind, key, state in mgr.kernel_states((op.name,)):
            if isinstance(state, np.random.Generator):
                record.states.append(StateRecord(
                    "generator", key, state, copy.deepcopy(state.bit_generator.state)))
    return record


def after_node(record: NodeRecord) -> None:
    """Note the state the node left behind (compared with the state at a later rewind)."""
    for r in record.states:
        if r.kind == "variable":
            r.after = _copy(r.target.value)
        elif r.kind == "queue":
            r.after = r.target.contents()


def check_undoable(records: list[tuple[int, str, NodeRecord]]) -> None:
    """Refuse (FailedPreconditionError) when ``records`` (``(event index, op name, record)``)
    hold an effect that cannot be undone or a queue someone else has changed since."""
    for index, name, rec in records:
        if rec.irreversible:
            raise errors.FailedPreconditionError(
                None, None, f"Cannot step back over event {index + 1} ({name}): "
                f"{rec.irreversible}.")
    for r, (index, name) in _latest(records, "queue").items():
        if not _same_contents(r.target.contents(), r.after):
            raise errors.FailedPreconditionError(
                None, None, f"Cannot step back over event {index + 1} ({name}): queue "
                f"'{r.name}' was changed by another run or thread since (its elements may "
                "be in another step now).")


def undo(records: list[tuple[int, str, NodeRecord]]) -> UndoReport:
    """Put back the state from before the first of ``records`` (see the module docstring)."""
    check_undoable(records)
    report = UndoReport()
    for r, (index, name) in _latest(records, "variable").items():
        report.values_before[r.target] = r.target.value
        if not _same(r.target.value, r.after):
            report.warnings.append(
                f"{r.name} was changed by another run since event {index + 1} ({name}) wrote "
                "it; restored anyway")
    for r in _earliest(records):
        if r.kind == "variable":
            with r.target.lock:
                r.target.set(_copy(r.before))
            report.variables.append(r.name)
        elif r.kind == "queue":
            r.target.restore(r.before)
            report.queues.append(r.name)
        else:
            r.target.bit_generator.state = copy.deepcopy(r.before)
    return report


def changed_variables(report: UndoReport) -> list[str]:
    """The variables whose value now differs from their value before ``undo`` (sorted)."""
    return sorted({state.name for state, old in report.values_before.items()
                   if not _same(state.value, old)})


def same_value(a, b) -> bool:
    """Whether two recorded values are equal (arrays by shape, dtype and contents; NaNs equal);
    values that are not arrays (handles, resources) are not compared."""
    if a is b:
        return True
    if _array(a) and _array(b):
        return _same(a, b)
    return not (_array(a) or _array(b))


# --- helpers ----------------------------------------------------------------------------------
def _earliest(records) -> list[StateRecord]:
    """The first record of each thing (whose ``before`` is the state to go back to)."""
    seen, out = set(), []
    for _, _, rec in records:
        for r in rec.states:
            if id(r.target) not in seen:
                seen.add(id(r.target))
                out.append(r)
    return out


def _latest(records, kind: str) -> dict:
    """The last record of each thing of ``kind`` -> (event index, op name) that made it."""
    last: dict = {}
    for index, name, rec in records:
        for r in rec.states:
            if r.kind == kind:
                last[id(r.target)] = (r, (index, name))
    return dict(last.values())


def _copy(value):
    return value.copy() if hasattr(value, "copy") else value


def _array(v) -> bool:
    return hasattr(v, "shape") and hasattr(v, "dtype")


def _plain_value(v) -> bool:
    return v is None or _array(v) or isinstance(v, (int, float, bool, str, bytes, tuple))


def _is_queue(v) -> bool:
    return hasattr(v, "contents") and hasattr(v, "restore") and hasattr(v, "dtypes")


def _kind_of(resource, resources):
    for mgr in resources:
        found = mgr.kind_of(resource)
        if found is not None:
            return found
    return None


def _same(a, b) -> bool:
    if a is b:
        return True
    if a is None or b is None:
        return False
    if getattr(a, "shape", None) != getattr(b, "shape", None) \
            or getattr(a, "dtype", None) != getattr(b, "dtype", None):
        return False
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        try:
            return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
        except TypeError:  # object arrays (strings)
            return bool(np.array_equal(a, b))
    return bool((a == b).all())  # device arrays (CuPy): compared where they live


def _same_contents(now: tuple, then: tuple) -> bool:
    items_now, closed_now, _ = now
    items_then, closed_then, _ = then
    return closed_now == closed_then and len(items_now) == len(items_then) \
        and all(x is y for x, y in zip(items_now, items_then, strict=True))
