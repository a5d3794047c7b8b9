"""Graph transactions: the one way ops leave a graph, and how a unit of graph edits is undone.

A notebook cell that is re-run replaces what its last run built; a cell that fails leaves the
graph as it found it. Both treat a cell's edits as one unit, a ``GraphTransaction``:

* ``begin(graph)`` opens one. While it is open it records the ops created (``ops``) and the
  names they take (``names``, a ``NameClaims``: what to release when they are replaced).
* ``remove(ops, reason, names)`` takes ops out of the graph (edges, name lookups and collection
  entries with them) and releases the names their code took, so new ops get the same names
  again: a re-run cell makes ``w``, never ``w_1``. Ops that stay but read a removed op become
  *stale* (``StaleMark``): kept, so they can be shown, but refused at run time
  (``check_not_stale``), and no new op may read a removed one, until the code that built the
  stale op is re-run (its own transaction removes it, which clears the mark).
* ``roll_back(reason)`` puts the graph back as it was at ``begin``; ``commit()`` keeps the edits.
  Layers above the graph register what they changed beside it (a variable store, session state,
  their own records) with ``on_roll_back``.

Transactions nest: one begun while another is open on the same graph is its child, and they close
innermost first. An op belongs to the innermost transaction open when it was created, and so do
the names its code took. Committing a child hands its undo callbacks to the parent, so rolling
back the parent undoes the child's committed edits too.

Invariant: while a transaction is open, ``roll_back`` returns its graph to exactly the state at
``begin`` (the same ops in the same order, with the same edges, op names, name counters,
collections and stale marks), then runs the undo callbacks registered with it and with the
children committed into it, newest first. Ops leave a graph only through ``remove`` and
``roll_back``; both bump the graph's version and plan epoch, so sessions drop cached plans.

This module edits the graph IR's private structures under the graph's lock, as ``graph.py``
does: it is the removal half of ``Graph``, kept apart so that building a graph stays small.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dflab.framework.operation import Operation
from dflab.framework.tensor import Tensor

if TYPE_CHECKING:
    from dflab.framework.graph import Graph

# The open transactions of each graph, outermost first.
_open: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


# --------------------------------------------------------------------------------------------
# What removal leaves behind: stale marks, released names
# --------------------------------------------------------------------------------------------
class StaleMark:
    """Why a graph op cannot run: it reads ``replaced`` (a tensor name, or ``^op`` for a control
    input), which was removed from the graph. ``origin`` may say which notebook cell built it."""

    __slots__ = ("op", "replaced", "reason", "origin")

    def __init__(self, op: Operation, replaced: str, reason: str = "", origin: str = ""):
        self.op = op
        self.replaced = replaced
        self.reason = reason
        self.origin = origin

    @property
    def replaced_op(self) -> str:
        """The name of the removed op that ``op`` reads."""
        return self.replaced.lstrip("^").split(":")[0]

    def message(self) -> str:
        built = f" (built in {self.origin})" if self.origin else ""
        why = f" when {self.reason}" if self.reason else ""
        kind, name = ("control input", self.replaced[1:]) if self.replaced.startswith("^") \
            else ("input", self.replaced)
        return (
            f"Operation '{self.op.name}'{built} is stale: its {kind} '{name}' was "
            f"replaced{why}. Re-run the code that built '{self.op.name}' so that it uses the "
            "new op."
        )

    def __repr__(self):
        return f"<StaleMark {self.op.name} reads replaced {self.replaced}>"


@dataclass(frozen=True)
class NameClaims:
    """The name keys (lower-cased, as ``Graph.unique_name`` counts them) some code took.

    ``added``: keys it created (``w``, ``layer1``, ``layer1/w``). ``bumped``: keys it found taken
    and counted up (it got ``w_1``). Releasing them (``GraphTransaction.remove``) lets the next
    run of the same code get the same names.
    """

    added: frozenset = frozenset()
    bumped: frozenset = frozenset()

    @staticmethod
    def between(before: dict, after: dict) -> NameClaims:
        """What was taken between two states of a graph's name counters."""
        return NameClaims(frozenset(k for k in after if k not in before),
                          frozenset(k for k, v in after.items() if k in before and before[k] != v))

    def __bool__(self) -> bool:
        return bool(self.added or self.bumped)


def _release(names: dict, claims: NameClaims, held: set) -> None:
    """Free ``claims`` in the name counters ``names``; ``held``: names of ops still in the graph.

    An added key is dropped unless an op left in the graph has exactly that name. Other ops merely
    inside such a scope (TF names slot variables ``w/Adam`` after their variable) do not hold it:
    names stay unique because every op name keeps its own key. A bumped key stays taken with its
    count back at 1, so ``unique_name`` walks the suffixes from ``_1`` and reuses the first free
    one instead of leaving gaps.
    """
    for key in claims.added:
        if key in names and key not in held:
            del names[key]
    for key in claims.bumped | (claims.added & held):
        if key in names:
            names[key] = 1


@dataclass(frozen=True)
class Removal:
    """What ``GraphTransaction.remove`` did: the ops it removed (in creation order; ops already
    gone are skipped) and the ops it made stale."""

    ops: list
    stale: list


def graph_ops_of(value) -> set:
    """The ops a graph value is built on: an op, a tensor's op, a variable's op, a queue
    runner's ops (what collections and notebooks hold)."""
    if isinstance(value, Operation):
        return {value}
    found = set()
    for attr in ("op", "close_op", "enqueue_ops"):
        v = getattr(value, attr, None)
        for x in v if isinstance(v, (list, tuple)) else [v]:
            if isinstance(x, Tensor):
                found.add(x.op)
            elif isinstance(x, Operation):
                found.add(x)
    return found


def readers_of(ops: Iterable[Operation]) -> set:
    """``ops`` and every op that reads them, directly or not (data and control edges): what
    cannot run while ``ops`` cannot."""
    seen, stack = set(ops), list(ops)
    while stack:
        op = stack.pop()
        for c in [c for t in op._outputs for c in t._consumers] + op._control_outputs:
            if c not in seen:
                seen.add(c)
                stack.append(c)
    return seen


# --------------------------------------------------------------------------------------------
# Removing and restoring ops (under the graph's lock)
# --------------------------------------------------------------------------------------------
def _in_graph(graph: Graph, op: Operation) -> bool:
    return graph._ops_by_name.get(op.name) is op


def _remove_ops(graph: Graph, ops, reason: str) -> Removal:
    with graph._lock:
        doomed = {op for op in ops if _in_graph(graph, op)}
        for op in doomed:
            for t in op._inputs:
                if op in t._consumers:
                    t._consumers.remove(op)
            for c in op._control_inputs:
                if op in c._control_outputs:
                    c._control_outputs.remove(op)
            del graph._ops_by_name[op.name]
            graph._stale.pop(op, None)
            graph._removed[op] = reason
        graph._ops = [o for o in graph._ops if o not in doomed]
        for key, coll in graph._collections.items():
            graph._collections[key] = [v for v in coll if not graph_ops_of(v) & doomed]
        marks = _mark_readers_stale(graph, doomed, reason)
        graph._version += 1
        graph._plan_epoch += 1
    return Removal(sorted(doomed, key=lambda o: o._id), marks)


def _mark_readers_stale(graph: Graph, doomed: set, reason: str) -> list[StaleMark]:
    marks = []
    for op in sorted(doomed, key=lambda o: o._id):
        readers = [(c, t.name) for t in op._outputs for c in t._consumers]
        readers += [(c, "^" + op.name) for c in op._control_outputs]
        for c, what in readers:
            if c in doomed or c in graph._stale or not _in_graph(graph, c):
                continue
            mark = graph._stale[c] = StaleMark(c, what, reason)
            marks.append(mark)
    return marks


@dataclass(frozen=True)
class _Snapshot:
    ops: list
    names: dict
    collections: dict
    stale: dict


def _snapshot(graph: Graph) -> _Snapshot:
    with graph._lock:
        return _Snapshot(list(graph._ops), dict(graph._names_in_use),
                         {k: list(v) for k, v in graph._collections.items()}, dict(graph._stale))


def _restore(graph: Graph, snap: _Snapshot, reason: str) -> list[Operation]:
    """Return ``graph`` to ``snap``; returns the ops added since, now removed (``reason``)."""
    with graph._lock:
        before = set(snap.ops)
        added = [op for op in graph._ops if op not in before]
        now = set(graph._ops)
        _remove_ops(graph, added, reason)
        for op in snap.ops:
            if op in now:
                continue
            for t in op._inputs:
                t._consumers.append(op)
            for c in op._control_inputs:
                c._control_outputs.append(op)
            graph._removed.pop(op, None)
        graph._ops = list(snap.ops)
        graph._ops_by_name = {op.name: op for op in snap.ops}
        graph._names_in_use = dict(snap.names)
        graph._collections = {k: list(v) for k, v in snap.collections.items()}
        graph._stale = dict(snap.stale)
        graph._version += 1
        graph._plan_epoch += 1
    return added


# --------------------------------------------------------------------------------------------
# Transactions
# --------------------------------------------------------------------------------------------
def begin(graph: Graph) -> GraphTransaction:
    """Open a transaction on ``graph``, nested in the innermost one already open there."""
    return GraphTransaction(graph)


def innermost(graph: Graph) -> GraphTransaction | None:
    """The innermost transaction open on ``graph`` (None: none is)."""
    stack = _open.get(graph)
    return stack[-1] if stack else None


class GraphTransaction:
    """One unit of edits to a graph: committed, or rolled back as a whole (see the module)."""

    def __init__(self, graph: Graph):
        self.graph = graph
        with graph._lock:
            self._snap = _snapshot(graph)
            stack = _open.setdefault(graph, [])
            self.parent: GraphTransaction | None = stack[-1] if stack else None
            stack.append(self)
        # Names taken are counted from here, less what ``remove`` releases on the way.
        self._names_base = dict(self._snap.names)
        self._ops: list[Operation] = []
        self._names: NameClaims | None = None
        self._undo: list[Callable[[], None]] = []
        self._state = "open"
        graph.add_op_observer(self._op_created)

    @property
    def state(self) -> str:
        """``"open"``, then ``"committed"`` or ``"rolled back"``."""
        return self._state

    # --- what it built ---------------------------------------------------------------------
    def _op_created(self, op: Operation) -> None:
        if innermost(self.graph) is self:
            self._ops.append(op)

    @property
    def ops(self) -> list[Operation]:
        """The ops this transaction created (not its children's) and did not remove, in
        creation order: fixed at commit, none once rolled back."""
        if self.state != "open":
            return list(self._ops)
        return [op for op in self._ops if _in_graph(self.graph, op)]

    @property
    def names(self) -> NameClaims:
        """The names this transaction's ops took (its children's are theirs): final at commit."""
        if self._names is not None:
            return self._names
        return NameClaims.between(self._names_base, self.graph._names_in_use)

    def added_ops(self) -> list[Operation]:
        """Every op in the graph created since ``begin``, children's included: what
        ``roll_back`` would remove."""
        before = set(self._snap.ops)
        return [op for op in self.graph.get_operations() if op not in before]

    # --- edits -----------------------------------------------------------------------------
    def remove(self, ops: Iterable[Operation], reason: str = "",
               names: NameClaims = NameClaims()) -> Removal:
        """Remove ``ops`` (those still in the graph) and release ``names``, the names their
        code took. Readers of the removed ops that stay become stale; ``reason`` says why the
        ops went (``"cell In[3] was re-run"``) in the errors about them."""
        self._check_open("remove ops")
        self.graph._check_not_finalized()
        graph = self.graph
        with graph._lock:
            removal = _remove_ops(graph, ops, reason)
            held = {name.lower() for name in graph._ops_by_name}
            _release(graph._names_in_use, names, held)
            _release(self._names_base, names, held)
        return removal

    def on_roll_back(self, undo: Callable[[], None]) -> None:
        """Call ``undo`` when this transaction, or an enclosing one it was committed into, is
        rolled back (after the graph is restored; newest first)."""
        self._check_open("register an undo")
        self._undo.append(undo)

    # --- closing ---------------------------------------------------------------------------
    def commit(self) -> None:
        """Keep the edits. A child's undo callbacks and names pass to its parent."""
        self._check_closable("commit")
        self._names = self.names
        self._ops = self.ops
        self._close("committed")
        parent = self.parent  # open: a parent closes only after its children
        if parent is not None:
            parent._undo.extend(self._undo)
            current = self.graph._names_in_use
            for key in self._names.added | self._names.bumped:
                if key in current:
                    parent._names_base[key] = current[key]

    def roll_back(self, reason: str = "") -> list[Operation]:
        """Return the graph to its state at ``begin``, then run the undo callbacks. Returns the
        ops removed (created since ``begin``); ``reason`` says why, in errors about them."""
        self._check_closable("roll back")
        try:
            removed = _restore(self.graph, self._snap, reason)
        finally:
            self._ops = []
            self._close("rolled back")
        errors = []
        for undo in reversed(self._undo):
            try:
                undo()
            except Exception as e:  # noqa: BLE001 - every undo runs; the first error is raised
                errors.append(e)
        if errors:
            raise errors[0]
        return removed

    def __enter__(self) -> GraphTransaction:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self.state == "open":
            if exc_type is None:
                self.commit()
            else:
                self.roll_back(f"its transaction's block raised {exc_type.__name__}")
        return False

    def _close(self, state: str) -> None:
        self._state = state
        self.graph.remove_op_observer(self._op_created)
        with self.graph._lock:
            stack = _open.get(self.graph, [])
            if self in stack:
                stack.remove(self)

    def _check_open(self, what: str) -> None:
        if self.state != "open":
            raise RuntimeError(f"Cannot {what}: the graph transaction was {self.state}.")

    def _check_closable(self, what: str) -> None:
        self._check_open(what)
        if innermost(self.graph) is not self:
            raise RuntimeError(f"Cannot {what} a graph transaction while a transaction nested "
                               "in it is open: close the inner one first.")

    def __repr__(self):
        return f"<GraphTransaction {self.state}, {len(self._ops)} ops>"
