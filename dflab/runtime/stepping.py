"""Stepping: one ``Session.run`` driven by hand, one node at a time, on the real executor.

A ``StepRun`` builds (or reuses) exactly the plan ``Session.run`` would use for the same fetches
and feeds — pruned, placed, partitioned — and creates the executions ``Session.run`` would
create, but instead of starting them it asks each for one ready node at a time
(``Execution.step``). So what the stepper shows *is* the executor: the ready set, dataflow order
being free (any ready node may go next), loop frames and iteration numbers, dead branches, values
crossing devices through ``_Send``/``_Recv`` (a ``_Recv`` whose value has not been sent yet is
*running*: it waits without holding a thread, exactly as in a real step), and mutable state
shared with every other run of the session — two StepRuns on overlapping subgraphs interleave
their reads and writes of the same variables.

History is kept as a list of ``StepEvent`` plus, per event, the change of node states it caused,
so the state after any prefix of the history can be shown again (``states_at``).

Time travel. ``position`` is how many events of the history are applied; ``back(n)`` moves it
back and really undoes them, ``forward(n)`` (or ``step()``) re-executes the recorded ones.

* Undo log: before a node runs, ``dflab.runtime.undo_log`` keeps what the node may change in
  state that outlives the step — a copy of each variable it writes (reference or resource
  variable), the contents of each queue it touches, its random generator's state — and, after
  it, the state it left. Effects that cannot be taken back (a checkpoint written, ``py_func``,
  a reader or iterator advanced) are marked, and going back over them is refused.
* Rewind = restore + replay. Going back to position k restores every recorded state to what it
  was before the step's first event, throws the executions away (their per-step state —
  frames, TensorArrays, the rendezvous — goes with them), creates fresh ones from the same plan,
  and re-executes the first k recorded node choices on them. The replay runs the real kernels
  through ``Execution.step``, so the ready set, frames and node states after a rewind are the
  executor's own, not a reconstruction; random ops draw the same numbers because their
  generators were restored. Every replayed node's outputs are compared with the recorded ones:
  a difference (state changed behind the stepper's back, a non-deterministic kernel) raises
  ``InternalError`` naming the event; what the node did now stands, the recorded events after
  it are dropped, and stepping goes on from there. A rewind costs re-running k nodes (about
  20 ms for the 45 events of a small MLP's Adam step, ``benchmarks/bench_stepper_rewind.py``).
* Forward re-executes the recorded next event (checked the same way); stepping a *different*
  ready node behind the end of the history takes another path: the recorded future is dropped.
* Someone else's writes: a variable whose value is no longer what this step last wrote (another
  run wrote it) is restored anyway and the rewind warns (``Rewind.warnings``); a queue changed
  by another run or thread cannot be restored honestly, so going back is refused. A closed
  session refuses everything.

Breakpoints: a name breakpoint stops ``resume`` as soon as that op becomes ready (before it runs);
a predicate breakpoint (``fn(event) -> bool``, e.g. ``has_inf_or_nan``) stops it right after an
event it accepts.

This module is the runtime half of the notebook's ``Stepper`` widget; it has no UI.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

import numpy as np

from dflab.framework import errors
from dflab.kernels.control_flow_kernels import DEAD
from dflab.runtime import undo_log
from dflab.runtime.partition import user_op

PENDING, READY, RUNNING, DONE, DEAD_STATE = "pending", "ready", "running", "done", "dead"
FAILED = "failed"  # the node whose kernel raised: the step ends there


@dataclass(frozen=True)
class ReadyNode:
    """A node that may run next: which op, where, and in which loop frame and iteration."""

    name: str
    op_type: str
    device: str
    frame: str  # "" for the root frame, else the while loop's frame name
    iteration: int
    key: str  # unique among the ready nodes: name, plus @frame#iteration inside loops


@dataclass
class StepEvent:
    """One node run (or started, for a ``_Recv`` still waiting) by ``StepRun.step``."""

    index: int
    name: str
    op_type: str
    device: str
    frame: str
    iteration: int
    dead: bool = False
    outputs: tuple = ()  # the node's output values (None where dead or not yet received)
    completed: bool = True  # False while an asynchronous node (a _Recv) waits for its value
    error: BaseException | None = None  # set when the node's kernel raised (the step failed)
    changes: dict = field(default_factory=dict, repr=False)  # node name -> (before, after)
    # What the node changed in state that outlives the step (None: a stateless node).
    record: undo_log.NodeRecord | None = field(default=None, repr=False)

    @property
    def key(self) -> str:
        """The ready key the node had: its name, plus @frame#iteration inside loops."""
        return _key(self.name, self.frame, self.iteration)


@dataclass(frozen=True)
class Rewind:
    """What ``StepRun.back`` did: the position it went back to, the variables whose value it
    changed, the queues it restored, and what it warns about."""

    position: int
    variables: tuple = ()
    queues: tuple = ()
    warnings: tuple = ()

    @property
    def message(self) -> str:
        """One line for a user: e.g. "restored 2 variables (v, w) to their values after
        event 3"."""
        where = "before the step" if self.position == 0 else f"after event {self.position}"
        n = len(self.variables)
        if n:
            text = (f"restored {n} variable{'s' if n != 1 else ''} "
                    f"({', '.join(self.variables)}) to their values {where}")
        else:
            text = f"back to {where}; no variable changed"
        if self.queues:
            text += f"; restored the contents of queue {', '.join(self.queues)}"
        return "; ".join([text, *self.warnings])


def has_inf_or_nan(event: StepEvent) -> bool:
    """Breakpoint predicate: the event produced a floating-point value with an inf or a NaN."""
    for v in event.outputs:
        if isinstance(v, np.ndarray) and v.dtype.kind in "fc" and v.size \
                and not np.all(np.isfinite(v)):
            return True
        if isinstance(v, float) and not np.isfinite(v):
            return True
    return False


def _key(name: str, frame: str, iteration: int) -> str:
    return f"{name}@{frame}#{iteration}" if frame else name


class _Recorder:
    """Executor observer: fills the current event's outputs and tracks running/finished nodes.

    Called on the stepping thread, and for a ``_Recv`` completed by a ``_Send`` of another
    partition, on the thread that stepped the ``_Send`` — the same one.
    """

    def __init__(self, run: StepRun):
        self.run = run

    def node_start(self, ex, node, frame, iteration) -> None:
        self.run._started(ex, node, frame, iteration)

    def node_end(self, ex, node, frame, iteration, outputs) -> None:
        self.run._ended(ex, node, frame, iteration, outputs)


class _GateHold:
    """A stepped step's hold on the session's step gate (at most one count, any thread)."""

    __slots__ = ("gate", "thread")

    def __init__(self):
        self.gate = None
        self.thread = None

    def acquire(self, gate) -> None:
        if gate is not None and self.gate is None and gate.enter_step():
            self.gate, self.thread = gate, threading.get_ident()

    def release(self) -> None:
        gate, self.gate = self.gate, None
        if gate is not None:
            gate.exit_step(self.thread)


class StepRun:
    """``Session.run(fetches, feed_dict)`` executed one node at a time (see module docstring)."""

    def __init__(self, session, fetches, feed_dict=None):
        self.session = session
        self._mapper, self.plan, self._feed_values = session.prepare_step(fetches, feed_dict)
        self._executions = self._create_executions()
        # Every op of the step by the user's name (fixed for the run).
        self._fused_into = {m: _user_name(n.op) for ex in self._executions
                            for n in ex.plan.nodes for m in n.op.attrs.get("fused_ops", ())}
        self._all_names = frozenset(_user_name(n.op) for ex in self._executions
                                    for n in ex.plan.nodes)
        self.history: list[StepEvent] = []
        self.position = 0  # events of the history applied (behind its end after back())
        # Where kernels keep state across steps (random generators, queues, readers).
        self._resources = [d.resources for d in session.devices.devices]
        self._breakpoints: list = []
        self._reset_run_state()
        self._initial_states = dict(self._states)
        # The session's step gate, held from the first variable-changing node to the end of
        # the step (see dflab.train.step_gate); released when the run is collected unfinished.
        self._gate_hold = _GateHold()
        weakref.finalize(self, self._gate_hold.release)

    # --- setting up -----------------------------------------------------------------------
    def _create_executions(self) -> list:
        return self.session.start_step(self.plan, self._feed_values, _Recorder(self))

    def _reset_run_state(self) -> None:
        """What the recorder learns from the executions: empty, for fresh executions."""
        self._current: StepEvent | None = None
        self._waiting: dict = {}  # (id(ex), node index, frame id, iteration) -> StepEvent
        self._last: dict[str, str] = {}  # op name -> done/dead (its latest run)
        self._values: dict[str, tuple] = {}
        self._running: set = set()  # op names of started, unfinished asynchronous nodes
        self._expected: dict[int, tuple] = {}  # id(event) -> its recorded (outputs, dead)
        self._diverged: list[StepEvent] = []  # replayed events whose outputs differ
        self._acknowledged: set = set()  # ready keys a name breakpoint already stopped at
        self.error: BaseException | None = None
        self._states = self._compute_states()

    def _abandon_executions(self) -> None:
        """Stop the current executions for good: their waiting nodes (a _Recv, a dequeue
        parked in a queue) are cancelled and nothing they do reaches this run any more."""
        error = errors.CancelledError(None, None, "The stepped step was rewound.")
        for ex in self._executions:
            ex.observer = None
            if ex.rendezvous is not None:
                ex.rendezvous.abort(error)
            ex.cancel(error)

    # --- what is where ----------------------------------------------------------------------
    @property
    def ready(self) -> list[ReadyNode]:
        out = []
        for ex in self._executions:
            for i, frame, it in ex.ready:
                op = ex.plan.nodes[i].op
                name = _user_name(op)
                out.append(ReadyNode(name, op.type, ex.device, frame.name, it.n,
                                     _key(name, frame.name, it.n)))
        return out

    @property
    def executed(self) -> list[str]:
        """Names of the nodes run so far (up to ``position``), in order."""
        return [e.name for e in self.history[: self.position]]

    @property
    def finished(self) -> bool:
        return self.error is None and all(ex.finished for ex in self._executions) \
            and not self._running

    @property
    def states(self) -> dict[str, str]:
        return dict(self._states)

    def states_at(self, k: int) -> dict[str, str]:
        """Node states after the first ``k`` events of the history (0: before any)."""
        if not 0 <= k <= len(self.history):
            raise IndexError(f"history has {len(self.history)} events, asked for {k}")
        states = dict(self._initial_states)
        for event in self.history[:k]:
            for name, (_, after) in event.changes.items():
                states[name] = after
        return states

    def value(self, name: str):
        """The op's outputs from its latest run (a tuple; None where dead)."""
        if name not in self._values:
            self._check_known(name)
            raise errors.FailedPreconditionError(
                None, None, f"{name} has not run yet in this step.")
        return self._values[name]

    @property
    def partition_graphs(self) -> list:
        return self.plan.partition_graph_defs() if self.plan.partitioned else []

    @property
    def live_frames(self) -> list[dict]:
        """Loop frames now executing: name, device and the iteration numbers in flight."""
        out = []
        for ex in self._executions:
            stack = list(ex.root.children.values())
            while stack:
                f = stack.pop()
                out.append({"frame": f.name, "device": ex.device,
                             "iterations": sorted(f.iters)})
                stack.extend(f.children.values())
        return out

    @property
    def result(self):
        """The fetches' values, as ``Session.run`` returns them, once the step has finished."""
        if self.error is not None:
            raise self.error
        if not self.finished:
            raise errors.FailedPreconditionError(
                None, None, f"The step has not finished: {len(self.history)} nodes run, "
                f"ready: {', '.join(r.key for r in self.ready) or 'none'}.")
        values = [p.fetch_values(ex) for p, ex in zip(self.plan.parts, self._executions)]
        return self._mapper.build(self.plan.fetched_values(values, self._feed_values))

    # --- driving ------------------------------------------------------------------------------
    def step(self, node=None) -> StepEvent:
        """Run one ready node: the first one, or the one named by ``node`` (an op name, a ready
        key, or a ``ReadyNode``). Behind the end of the history (after ``back``), no ``node``
        or the recorded one re-executes the recorded event; another ready node takes another
        path and drops the recorded events after this point."""
        if self.position < len(self.history):
            recorded = self.history[self.position]
            if node is None or _node_key(node) in (recorded.name, recorded.key):
                return self._redo()
            if self.error is None:
                del self.history[self.position:]
                self._expected.clear()  # outputs recorded on the dropped path bind nothing
        return self._execute(node)

    def _execute(self, node, reuse: StepEvent | None = None) -> StepEvent:
        """Run one ready node, recording an event (``reuse``: the recorded one being redone)."""
        if self.error is not None:
            raise self.error
        self.session.check_open()  # (a closed one's devices' state is gone)
        ex, item = self._find_ready(node)
        op = ex.plan.nodes[item[0]].op
        name = _user_name(op)
        frame, it = item[1], item[2]
        event = reuse or StepEvent(self.position, name, op.type, ex.device, frame.name, it.n)
        if op.op_def.stateful:
            args = [it.slots[s] for s in ex.plan.nodes[item[0]].inputs]
            event.record = undo_log.before_node(op, args, self._resources)
        before = self._states
        self._current = event
        if op.op_def.writes_variables:
            self._gate_hold.acquire(self.session.step_gate)
        try:
            ex.step(item)
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            from dflab.runtime.session import _user_error

            self.error = event.error = _user_error(e)
            self._last[name] = FAILED
            self._gate_hold.release()
            raise self.error from None
        finally:
            self._current = None
            if event.record is not None:
                undo_log.after_node(event.record)
            if self.finished:
                self._gate_hold.release()
            self._states = self._compute_states()
            event.changes = {n: (before.get(n, PENDING), s) for n, s in self._states.items()
                             if before.get(n, PENDING) != s}
            if reuse is None:  # a failed node too: the history shows where it ended
                self.history.append(event)
            self.position += 1
        if self._diverged:
            raise self._divergence(self._diverged[0], "gave other outputs than when it was "
                                   "recorded")
        return event

    def _redo(self) -> StepEvent:
        """Re-execute the recorded event at ``position``; its outputs must be the same."""
        if self.error is not None:
            raise self.error
        self.session.check_open()
        recorded = self.history[self.position]
        if not any(r.key == recorded.key for r in self.ready):
            raise self._divergence(recorded, "could not run: it is not ready now")
        expected_error = recorded.error
        if recorded.completed:  # (a _Recv recorded while still waiting has nothing to match)
            self._expected[id(recorded)] = (recorded.outputs, recorded.dead)
        recorded.outputs, recorded.dead, recorded.completed, recorded.error = (), False, True, None
        try:
            self._execute(recorded.key, reuse=recorded)
        except errors.OpError:
            if self.error is None:  # a divergence: the node ran, its record was wrong
                raise
            if expected_error is None or type(recorded.error) is not type(expected_error):
                del self.history[self.position:]  # a new failure: the recorded rest is moot
                raise
            raise recorded.error from None  # it failed as it did the first time
        if expected_error is not None:
            raise self._divergence(recorded, f"ran without the error it had ({expected_error})")
        return recorded

    def _divergence(self, event: StepEvent, how: str) -> BaseException:
        """A replayed event did not do what it did when recorded: what it did now is what the
        executor did, so the recorded events after the cursor (built on the old outcome) go,
        and the step goes on from here."""
        self._diverged.clear()
        self._expected.clear()
        dropped = len(self.history) - self.position
        del self.history[self.position:]
        return errors.InternalError(
            None, None, f"Replaying event {event.index + 1} ({event.key}) {how}: the state it "
            "reads changed behind the stepper's back, or its kernel is not deterministic. "
            f"The {dropped} recorded event{'s' if dropped != 1 else ''} after the cursor were "
            "dropped; stepping goes on from the values it gave now.")

    def back(self, n: int = 1) -> Rewind:
        """Undo the last ``n`` applied events (see the module docstring): variables, queues
        and random generators get their state after the remaining prefix back, and the
        executions are exactly where they were then. Refused (``FailedPreconditionError``,
        nothing changed) over an effect that cannot be undone."""
        n = int(n)
        if n < 0:
            raise errors.InvalidArgumentError(None, None, f"back({n}): n must be >= 0.")
        return self._rewind(max(self.position - n, 0))

    def forward(self, n: int = 1) -> list[StepEvent]:
        """Re-execute the next ``n`` recorded events (at most up to the end of the history)."""
        out = []
        for _ in range(int(n)):
            if self.position >= len(self.history):
                break
            out.append(self._redo())
        return out

    def _rewind(self, k: int) -> Rewind:
        self.session.check_open()
        records = [(e.index, e.name, e.record) for e in self.history[: self.position]
                   if e.record is not None]
        undo_log.check_undoable(records)  # refuse before anything changes
        if any(r.kind == "variable" for _, _, rec in records for r in rec.states):
            # Restoring variables changes them: a consistent save must not see it half done
            # (the hold lasts, as a stepped step's does, until the step finishes or closes).
            self._gate_hold.acquire(self.session.step_gate)
        self._abandon_executions()
        report = undo_log.undo(records)
        self._executions = self._create_executions()
        self._reset_run_state()
        self.position = 0
        while self.position < k:
            self._redo()
        return Rewind(k, tuple(undo_log.changed_variables(report)), tuple(report.queues),
                      tuple(report.warnings))

    def run_to(self, name: str) -> list[StepEvent]:
        """Step until op ``name`` has run (in any frame and iteration), preferring ready nodes
        it depends on; returns the events."""
        self._check_known(name)
        needed = self._ancestors(name)
        start = self.position
        while not any(e.name == name for e in self.history[start:self.position]):
            ready = self.ready
            if not ready:
                raise errors.OutOfRangeError(
                    None, None, f"The step cannot reach {name}: no node is ready "
                    f"({'finished' if self.finished else 'waiting'}).")
            if self.position < len(self.history):
                self.step()  # the recorded path first
                continue
            pick = next((r for r in ready if r.name in needed), ready[0])
            self.step(pick)
        return self.history[start:self.position]

    def resume(self, breakpoints=()) -> list[StepEvent]:
        """Step until the step finishes or a breakpoint hits (see module docstring)."""
        names = {b for b in (*self._breakpoints, *breakpoints) if isinstance(b, str)}
        preds = [b for b in (*self._breakpoints, *breakpoints) if callable(b)]
        for n in names:
            self._check_known(n)
        start = self.position
        while True:
            ready = self.ready
            if not ready:
                break
            hit = next((r for r in ready if r.name in names
                        and r.key not in self._acknowledged), None)
            if hit is not None:
                self._acknowledged.add(hit.key)
                break
            event = self.step(None if self.position < len(self.history) else ready[0])
            if any(p(event) for p in preds):
                break
        return self.history[start:self.position]

    def close(self) -> None:
        """Stop stepping: a variable-changing step left unfinished lets consistent saves run
        again (its updates so far stay applied, as after a failed step)."""
        self._gate_hold.release()

    def add_breakpoint(self, bp) -> None:
        """An op name (stop when it becomes ready) or a predicate on events."""
        if isinstance(bp, str):
            self._check_known(bp)
        elif not callable(bp):
            raise TypeError(f"A breakpoint is an op name or a callable, not {bp!r}")
        self._breakpoints.append(bp)

    def clear_breakpoints(self) -> None:
        self._breakpoints.clear()

    # --- internals ------------------------------------------------------------------------
    def _find_ready(self, node):
        if isinstance(node, ReadyNode):
            node = node.key
        for ex in self._executions:
            for item in ex.ready:
                op = ex.plan.nodes[item[0]].op
                name = _user_name(op)
                if node is None or node == _key(name, item[1].name, item[2].n) or node == name:
                    return ex, item
        if node is None:
            raise errors.OutOfRangeError(
                None, None, "No node is ready to run: the step has finished."
                if self.finished else "No node is ready to run: waiting for a value.")
        self._check_known(node.split("@", 1)[0])
        ready = ", ".join(r.key for r in self.ready) or "none"
        raise errors.InvalidArgumentError(
            None, None, f"{node} is not ready to run (ready: {ready}).")

    def _check_known(self, name: str) -> None:
        if name not in self._all_names:
            fused_into = self._fused_into.get(name)
            if fused_into is not None:
                raise errors.NotFoundError(
                    None, None, f"{name} does not run on its own in this step: it is fused into "
                    f"{fused_into} (a graph rewrite; RewriterConfig.remapping=OFF keeps it).")
            raise errors.NotFoundError(
                None, None, f"{name} is not part of this step (it is not needed by the "
                "fetches, or does not exist).")

    def _ancestors(self, name: str) -> set:
        """Ops ``name`` depends on, within this step's plan (loop back edges included)."""
        by_name = {}
        for ex in self._executions:
            for n in ex.plan.nodes:
                by_name.setdefault(_user_name(n.op), []).append(n.op)
        seen, stack = set(), [name]
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            for op in by_name.get(n, ()):
                stack.extend(_user_name(t.op) for t in op.inputs)
                stack.extend(_user_name(c) for c in op.control_inputs)
        return seen

    def _started(self, ex, node, frame, iteration) -> None:
        event = self._current
        if event is not None and node.is_async:
            event.completed = False
            self._running.add(event.name)
            self._waiting[(id(ex), node.index, id(frame), iteration)] = event

    def _ended(self, ex, node, frame, iteration, outputs) -> None:
        name = _user_name(node.op)
        event = self._waiting.pop((id(ex), node.index, id(frame), iteration), None)
        if event is not None:
            event.completed = True
            self._running.discard(name)
        else:
            event = self._current
        dead = bool(outputs) and all(v is DEAD for v in outputs)
        values = tuple(None if v is DEAD else v for v in outputs)
        if event is not None and event.name == name:
            event.outputs, event.dead = values, dead
            expected = self._expected.pop(id(event), None)
            if expected is not None and not _same_outputs(expected, (values, dead)):
                self._diverged.append(event)
        self._last[name] = DEAD_STATE if dead else DONE
        self._values[name] = values

    def _compute_states(self) -> dict[str, str]:
        states = dict.fromkeys(self._all_names, PENDING)
        states.update(self._last)
        for name in self._running:
            states[name] = RUNNING
        for r in self.ready:
            states[r.name] = READY
        return states


def _same_outputs(a: tuple, b: tuple) -> bool:
    """Whether two (outputs, dead) records match: arrays equal, handles not compared."""
    (va, da), (vb, db) = a, b
    return da == db and len(va) == len(vb) \
        and all(undo_log.same_value(x, y) for x, y in zip(va, vb, strict=True))


def _node_key(node) -> str:
    return node.key if isinstance(node, ReadyNode) else str(node)


def _user_name(op) -> str:
    """Partition views of an op carry the user's op as ``original``; Send/Recv have none."""
    return user_op(op).name
