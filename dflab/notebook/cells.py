"""The ``%%dflab`` cell model: what each cell owns in the graph, and replacing it on re-run.

Plain Python, no IPython (the magics adapt IPython to it). A ``CellBook`` holds the records of
the cells that built one graph, in run order. ``CellBook.run`` runs one cell: ``execute`` runs
its body (IPython's ``run_cell`` in the magics, ``exec`` in tests) inside a graph transaction
(``dflab.framework.graph_transaction``), after the ops of the cell's last run are removed:

* a cell is found again by its key (``key``: its ``--name``, else the front-end's cell id, else
  its first line and likeness to earlier cells, see ``fallback_key``);
* re-running it removes its last run's ops and releases the names and variable scopes they
  took, so the new ops get the same names (``w`` again, never ``w_1``); collections and
  ``get_variable``'s store forget the old variables; open sessions forget the replaced ops'
  state (``Session.forget_state``); ops of other cells that read a replaced op become *stale*;
* a run that fails is rolled back as a whole: its new ops go, the ops of its previous run come
  back with their names, collection entries, session state and stale marks, and notebook names
  bound to the removed new ops get their old values back (or are deleted if they are new).

What a run did comes back as a ``CellRun``; ``CellBook.report`` and ``CellRun.failure`` put it
in words, and ``origin`` names where an op was built (a cell and its line).

Invariant: after every ``run``, every record's ops are in the graph and no op belongs to two
records; after a failed run, the graph, its variable stores, open sessions' state, the book and
the notebook's names are as they were before it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field

from dflab.framework import graph_transaction as _gt
from dflab.framework import ops as _ops
from dflab.framework.graph_transaction import GraphTransaction, NameClaims, StaleMark
from dflab.ops.variable_scope import variable_stores
from dflab.ops.variables import Variable
from dflab.runtime.session import sessions_on
from dflab.visualize.text import readable_site

# How alike two sources must be (difflib ratio) for a cell without a cell id to count as an
# edit of an earlier cell with the same first line rather than a different cell.
SAME_CELL_RATIO = 0.6
PREVIEW = 6  # op names listed per cell in reports
ROLLED_BACK = "its cell failed and was rolled back"


@dataclass
class CellRecord:
    """What one ``%%dflab`` cell built in its last successful run."""

    key: str  # "name:…", "id:…" or "line:…": how the cell is found again
    label: str  # what users read: "In[5]", or "'model'" for a named cell
    source: str
    ops: list = field(default_factory=list)
    names: NameClaims = NameClaims()  # the graph names its ops took
    scope_opens: dict = field(default_factory=dict)  # variable scope name -> times opened

    @property
    def first_line(self) -> str:
        return _first_line(self.source)


@dataclass
class CellRun:
    """What ``CellBook.run`` did."""

    label: str
    record: CellRecord | None  # None: the run failed, or it made a new default graph
    previous: CellRecord | None  # the record this run replaced (or tried to)
    failed: bool = False
    new_graph: bool = False  # the cell made a new default graph: nothing was recorded
    removed: int = 0  # a failed run: how many of its new ops were removed
    stale: list = field(default_factory=list)  # StaleMarks of other cells' ops it made
    forgotten: list = field(default_factory=list)  # variables open sessions forgot
    dangling: list = field(default_factory=list)  # notebook names left on removed ops

    def failure(self) -> str:
        """What a failed run undid, in words."""
        kept = (f"; the {len(self.previous.ops)} ops of its previous run are back"
                if self.previous else "")
        return (f"%%dflab: cell {self.label} failed and was rolled back: {self.removed} new ops "
                f"removed{kept}. The graph is as it was before this run.")


def _first_line(source: str) -> str:
    return next((ln.strip() for ln in source.splitlines() if ln.strip()), "")


def _likeness(a: str, b: str) -> float:
    return 1.0 if a == b else difflib.SequenceMatcher(None, a, b).ratio()


def _preview(names: list[str]) -> str:
    more = f" (+{len(names) - PREVIEW} more)" if len(names) > PREVIEW else ""
    return ", ".join(names[:PREVIEW]) + more


def is_graph_value(value) -> bool:
    return isinstance(value, (_ops.Tensor, _ops.Operation, Variable))


def bound_to(namespace: dict, ops: set) -> list[str]:
    """The names in ``namespace`` bound to graph values built on ``ops`` (IPython's output
    history, ``_``, ``_5`` …, left out)."""
    return sorted(k for k, v in namespace.items()
                  if not k.startswith("_") and is_graph_value(v) and _gt.graph_ops_of(v) & ops)


class CellBook:
    """The records of the cells that built ``graph``, in run order."""

    def __init__(self, graph: _ops.Graph):
        self.graph = graph
        self.records: dict[str, CellRecord] = {}
        self._owner: dict[_ops.Operation, CellRecord] = {}

    def cell_of(self, op) -> CellRecord | None:
        return self._owner.get(op)

    # --- finding a cell again ------------------------------------------------------------
    def key(self, name: str | None, cell_id: str | None, source: str) -> str:
        """The key of a cell: its ``--name``, else its cell id, else ``fallback_key``."""
        if name:
            return f"name:{name}"
        if cell_id:
            return f"id:{cell_id}"
        return self.fallback_key(source)

    def fallback_key(self, source: str) -> str:
        """The key of a cell the front-end gave no id: the earlier cell with the same first line
        whose source resembles this one most (an edit of it), else a fresh key."""
        first = _first_line(source)
        same = [r for r in self.records.values()
                if r.key.startswith("line:") and r.first_line == first]
        if same:
            best = max(same, key=lambda r: _likeness(r.source, source))
            if _likeness(best.source, source) >= SAME_CELL_RATIO:
                return best.key
        key, n = f"line:{first}", 1
        while key in self.records:
            n += 1
            key = f"line:{first}#{n}"
        return key

    # --- running a cell ------------------------------------------------------------------
    def run(self, key: str, label: str, source: str, execute: Callable[[], bool],
            namespace: dict) -> CellRun:
        """Run the cell ``key`` (its body is ``source``, ``label`` what users read) by calling
        ``execute()``, which returns whether the body succeeded; ``namespace`` is where it
        binds names. What the cell's last run built is replaced; a failed run is rolled back,
        and an exception from ``execute`` is raised after the rollback."""
        graph = self.graph
        previous = self.records.get(key)
        names_before = dict(namespace)
        txn = _gt.begin(graph)
        try:
            self._undo_with(txn)
            stale, forgotten = self._replace(txn, previous, label) if previous else ([], [])
            scopes_before = _scope_counts(graph)
            ok = execute()
        except BaseException:
            self._roll_back(txn, namespace, names_before)
            raise
        if not ok:
            removed = self._roll_back(txn, namespace, names_before)
            return CellRun(label, None, previous, failed=True, removed=len(removed))
        txn.commit()
        if _ops.get_default_graph() is not graph:
            return CellRun(label, None, previous, new_graph=True)
        record = CellRecord(key, label, source, txn.ops, txn.names,
                            _scope_opens(scopes_before, _scope_counts(graph)))
        self._add(record)
        for mark in stale:
            mark.origin = self.origin(mark.op)
        dangling = bound_to(namespace, set(previous.ops)) if previous else []
        return CellRun(label, record, previous, stale=stale, forgotten=forgotten,
                       dangling=dangling)

    def _add(self, record: CellRecord) -> None:
        old = self.records.pop(record.key, None)  # re-inserted: records stay in run order
        if old is not None:
            for op in old.ops:
                self._owner.pop(op, None)
        self.records[record.key] = record
        self._owner.update(dict.fromkeys(record.ops, record))

    def _undo_with(self, txn: GraphTransaction) -> None:
        """Have ``txn``'s rollback also restore what lives beside the graph: this book and
        the graph's variable stores."""
        records, owner = dict(self.records), dict(self._owner)

        def restore_book():
            self.records, self._owner = records, owner

        txn.on_roll_back(restore_book)
        var_store, scope_store = variable_stores(self.graph)
        if var_store is not None:
            state = var_store.saved_state()
            txn.on_roll_back(lambda: var_store.restore_state(state))
        if scope_store is not None:
            counts = dict(scope_store.variable_scopes_count)
            txn.on_roll_back(lambda: _set_counts(scope_store, counts))

    def _replace(self, txn: GraphTransaction, previous: CellRecord, label: str):
        """Remove what ``previous`` built and release what it held; returns (the stale marks
        that made, the variables open sessions forgot)."""
        graph = self.graph
        removal = txn.remove(previous.ops, f"cell {label} was re-run", previous.names)
        forgotten = _forget_state(graph, removal.ops)
        for record in forgotten:
            txn.on_roll_back(record.undo)
        _, scope_store = variable_stores(graph)
        if scope_store is not None:
            counts = scope_store.variable_scopes_count
            for name, n in previous.scope_opens.items():
                counts[name] = max(counts.get(name, 0) - n, 0)
        variables = sorted({v for record in forgotten for v in record.variables})
        return removal.stale, variables

    def _roll_back(self, txn: GraphTransaction, namespace: dict, names_before: dict) -> list:
        """Undo a failed run; returns the new ops it removed."""
        # The failed run may have run its new ops in a session: drop that state first; the
        # rollback then gives the previous ops of the same names their state back.
        _forget_state(self.graph, txn.added_ops())
        removed = txn.roll_back(ROLLED_BACK)
        for name in bound_to(namespace, set(removed)):
            if name in names_before:
                namespace[name] = names_before[name]
            else:
                del namespace[name]
        return removed

    # --- reports ---------------------------------------------------------------------------
    def report(self, run: CellRun) -> list[str]:
        """What a successful run built and replaced, and which ops are stale, in lines."""
        record, previous = run.record, run.previous
        replaced = f", replacing {len(previous.ops)} from its last run" if previous else ""
        lines = [f"%%dflab {record.label}: built {len(record.ops)} ops{replaced}."]
        if run.forgotten:
            lines.append(f"  open sessions forgot the old values of {', '.join(run.forgotten)}: "
                         "run the initializer again.")
        lines += self.stale_lines(self.graph.stale_marks())
        if run.dangling:
            lines.append("  no longer built by this cell, still bound to removed ops: "
                         f"{', '.join(run.dangling)}")
        return lines

    def stale_lines(self, marks: list[StaleMark]) -> list[str]:
        """One line per cell with stale ops (what they read, what to re-run), then the cells
        that depend on those."""
        by_cell: dict[str, list] = {}
        for mark in marks:
            rec = self.cell_of(mark.op)
            where = f"cell {rec.label}" if rec else readable_site(mark.op.creation_site)
            by_cell.setdefault(where, []).append(mark)
        lines = []
        for where, ms in by_cell.items():
            ops = _preview([m.op.name for m in ms])
            inputs = ", ".join(dict.fromkeys(m.replaced_op for m in ms))
            lines.append(f"stale: {ops} ({where}) uses replaced {inputs}; re-run that cell")
        downstream = self.downstream([m.op for m in marks])
        if downstream:
            lines.append(f"  then re-run the cells that depend on them: {', '.join(downstream)}")
        return lines

    def downstream(self, stale_ops) -> list[str]:
        """Labels of recorded cells that (transitively) read ``stale_ops``, beyond their own."""
        own = {id(self.cell_of(op)) for op in stale_ops}
        seen = _gt.readers_of(stale_ops)
        return [rec.label for rec in self.records.values()
                if id(rec) not in own and any(op in seen for op in rec.ops)]

    def listing(self) -> list[str]:
        """``%dflab cells``: each record's label, key kind, ops and stale ops."""
        if not self.records:
            return ["No %%dflab cells recorded for the default graph."]
        stale = {m.op for m in self.graph.stale_marks()}
        lines = []
        for rec in self.records.values():
            kind = rec.key.split(":", 1)[0]
            lines.append(f"{rec.label} [{kind} key] {len(rec.ops)} ops: "
                         f"{_preview([op.name for op in rec.ops]) or '-'}")
            marked = [op.name for op in rec.ops if op in stale]
            if marked:
                lines.append(f"    stale: {_preview(marked)}")
        return lines

    def origin(self, op) -> str:
        """Where ``op`` was built, as one cell: a ``%%dflab`` cell by its label and the line in
        it (IPython names the magic's body after another prompt number), other code by
        IPython's own cell naming."""
        rec = self.cell_of(op)
        if rec is None:
            return readable_site(op.creation_site)
        line = op.creation_site.rpartition(":")[2] if op.creation_site else ""
        # As IPython names a cell in tracebacks, so the two read alike.
        return f"Cell {rec.label}, line {line}" if line.isdigit() else f"Cell {rec.label}"


# --------------------------------------------------------------------------------------------
# What lives beside the graph: session state, variable scope counts
# --------------------------------------------------------------------------------------------
def _forget_state(graph, ops) -> list:
    """Drop, in every open session on ``graph``, the state of the stateful ``ops`` (variables,
    random streams, queues), so new ops of the same names start afresh; returns the records
    whose ``undo()`` puts it back."""
    names = {op.name for op in ops if op.op_def.stateful}
    return [sess.forget_state(names) for sess in sessions_on(graph)] if names else []


def _scope_counts(graph) -> dict:
    _, scopes = variable_stores(graph)
    return dict(scopes.variable_scopes_count) if scopes is not None else {}


def _scope_opens(before: dict, after: dict) -> dict:
    return {k: v - before.get(k, 0) for k, v in after.items() if v > before.get(k, 0)}


def _set_counts(scope_store, counts: dict) -> None:
    scope_store.variable_scopes_count.clear()
    scope_store.variable_scopes_count.update(counts)
