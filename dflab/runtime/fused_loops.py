"""Fused loops: a simple while-loop frame run as one generated Python function.

The dataflow executor runs a loop iteration by iteration, node by node, with frame and
deadness bookkeeping for each of the dozen nodes an iteration costs (Merge, Switch, Identity,
NextIteration, Exit per loop variable, the condition, LoopCond, the body). For a loop whose
frame holds only synchronous nodes, no nested loop and no cond, and no expensive node unless
its device runs expensive kernels one at a time anyway (a serial plan: the loop then holds the
stream), running its iterations one after another is one valid schedule of the same dataflow.
This module generates that schedule as a straight Python ``while`` loop (each tensor a local
variable, each node one line, ``Merge``/``Switch``/``NextIteration`` reduced to assignments), so
an iteration costs little more than its kernel calls.

The executor uses a fused loop only when no observer (tracer, stepper) is attached: stepping
and tracing always see the real frames and iterations. As in
``executor_plan._compile_schedule``, the source is generated from integer indices only, so
nothing from a graph reaches ``compile``; a failing line maps back to its node. The loop checks
for cancellation once per iteration, so a step deadline stops an endless loop.
"""

from __future__ import annotations

from dflab.framework import errors
from dflab.runtime.plan_node import (
    ENTER,
    EXIT,
    MERGE,
    NEXT,
    PLAIN,
    SWITCH,
    failed_node,
    node_error,
)

_GENERATED_FILE = "<dflab fused loop>"


class FusedLoop:
    """The compiled form of one static frame: ``run(step, enter_values) -> exit_values``."""

    __slots__ = ("fn", "line_to_node", "enters", "exits", "enter_pos", "op")

    def __init__(self, fn, line_to_node, enters, exits, op):
        self.fn = fn
        self.line_to_node = line_to_node
        self.enters = enters
        self.exits = exits
        self.enter_pos = {i: k for k, i in enumerate(enters)}
        self.op = op

    def run(self, step, values, nodes):
        try:
            return self.fn(step, values)
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            node = failed_node(e, self.line_to_node, _GENERATED_FILE, None)
            raise node_error(e, nodes[node].op if node is not None else self.op) from e


def fuse_frame(plan, frame, serial: bool = False) -> FusedLoop | None:
    """A ``FusedLoop`` for ``frame`` of ``plan``, or None when the frame is not simple.
    ``serial``: the plan's expensive kernels run one at a time on a stream, so an expensive
    kernel does not keep the frame from being fused (the loop holds the stream instead)."""

    nodes = [plan.nodes[i] for i in frame.nodes]
    enters = [n.index for n in plan.nodes if n.kind == ENTER and n.out_frame == frame.id]
    if any((n.expensive and not serial) or n.blocking or n.is_async or n.takes_step
           or n.kind == ENTER for n in nodes):
        return None
    conds = [n for n in nodes if n.op.type == "LoopCond"]
    if len(conds) != 1:
        return None
    lc = conds[0]
    producer = {}  # local slot -> node producing it in this frame
    for n in nodes:
        if n.out_frame == frame.id:
            for k in range(n.n_out):
                producer[n.out_base + k] = n
    for i in enters:
        producer[plan.nodes[i].out_base] = plan.nodes[i]
    used = {s for n in nodes for s in n.inputs}
    merges = [n for n in nodes if n.kind == MERGE]
    for m in merges:
        if (m.n_forward, m.n_back) != (1, 1) or frame.initial_pending[m.local] != 1 or \
                m.out_base + 1 in used:
            return None
    for n in nodes:
        if n.kind == SWITCH:
            if n.inputs[1] != lc.out_base or producer[n.inputs[0]].kind != MERGE:
                return None
            consumers_of_false = [c for c in nodes if n.out_base in c.inputs]
            if any(c.kind != EXIT for c in consumers_of_false):
                return None
        elif n.kind not in (PLAIN, MERGE, NEXT, EXIT):
            return None
    lines, line_to_node = ["def run(EX, S):"], {}
    lines += [f"    v{plan.nodes[i].out_base} = S[{k}]" for k, i in enumerate(enters)]
    back = {}
    for m in merges:
        fwd_slot, back_slot = sorted(m.inputs, key=lambda s: producer[s].kind == NEXT)
        lines.append(f"    v{m.out_base} = v{fwd_slot}")
        back[m.out_base] = back_slot
    lines += ["    C = EX.cancelled.is_set", "    while True:",
              "        if C():", "            raise CANCELLED"]
    for n in nodes:
        if n.kind in (MERGE, EXIT):
            continue
        if n.kind == SWITCH:
            lines.append(f"        v{n.out_base} = v{n.out_base + 1} = v{n.inputs[0]}")
        elif n.kind == NEXT:
            lines.append(f"        v{n.out_base} = v{n.inputs[0]}")
        else:
            args = ", ".join(f"v{s}" for s in n.inputs)  # no takes_step node is fused
            call = f"k{n.index}({args})"
            if n.n_out == 1:
                text = f"v{n.out_base} = {call}"
            elif n.n_out == 0:
                text = call
            else:
                text = ", ".join(f"v{n.out_base + k}" for k in range(n.n_out)) + f", = {call}"
            lines.append("        " + text)
            line_to_node[len(lines)] = n.index
            if n is lc:
                lines.append(f"        if not v{n.out_base}:")
                lines.append("            break")
    lines += [f"        v{m} = v{b}" for m, b in back.items()]
    # An Exit reads its Switch's false port: at the break, that is the Switch's input.
    switch_at = {n.out_base: n for n in nodes if n.kind == SWITCH}
    exit_values = [switch_at[plan.nodes[i].inputs[0]].inputs[0] for i in frame.exits]
    lines.append("    return (" + "".join(f"v{s}, " for s in exit_values) + ")")
    called = [n for n in nodes if n.kind == PLAIN]
    head = "def make(K, CANCELLED):\n"
    kernel_args = "".join(f", k{n.index}=K[{n.index}]" for n in called)
    body = "\n".join("    " + ln for ln in lines).replace(
        "def run(EX, S):", f"def run(EX, S{kernel_args}):", 1)
    namespace: dict = {}
    exec(compile(head + body + "\n    return run\n", _GENERATED_FILE, "exec"),  # noqa: S102
         namespace)
    kernels = {n.index: n.fn for n in called}
    cancelled = errors.CancelledError(None, lc.op, "the step was cancelled")
    fn = namespace["make"](kernels, cancelled)
    # Source line numbers are shifted by the `def make` header.
    return FusedLoop(fn, {ln + 1: i for ln, i in line_to_node.items()}, enters,
                     list(frame.exits), lc.op)
