"""IPython magics: ``%%dflab`` builds the default graph cell by cell, ``%dflab`` inspects it.

A thin adapter: the cell model (``dflab.notebook.cells``) decides what a cell owns and what
re-running it replaces; this module parses the magics' arguments, finds the cell's identity
(its ``--name``, the front-end's cell id from IPython's ``pre_run_cell`` event, else its
source), runs the body with IPython's ``run_cell`` so tracebacks show the user's lines, prints
the model's reports and draws the graph. ``%dflab`` commands resolve names in the notebook and
return widgets or reports.

Invariant: every ``%%dflab`` cell runs through ``CellBook.run`` of the default graph's book;
records follow the default graph, and a new default graph starts a new book.
"""

from __future__ import annotations

import argparse
import shlex
import weakref

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from dflab.framework import errors
from dflab.framework import ops as _ops
from dflab.framework.graph_transaction import readers_of
from dflab.notebook.cells import CellBook
from dflab.visualize.text import readable_site


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
    fn = sub.add_parser("function", help="a tf.function's traces, why each was traced, and "
                                         "their graphs (FunctionView)")
    fn.add_argument("name", help="the tf.function (a name or expression in the notebook)")
    fn.add_argument("--no-graphs", action="store_true", help="the table only")
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


def _new_among_old(graph, ops) -> list:
    """The ops a cell built, to highlight, or none when the graph holds nothing else: a
    drawing with every node highlighted highlights nothing."""
    ops = list(ops)
    return ops if len(ops) < len(graph.get_operations()) else []


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
        key = book.key(args.name, self._cell_id(cell), cell)
        run = book.run(key, label, cell, lambda: self._execute(line, cell), self.shell.user_ns)
        if run.failed:
            raise CellFailedError(run.failure())
        if run.new_graph:
            print("%%dflab: the cell made a new default graph; cells are recorded afresh.")
            return None
        print("\n".join(book.report(run)))
        if not args.no_show and graph.get_operations():
            drawing = _draw(graph, highlight=_new_among_old(graph, run.record.ops),
                            color_by=args.color_by)
            if drawing is not None:
                _display(drawing)
        return None

    def _execute(self, line: str, body: str) -> bool:
        """Run ``body`` as a cell of its own (tracebacks show the user's lines); returns
        whether it succeeded."""
        # The magic's line, as a comment, keeps the body on the cell's own line numbers.
        source = body if body.lstrip().startswith("%%") else f"#%%dflab {line}\n{body}"
        # IPython counts a cell before running it, and names the code a nested run compiles
        # after the count: without this the body's lines would read as the next cell's
        # ("Cell In[3], line 2" for cell [2]) in tracebacks and creation sites.
        count = self.shell.execution_count
        self.shell.execution_count = count - 1
        self._nested += 1
        try:
            return self.shell.run_cell(source, store_history=False).success
        finally:
            self._nested -= 1
            self.shell.execution_count = count

    def site_of(self, op) -> str | None:
        """``errors``' site formatter while these magics are loaded: cells, not temp files."""
        if self._book is None or op.graph is not self._book.graph:
            return readable_site(op.creation_site)
        return self._book.origin(op)

    # --- %dflab --------------------------------------------------------------------------------
    @line_magic("dflab")
    def dflab_line(self, line: str):
        """Look at and run the default graph: show, reset, step, trace, placement, cells,
        cluster, function.

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
            blocked = readers_of([m.op for m in graph.stale_marks()])
            fetches = [op for op in graph.get_operations() if op not in blocked]
            if len(blocked):
                print(f"%dflab placement: {len(blocked)} stale ops and their dependents left out.")
        if not fetches:
            raise UsageError("%dflab placement: nothing to place.")
        sess = self._session(args.session, create=False)
        config = sess.master.config if sess is not None else None
        # Requests this session cannot satisfy are rows with the reason, not a traceback.
        return explain_placement(fetches, config=config, graph=graph, report_unsatisfiable=True)

    def _cmd_cluster(self, args):
        from dflab.notebook.cluster_view import ClusterView

        sess = self._session(args.session, create=False)
        if sess is None or not sess.sess_str:
            raise UsageError("%dflab cluster: no session on a cluster is open; create one with "
                             "tf.Session(server.target) (or name it with --session NAME).")
        return ClusterView(sess)

    def _cmd_function(self, args):
        from dflab.eager.function import Function
        from dflab.notebook.function_view import FunctionView

        try:
            value = eval(args.name, self.shell.user_ns)  # noqa: S307 - the user's expression
        except Exception as e:  # noqa: BLE001 - any failure is a usage error here
            raise UsageError(f"%dflab function: {args.name!r}: {e}") from None
        if not isinstance(value, Function):
            raise UsageError(f"%dflab function: {args.name!r} is not a tf.function")
        return FunctionView(value, draw=not args.no_graphs)

    def _cmd_cells(self, args):
        print("\n".join(self.book.listing()))

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
