"""IPython magics: ``%%dflab`` builds the default graph cell by cell, ``%dflab`` inspects it.

A ``%%dflab`` cell runs in the user namespace while an op observer records the ops it creates.
Each record is keyed by the cell's identity — its ``--name``, else the front-end's cell id, else
its first line (see ``CellBook.fallback_key``) — so re-running a cell, edited or not, first
removes what its last run built: the names it took are released (``Variable`` stays
``Variable``), collections and ``get_variable``'s store forget the old variables, open sessions
forget the replaced ops' state, and ops of other cells that read a replaced op become *stale*:
they stay in the graph, are reported, and sessions refuse to run them until their cell is re-run.

A cell that fails is rolled back as a whole: its new ops go, the ops of its previous run come
back (with their names, collections and session state), and notebook names that were bound to
the removed new ops get their old values back. The graph is as if the failed run never happened.

Invariant: after every ``%%dflab`` cell, every record's ops are in the graph and no op belongs
to two records. Records follow the default graph: a new default graph starts a new book.
"""

from __future__ import annotations

import argparse
import difflib
import shlex
import weakref
from dataclasses import dataclass, field

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from dflab.framework import errors
from dflab.framework import ops as _ops
from dflab.ops import variable_scope as _vs
from dflab.ops.variables import Variable
from dflab.visualize.text import readable_site

# How alike two sources must be (difflib ratio) for a cell without a cell id to count as an
# edit of an earlier cell with the same first line rather than a different cell.
SAME_CELL_RATIO = 0.6
_PREVIEW = 6  # op names listed per cell in reports


# --------------------------------------------------------------------------------------------
# Cell records
# --------------------------------------------------------------------------------------------
@dataclass
class CellRecord:
    """What one ``%%dflab`` cell built in its last successful run."""

    key: str  # "name:…", "id:…" or "line:…": how the cell is found again
    label: str  # what users read: "In[5]", or "'model'" for a named cell
    source: str
    ops: list = field(default_factory=list)
    names_added: set = field(default_factory=set)  # Graph._names_in_use keys it created
    names_bumped: set = field(default_factory=set)  # keys it found taken and counted up
    scope_opens: dict = field(default_factory=dict)  # variable scope name -> times opened

    @property
    def first_line(self) -> str:
        return _first_line(self.source)


def _first_line(source: str) -> str:
    return next((ln.strip() for ln in source.splitlines() if ln.strip()), "")


class CellBook:
    """The records of the cells that built the current default graph, in run order."""

    def __init__(self, graph: _ops.Graph):
        self.graph = graph
        self.records: dict[str, CellRecord] = {}
        self._owner: dict[_ops.Operation, CellRecord] = {}

    def cell_of(self, op) -> CellRecord | None:
        return self._owner.get(op)

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

    def add(self, record: CellRecord) -> None:
        old = self.records.pop(record.key, None)  # re-inserted: records stay in run order
        if old is not None:
            for op in old.ops:
                self._owner.pop(op, None)
        self.records[record.key] = record
        self._owner.update(dict.fromkeys(record.ops, record))


def _likeness(a: str, b: str) -> float:
    return 1.0 if a == b else difflib.SequenceMatcher(None, a, b).ratio()


# --------------------------------------------------------------------------------------------
# Replacing a cell's ops, and undoing that when the new run fails
# --------------------------------------------------------------------------------------------
def _variable_stores(graph):
    """``get_variable``'s store and the variable-scope store of ``graph`` (None if absent)."""
    var_store = graph.get_collection(_vs._VARSTORE_KEY)
    scope_store = graph.get_collection(_vs._VARSCOPESTORE_KEY)
    return (var_store[0] if var_store else None), (scope_store[0] if scope_store else None)


def _scope_counts(graph) -> dict:
    _, scopes = _variable_stores(graph)
    return dict(scopes.variable_scopes_count) if scopes is not None else {}


class _ForgottenState:
    """Session state of replaced stateful ops (variables, random streams, queues), dropped so
    the new ops of the same names start afresh, and put back if the new run fails."""

    def __init__(self, graph, ops):
        from dflab.runtime.session import sessions_on

        names = {op.name for op in ops if op.op_def.stateful}
        self.records = [sess.forget_state(names) for sess in sessions_on(graph)] if names else []

    @property
    def variables(self) -> list[str]:
        return sorted({v for record in self.records for v in record.variables})

    def undo(self) -> None:
        for record in self.records:
            record.undo()


class _Replacement:
    """Everything needed to put the graph (and the notebook's names) back as they were before a
    cell run: taken before the cell's previous ops are removed."""

    def __init__(self, graph, user_ns):
        self.graph = graph
        self.snapshot = graph._snapshot()
        var_store, scope_store = _variable_stores(graph)
        self.var_store = (var_store, dict(var_store._vars)) if var_store is not None else None
        self.scope_store = ((scope_store, dict(scope_store.variable_scopes_count))
                            if scope_store is not None else None)
        self.user_ns = user_ns
        self.ns_before = dict(user_ns)
        self.forgotten: _ForgottenState | None = None

    def remove(self, record: CellRecord, reason: str) -> list:
        """Remove ``record``'s ops and release what they held; returns the new stale marks."""
        graph = self.graph
        ops = [op for op in record.ops if graph._ops_by_name.get(op.name) is op]
        self.forgotten = _ForgottenState(graph, ops)
        marks = graph._remove_ops(ops, reason)
        graph._release_names(record.names_added, record.names_bumped)
        _, scope_store = _variable_stores(graph)
        if scope_store is not None:
            counts = scope_store.variable_scopes_count
            for name, n in record.scope_opens.items():
                counts[name] = max(counts.get(name, 0) - n, 0)
        return marks

    def roll_back(self, new_ops) -> None:
        """Undo a failed run: remove ``new_ops``, bring back what ``remove`` removed."""
        # The failed run may have run its new ops in a session: drop that state first, then
        # give the previous ops of the same names their state back.
        _ForgottenState(self.graph, new_ops)
        self.graph._restore(self.snapshot, "its cell failed and was rolled back")
        if self.var_store is not None:
            store, saved = self.var_store
            store._vars.clear()
            store._vars.update(saved)
        if self.scope_store is not None:
            store, saved = self.scope_store
            store.variable_scopes_count.clear()
            store.variable_scopes_count.update(saved)
        if self.forgotten is not None:
            self.forgotten.undo()
        self._restore_names(set(new_ops))

    def _restore_names(self, new_set) -> None:
        for name, value in list(self.user_ns.items()):
            if name.startswith("_"):  # IPython's output history (_, _5 …) is its own business
                continue
            if _is_graph_value(value) and _ops._collection_ops(value) & new_set:
                if name in self.ns_before:
                    self.user_ns[name] = self.ns_before[name]
                else:
                    del self.user_ns[name]


def _is_graph_value(value) -> bool:
    return isinstance(value, (_ops.Tensor, _ops.Operation, Variable))


def _names_taken(before: dict, after: dict) -> tuple[set, set]:
    """(keys created, keys counted up) between two states of ``Graph._names_in_use``."""
    added = {k for k in after if k not in before}
    bumped = {k for k, v in after.items() if k in before and before[k] != v}
    return added, bumped


def _scope_opens(before: dict, after: dict) -> dict:
    return {k: v - before.get(k, 0) for k, v in after.items() if v > before.get(k, 0)}


class CellFailedError(Exception):
    """A ``%%dflab`` cell raised; its traceback is already shown, this says what was undone."""

    def _render_traceback_(self):
        return [str(self)]


# --------------------------------------------------------------------------------------------
# Argument parsing with IPython's error style
# --------------------------------------------------------------------------------------------
class _HelpShownError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as ``UsageError`` and never exits the kernel."""

    def error(self, message):
        raise UsageError(f"{self.format_usage().rstrip()}\n{self.prog}: error: {message}")

    def exit(self, status=0, message=None):
        if message:
            print(message)
        raise _HelpShownError()


def _cell_parser() -> _Parser:
    p = _Parser(prog="%%dflab", description=(
        "Run the cell against the default graph and show the graph with the ops it built "
        "highlighted. Re-running the cell replaces the ops it built last time."))
    p.add_argument("--name", help="key the cell by NAME instead of its cell id / first line")
    p.add_argument("--no-show", action="store_true", help="do not draw the graph")
    p.add_argument("--color-by", default="op", help="op (default), device, …")
    return p


def _line_parser() -> _Parser:
    p = _Parser(prog="%dflab", description="Look at and run the default graph.")
    sub = p.add_subparsers(dest="command", metavar="command", parser_class=_Parser)
    show = sub.add_parser("show", help="interactive graph view (GraphView)")
    show.add_argument("fetches", nargs="*", help="fade what running these would not execute")
    show.add_argument("--color-by", default="op", help="op (default), device, …")
    sub.add_parser("reset", help="reset the default graph and forget the recorded cells")
    for name, text in (("step", "walk one run node by node (Stepper)"),
                       ("trace", "run once with FULL_TRACE and show the Timeline")):
        s = sub.add_parser(name, help=text)
        s.add_argument("fetches", nargs="+", help="names in the notebook or in the graph")
        s.add_argument("--feed", action="append", default=[], metavar="NAME=EXPR",
                       help="feed a tensor; EXPR is evaluated in the notebook")
        s.add_argument("--session", metavar="NAME",
                       help="the session to use (default: the default session, or the one "
                       "session in the notebook, or a new one)")
    pl = sub.add_parser("placement", help="explain where each op would run (PlacementReport)")
    pl.add_argument("fetches", nargs="*", help="what to place (default: the whole graph)")
    pl.add_argument("--session", metavar="NAME", help="place with this session's devices")
    sub.add_parser("cells", help="list the recorded %%%%dflab cells, their ops and stale ops")
    cl = sub.add_parser("cluster", help="the session's cluster: tasks, devices, variables, "
                                        "live activity (ClusterView)")
    cl.add_argument("--session", metavar="NAME", help="a session on the cluster")
    return p


def _parse(parser: _Parser, line: str):
    try:
        return parser.parse_args(shlex.split(line))
    except ValueError as e:  # unbalanced quotes
        raise UsageError(f"{parser.prog}: {e}") from None
    except _HelpShownError:
        return None


# --------------------------------------------------------------------------------------------
# Display
# --------------------------------------------------------------------------------------------
def _display(obj) -> None:
    from IPython.display import display

    display(obj)


def _draw(graph, *, highlight=None, color_by="op", fetches=None):
    """The static drawing of ``graph``: a ``GraphLayout``, shown as its SVG as is (None, with
    a note printed, if it cannot be drawn here: the layout needs pygraphviz)."""
    from dflab.visualize.graph import layout_graph

    try:
        return layout_graph(graph, highlight=highlight, color_by=color_by, fetches=fetches)
    except ImportError as e:
        print(f"(no drawing: {e}; install dflab[notebook])")
        return None
    except ValueError as e:
        raise UsageError(str(e)) from None


def _check_color_by(mode: str) -> None:
    """Refuse an unknown colouring before the cell runs (not after it built its ops)."""
    from dflab.visualize.graph import COLOR_MODES

    if mode not in COLOR_MODES:
        raise UsageError(f"--color-by must be one of {', '.join(COLOR_MODES)}; got {mode!r}")


def _concise(error: errors.OpError) -> errors.OpError:
    """Show a TF error raised in a magic as its type and message, without dflab's frames."""
    error._render_traceback_ = lambda: [f"{type(error).__name__}: {error}"]
    return error


# --------------------------------------------------------------------------------------------
# The magics
# --------------------------------------------------------------------------------------------
@magics_class
class DflabMagics(Magics):
    def __init__(self, shell):
        super().__init__(shell)
        self._book: CellBook | None = None
        self._cell_info = None  # ExecutionInfo of the top-level cell now running
        self._nested = 0

    # --- bookkeeping -----------------------------------------------------------------------
    @property
    def book(self) -> CellBook:
        """The records of the current default graph (a new graph starts a new book)."""
        graph = _ops.get_default_graph()
        if self._book is None or self._book.graph is not graph:
            self._book = CellBook(graph)
        return self._book

    def pre_run_cell(self, info) -> None:
        if not self._nested:
            self._cell_info = info

    def _cell_id(self, body: str):
        """The front-end's id of the cell running ``body`` (None when it sent none)."""
        info = self._cell_info
        cell_id = getattr(info, "cell_id", None)
        if not cell_id or body.strip() not in (getattr(info, "raw_cell", "") or ""):
            return None
        return cell_id

    # --- %%dflab -------------------------------------------------------------------------------
    @cell_magic("dflab")
    def dflab_cell(self, line: str, cell: str):
        """Run the cell against the default graph; re-running replaces what it built.

        %%dflab [--name NAME] [--no-show] [--color-by MODE]   (``%%dflab --help`` for more)
        """
        args = _parse(_cell_parser(), line)
        if args is None:
            return None
        _check_color_by(args.color_by)
        book = self.book
        graph = book.graph
        if graph.finalized:
            raise UsageError("%%dflab: the default graph is finalized; it cannot be changed.")
        # IPython counts the cell before running it: its prompt number is one less.
        label = f"'{args.name}'" if args.name else f"In[{self.shell.execution_count - 1}]"
        key = self._key(book, args.name, cell)
        previous = book.records.get(key)
        txn = _Replacement(graph, self.shell.user_ns)
        marks = txn.remove(previous, f"cell {label} was re-run") if previous else []
        names_before, scopes_before = dict(graph._names_in_use), _scope_counts(graph)
        ok, new_ops = self._execute(graph, line, cell)
        if not ok:
            return self._fail(txn, new_ops, label, previous)
        if _ops.get_default_graph() is not graph:
            print("%%dflab: the cell made a new default graph; cells are recorded afresh.")
            return None
        record = CellRecord(key, label, cell, new_ops,
                            *_names_taken(names_before, graph._names_in_use),
                            _scope_opens(scopes_before, _scope_counts(graph)))
        book.add(record)
        self._report(book, record, previous, marks, txn)
        if not args.no_show and graph.get_operations():
            drawing = _draw(graph, highlight=record.ops, color_by=args.color_by)
            if drawing is not None:
                _display(drawing)
        return None

    def _key(self, book: CellBook, name, body: str) -> str:
        if name:
            return f"name:{name}"
        cell_id = self._cell_id(body)
        if cell_id:
            return f"id:{cell_id}"
        return book.fallback_key(body)

    def _execute(self, graph, line: str, body: str):
        """Run ``body`` as a cell of its own (tracebacks show the user's lines); returns
        (whether it succeeded, the ops it built)."""
        # The magic's line, as a comment, keeps the body on the cell's own line numbers.
        source = body if body.lstrip().startswith("%%") else f"#%%dflab {line}\n{body}"
        built = []
        graph._op_observers.append(built.append)
        self._nested += 1
        try:
            result = self.shell.run_cell(source, store_history=False)
        finally:
            self._nested -= 1
            graph._op_observers.remove(built.append)
        return result.success, built

    def _fail(self, txn: _Replacement, new_ops, label, previous):
        txn.roll_back(new_ops)
        kept = f"; the {len(previous.ops)} ops of its previous run are back" if previous else ""
        raise CellFailedError(
            f"%%dflab: cell {label} failed and was rolled back: {len(new_ops)} new ops "
            f"removed{kept}. The graph is as it was before this run.")

    # --- reports -----------------------------------------------------------------------------
    def _report(self, book, record, previous, marks, txn: _Replacement) -> None:
        replaced = f", replacing {len(previous.ops)} from its last run" if previous else ""
        print(f"%%dflab {record.label}: built {len(record.ops)} ops{replaced}.")
        if txn.forgotten is not None and txn.forgotten.variables:
            names = ", ".join(txn.forgotten.variables)
            print(f"  open sessions forgot the old values of {names}: run the initializer again.")
        for mark in marks:
            mark.origin = self._origin(book, mark.op)
        for line in self._stale_lines(book, book.graph._stale_marks()):
            print(line)
        dangling = self._dangling_names(previous)
        if dangling:
            print(f"  no longer built by this cell, still bound to removed ops: {dangling}")

    def _stale_lines(self, book, marks) -> list[str]:
        by_cell: dict[str, list] = {}
        for mark in marks:
            rec = book.cell_of(mark.op)
            where = f"cell {rec.label}" if rec else readable_site(mark.op.creation_site)
            by_cell.setdefault(where, []).append(mark)
        lines = []
        for where, ms in by_cell.items():
            ops = _preview([m.op.name for m in ms])
            inputs = ", ".join(dict.fromkeys(m.replaced.lstrip("^").split(":")[0] for m in ms))
            lines.append(f"stale: {ops} ({where}) uses replaced {inputs}; re-run that cell")
        downstream = self._downstream(book, [m.op for m in marks])
        if downstream:
            lines.append(f"  then re-run the cells that depend on them: {', '.join(downstream)}")
        return lines

    def _downstream(self, book, stale_ops) -> list[str]:
        """Labels of recorded cells that (transitively) read the stale ops, beyond their own."""
        own = {id(book.cell_of(op)) for op in stale_ops}
        seen = _dependents(stale_ops)
        cells = []
        for rec in book.records.values():
            if id(rec) not in own and any(op in seen for op in rec.ops):
                cells.append(rec.label)
        return cells

    def _dangling_names(self, previous) -> str:
        if previous is None:
            return ""
        old = set(previous.ops)
        names = [k for k, v in self.shell.user_ns.items()
                 if not k.startswith("_") and _is_graph_value(v) and _ops._collection_ops(v) & old]
        return ", ".join(sorted(names))

    def _origin(self, book, op) -> str:
        """Where ``op`` was built, as one cell: a ``%%dflab`` cell by its label and the line in
        it (IPython names the magic's body after another prompt number), other code by
        IPython's own cell naming."""
        rec = book.cell_of(op)
        if rec is None:
            return readable_site(op.creation_site)
        line = op.creation_site.rpartition(":")[2] if op.creation_site else ""
        return f"cell {rec.label}, line {line}" if line.isdigit() else f"cell {rec.label}"

    def site_of(self, op) -> str | None:
        """``errors``' site formatter while these magics are loaded: cells, not temp files."""
        if self._book is None or op.graph is not self._book.graph:
            return readable_site(op.creation_site)
        return self._origin(self._book, op)

    # --- %dflab --------------------------------------------------------------------------------
    @line_magic("dflab")
    def dflab_line(self, line: str):
        """Look at and run the default graph: show, reset, step, trace, placement, cells,
        cluster.

        ``%dflab --help`` lists the commands, ``%dflab COMMAND --help`` their options.
        """
        parser = _line_parser()
        args = _parse(parser, line)
        if args is None:
            return None
        if args.command is None:
            parser.print_help()
            return None
        try:
            return getattr(self, f"_cmd_{args.command}")(args)
        except errors.OpError as e:
            raise _concise(e) from None

    def _cmd_show(self, args):
        _check_color_by(args.color_by)
        graph = _ops.get_default_graph()
        fetches = self._resolve_all(args.fetches) or None
        try:
            from dflab.notebook.graph_view import GraphView
        except ImportError:
            return _draw(graph, color_by=args.color_by, fetches=fetches)
        try:
            return GraphView(graph, color_by=args.color_by, fetches=fetches)
        except ValueError as e:
            raise UsageError(str(e)) from None

    def _cmd_reset(self, args):
        try:
            _ops.reset_default_graph()
        except AssertionError as e:
            raise UsageError(f"%dflab reset: {e}") from None
        self._book = None
        print("%dflab: new empty default graph; cell records cleared.")

    def _cmd_step(self, args):
        from dflab.notebook.stepper import Stepper

        sess = self._session(args.session)
        fetches = self._fetch_arg(args.fetches)
        return Stepper(sess, fetches, self._feeds(args.feed))

    def _cmd_trace(self, args):
        from dflab.runtime.config import RunMetadata, RunOptions

        sess = self._session(args.session)
        metadata = RunMetadata()
        sess.run(self._fetch_arg(args.fetches), self._feeds(args.feed),
                 options=RunOptions(trace_level=RunOptions.FULL_TRACE), run_metadata=metadata)
        try:
            from dflab.notebook.timeline import Timeline
        except ImportError:
            return metadata
        return Timeline(metadata)

    def _cmd_placement(self, args):
        from dflab.runtime.placer import explain_placement
        from dflab.runtime.subgraph import prune

        graph = _ops.get_default_graph()
        fetches = self._resolve_all(args.fetches)
        if fetches:
            # Placing a stale op would place the removed ops it reads: refuse, as a run would.
            tensors = [f for f in fetches if isinstance(f, _ops.Tensor)]
            targets = [f for f in fetches if isinstance(f, _ops.Operation)]
            _ops.check_not_stale(graph, prune(tensors, targets, ()))
        else:  # the whole graph, less what cannot run until a stale cell is re-run
            blocked = _dependents([m.op for m in graph._stale_marks()])
            fetches = [op for op in graph.get_operations() if op not in blocked]
            if len(blocked):
                print(f"%dflab placement: {len(blocked)} stale ops and their dependents left out.")
        if not fetches:
            raise UsageError("%dflab placement: nothing to place.")
        sess = self._session(args.session, create=False)
        config = getattr(sess, "_config", None) if sess is not None else None
        # Requests this session cannot satisfy are rows with the reason, not a traceback.
        return explain_placement(fetches, config=config, graph=graph, report_unsatisfiable=True)

    def _cmd_cluster(self, args):
        from dflab.notebook.cluster_view import ClusterView

        sess = self._session(args.session, create=False)
        if sess is None or not sess.sess_str:
            raise UsageError("%dflab cluster: no session on a cluster is open; create one with "
                             "tf.Session(server.target) (or name it with --session NAME).")
        return ClusterView(sess)

    def _cmd_cells(self, args):
        book = self.book
        if not book.records:
            print("No %%dflab cells recorded for the default graph.")
            return
        stale = {m.op: m for m in book.graph._stale_marks()}
        for rec in book.records.values():
            kind = rec.key.split(":", 1)[0]
            print(f"{rec.label} [{kind} key] {len(rec.ops)} ops: "
                  f"{_preview([op.name for op in rec.ops]) or '-'}")
            marked = [op.name for op in rec.ops if op in stale]
            if marked:
                print(f"    stale: {_preview(marked)}")

    # --- names, sessions, feeds ------------------------------------------------------------
    def _resolve(self, token: str):
        """A graph element for ``token``: a notebook name, a graph name ("loss:0",
        "train_op"), or a Python expression evaluated in the notebook ("model.loss")."""
        graph = _ops.get_default_graph()
        ns = self.shell.user_ns
        if token.isidentifier() and token in ns:
            return self._element(token, ns[token], graph)
        try:
            return graph.as_graph_element(token)
        except (KeyError, ValueError, TypeError):
            pass
        try:
            value = eval(token, ns)  # noqa: S307 - the user's own expression, as in any magic
        except Exception:  # noqa: BLE001 - any failure means "not a name we know"
            raise UsageError(
                f"%dflab: {token!r} is neither a name in the notebook nor an op or tensor of "
                "the default graph.") from None
        return self._element(token, value, graph)

    @staticmethod
    def _element(token, value, graph):
        if isinstance(value, (list, tuple)):
            return [DflabMagics._element(token, v, graph) for v in value]
        try:
            return graph.as_graph_element(value)
        except (TypeError, ValueError) as e:
            raise UsageError(f"%dflab: {token!r} is not an op or tensor of the default graph: "
                             f"{e}") from None

    def _resolve_all(self, tokens) -> list:
        out = []
        for t in tokens:
            el = self._resolve(t)
            out.extend(el if isinstance(el, list) else [el])
        return out

    def _fetch_arg(self, tokens):
        fetches = self._resolve_all(tokens)
        return fetches[0] if len(fetches) == 1 else fetches

    def _feeds(self, items) -> dict:
        feeds = {}
        for item in items:
            name, sep, expr = item.partition("=")
            if not sep or not name or not expr:
                raise UsageError(f"%dflab: --feed wants NAME=EXPR, got {item!r}")
            key = self._resolve(name.strip())
            if not isinstance(key, _ops.Tensor):
                key = key.outputs[0] if isinstance(key, _ops.Operation) and key.outputs else key
            try:
                feeds[key] = eval(expr, self.shell.user_ns)  # noqa: S307 - the user's expression
            except Exception as e:  # noqa: BLE001 - reported as a usage error
                raise UsageError(f"%dflab: cannot evaluate the feed {expr!r}: {e}") from None
        return feeds

    def _session(self, name=None, create=True):
        """The session to run in: ``name`` from the notebook, else the default session, else
        the one open session on the default graph in the notebook, else a new one."""
        from dflab.runtime.session import BaseSession, Session, get_default_session

        graph = _ops.get_default_graph()
        ns = self.shell.user_ns
        if name:
            sess = ns.get(name)
            if not isinstance(sess, BaseSession):
                raise UsageError(f"%dflab: {name!r} is not a tf.Session in the notebook.")
            if sess.graph is not graph:
                raise UsageError(f"%dflab: session {name!r} runs another graph.")
            return sess
        sess = get_default_session()
        if sess is not None and sess.graph is graph:
            return sess
        found = {id(v): (k, v) for k, v in ns.items()
                 if isinstance(v, BaseSession) and v.graph is graph
                 and not v.closed and not k.startswith("_")}
        if len(found) == 1:
            return next(iter(found.values()))[1]
        if len(found) > 1:
            names = ", ".join(sorted(k for k, _ in found.values()))
            raise UsageError(f"%dflab: several sessions are open ({names}); pick one with "
                             "--session NAME.")
        if not create:
            return None
        print("%dflab: no session open on the default graph; using a new tf.Session() "
              "(its variables start uninitialized).")
        return Session(graph=graph)


def _dependents(ops) -> set:
    """``ops`` and every op that reads them, directly or not (data and control edges)."""
    seen, stack = set(ops), list(ops)
    while stack:
        op = stack.pop()
        for c in [c for t in op.outputs for c in t.consumers()] + op._control_outputs:
            if c not in seen:
                seen.add(c)
                stack.append(c)
    return seen


def _preview(names: list[str]) -> str:
    more = f" (+{len(names) - _PREVIEW} more)" if len(names) > _PREVIEW else ""
    return ", ".join(names[:_PREVIEW]) + more


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------
_loaded: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def load_ipython_extension(ipython) -> None:
    """Register ``%%dflab`` and ``%dflab`` (``%load_ext dflab`` calls this)."""
    old = _loaded.get(ipython)
    if old is not None:  # loaded again (%reload_ext): one pre-run hook, not two
        ipython.events.unregister("pre_run_cell", old.pre_run_cell)
    magics = DflabMagics(ipython)
    ipython.register_magics(magics)
    errors.set_site_formatter(magics.site_of)
    ipython.events.register("pre_run_cell", magics.pre_run_cell)
    _loaded[ipython] = magics


def magics_of(ipython) -> DflabMagics | None:
    """The loaded magics of a shell (their ``book`` holds the cell records)."""
    return _loaded.get(ipython)
