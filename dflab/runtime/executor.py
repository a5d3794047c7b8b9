"""The dataflow executor: a fixed per-signature *plan* plus per-run *state*.

The plan (``ExecutorPlan``: nodes, bound kernels, slots, edges, static frames) is built in
``dflab.runtime.executor_plan``; this module holds the per-run state (``Execution``) and
the drivers that run a step on it. Invariant: everything a step writes lives in its
``Execution``; the plan is only read, so any number of steps can run one plan at once.

Run state (``Execution``) follows TF's executor (and Yu et al., EuroSys 2018): a *frame
instance* per execution of a loop (keyed by parent frame instance, parent iteration and frame
name), and inside it one *iteration state* per live iteration, holding that iteration's tensor
slots, pending counts and deadness. ``NextIteration`` starts iteration i+1 while iteration i may
still be running, up to ``parallel_iterations`` iterations in flight; iteration i is complete
once nothing of it is ready or running and iteration i-1 is complete; then its state is freed.
A frame is done when its last iteration completes; its ``Exit`` nodes that never produced a live
value then send *dead* values out, so a loop inside an untaken ``cond`` branch is dead as a whole.

Deadness: a ``Switch`` sends its input to one port and ``DEAD`` to the other; a node with a dead
input (or a dead control input) produces dead outputs without running; a ``Merge`` runs as soon as
one live input arrives, or produces dead outputs once all its inputs of this iteration are dead;
a dead ``NextIteration`` ends its loop's chain.

Three drivers share ``_run``/``_propagate``:

* ``step()`` runs one ready node and reports it: the stepper and partial runs use it;
* ``start()``/``wait()`` (``run_dataflow()``) is the concurrent driver: the calling thread and
  inter-op pool workers each take a ready node, run it, and propagate; newly ready cheap nodes are
  run inline, newly ready expensive ones except one are handed to the pool (TF's
  ``ScheduleReady``), so chains never pay a thread hand-off while independent branches run in
  parallel (NumPy releases the GIL inside BLAS and ufunc loops). Asynchronous kernels (``_Recv``)
  hold no thread while they wait: they call back when their value arrives;
* ``run_inline()`` is the precompiled straight-line schedule for plans without control flow,
  blocking or asynchronous nodes, used when there is nothing to run in parallel: at most one
  expensive node, or one stream that every expensive node must hold in turn anyway (a serial
  device, or one inter-op thread).

Observers (tracing, stepping, live UI) attach through ``Execution.observer`` and are called as
``node_start(ex, node, frame, iteration)`` and ``node_end(ex, node, frame, iteration, outputs)``;
when it is None the hot loops pay nothing for them.
"""

from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np

from dflab.framework import errors
from dflab.kernels.control_flow_kernels import DEAD
from dflab.kernels.fp_errors import ignore_fp_errors, restore_fp_errors
from dflab.runtime.executor_plan import SCHEDULE_FILE, ExecutorPlan, on_stream
from dflab.runtime.plan_node import (
    ENTER,
    EXIT,
    FUSED,
    MERGE,
    NEXT,
    ROOT,
    FrameInfo,
    failed_node,
    node_error,
)


class _Frame:
    """One execution of a static frame (the root, or one run of a while loop)."""

    __slots__ = ("info", "parent", "parent_iter", "iters", "count", "n_iters", "pending_enters",
                 "invariants", "deferred", "live_exits", "children", "fused_inputs")

    def __init__(self, info: FrameInfo, parent=None, parent_iter: int = 0):
        self.info = info
        self.parent = parent
        self.parent_iter = parent_iter
        self.iters: dict[int, _Iter] = {0: _Iter(0, info)}
        self.count = 0  # the highest iteration started
        self.n_iters = 1  # iterations started and not complete
        self.pending_enters = info.n_enters
        self.invariants: list = []  # (Enter node, value) of loop-invariant Enters
        self.deferred: list = []  # NextIteration values waiting for a free iteration
        self.live_exits: set = set()
        self.children: dict = {}
        self.fused_inputs = None  # Enter values, when the frame runs as a fused loop

    @property
    def name(self) -> str:
        return self.info.name

    def __repr__(self):
        where = f" in {self.parent.name or '(root)'}:{self.parent_iter}" if self.parent else ""
        return f"<Frame {self.name or '(root)'}{where}>"


class _Iter:
    """State of one iteration of a frame: tensor slots, pending counts, deadness."""

    __slots__ = ("n", "slots", "pending", "outstanding", "dead_ctrl", "merge")

    def __init__(self, n: int, info: FrameInfo):
        self.n = n
        self.slots = [None] * info.n_slots
        self.pending = list(info.initial_pending)
        self.outstanding = 0  # nodes ready or running, plus live child frames
        self.dead_ctrl: set = set()
        self.merge: dict = {}  # local index -> [dead inputs, chosen input pos, chosen slot]


class Execution:
    """Per-run state of one plan (see the module docstring)."""

    def __init__(self, plan: ExecutorPlan, feed_values=(), step_id: int = 0,
                 partial: bool = False):
        self.plan = plan
        self.step_id = step_id
        self.root = _Frame(plan.frames[ROOT])
        self._root_iter = it = self.root.iters[0]
        for k, v in enumerate(feed_values):
            it.slots[k] = v
        self.uses = list(plan.initial_uses)
        if partial:
            for consumers in plan.feed_consumers:
                for i in consumers:
                    it.pending[plan.nodes[i].local] += 1
            roots = [i for i in plan.frames[ROOT].nodes if it.pending[plan.nodes[i].local] == 0]
        else:
            roots = plan.roots
        self.ready = deque((i, self.root, it) for i in roots)
        it.outstanding = self._inflight = len(self.ready)
        self.executed = 0
        self.done_flags = [False] * len(plan.nodes)
        self.lock = threading.Lock()
        self._cancelled = None  # created on first use: most steps never need one
        self.error: BaseException | None = None
        self.error_callback = None
        self.observer = None
        self.rendezvous = None
        self._pool = None
        self._stream = None  # the device's stream, when expensive nodes run one at a time
        # What a thread running this step's kernels enters once per run (a GPU's device,
        # stream and memory pool: ``Device.kernel_scope``), instead of once per kernel.
        self.scope = None
        # Fused loops only when the step runs unobserved: stepping and tracing see real frames.
        self._fuse = False
        self._finished = None  # created by start(): the straight-line driver needs none
        self.start_time = time.perf_counter()
        if plan.cf:
            self._run, self._propagate = self._run_cf, self._propagate_cf
        else:
            self._run, self._propagate = self._run_flat, self._propagate_flat

    @property
    def cancelled(self) -> threading.Event:
        """Set when the step is cancelled (timeout, error): blocking kernels poll it."""
        ev = self._cancelled
        if ev is None:
            with self.lock:
                if self._cancelled is None:
                    self._cancelled = threading.Event()
                ev = self._cancelled
        return ev

    def _signal_finished(self) -> None:
        if self._finished is not None:
            self._finished.set()

    @property
    def slots(self) -> list:
        """The root frame's tensor slots."""
        return self._root_iter.slots

    @property
    def ready_nodes(self) -> list[int]:
        return [item[0] for item in self.ready]

    # --- running one node -----------------------------------------------------------------
    def _call(self, node, args):
        try:
            if node.takes_step:
                return node.fn(self, *args)
            return node.fn(*args)
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            raise node_error(e, node.op) from e

    def _run_flat(self, item):
        i, frame, it = item
        node = self.plan.nodes[i]
        slots = it.slots
        obs = self.observer
        if obs is not None:
            obs.node_start(self, node, frame, 0)
        out = self._call(node, [slots[s] for s in node.inputs])
        if obs is not None:
            obs.node_end(self, node, frame, 0, _as_outputs(out, node.n_out))
        return out

    def _run_cf(self, item):
        """Run a node unless it is dead; returns (outputs, dead)."""
        i, frame, it = item
        node = self.plan.nodes[i]
        if node.kind == FUSED:
            values = frame.fused_inputs
            if any(v is DEAD for v in values):  # a loop on an untaken branch
                return (DEAD,) * node.n_out, True
            return node.fn.run(self, values, self.plan.nodes), False
        obs = self.observer
        if obs is not None:
            obs.node_start(self, node, frame, it.n)
        dead = bool(it.dead_ctrl) and node.local in it.dead_ctrl
        if node.accepts_dead:  # it runs anyway, and is told its inputs are dead
            if node.inputs:
                args = [DEAD if dead else it.slots[s] for s in node.inputs]
            else:  # only control inputs: one DEAD argument says they were dead
                args = [DEAD] if dead else []
            if node.frame_tagged:
                args.insert(0, frame_tag(frame, it.n))
            out = self._call(node, args)
            if obs is not None:
                obs.node_end(self, node, frame, it.n, _as_outputs(out, node.n_out))
            return out, False
        if node.kind == MERGE:
            st = it.merge[node.local]
            dead = dead or st[1] < 0
            args = None if dead else (it.slots[st[2]], st[1])
        else:
            args = [it.slots[s] for s in node.inputs]
            dead = dead or any(a is DEAD for a in args)
        if dead:
            out = DEAD if node.n_out == 1 else (DEAD,) * node.n_out
        else:
            if node.frame_tagged:
                args.insert(0, frame_tag(frame, it.n))
            out = self._call(node, args)
        if obs is not None:
            obs.node_end(self, node, frame, it.n, _observed(out, node.n_out, dead))
        return out, dead

    # --- propagation --------------------------------------------------------------------------
    def _propagate_flat(self, item, out) -> list:
        """Store node i's outputs, release its inputs, return the successors it made ready."""
        i, frame, it = item
        node = self.plan.nodes[i]
        slots = it.slots
        pending, uses = it.pending, self.uses
        # An output no node reads and no fetch takes is not kept: a value held in a slot until
        # the execution is dropped (a resource update's trailing read, say) would make the
        # variable's next in-place write copy its whole buffer first.
        if node.n_out == 1:
            if uses[node.out_base]:
                slots[node.out_base] = out
        elif node.n_out:
            b = node.out_base
            for k, v in enumerate(out):
                if uses[b + k]:
                    slots[b + k] = v
        new = []
        with self.lock:
            self.done_flags[i] = True
            self.executed += 1
            for s in node.inputs:
                u = uses[s] - 1
                uses[s] = u
                if u == 0:
                    slots[s] = None
            for j in node.succ:
                p = pending[j] - 1
                pending[j] = p
                if p == 0:
                    new.append((j, frame, it))
            self._inflight += len(new) - 1
            if self._inflight == 0:
                self._signal_finished()
        return new

    def _propagate_cf(self, item, result) -> list:
        i, frame, it = item
        out, dead = result
        node = self.plan.nodes[i]
        if node.kind == FUSED:
            return self._propagate_fused(item, out, dead)
        outs = _as_outputs(out, node.n_out)
        new: list = []
        with self.lock:
            self.done_flags[i] = True
            self.executed += 1
            if frame is self.root:
                uses, slots = self.uses, it.slots
                for s in node.inputs:
                    u = uses[s] - 1
                    uses[s] = u
                    if u == 0:
                        slots[s] = None
            kind = node.kind
            if kind == ENTER:
                self._enter(node, frame, it, outs[0], new)
            elif kind == EXIT:
                if outs[0] is not DEAD:  # dead exits leave the frame when it is done
                    frame.live_exits.add(i)
                    self._deliver(node, frame.parent, frame.parent.iters[frame.parent_iter],
                                  outs, False, new)
            elif kind == NEXT:
                if outs[0] is not DEAD:  # a dead NextIteration ends the chain
                    self._next_iteration(node, frame, it, outs[0], new)
            else:
                self._deliver(node, frame, it, outs, dead, new)
            it.outstanding -= 1
            if it.outstanding == 0 and frame.parent is not None:
                self._iteration_idle(frame, it, new)
            self._inflight += len(new) - 1
            if self._inflight == 0:
                self._signal_finished()
        return new

    def _propagate_fused(self, item, outs, dead) -> list:
        """A fused loop finished: its Exit values enter the parent iteration."""
        i, child, pit = item
        new: list = []
        nodes = self.plan.nodes
        with self.lock:
            self.executed += 1
            for j in child.info.nodes:
                self.done_flags[j] = True
            parent = child.parent
            for e, v in zip(child.info.exits, outs):
                self._deliver(nodes[e], parent, pit, (v,), dead, new)
            del parent.children[(child.info.id, child.parent_iter)]
            pit.outstanding -= 2  # the fused node, and the child frame it replaced
            if pit.outstanding == 0 and parent.parent is not None:
                self._iteration_idle(parent, pit, new)
            self._inflight += len(new) - 1
            if self._inflight == 0:
                self._signal_finished()
        return new

    def _deliver(self, node, frame, it, outs, dead, new) -> None:
        """Write ``outs`` into iteration ``it`` of ``frame``; count down node's successors."""
        slots = it.slots
        b = node.out_base
        uses = self.uses if frame is self.root else None  # see _propagate_flat
        for k, v in enumerate(outs):
            if uses is None or uses[b + k]:  # a Merge reading a dead input is one of its uses
                slots[b + k] = v
        nodes = self.plan.nodes
        pending = it.pending
        for j, slot, pos in node.edges:
            c = nodes[j]
            loc = c.local
            if slot < 0:
                if dead:
                    it.dead_ctrl.add(loc)
            elif c.kind == MERGE and not self._merge_arrival(c, it, slot, pos):
                continue
            p = pending[loc] - 1
            pending[loc] = p
            if p == 0:
                it.outstanding += 1
                new.append((j, frame, it))

    def _merge_arrival(self, merge, it, slot, pos) -> bool:
        """A data input reached a Merge: True when it decides the Merge (first live input, or
        the last of the inputs expected in this iteration, all dead)."""
        st = it.merge.get(merge.local)
        if st is None:
            st = it.merge[merge.local] = [0, -1, -1]
        elif st[1] != -1:
            return False  # already decided: later inputs are ignored
        if it.slots[slot] is DEAD:
            st[0] += 1
            if merge.n_back == 0:
                expected = merge.n_forward
            else:
                expected = merge.n_forward if it.n == 0 else merge.n_back
            if st[0] < expected:
                return False
            st[1] = -2
            return True
        st[1], st[2] = pos, slot
        return True

    def _enter(self, node, frame, it, value, new) -> None:
        key = (node.out_frame, it.n)
        child = frame.children.get(key)
        if child is None:
            child = _Frame(self.plan.frames[node.out_frame], frame, it.n)
            frame.children[key] = child
            it.outstanding += 1  # a live child frame keeps its parent iteration open
        child.pending_enters -= 1
        info = child.info
        if info.fused is not None and self._fuse:
            if child.fused_inputs is None:
                child.fused_inputs = [None] * len(self.plan.nodes[info.fused].fn.enters)
            child.fused_inputs[self.plan.nodes[info.fused].fn.enter_pos[node.index]] = value
            if child.pending_enters == 0:  # all inputs are in: run the loop as one node
                it.outstanding += 1
                new.append((info.fused, child, it))
            return
        dead = value is DEAD
        if node.is_constant:  # loop invariant: available to every iteration
            child.invariants.append((node, value))
            for cit in list(child.iters.values()):
                self._deliver(node, child, cit, (value,), dead, new)
        else:
            self._deliver(node, child, child.iters[0], (value,), dead, new)
        if child.pending_enters == 0:
            first = child.iters.get(0)
            if first is not None and first.outstanding == 0:
                self._iteration_idle(child, first, new)

    def _next_iteration(self, node, frame, it, value, new) -> None:
        nxt = frame.iters.get(it.n + 1)
        if nxt is None:
            if frame.n_iters >= frame.info.parallel_iterations:
                frame.deferred.append((node, value))
                return
            nxt = self._new_iteration(frame, new)
        self._deliver(node, frame, nxt, (value,), False, new)

    def _new_iteration(self, frame, new):
        frame.count += 1
        nit = _Iter(frame.count, frame.info)
        frame.iters[frame.count] = nit
        frame.n_iters += 1
        for enter, value in frame.invariants:
            self._deliver(enter, frame, nit, (value,), value is DEAD, new)
        return nit

    def _iteration_idle(self, frame, it, new) -> None:
        """Nothing of ``it`` is ready or running: complete it (and later ones) if possible."""
        while True:
            n = it.n
            if it.outstanding or (n == 0 and frame.pending_enters) or (n - 1) in frame.iters:
                return
            del frame.iters[n]
            frame.n_iters -= 1
            if frame.deferred:
                waiting, frame.deferred = frame.deferred, []
                nit = self._new_iteration(frame, new)
                for node, value in waiting:
                    self._deliver(node, frame, nit, (value,), False, new)
            nxt = frame.iters.get(n + 1)
            if nxt is None:
                if not frame.iters:
                    self._frame_done(frame, new)
                return
            it = nxt

    def _frame_done(self, frame, new) -> None:
        parent = frame.parent
        pit = parent.iters[frame.parent_iter]
        nodes = self.plan.nodes
        for i in frame.info.exits:
            if i not in frame.live_exits:
                self._deliver(nodes[i], parent, pit, (DEAD,), True, new)
        del parent.children[(frame.info.id, frame.parent_iter)]
        pit.outstanding -= 1
        if pit.outstanding == 0 and parent.parent is not None:
            self._iteration_idle(parent, pit, new)

    # --- driver 1: single steps -------------------------------------------------------------
    def step(self, i=None) -> int:
        """Run one ready node: the first, node index ``i``, or the ready item ``i``; returns
        the node's index."""
        if not self.ready:
            raise errors.OutOfRangeError(None, None, "No node is ready to run.")
        if i is None:
            item = self.ready.popleft()
        else:
            item = i if isinstance(i, tuple) else next(
                (r for r in self.ready if r[0] == i), None)
            if item is None or item not in self.ready:
                node = self.plan.nodes[i[0] if isinstance(i, tuple) else i]
                raise errors.InvalidArgumentError(None, node.op, "node is not ready to run")
            self.ready.remove(item)
        if self.plan.nodes[item[0]].is_async:
            self._start_async(item)
        else:
            token = ignore_fp_errors()
            try:
                self.ready.extend(self._propagate(item, self._run(item)))
            finally:
                restore_fp_errors(token)
        if self.error is not None:
            raise self.error
        return item[0]

    def provide_feed(self, k: int, value) -> None:
        """Partial runs: feed ``k`` arrives; its consumers lose one pending input."""
        it = self._root_iter
        it.slots[k] = value
        with self.lock:
            for j in self.plan.feed_consumers[k]:
                loc = self.plan.nodes[j].local
                it.pending[loc] -= 1
                if it.pending[loc] == 0:
                    it.outstanding += 1
                    self._inflight += 1
                    self.ready.append((j, self.root, it))

    @property
    def finished(self) -> bool:
        return not self.ready and self._inflight == 0

    # --- asynchronous kernels -----------------------------------------------------------------
    def _start_async(self, item) -> None:
        i, frame, it = item
        node = self.plan.nodes[i]
        args = [it.slots[s] for s in node.inputs]
        if node.frame_tagged:
            args.insert(0, frame_tag(frame, it.n))
        if self.plan.cf and (any(a is DEAD for a in args) or node.local in it.dead_ctrl):
            dead = DEAD if node.n_out == 1 else (DEAD,) * node.n_out
            if self.observer is not None:
                self.observer.node_start(self, node, frame, it.n)
            self._async_done(item, (dead, True))
            return
        called = []

        def done(outputs=None, error=None):
            if called:
                raise RuntimeError(f"done() called twice by the kernel of {node.op.name}")
            called.append(True)
            if error is not None:
                self._fail(node_error(error, node.op))
            elif not self.cancelled.is_set():
                self._async_done(item, (outputs, False) if self.plan.cf else outputs)

        if self.observer is not None:
            self.observer.node_start(self, node, frame, it.n)
        try:
            node.fn(self, done, *args)
        except BaseException as e:  # noqa: BLE001 - reported like any kernel error
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            if not called:
                called.append(True)
                self._fail(node_error(e, node.op))

    def _async_done(self, item, result) -> None:
        if self.plan.cf and not result[1]:  # a dead value received: its consumers are dead
            out, n_out = result[0], self.plan.nodes[item[0]].n_out
            if n_out and all(v is DEAD for v in _as_outputs(out, n_out)):
                result = (out, True)
        obs = self.observer
        if obs is not None:
            i, frame, it = item
            node = self.plan.nodes[i]
            out = result[0] if self.plan.cf else result
            dead = self.plan.cf and result[1]
            obs.node_end(self, node, frame, it.n, _observed(out, node.n_out, dead))
        new = self._propagate(item, result)
        if self._pool is None:  # stepping: the caller runs what became ready
            self.ready.extend(new)
        elif new:
            self._pool.submit(self._work, new)

    # --- driver 2: straight-line ----------------------------------------------------------
    def run_inline(self, stream=None) -> None:
        """Run an inline-capable plan to its end on this thread; with a ``stream``, each
        expensive kernel holds it while it runs (as ``run_dataflow`` does). Kernels run with
        NumPy's floating-point errors ignored (as every driver runs them: TF is silent)."""
        token = ignore_fp_errors()
        scope = self.scope
        try:
            if scope is None:
                self._run_inline(stream)
            else:
                with scope:
                    self._run_inline(stream)
        finally:
            restore_fp_errors(token)

    def _run_inline(self, stream) -> None:
        slots = self.slots
        self._stream = stream
        if self.observer is not None:
            # The compiled schedule's order, node by node, so that a traced or watched step
            # shows what an unobserved one does (its memory high-water mark included).
            self.ready.clear()
            root, it = self.root, self._root_iter
            for i in range(len(self.plan.nodes)):
                self._run_one((i, root, it))
            return
        self.ready.clear()
        fn, line_to_node = self.plan.compiled(stream)
        if fn is not None:
            n_feeds = len(self.plan.feeds)
            try:
                out = fn(slots[:n_feeds], self)
            except BaseException as e:
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                failed = failed_node(e, line_to_node, SCHEDULE_FILE)
                raise node_error(e, self.plan.nodes[failed].op) from e
            for s, v in zip(self.plan.fetch_slots, out):
                slots[s] = v
            self._all_done()
            return
        i = 0
        nodes = self.plan.nodes
        try:
            for fn, ins, base, n_out, rel in self.plan.schedule:
                if stream is not None and nodes[i].expensive:
                    fn = on_stream(fn, stream)
                out = fn(*[slots[s] for s in ins])
                if n_out == 1:
                    slots[base] = out
                elif n_out:
                    slots[base:base + n_out] = out
                for s in rel:
                    slots[s] = None
                i += 1
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            raise node_error(e, self.plan.nodes[i].op) from e
        self._all_done()

    def _all_done(self) -> None:
        self.executed = len(self.plan.nodes)
        self._inflight = 0
        self._signal_finished()

    # --- driver 3: concurrent dataflow ------------------------------------------------------
    def run_dataflow(self, pool, timeout: float | None = None, stream=None) -> None:
        """Run the step on this thread plus ``pool``. With a ``stream`` (a serial device, or one
        inter-op thread) expensive nodes run one at a time on it and only blocking nodes leave
        this thread; without one, independent expensive nodes run in parallel."""
        # With a deadline the calling thread only waits, so that it can give up on time even
        # when the step never ends (an endless loop of cheap nodes never leaves a thread).
        self.start(pool, stream, inline=timeout is None)
        self.wait(timeout)

    def start(self, pool, stream=None, inline: bool = False) -> None:
        """Begin the step: run the ready nodes on this thread (``inline``) or hand them to
        ``pool`` and return at once. ``stream``: see ``run_dataflow``."""
        self._pool = pool
        self._stream = stream
        self._fuse = self.observer is None
        self._finished = threading.Event()
        if self.error is not None:
            # Cancelled before it started (another partition of the step failed first): the
            # cancel could not signal an event that did not exist yet.
            self._finished.set()
            return
        items = list(self.ready)
        self.ready.clear()
        if not items:
            if self._inflight == 0:
                self._signal_finished()
            return
        if inline:
            self._work(items)
        else:
            pool.submit(self._work, items)

    def wait(self, timeout: float | None = None) -> None:
        """Block until the step is finished; raise its error, or time out and cancel it."""
        if not self._finished.wait(timeout):
            self.cancel(errors.DeadlineExceededError(
                None, None, f"Timed out after {timeout * 1000:.0f} ms waiting for the step to "
                f"finish ({self.executed} nodes run, {self._inflight} ready, running or "
                f"waiting){self._loops_running()}."))
        if self.error is not None:
            raise self.error

    def _loops_running(self) -> str:
        """Which while loops are running, and at which iteration (for timeout messages)."""
        with self.lock:
            found, stack = [], list(self.root.children.values())
            while stack:
                f = stack.pop()
                where = f" (created at {f.info.site})" if f.info.site else ""
                at = ("running as one fused loop" if f.fused_inputs is not None
                      else f"at iteration {f.count}")
                found.append(f"'{f.name.rstrip('/').removesuffix('/while_context')}'{where} {at}")
                stack.extend(f.children.values())
        return "; inside while loop " + ", ".join(found) if found else ""

    def cancel(self, error: BaseException) -> None:
        """Stop the step: nothing more is scheduled, waiters wake up with ``error``."""
        self._fail(error)

    def _fail(self, e: BaseException) -> None:
        with self.lock:
            first = self.error is None
            if first:
                self.error = e
        self.cancelled.set()
        self._signal_finished()
        if first and self.error_callback is not None:
            self.error_callback(e)

    def _submit(self, item) -> None:
        self._pool.submit(self._work, [item], True)

    def _run_one(self, item) -> list:
        node = self.plan.nodes[item[0]]
        if node.is_async:
            self._start_async(item)
            return []
        if node.expensive and self._stream is not None and not node.blocking:
            # One stream: expensive nodes one at a time, even when a Recv's completion has
            # brought a second thread into this step. A blocking node (a queue wait) never
            # holds the stream: it would stall every other step on the device.
            with self._stream:
                return self._propagate(item, self._run(item))
        return self._propagate(item, self._run(item))

    def _work(self, ready: list, direct: bool = False) -> None:
        """Run ``ready`` and whatever it makes ready: cheap nodes first, inline; one expensive
        node is held back to run here once no cheap work is left, any further expensive (and
        every blocking) node goes to the pool. A chain never changes threads; two branches that
        become ready together run in parallel."""
        nodes = self.plan.nodes
        cheap: list = []
        held = None
        later: list = []  # expensive nodes kept on this thread when not parallel
        token = ignore_fp_errors()
        scope = self.scope
        entered = False
        try:
            if scope is not None:  # (inside: a failure to enter fails the step, not the pool)
                scope.__enter__()
                entered = True
            # A submitted node runs here as it is: it was already classified.
            pending = self._run_one(ready[0]) if direct else ready
            while True:
                for item in pending:
                    n = nodes[item[0]]
                    if n.blocking:
                        self._submit(item)
                    elif n.expensive:
                        if held is None:
                            held = item
                        elif self._stream is None:
                            self._submit(item)
                        else:
                            later.append(item)
                    else:
                        cheap.append(item)
                if cheap:
                    item = cheap.pop()
                elif held is not None:
                    item, held = held, None
                elif later:
                    item = later.pop(0)
                else:
                    break
                if self.error is not None:  # cancelled: _fail sets error before the event
                    return
                pending = self._run_one(item)
        except BaseException as e:  # noqa: BLE001 - reported to the waiting caller
            self._fail(e)
        finally:
            if entered:
                scope.__exit__(None, None, None)
            restore_fp_errors(token)

    # --- results ------------------------------------------------------------------------------
    def fetch_values(self) -> list:
        out = []
        slots = self.slots
        for t, s in zip(self.plan.fetches, self.plan.fetch_slots):
            v = slots[s]
            if v is DEAD or v is None:
                why = ("it is on a branch of a cond that was not taken" if v is DEAD
                       else "the step ended before it was computed")
                raise errors.InvalidArgumentError(
                    None, t.op, f"Fetched tensor {t.name} has no value: {why}.")
            try:
                out.append(to_client_value(v))
            except errors.OpError as e:
                raise node_error(e, t.op) from None
        return out


def frame_tag(frame, iteration: int) -> str:
    """Where a node runs, as text the same in every partition of a step: the frame names and
    iteration numbers from the outermost loop in (``""`` in the root frame)."""
    parts = []
    while frame.parent is not None:
        parts.append(f"{frame.name}:{iteration}")
        frame, iteration = frame.parent, frame.parent_iter
    return "/".join(reversed(parts))


def _observed(out, n_out: int, dead: bool) -> tuple:
    """The outputs an observer is shown: a dead node without outputs (an update on an untaken
    branch, a loop's exiting iteration) shows one ``DEAD``, so it is not taken for one that ran."""
    outs = _as_outputs(out, n_out)
    return (DEAD,) if dead and not outs else outs


def _as_outputs(out, n_out: int) -> tuple:
    if n_out == 1:
        return (out,)
    return tuple(out) if n_out else ()


def to_client_value(v):
    """What ``Session.run`` hands back: never an alias of state, 0-d arrays as NumPy scalars."""
    if hasattr(v, "read") and not isinstance(v, np.ndarray):
        v = v.read()
    if isinstance(v, np.ndarray):
        if v.ndim == 0:
            return v[()]
        if not v.flags.writeable:
            return v.copy()
    return v
