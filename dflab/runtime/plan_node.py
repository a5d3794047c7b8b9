"""What the executor's plan is made of, shared by the plan builder (``executor_plan``), the
executor (``executor``) and the loop compiler (``fused_loops``) so that none of them imports
another's internals: node kinds, ``PlanNode``, ``FrameInfo``, and how a failure inside a node
becomes the ``OpError`` that names it.

Kernels are built from node defs (plain data), so an error a kernel raises names a ``NodeDef``;
``node_error`` points it back at the plan node (or, in a fused node, the member op) it came from,
which the session in turn maps to the user's op.
"""

from __future__ import annotations

from dflab.framework import errors
from dflab.framework.graph_io import NodeDef
from dflab.framework.op_kinds import CONTROL_FLOW_OPS, ControlFlowKind, control_flow_kind

# Node kinds: how the executor routes a node's outputs.
PLAIN, SWITCH, MERGE, ENTER, EXIT, NEXT, FUSED = range(7)  # FUSED: a whole fused loop
_ROUTING = {ControlFlowKind.SWITCH: SWITCH, ControlFlowKind.MERGE: MERGE,
            ControlFlowKind.ENTER: ENTER, ControlFlowKind.EXIT: EXIT,
            ControlFlowKind.NEXT_ITERATION: NEXT}  # LoopCond routes as a plain node
# Op type -> node kind, for every op type that is not PLAIN.
KINDS = {t: _ROUTING[k] for t in CONTROL_FLOW_OPS if (k := control_flow_kind(t)) in _ROUTING}
ROOT = 0


class PlanNode:
    __slots__ = ("op", "index", "fn", "inputs", "out_base", "n_out", "succ", "edges", "expensive",
                 "blocking", "takes_step", "is_async", "releases", "kind", "local", "in_frame",
                 "out_frame", "is_constant", "n_forward", "n_back", "accepts_dead", "frame_tagged")

    def __repr__(self):
        return f"<PlanNode {self.index} {self.op.name}>"


class FrameInfo:
    """A static frame: the root, or the body of one ``while_loop`` (named by ``frame_name``)."""

    __slots__ = ("id", "name", "parent", "parallel_iterations", "nodes", "n_slots",
                 "initial_pending", "n_enters", "exits", "fused", "site")

    def __init__(self, fid, name, parent, parallel_iterations):
        self.id = fid
        self.name = name
        self.parent = parent
        self.parallel_iterations = max(int(parallel_iterations), 1)
        self.nodes = []
        self.n_slots = 0
        self.initial_pending = []
        self.n_enters = 0
        self.exits = []
        self.fused = None  # index of the plan node running the whole loop, when fusable
        self.site = ""  # where the user built the loop (its first Enter's creation site)

    def __repr__(self):
        return f"<FrameInfo {self.id} {self.name or '(root)'}>"


def node_error(e: BaseException, node) -> errors.OpError:
    """``e``, raised while building or running ``node``'s kernel, as an ``OpError`` naming it."""
    if isinstance(e, errors.OpError):
        if e.op is None or isinstance(e.op, NodeDef):
            e.op = _named(node, e.op)
            e.args = (e._format(),)
        return e
    if isinstance(e, (ValueError, TypeError, IndexError, ZeroDivisionError, FloatingPointError)):
        return errors.InvalidArgumentError(None, node, f"{type(e).__name__}: {e}")
    if isinstance(e, MemoryError):
        return errors.ResourceExhaustedError(None, node, f"OOM when running {node.name}: {e}")
    return errors.InternalError(None, node, f"{type(e).__name__}: {e}")


def _named(node, node_def):
    """The node, or the member of a fused node, that the node def a kernel named stands for."""
    if node_def is None or node_def.name == node.name:
        return node
    for member in getattr(node, "fused_ops", ()):
        if member.name == node_def.name:
            return member
    return node_def


def failed_node(exc: BaseException, line_to_node: dict, filename: str, default=0):
    """The node whose line of generated source ``filename`` raised ``exc`` (the innermost)."""
    tb, node = exc.__traceback__, default
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            node = line_to_node.get(tb.tb_lineno, node)
        tb = tb.tb_next
    return node
