"""``Stepper``: one ``Session.run`` executed node by node on the real executor, in a notebook.

The stepper drives a ``dflab.runtime.stepping.StepRun`` (the executor's own ``step()``), so what
it shows is what ``Session.run`` does: the ready set (any ready node may go next — dataflow order
is free), loop frames and iterations, dead branches of a ``cond``, values crossing devices
through ``_Send``/``_Recv``, and variables shared with every other run of the session.

Going back is time travel, not only a view: ``back()`` undoes the last events — variables
(reference and resource), queue contents and random generators get their state after the
remaining prefix back, and the executor is rewound to exactly that point (see
``dflab.runtime.stepping``) — and the variables panel shows the restored values, the ones that
changed highlighted. ``forward()`` (or ``step()`` without a node) re-executes the recorded next
event and gets the same results; stepping another ready node takes another path and drops the
recorded events after the cursor. Going back over an effect that cannot be undone (a checkpoint
written, ``py_func``, a reader or iterator advanced, a queue another run changed) is refused,
and the message line says why.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import ipywidgets
import traitlets as t

from dflab.framework import errors
from dflab.framework.op_kinds import ENTER_OPS
from dflab.notebook import _assets
from dflab.notebook._graph_widget import GraphWidget
from dflab.notebook._saved import SavedOutput
from dflab.notebook._summaries import summarize, summarize_outputs
from dflab.runtime.stepping import ReadyNode, StepEvent, StepRun
from dflab.visualize import graph as _vgraph
from dflab.visualize.states import paint_states
from dflab.visualize.svg import stack
from dflab.visualize.text import short_device

# Up to this many ops a step is drawn op by op (stepping is about individual nodes, and a small
# loop's machinery is the lesson); a bigger one opens what fits, as GraphView does.
EXPAND_ALL_UP_TO = 40
# Beside a side panel (variables, loop frames) the canvas is this much narrower.
SIDE_PANEL_UNITS = 230.0
LANE_LENGTH = 60  # events shown per device lane (the most recent ones)
VARIABLE_TYPES = ("VariableV2", "Variable", "VarHandleOp")

_live_steppers: weakref.WeakSet = weakref.WeakSet()


@dataclass(frozen=True)
class _Mark:
    """A name breakpoint (``name``) or a predicate breakpoint (``fn(event) -> bool``)."""

    name: str | None = None
    fn: object = None


def _label(name: str, frame: str, iteration: int) -> str:
    return f"{name} #{iteration}" if frame else name


class Stepper(GraphWidget):
    """Step ``session.run(fetches, feed_dict)`` one node at a time (see the module docstring).

    Python API and buttons: ``step()`` / ``step(name)``, ``back()``, ``forward()``,
    ``run_to(name)``, ``resume()``, ``reset()``; breakpoints by op name or predicate
    (``add_breakpoint``); ``ready``, ``executed``, ``result``, ``history``, ``cursor``.
    Clicking a ready node in the graph steps it; shift-click toggles a breakpoint; clicking
    another node shows its details.
    """

    _esm = _assets.esm("stepper")

    status = t.Unicode("").tag(sync=True)
    message = t.Unicode("").tag(sync=True)
    message_kind = t.Unicode("error").tag(sync=True)  # error | warning | info (its colour)
    ready_items = t.List().tag(sync=True)  # [{"key", "name", "label"}]
    lanes = t.Dict().tag(sync=True)  # device -> [{"label", "state"}] (recent events)
    frames = t.List(t.Unicode()).tag(sync=True)  # one line per loop frame seen
    variables = t.List().tag(sync=True)  # [[name, value text]]
    changed_variables = t.List(t.Unicode()).tag(sync=True)  # changed by the last action
    badges = t.Dict().tag(sync=True)  # node id -> "#iteration"
    breakpoint_ids = t.List(t.Unicode()).tag(sync=True)
    cursor = t.Int(0).tag(sync=True)  # events of the history shown
    total = t.Int(0).tag(sync=True)  # events recorded
    finished = t.Bool(False).tag(sync=True)

    def __init__(self, session, fetches, feed_dict=None, *, color_by: str | None = None,
                 expanded=None, title: str = ""):
        self.session = session
        self._fetches = fetches
        self._feed_dict = feed_dict
        self._marks: list[_Mark] = []
        self._texts: dict[int, str] = {}  # id(event) -> its value text (see _record_texts)
        self._shown_variables: dict[str, str] = {}
        self._finished_length = -1  # history length of the last run to the end (-1: none)
        self.run = StepRun(session, fetches, feed_dict)
        if color_by is None:  # a partitioned step is drawn as device clusters with Send/Recv
            # Otherwise nodes are drawn plain: their colours are the executor's states.
            color_by = "partition" if self.run.partition_graphs else "state"
        super().__init__(color_by=color_by, expanded=list(expanded or ()), title=title)
        if self._has_side_panel():
            self._fit = (_vgraph.FIT[0] - SIDE_PANEL_UNITS, _vgraph.FIT[1])
        if expanded is None and len(self.run.states) <= EXPAND_ALL_UP_TO:
            self._first_collapse = False
        self.relayout()
        self._ready_to_layout = True
        self._sync()
        _live_steppers.add(self)

    # --- layout ---------------------------------------------------------------------------
    def _has_side_panel(self) -> bool:
        """Whether the step shows variables or loop frames beside the drawing."""
        ops = self.session.graph.get_operations()
        return any(op.type in VARIABLE_TYPES or op.type in ENTER_OPS for op in ops
                   if op.name in self.run.states)

    def _layout_source(self):
        graph = self.session.graph
        by_name = {op.name: op for op in graph.get_operations()}
        ops = [by_name[n] for n in self.run.states if n in by_name]
        feeds = list(self._feed_dict or ())
        kwargs = dict(fetches=self._fetches, feeds=feeds or None)
        if self.run.partition_graphs:
            kwargs["partition_graphs"] = self.run.partition_graphs
        placement = getattr(self.run.plan, "placement", None)
        if placement:
            kwargs["placement"] = placement
        return ops, kwargs

    # --- the cursor over the history ----------------------------------------------------------
    @property
    def history(self) -> list[StepEvent]:
        """Every event recorded so far (the cursor may be behind its end)."""
        return list(self.run.history)

    @property
    def _live(self) -> bool:
        return self.cursor == len(self.run.history)

    @property
    def ready(self) -> list[ReadyNode]:
        """The nodes that may run next, at the cursor (the rewound executor's own)."""
        return list(self.run.ready)

    @property
    def executed(self) -> list[str]:
        """Names of the nodes run up to the cursor, in order."""
        return self.run.executed

    @property
    def result(self):
        """The fetches' values, as ``Session.run`` returns them, once the step has finished."""
        return self.run.result

    def op_states(self) -> dict[str, str]:
        """Op name -> pending|ready|running|done|dead, at the cursor."""
        return self._op_states()

    def _op_states(self) -> dict:
        return self.run.states

    def value(self, name: str):
        """The outputs of op ``name``'s latest run up to the cursor."""
        for e in reversed(self.run.history[: self.cursor]):
            if e.name == name and e.completed:
                return e.outputs
        return self.run.value(name)  # raises the runtime's error naming the op

    # --- actions ----------------------------------------------------------------------------
    def step(self, node=None) -> StepEvent:
        """Run one ready node: the first one, or ``node`` (an op name, a key or a ReadyNode).

        Behind the end of the history (after ``back``), no ``node`` or the recorded one
        re-executes the recorded next event; another ready node takes another path, and the
        recorded events after the cursor are dropped (the message line says how many).
        """
        if self.run.finished:
            self._raise_finished()
        ahead = len(self.run.history) - self.cursor
        recorded_next = self.run.history[self.cursor] if ahead else None
        events = self._execute(lambda: [self.run.step(node)])
        if ahead and events[-1] is not recorded_next:
            self._say(f"took another path at event {self.cursor}: the {ahead} recorded "
                      f"event{'s' if ahead != 1 else ''} from there on were dropped")
        return events[-1]

    def back(self, n: int = 1) -> int:
        """Undo the last ``n`` events (variables, queues and generators are restored, the
        executor rewound); returns the new cursor. The message line says what was restored."""
        rewinds = []
        self._execute(lambda: rewinds.append(self.run.back(n)) or [])
        self._say(rewinds[0].message, "warning" if rewinds[0].warnings else "info")
        return self.cursor

    def forward(self, n: int = 1) -> int:
        """Re-execute the next ``n`` recorded events; returns the new cursor."""
        events = self._execute(lambda: self.run.forward(n))
        if events:
            self._say(f"replayed {len(events)} recorded event"
                      f"{'s' if len(events) != 1 else ''}: same outputs as before")
        return self.cursor

    def run_to(self, name: str) -> list[StepEvent]:
        """Step until op ``name`` has run (or the step finishes), the recorded path first."""
        if isinstance(name, ReadyNode):
            name = name.name
        if self.run.finished:
            return []
        return self._execute(lambda: self.run.run_to(name))

    def resume(self, breakpoints=()) -> list[StepEvent]:
        """Run until the step finishes or a breakpoint (the stepper's and ``breakpoints``)."""
        marks = self._marks + [_as_mark(b) for b in breakpoints]
        if self.run.finished:
            return []
        return self._execute(lambda: self.run.resume(breakpoints=[
            m.name if m.name is not None else m.fn for m in marks]))

    def reset(self) -> None:
        """Start the step again from nothing run (variables keep their current values)."""
        self.run.close()
        self.run = StepRun(self.session, self._fetches, self._feed_dict)
        self._texts = {}
        self._finished_length = -1
        self.message = ""
        self._move(0)
        self.relayout()

    # --- breakpoints ------------------------------------------------------------------------
    def add_breakpoint(self, bp) -> None:
        """Stop ``resume`` before op ``bp`` runs (a name), or after an event ``bp(event)``
        accepts (a predicate such as ``dflab.runtime.stepping.has_inf_or_nan``)."""
        mark = _as_mark(bp)
        if mark.name is not None and mark.name not in self.run.states:
            raise errors.NotFoundError(
                None, None, f"{mark.name} is not part of this step (it is not needed by the "
                "fetches, or does not exist).")
        if mark not in self._marks:
            self._marks.append(mark)
        self._sync()

    def remove_breakpoint(self, bp) -> None:
        mark = _as_mark(bp)
        self._marks = [m for m in self._marks if m != mark]
        self._sync()

    @property
    def breakpoints(self) -> list:
        return [m.name if m.name is not None else m.fn for m in self._marks]

    # --- internals ----------------------------------------------------------------------------
    def _raise_finished(self):
        raise errors.OutOfRangeError(None, None, "The step has finished; reset() to run it again.")

    def _say(self, text: str, kind: str = "info") -> None:
        """Show ``text`` on the message line; ``kind`` (error, warning, info) sets its colour."""
        with self.hold_sync():
            self.message_kind = kind
            self.message = text

    def _execute(self, action) -> list[StepEvent]:
        cursor = self.cursor
        try:
            events = action()
            self.message = ""
        except errors.OpError as e:
            op = getattr(e, "op", None)
            self._say(_error_text(e), "error")
            if op is not None and self.node_id(op.name) is not None:
                self._selected_name = op.name  # show the failing node's details
            raise
        finally:
            self._record_texts(min(cursor, self.run.position) - 1)
            self._move(self.run.position)
            _refresh_peers(self)
        return events

    def _record_texts(self, first: int) -> None:
        """Value texts of the events up to the cursor, each computed once: again from index
        ``first`` on (what the last action ran or re-ran: a re-run's outputs are the replay's),
        never for a node still waiting (a _Recv); dropped events' texts go."""
        history = self.run.history[: self.run.position]
        old = self._texts
        texts = {}
        for i, e in enumerate(history):
            if not e.completed:
                continue
            text = old.get(id(e)) if i < first else None
            texts[id(e)] = text if text is not None else _event_text(e)
        self._texts = texts

    def _move(self, k: int) -> None:
        self.cursor = k
        self._sync()
        if self._selected_name and self.node_id(self._selected_name) != self.selected:
            self.select(self._selected_name)

    def _sync(self) -> None:
        """Send everything the views show, for the cursor's position."""
        if self._layout is None:
            return
        k = self.cursor
        history = self.run.history
        if self.run.finished:
            self._finished_length = len(history)
        self._op_values = self._values_at(k)
        with self.hold_sync():
            self.total = len(history)
            # A failed step is over too: nothing more can run (reset() starts it again).
            self.finished = (self.run.finished or self.run.error is not None) \
                and k == len(history)
            self._send_node_state()
            ready = self.ready
            self.ready_items = [{"key": r.key, "name": r.name,
                                 "label": _label(r.name, r.frame, r.iteration)} for r in ready]
            self.status = self._status_text(ready)
            self.lanes = self._lanes(history[:k])
            self.frames = self._frame_lines(history[:k])
            self.refresh_variables()

    def refresh_variables(self) -> None:
        """Show the variables' current values, marking those that changed since they were last
        shown (a step's write, a restored value after ``back``, another stepper's write)."""
        rows = self._variable_texts()
        shown = self._shown_variables
        self.changed_variables = [n for n, text in rows if n in shown and shown[n] != text]
        self._shown_variables = dict((n, text) for n, text in rows)
        self.variables = rows

    def _status_text(self, ready) -> str:
        k, n = self.cursor, len(self.run.history)
        # The number of events is known once the step ran to its end on this path.
        total = str(n) if self.run.finished or self._finished_length == n else "?"
        names = ", ".join(_label(r.name, r.frame, r.iteration) for r in ready)
        parts = [f"step {k} of {total}"]
        if self.run.error is not None and k == n:
            parts.append("failed")
        elif self.run.finished and k == n:
            parts.append("finished")
        else:
            parts.append(f"ready: {names}" if names else "ready: none")
        if k < n:
            parts.append(f"rewound ({n - k} recorded event{'s' if n - k != 1 else ''} ahead)")
        return " \u00b7 ".join(parts)

    def _values_at(self, k: int) -> dict:
        values = {}
        for e in self.run.history[:k]:
            if not e.completed:
                continue
            text = self._texts.get(id(e)) or _event_text(e)
            values[e.name] = f"[{e.frame} #{e.iteration}] {text}" if e.frame else text
        return values

    def _send_extra_state(self, ids: dict) -> None:
        badges = {}
        for e in self.run.history[: self.cursor]:
            if e.frame and e.name in ids:
                badges[ids[e.name]] = f"#{e.iteration}"
        for r in self.ready:
            if r.frame and r.name in ids:
                badges[ids[r.name]] = f"#{r.iteration}"
        self.badges = badges
        self.breakpoint_ids = sorted({ids[m.name] for m in self._marks
                                      if m.name is not None and m.name in ids})

    def _lanes(self, events) -> dict:
        lanes: dict = {}
        for e in events:
            state = "failed" if e.error is not None else "dead" if e.dead else \
                ("done" if e.completed else "running")
            lanes.setdefault(short_device(e.device) or "?", []).append(
                {"label": _label(e.name, e.frame, e.iteration), "state": state})
        return {d: items[-LANE_LENGTH:] for d, items in sorted(lanes.items())}

    def _frame_lines(self, events) -> list[str]:
        """One line per loop frame: the iterations the executor has alive at the cursor (what
        ``run.live_frames`` says, ready nodes' iterations included), or, for a frame that is
        over, the last iteration it ran; with the iterations seen among the events."""
        alive: dict = {}
        for f in self.run.live_frames:
            alive.setdefault(f["frame"], set()).update(f["iterations"])
        seen: dict = {}
        for e in events:
            if e.frame:
                seen.setdefault(e.frame, set()).add(e.iteration)
        lines = []
        for frame in dict.fromkeys([*seen, *alive]):
            its, ran = sorted(alive.get(frame, ())), seen.get(frame, set())
            count = f"({len(ran)} seen)"
            if its:
                word = "iteration" if len(its) == 1 else "iterations"
                lines.append(f"{frame}: {word} {', '.join(map(str, its))} alive {count}")
            else:
                lines.append(f"{frame}: finished at iteration {max(ran)} {count}")
        return lines

    def _variable_texts(self) -> list:
        names = []
        for name in self.run.states:
            try:
                op = self.session.graph.get_operation_by_name(name)
            except (KeyError, ValueError):
                continue
            if op.type in VARIABLE_TYPES:
                names.append(name)
        if not names:
            return []
        current = {}
        for device in self.session.devices.devices:
            for name, state in device.resources.variables().items():
                current[name] = state
        return [[n, summarize(current[n].value) if n in current and current[n].initialized
                 else "uninitialized"] for n in sorted(names)]

    # --- front-end messages ---------------------------------------------------------------
    def _handle_message(self, content: dict) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        try:
            if kind == "action":
                self._button(str(content.get("action", "")))
            elif kind == "step":
                self.step(str(content.get("key", "")) or None)
            elif kind == "toggle-breakpoint":
                self._toggle_breakpoint(str(content.get("id", "")))
            else:
                super()._handle_message(content)
        except Exception as e:  # noqa: BLE001 - every failure is reported, none raised
            # A button press has nowhere to raise to (the error would go to the kernel's log,
            # unseen): say what went wrong in the widget — a closed session included.
            self._say(_error_text(e), "error")

    def _button(self, action: str) -> None:
        if action == "step":
            self.step()
        elif action == "back":
            self.back()
        elif action == "forward":
            self.forward()
        elif action == "resume":
            self.resume()
        elif action == "reset":
            self.reset()
        elif action == "run-to":
            name = self.nodes.get(self.selected, {}).get("name")
            if not name or self.nodes[self.selected].get("kind") != "op":
                self.message = "Select a node first (click it), then run to it."
                return
            self.run_to(name)

    def _node_clicked(self, node_id: str) -> None:
        info = self.nodes.get(node_id) or {}
        name = info.get("name")
        if info.get("kind") == "op" and any(r.name == name for r in self.ready):
            self.select(node_id)
            self.step(name)
            return
        super()._node_clicked(node_id)

    def _toggle_breakpoint(self, node_id: str) -> None:
        info = self.nodes.get(node_id) or {}
        if info.get("kind") != "op":
            return
        name = info["name"]
        if _Mark(name=name) in self._marks:
            self.remove_breakpoint(name)
        else:
            self.add_breakpoint(name)

    # --- display ------------------------------------------------------------------------------
    def _text(self) -> str:
        return f"Stepper: {self.status}"

    def _document_title(self) -> str:
        """A saved stepper says where its step stood (its title first, if it has one)."""
        return " \u00b7 ".join(t for t in (self.title, self.status) if t)

    def _static_svg(self) -> str:
        """The drawing with its nodes in their states and the status line, as the widget
        shows them (where only the SVG is shown, the browser does not colour the states)."""
        return paint_states(self.svg, self.states, self._document_title() or "state")

    @staticmethod
    def side_by_side(*steppers) -> SideBySide:
        """Two (or more) steppers next to each other, e.g. on overlapping subgraphs of one
        session: stepping one refreshes the shared variables shown by the others."""
        return side_by_side(*steppers)


class SideBySide(SavedOutput, ipywidgets.HBox):
    """Steppers next to each other (``side_by_side``); its saved output is their drawings
    side by side, each in its state."""

    def _repr_mimebundle_(self, **kwargs):
        bundle = dict(super()._repr_mimebundle_(**kwargs))
        drawings = [s._static_svg() for s in self.children if s.svg]
        if drawings:
            bundle["image/svg+xml"] = stack(drawings, gap=24.0, across=True)
        bundle["text/plain"] = " | ".join(s._text() for s in self.children)
        return bundle


def side_by_side(*steppers) -> SideBySide:
    """An HBox of steppers, each refreshing the others' variable panels when it steps."""
    if not steppers or not all(isinstance(s, Stepper) for s in steppers):
        raise TypeError("side_by_side takes Stepper widgets")
    box = SideBySide(list(steppers),
                     layout=ipywidgets.Layout(width="100%", align_items="flex-start"))
    box.add_class("dflab-side-by-side")
    for s in steppers:
        s._saved_parents = (*s._saved_parents, box)
    return box


def _refresh_peers(stepper: Stepper) -> None:
    """Variables are shared by every run of a session: show their new values everywhere."""
    for other in list(_live_steppers):
        if other is not stepper and other.session is stepper.session:
            other.refresh_variables()


def _event_text(e: StepEvent) -> str:
    if e.error is not None:
        return f"failed: {type(e.error).__name__}"
    return "dead" if e.dead else summarize_outputs(e.outputs)


def _error_text(e: BaseException) -> str:
    op = getattr(e, "op", None)
    where = f" in {op.name}" if op is not None else ""
    return f"{type(e).__name__}{where}: {getattr(e, 'message', None) or e}"


def _as_mark(bp) -> _Mark:
    if isinstance(bp, _Mark):
        return bp
    if isinstance(bp, str):
        return _Mark(name=bp)
    if callable(bp):
        return _Mark(fn=bp)
    raise TypeError(f"A breakpoint is an op name or a predicate fn(event) -> bool, not {bp!r}")


