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
so the state after any prefix of the history can be shown again (``states_at``) without
re-executing anything: stepping backwards is a view, the variables keep their current values.

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

    @property
    def key(self) -> str:
        """The ready key the node had: its name, plus @frame#iteration inside loops."""
        return _key(self.name, self.frame, self.iteration)


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
                            for n in ex.plan.nodes for m in n.op._attrs.get("fused_ops", ())}
        self._all_names = frozenset(_user_name(n.op) for ex in self._executions
                                    for n in ex.plan.nodes)
        self.history: list[StepEvent] = []
        self._current: StepEvent | None = None
        self._waiting: dict = {}  # (id(ex), node index, frame id, iteration) -> StepEvent
        self._last: dict[str, str] = {}  # op name -> done/dead (its latest run)
        self._values: dict[str, tuple] = {}
        self._running: set = set()  # op names of started, unfinished asynchronous nodes
        self._states = self._compute_states()
        self._initial_states = dict(self._states)
        self._breakpoints: list = []
        self._acknowledged: set = set()  # ready keys a name breakpoint already stopped at
        self.error: BaseException | None = None
        # The session's step gate, held from the first variable-changing node to the end of
        # the step (see dflab.train.step_gate); released when the run is collected unfinished.
        self._gate_hold = _GateHold()
        weakref.finalize(self, self._gate_hold.release)

    # --- setting up -----------------------------------------------------------------------
    def _create_executions(self) -> list:
        return self.session.start_step(self.plan, self._feed_values, _Recorder(self))

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
        return [e.name for e in self.history]

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
        return self._mapper.build(self.plan.fetched_values(self._executions, self._feed_values))

    # --- driving ------------------------------------------------------------------------------
    def step(self, node=None) -> StepEvent:
        """Run one ready node: the first one, or the one named by ``node`` (an op name, a ready
        key, or a ``ReadyNode``)."""
        if self.error is not None:
            raise self.error
        if self.session.closed:  # its devices' state is gone: no node may run any more
            raise RuntimeError("Attempted to use a closed Session.")
        ex, item = self._find_ready(node)
        op = ex.plan.nodes[item[0]].op
        name = _user_name(op)
        frame, it = item[1], item[2]
        event = StepEvent(len(self.history), name, op.type, ex.device, frame.name, it.n)
        before = self._states
        self._current = event
        if op._op_def.writes_variables:
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
            if self.finished:
                self._gate_hold.release()
            self._states = self._compute_states()
            event.changes = {n: (before.get(n, PENDING), s) for n, s in self._states.items()
                             if before.get(n, PENDING) != s}
            self.history.append(event)  # a failed node too: the history shows where it ended
        return event

    def run_to(self, name: str) -> list[StepEvent]:
        """Step until op ``name`` has run (in any frame and iteration), preferring ready nodes
        it depends on; returns the events."""
        self._check_known(name)
        needed = self._ancestors(name)
        start = len(self.history)
        while not any(e.name == name for e in self.history[start:]):
            ready = self.ready
            if not ready:
                raise errors.OutOfRangeError(
                    None, None, f"The step cannot reach {name}: no node is ready "
                    f"({'finished' if self.finished else 'waiting'}).")
            pick = next((r for r in ready if r.name in needed), ready[0])
            self.step(pick)
        return self.history[start:]

    def resume(self, breakpoints=()) -> list[StepEvent]:
        """Step until the step finishes or a breakpoint hits (see module docstring)."""
        names = {b for b in (*self._breakpoints, *breakpoints) if isinstance(b, str)}
        preds = [b for b in (*self._breakpoints, *breakpoints) if callable(b)]
        for n in names:
            self._check_known(n)
        start = len(self.history)
        while True:
            ready = self.ready
            if not ready:
                break
            hit = next((r for r in ready if r.name in names
                        and r.key not in self._acknowledged), None)
            if hit is not None:
                self._acknowledged.add(hit.key)
                break
            event = self.step(ready[0])
            if any(p(event) for p in preds):
                break
        return self.history[start:]

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
                    f"{fused_into} (elementwise fusion; RewriterConfig.remapping=OFF keeps it).")
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


def _user_name(op) -> str:
    """Partition views of an op carry the user's op as ``original``; Send/Recv have none."""
    return user_op(op).name
