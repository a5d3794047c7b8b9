"""The executor's fixed *plan*: what running one pruned graph needs that is the same every step.

Built once per signature and cached by the session (TF keeps per-graph executor state apart from
per-run state the same way; the per-run part is ``Execution`` in ``dflab.runtime.executor``):
nodes in topological order (loop back edges aside), each with its bound kernel, input slots,
output slots, out-edges, initial pending count, and whether it is expensive (worth a pool
thread), blocking or asynchronous. Plans with dynamic control flow also carry *static frames*:
every node reads its inputs in one frame (the root frame, or the body of a ``while_loop``) and
writes its outputs in one frame; ``Enter`` writes into its child frame, ``Exit`` into the parent
frame. A simple loop frame also gets one extra node that runs the whole loop
(``dflab.runtime.fused_loops``), and a plan without control flow can be compiled into one
straight-line Python function (``_compile_schedule``).

Invariant: running a step never changes its plan (apart from compiling the straight-line
schedule once, on first use); everything a step writes (tensor slots, pending counts, frames,
deadness) lives in its ``Execution``, so one plan serves every step that runs it, concurrently.
"""

from __future__ import annotations

from dflab.framework import errors
from dflab.framework.op_kinds import BACK_EDGE_OPS, CONTROL_FLOW_OPS
from dflab.kernels.registry import get_kernel_def
from dflab.runtime.fused_loops import fuse_frame
from dflab.runtime.plan_node import (
    ENTER,
    EXIT,
    FUSED,
    KINDS,
    MERGE,
    NEXT,
    PLAIN,
    ROOT,
    FrameInfo,
    PlanNode,
    node_error,
)


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


class _DerefMerge:
    """A ``Merge`` runs on its one live input, given as ``(value, index)``: it reads the
    variable when that input is a reference (a branch ending in a reference variable's
    ``assign_add``, the other in a value), as TF's Merge of a ref and a value does."""

    __slots__ = ("fn", "refs")

    def __init__(self, fn, refs):
        self.fn = fn
        self.refs = refs

    def __call__(self, value, index):
        return self.fn(value.read() if index in self.refs else value, index)


def _is_ref(t) -> bool:
    return t.dtype.is_ref_dtype


class ExecutorPlan:
    """The fixed part of executing one pruned graph: see the module docstring."""

    def __init__(self, ops_in_order, feeds, fetches, ctx_for_op, observer_names=None,
                 control_flow=False, serial=False):
        """``serial``: the plan's expensive kernels will run one at a time on a stream (a GPU
        partition's), so a loop holding some can still run as one fused node, which holds
        the stream while it runs."""
        self.ops = list(ops_in_order)
        self.feeds = list(feeds)
        self.fetches = list(fetches)
        self.cf = control_flow or any(op.type in CONTROL_FLOW_OPS for op in self.ops)
        index_of = {id(op): i for i, op in enumerate(self.ops)}
        for i, op in enumerate(self.ops):
            # A fused node produces the outputs of the op it replaced (dflab.runtime.fusion):
            # consumers find it through their input tensors' op.
            for t in op.outputs:
                index_of.setdefault(id(t.op), i)
        fed = {id(t): k for k, t in enumerate(self.feeds)}
        nodes = []
        for i, op in enumerate(self.ops):
            node = PlanNode()
            node.op = op
            node.index = i
            node.kind = KINDS.get(op.type, PLAIN)
            node.n_out = len(op.outputs)
            node.releases = ()
            node.is_constant = bool(op.attrs.get("is_constant", False))
            # Runs even on dead inputs (a loop-gradient accumulator records "dead" too).
            node.accepts_dead = bool(op.op_def.extra.get("accepts_dead", False))
            nodes.append(node)
        self.nodes = nodes
        self.frames = [FrameInfo(ROOT, "", None, 1)]
        self._assign_frames(index_of, fed)
        slot_of = self._assign_slots()
        self._wire(index_of, fed, slot_of)
        for node in nodes:
            self._bind_kernel(node, ctx_for_op(node.op))
        self.fetch_slots = []
        for t in self.fetches:
            if id(t) not in fed and nodes[index_of[id(t.op)]].out_frame != ROOT:
                raise errors.InvalidArgumentError(
                    None, t.op, f"Cannot fetch {t.name}: it is computed inside a while loop "
                    "(fetch an output of the loop instead).")
            self.fetch_slots.append(fed[id(t)] if id(t) in fed else slot_of[id(t)])
        uses = [0] * self.frames[ROOT].n_slots
        for node in nodes:
            if node.in_frame == ROOT:
                for s in node.inputs:
                    uses[s] += 1
        for s in self.fetch_slots:
            uses[s] += 1 << 30  # fetched tensors are never released
        self.n_slots = self.frames[ROOT].n_slots
        self.initial_pending = self.frames[ROOT].initial_pending
        self.initial_uses = uses
        self.roots = [i for i in self.frames[ROOT].nodes
                      if self.initial_pending[nodes[i].local] == 0]
        self.has_blocking = any(n.blocking or n.is_async for n in nodes)
        self.n_expensive = sum(n.expensive for n in nodes)
        self._compute_releases()
        self.schedule = [(n.fn, n.inputs, n.out_base, n.n_out, n.releases) for n in nodes]
        self._compiled = None
        for frame in self.frames[1:]:
            self._fuse(frame, serial)

    # --- frames, slots and edges --------------------------------------------------------------
    def _assign_frames(self, index_of, fed) -> None:
        """Give every node the static frame it reads in and the one it writes in."""
        nodes = self.nodes
        child_of: dict[tuple, int] = {}
        for node in nodes:
            op = node.op
            if not self.cf:
                node.in_frame = node.out_frame = ROOT
                continue
            producers = [t.op for t in op.inputs if id(t) not in fed]
            if node.kind == MERGE:  # a loop Merge's back edge comes from a later node
                producers = [p for p in producers if p.type not in BACK_EDGE_OPS]
            if not producers:
                producers = [c for c in op.control_inputs if id(c) in index_of]
            found = {nodes[index_of[id(p)]].out_frame for p in producers}
            if len(found) > 1:
                names = ", ".join(sorted(self.frames[f].name or "(root)" for f in found))
                raise errors.InvalidArgumentError(
                    None, op, f"{op.name} takes inputs from different loop frames ({names}); "
                    "tensors enter a while loop only through Enter (build loops with "
                    "tf.while_loop).")
            node.in_frame = found.pop() if found else ROOT
            if node.kind == ENTER:
                key = (node.in_frame, op.attrs.get("frame_name", ""))
                if key not in child_of:
                    child_of[key] = len(self.frames)
                    self.frames.append(FrameInfo(len(self.frames), key[1], node.in_frame,
                                                 op.attrs.get("parallel_iterations", 10)))
                    self.frames[-1].site = op.creation_site or ""
                node.out_frame = child_of[key]
                self.frames[node.out_frame].n_enters += 1
            elif node.kind == EXIT:
                parent = self.frames[node.in_frame].parent
                if parent is None:
                    raise errors.InvalidArgumentError(
                        None, op, f"Exit node {op.name} is not inside a while loop.")
                node.out_frame = parent
                self.frames[node.in_frame].exits.append(node.index)
            else:
                node.out_frame = node.in_frame

    def _assign_slots(self) -> dict:
        """Number each node locally in its read frame and each output in its write frame."""
        slot_of: dict[int, int] = {}
        root = self.frames[ROOT]
        root.n_slots = len(self.feeds)
        fed = {id(t) for t in self.feeds}
        for k, t in enumerate(self.feeds):
            slot_of[id(t)] = k
        for node in self.nodes:
            fin = self.frames[node.in_frame]
            node.local = len(fin.nodes)
            fin.nodes.append(node.index)
            fout = self.frames[node.out_frame]
            node.out_base = fout.n_slots
            for t in node.op.outputs:
                if id(t) not in fed:
                    slot_of[id(t)] = fout.n_slots
                fout.n_slots += 1
        return slot_of

    def _wire(self, index_of, fed, slot_of) -> None:
        nodes = self.nodes
        edges = [[] for _ in nodes]
        self.feed_consumers: list[list[int]] = [[] for _ in self.feeds]
        for frame in self.frames:
            frame.initial_pending = [0] * len(frame.nodes)
        for node in nodes:
            op = node.op
            pending = 0
            node.n_forward = node.n_back = 0
            ins = []
            for pos, t in enumerate(op.inputs):
                s = slot_of[id(t)]
                ins.append(s)
                if id(t) in fed:
                    if node.in_frame != ROOT:
                        raise errors.InvalidArgumentError(
                            None, op, f"Cannot feed {t.name}: it is used inside a while loop "
                            f"by {op.name}.")
                    self.feed_consumers[fed[id(t)]].append(node.index)
                    continue
                prod = nodes[index_of[id(t.op)]]
                self._check_same_frame(prod, node)
                edges[prod.index].append((node.index, s, pos))
                if node.kind == MERGE:
                    if prod.kind == NEXT:
                        node.n_back += 1
                    else:
                        node.n_forward += 1
                else:
                    pending += 1
            for c in op.control_inputs:
                j = index_of.get(id(c))
                if j is not None:
                    self._check_same_frame(nodes[j], node)
                    edges[j].append((node.index, -1, -1))
                    pending += 1
            if node.kind == MERGE:
                pending += 1  # the first live data input, or the last dead one
            node.inputs = tuple(ins)
            self.frames[node.in_frame].initial_pending[node.local] = pending
        for node in nodes:
            node.edges = tuple(edges[node.index])
            node.succ = tuple(nodes[j].local for j, _, _ in node.edges)

    def _fuse(self, frame, serial: bool) -> None:
        """Compile a simple loop frame into one node that runs the whole loop (used when
        nothing observes the step; see ``dflab.runtime.fused_loops``). With ``serial``, the
        frame may hold expensive kernels: the loop node is then expensive itself, and holds
        the plan's stream for the whole loop, as each of them would have held it in turn."""
        loop = fuse_frame(self, frame, serial)
        if loop is None:
            return
        node = PlanNode()
        node.op = loop.op
        node.index = len(self.nodes)
        node.kind = FUSED
        node.fn = loop
        node.inputs = node.edges = node.succ = node.releases = ()
        node.out_base = node.local = -1
        node.n_out = len(loop.exits)
        node.blocking = node.is_async = node.takes_step = node.frame_tagged = False
        node.expensive = any(self.nodes[i].expensive for i in frame.nodes)
        node.accepts_dead = node.is_constant = False
        node.in_frame = node.out_frame = frame.parent
        node.n_forward = node.n_back = 0
        self.nodes.append(node)
        frame.fused = node.index

    def _check_same_frame(self, producer, consumer) -> None:
        if producer.out_frame != consumer.in_frame:
            raise errors.InvalidArgumentError(
                None, consumer.op, f"{consumer.op.name} uses {producer.op.name} across a while "
                "loop boundary; values enter a loop only through Enter and leave it through "
                "Exit (build loops with tf.while_loop).")

    def _bind_kernel(self, node, ctx) -> None:
        op = node.op
        node_def = op.node_def  # plain data: the kernel never sees the user's op
        try:
            kd = get_kernel_def(node_def, ctx.device_type)
            fn = kd.factory(node_def, ctx)
        except errors.OpError as e:
            raise node_error(e, op) from None
        except (ValueError, TypeError, NotImplementedError) as e:
            raise errors.InvalidArgumentError(None, op, str(e)) from None
        ref_inputs = op.op_def.ref_inputs
        deref = [i for i, t in enumerate(op.inputs) if _is_ref(t) and i not in ref_inputs]
        if deref and op.type == "Merge":
            fn = _DerefMerge(fn, frozenset(deref))
        elif deref and not getattr(fn, "accepts_refs", False):
            lead = 2 if kd.is_async else 1 if kd.takes_step else 0  # (step[, done], *inputs)
            fn = _Deref(fn, [i + lead for i in deref])
        fn = ctx.bind_kernel(kd, node_def, fn)  # the device's hook (a GPU's stream, memory)
        node.fn = fn
        node.takes_step = kd.takes_step
        node.is_async = kd.is_async
        # A _Send/_Recv inside a loop frame (partitioned loops): the kernel is told the frame
        # and iteration, which make its rendezvous key unique per iteration.
        node.frame_tagged = bool(op.attrs.get("_frame_tagged", False))
        node.expensive = op.op_def.expensive or op.op_def.blocking
        node.blocking = op.op_def.blocking

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
    def inline_capable(self) -> bool:
        """Whether one thread can run the whole plan in a fixed order: no control flow, and
        no node that waits (a blocking or asynchronous kernel)."""
        return not self.cf and not self.has_blocking

    @property
    def straight_line(self) -> bool:
        """Inline-capable with at most one expensive node: nothing to run in parallel."""
        return self.inline_capable and self.n_expensive < 2

    def compiled(self, stream=None):
        """The straight-line schedule as one generated Python function (built on first use).

        Each tensor becomes a local variable and each node one line ``v7 = k3(v2, v5)``, so a
        step costs little more than the kernel calls themselves. The source is generated only
        from integer indices (no names or strings from the graph), so nothing from a graph or a
        file ever reaches ``compile``. A failing line maps back to its node through the
        traceback's line number. With a ``stream`` (a serial device, or one inter-op thread),
        each expensive kernel holds it while it runs, as in the dataflow driver.
        """
        if self._compiled is None:
            self._compiled = {}
        key = id(stream) if stream is not None else None
        if key not in self._compiled:
            self._compiled[key] = _compile_schedule(self, stream)
        return self._compiled[key]


_MAX_COMPILED_NODES = 20000
SCHEDULE_FILE = "<dflab straight-line schedule>"


def on_stream(fn, stream):
    """``fn`` holding ``stream`` while it runs."""
    def run(*args):
        with stream:
            return fn(*args)
    return run


def _compile_schedule(plan, stream=None):
    """Generate ``run(feeds, step) -> fetches`` for an inline-capable plan (``step``: what a
    kernel that takes the step receives, the running execution); (None, None) if too big."""
    if len(plan.nodes) > _MAX_COMPILED_NODES:
        return None, None
    lines = ["def run(F, S=None):"]
    line_to_node = {}
    if plan.feeds:
        lines.append("    " + ", ".join(f"v{k}" for k in range(len(plan.feeds))) + ", = F")
    fetched = set(plan.fetch_slots)
    for node in plan.nodes:
        args = [f"v{s}" for s in node.inputs]
        if node.takes_step:  # a function call's kernel runs its body within this step
            args.insert(0, "S")
        call = f"k{node.index}(" + ", ".join(args) + ")"
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
        src = src.replace("def run(F, S=None):", f"def run(F, S=None, {kernel_args}):", 1)
    namespace: dict = {}
    exec(compile(src, SCHEDULE_FILE, "exec"), namespace)  # noqa: S102 - indices only
    run = namespace["make"]([on_stream(n.fn, stream) if stream is not None and n.expensive
                             else n.fn for n in plan.nodes])
    # Line numbers in `src` are shifted by the `def make` header line.
    return run, {ln + 1: i for ln, i in line_to_node.items()}
