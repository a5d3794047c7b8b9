"""The dataflow executor: a fixed per-signature *plan* plus per-run *state*.

Plan (built once, cached by the session): nodes in topological order, each with its bound kernel,
input slot indices, output slot base, successor list (one entry per edge), initial pending count,
and whether it is expensive (worth a pool thread) or blocking. Every tensor of the pruned graph
has a slot in a flat list; fed tensors have slots filled before the run.

Run state (``Execution``): the slots, the pending counts, the remaining-use count of each slot (a
tensor is released at its last use unless fetched), a ready queue.

Three drivers share ``_execute`` and ``_propagate``:

* ``step()`` runs one ready node and reports it: the stepper and partial runs use it;
* ``run_dataflow()`` is the concurrent driver: the calling thread and inter-op pool workers each
  take a ready node, run it, and decrement its successors' pending counts; newly ready cheap nodes
  are run inline, newly ready expensive ones except one are handed to the pool (TF's
  ``ScheduleReady``), so chains never pay a thread hand-off while independent branches run in
  parallel (NumPy releases the GIL inside BLAS and ufunc loops);
* ``run_inline()`` is the precompiled straight-line schedule for plans with no blocking node and
  at most one expensive node: no pending counts, no locks, only the topological order and
  precomputed release lists.

Observers (tracing, stepping, live UI) attach through ``Execution.observer``; when it is None the
hot loops pay nothing for them.
"""

from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np

from dflab.framework import errors
from dflab.kernels.registry import get_kernel_def


class KernelContext:
    """What a kernel factory sees of the device it is bound to."""

    __slots__ = ("device", "device_type", "xp", "resources", "session")

    def __init__(self, device, device_type, xp, resources, session=None):
        self.device = device
        self.device_type = device_type
        self.xp = xp
        self.resources = resources
        self.session = session


class _Deref:
    """Wraps a kernel whose non-ref inputs may receive a variable reference (``VarState``)."""

    __slots__ = ("fn", "idx", "op")

    def __init__(self, fn, idx):
        self.fn = fn
        self.idx = idx

    def __call__(self, *args):
        args = list(args)
        for i in self.idx:
            args[i] = args[i].read()
        return self.fn(*args)


class PlanNode:
    __slots__ = ("op", "index", "fn", "inputs", "out_base", "n_out", "succ", "expensive",
                 "blocking", "takes_step", "releases")

    def __repr__(self):
        return f"<PlanNode {self.index} {self.op.name}>"


def _is_ref(t) -> bool:
    return t.dtype.is_ref_dtype


class ExecutorPlan:
    """The fixed part of executing one pruned graph: see the module docstring."""

    def __init__(self, ops_in_order, feeds, fetches, ctx_for_op, observer_names=None):
        self.ops = list(ops_in_order)
        self.feeds = list(feeds)
        self.fetches = list(fetches)
        fed = {id(t) for t in self.feeds}
        slot_of: dict[int, int] = {}
        n_slots = 0
        for t in self.feeds:
            slot_of[id(t)] = n_slots
            n_slots += 1
        index_of = {id(op): i for i, op in enumerate(self.ops)}
        nodes = []
        for i, op in enumerate(self.ops):
            node = PlanNode()
            node.op = op
            node.index = i
            node.out_base = n_slots
            node.n_out = len(op._outputs)
            for t in op._outputs:
                if id(t) not in fed:
                    slot_of[id(t)] = n_slots
                n_slots += 1
            node.succ = []
            node.releases = ()
            nodes.append(node)
        pending = [0] * len(nodes)
        uses = [0] * n_slots
        self.feed_consumers: list[list[int]] = [[] for _ in self.feeds]
        feed_pos = {id(t): k for k, t in enumerate(self.feeds)}
        for node in nodes:
            op = node.op
            ins = []
            for t in op._inputs:
                s = slot_of[id(t)]
                ins.append(s)
                uses[s] += 1
                if id(t) in fed:
                    self.feed_consumers[feed_pos[id(t)]].append(node.index)
                else:
                    nodes[index_of[id(t.op)]].succ.append(node.index)
                    pending[node.index] += 1
            for c in op._control_inputs:
                j = index_of.get(id(c))
                if j is not None:
                    nodes[j].succ.append(node.index)
                    pending[node.index] += 1
            node.inputs = tuple(ins)
            self._bind_kernel(node, ctx_for_op(op))
        self.fetch_slots = [slot_of[id(t)] for t in self.fetches]
        for s in self.fetch_slots:
            uses[s] += 1 << 30  # fetched tensors are never released
        self.nodes = nodes
        self.n_slots = n_slots
        self.initial_pending = pending
        self.initial_uses = uses
        self.roots = [i for i, p in enumerate(pending) if p == 0]
        self.has_blocking = any(n.blocking for n in nodes)
        self.n_expensive = sum(n.expensive for n in nodes)
        self._compute_releases()
        self.schedule = [(n.fn, n.inputs, n.out_base, n.n_out, n.releases) for n in nodes]
        self._compiled = None

    def _bind_kernel(self, node, ctx) -> None:
        op = node.op
        kd = get_kernel_def(op, ctx.device_type)
        try:
            fn = kd.factory(op, ctx)
        except errors.OpError as e:
            if e.op is None:
                e.op = op
                e.args = (e._format(),)
            raise
        except (ValueError, TypeError, NotImplementedError) as e:
            raise errors.InvalidArgumentError(None, op, str(e)) from None
        ref_inputs = op._op_def.ref_inputs
        deref = [i for i, t in enumerate(op._inputs) if _is_ref(t) and i not in ref_inputs]
        if deref and not getattr(fn, "accepts_refs", False):
            fn = _Deref(fn, deref)
        node.fn = fn
        node.takes_step = kd.takes_step
        node.expensive = op._op_def.expensive or op._op_def.blocking
        node.blocking = op._op_def.blocking

    def _compute_releases(self) -> None:
        """For the straight-line schedule: the slots whose last reader is each node."""
        last = {}
        for node in self.nodes:
            for s in node.inputs:
                last[s] = node.index
        per_node: dict[int, list[int]] = {}
        fetched = set(self.fetch_slots)
        for s, i in last.items():
            if s not in fetched:
                per_node.setdefault(i, []).append(s)
        for i, slots in per_node.items():
            self.nodes[i].releases = tuple(slots)

    @property
    def straight_line(self) -> bool:
        return not self.has_blocking and self.n_expensive < 2

    def compiled(self):
        """The straight-line schedule as one generated Python function (built on first use).

        Each tensor becomes a local variable and each node one line ``v7 = k3(v2, v5)``, so a
        step costs little more than the kernel calls themselves. The source is generated only
        from integer indices (no names or strings from the graph), so nothing from a graph or a
        file ever reaches ``compile``. A failing line maps back to its node through the
        traceback's line number.
        """
        if self._compiled is None:
            self._compiled = _compile_schedule(self)
        return self._compiled


def _attach_op(e: BaseException, op) -> errors.OpError:
    if isinstance(e, errors.OpError):
        if e.op is None:
            e.op = op
            e.args = (e._format(),)
        return e
    if isinstance(e, (ValueError, TypeError, IndexError, ZeroDivisionError, FloatingPointError)):
        return errors.InvalidArgumentError(None, op, f"{type(e).__name__}: {e}")
    if isinstance(e, MemoryError):
        return errors.ResourceExhaustedError(None, op, f"OOM when running {op.name}: {e}")
    return errors.InternalError(None, op, f"{type(e).__name__}: {e}")


class Execution:
    """Per-run state of one plan (see the module docstring)."""

    def __init__(self, plan: ExecutorPlan, feed_values=(), step_id: int = 0,
                 partial: bool = False):
        self.plan = plan
        self.step_id = step_id
        self.slots = [None] * plan.n_slots
        for k, v in enumerate(feed_values):
            self.slots[k] = v
        self.pending = list(plan.initial_pending)
        self.uses = list(plan.initial_uses)
        if partial:
            for consumers in plan.feed_consumers:
                for i in consumers:
                    self.pending[i] += 1
            self.ready = deque(i for i, p in enumerate(self.pending) if p == 0)
        else:
            self.ready = deque(plan.roots)
        self.executed = 0
        self.done_flags = [False] * len(plan.nodes)
        self.lock = threading.Lock()
        self.cancelled = threading.Event()
        self.error: BaseException | None = None
        self.observer = None
        self._outstanding = 0
        self._parallel = True
        self._finished = threading.Event()
        self.start_time = time.perf_counter()

    # --- the shared core ------------------------------------------------------------------
    def _execute(self, i: int) -> None:
        node = self.plan.nodes[i]
        slots = self.slots
        args = [slots[s] for s in node.inputs]
        obs = self.observer
        if obs is not None:
            obs.node_start(self, node)
        try:
            if node.takes_step:
                out = node.fn(self, *args)
            else:
                out = node.fn(*args)
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            raise _attach_op(e, node.op) from e
        if node.n_out == 1:
            slots[node.out_base] = out
        elif node.n_out:
            b = node.out_base
            for k, v in enumerate(out):
                slots[b + k] = v
        if obs is not None:
            obs.node_end(self, node)

    def _propagate(self, i: int) -> list[int]:
        """Mark node i done, release its inputs, return the successors it made ready."""
        plan_nodes = self.plan.nodes
        node = plan_nodes[i]
        pending, uses, slots = self.pending, self.uses, self.slots
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
                    new.append(j)
        return new

    # --- driver 1: single steps -------------------------------------------------------------
    def step(self, i: int | None = None) -> int:
        """Run one ready node (the first, or node ``i`` which must be ready); returns its index."""
        if not self.ready:
            raise errors.OutOfRangeError(None, None, "No node is ready to run.")
        if i is None:
            i = self.ready.popleft()
        else:
            try:
                self.ready.remove(i)
            except ValueError:
                raise errors.InvalidArgumentError(
                    None, self.plan.nodes[i].op, "node is not ready to run") from None
        self._execute(i)
        self.ready.extend(self._propagate(i))
        return i

    def provide_feed(self, k: int, value) -> None:
        """Partial runs: feed ``k`` arrives; its consumers lose one pending input."""
        self.slots[k] = value
        with self.lock:
            for j in self.plan.feed_consumers[k]:
                self.pending[j] -= 1
                if self.pending[j] == 0:
                    self.ready.append(j)

    @property
    def finished(self) -> bool:
        return self.executed == len(self.plan.nodes)

    # --- driver 2: straight-line ----------------------------------------------------------
    def run_inline(self) -> None:
        slots = self.slots
        if self.observer is not None:
            for i in range(len(self.plan.nodes)):
                self._execute(i)
                self._propagate(i)
            return
        fn, line_to_node = self.plan.compiled()
        if fn is not None:
            n_feeds = len(self.plan.feeds)
            try:
                out = fn(slots[:n_feeds])
            except BaseException as e:
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                raise _attach_op(e, self.plan.nodes[_failed_node(e, line_to_node)].op) from e
            for s, v in zip(self.plan.fetch_slots, out):
                slots[s] = v
            self.executed = len(self.plan.nodes)
            return
        i = 0
        try:
            for fn, ins, base, n_out, rel in self.plan.schedule:
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
            raise _attach_op(e, self.plan.nodes[i].op) from e
        self.executed = len(self.plan.nodes)

    # --- driver 3: concurrent dataflow ------------------------------------------------------
    def run_dataflow(self, pool, timeout: float | None = None, parallel: bool = True) -> None:
        """Run the step on this thread plus ``pool``. With ``parallel=False`` (one inter-op
        thread) only blocking nodes leave this thread, so nothing else runs concurrently."""
        nodes = self.plan.nodes
        if not nodes:
            return
        self._parallel = parallel
        self._outstanding = 1  # this thread
        ready = list(self.ready)
        self.ready.clear()
        self._work(pool, ready)
        if not self._finished.wait(timeout):
            self.cancelled.set()
            raise errors.DeadlineExceededError(
                None, None, f"Timed out after {timeout * 1000:.0f} ms waiting for the step to "
                f"finish ({self.executed} of {len(nodes)} nodes done)."
            )
        if self.error is not None:
            raise self.error

    def _submit(self, pool, j: int) -> None:
        with self.lock:
            self._outstanding += 1
        pool.submit(self._work, pool, [j])

    def _work(self, pool, ready: list[int]) -> None:
        """Run ``ready`` and whatever it makes ready: cheap nodes first, inline; one expensive
        node is held back to run here once no cheap work is left, any further expensive (and
        every blocking) node goes to the pool. A chain never changes threads; two branches that
        become ready together run in parallel."""
        nodes = self.plan.nodes
        cheap: list[int] = []
        held = None
        later: list[int] = []  # expensive nodes kept on this thread when not parallel
        try:
            pending = ready
            while True:
                for j in pending:
                    n = nodes[j]
                    if n.blocking:
                        self._submit(pool, j)
                    elif n.expensive:
                        if held is None:
                            held = j
                        elif self._parallel:
                            self._submit(pool, j)
                        else:
                            later.append(j)
                    else:
                        cheap.append(j)
                if cheap:
                    i = cheap.pop()
                elif held is not None:
                    i, held = held, None
                elif later:
                    i = later.pop(0)
                else:
                    break
                if self.cancelled.is_set():
                    return
                self._execute(i)
                pending = self._propagate(i)
        except BaseException as e:  # noqa: BLE001 - reported to the waiting caller
            with self.lock:
                if self.error is None:
                    self.error = e
            self.cancelled.set()
            self._finished.set()
        finally:
            with self.lock:
                self._outstanding -= 1
                done = self._outstanding == 0
            if done:
                self._finished.set()

    # --- results ------------------------------------------------------------------------------
    def fetch_values(self) -> list:
        out = []
        for t, s in zip(self.plan.fetches, self.plan.fetch_slots):
            try:
                out.append(to_client_value(self.slots[s]))
            except errors.OpError as e:
                raise _attach_op(e, t.op) from None
        return out


_MAX_COMPILED_NODES = 20000
_GENERATED_FILE = "<dflab straight-line schedule>"


def _compile_schedule(plan):
    """Generate ``run(feeds) -> fetches`` for a straight-line plan; (None, None) if too big."""
    if len(plan.nodes) > _MAX_COMPILED_NODES:
        return None, None
    lines = ["def run(F):"]
    line_to_node = {}
    if plan.feeds:
        lines.append("    " + ", ".join(f"v{k}" for k in range(len(plan.feeds))) + ", = F")
    fetched = set(plan.fetch_slots)
    for node in plan.nodes:
        call = f"k{node.index}(" + ", ".join(f"v{s}" for s in node.inputs) + ")"
        if node.n_out == 1:
            text = f"v{node.out_base} = {call}"
        elif node.n_out == 0:
            text = call
        else:
            outs = ", ".join(f"v{node.out_base + k}" for k in range(node.n_out))
            text = f"{outs}, = {call}"
        lines.append("    " + text)
        line_to_node[len(lines)] = node.index
        dead = [s for s in node.releases if s not in fetched]
        if dead:  # release tensors at their last use (peak memory of long chains)
            lines.append("    " + " = ".join(f"v{s}" for s in dead) + " = None")
    lines.append("    return (" + "".join(f"v{s}, " for s in plan.fetch_slots) + ")")
    # Kernels are bound as default arguments: fast local lookups inside the function.
    kernel_args = ", ".join(f"k{n.index}=K[{n.index}]" for n in plan.nodes)
    src = "def make(K):\n" + "\n".join("    " + ln for ln in lines) + "\n    return run\n"
    if kernel_args:
        src = src.replace("def run(F):", f"def run(F, {kernel_args}):", 1)
    namespace: dict = {}
    exec(compile(src, _GENERATED_FILE, "exec"), namespace)  # noqa: S102 - indices only
    run = namespace["make"]([n.fn for n in plan.nodes])
    # Line numbers in `src` are shifted by the `def make` header line.
    return run, {ln + 1: i for ln, i in line_to_node.items()}


def _failed_node(exc, line_to_node) -> int:
    tb = exc.__traceback__
    node = 0
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == _GENERATED_FILE:
            node = line_to_node.get(tb.tb_lineno, node)
        tb = tb.tb_next
    return node


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
