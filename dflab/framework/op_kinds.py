"""Which op types play which role: the one classification of op types by name.

Control flow is TF's six dataflow primitives (``Switch``, ``Merge``, ``Enter``, ``Exit``,
``NextIteration``, ``LoopCond``); every one but ``LoopCond`` has a reference variant (``RefEnter``
…) that carries a variable's reference instead of a value and behaves the same.
``control_flow_kind`` maps an op type to its primitive, and the sets below are derived from it,
so the plan builder, the executor, the partitioner, graph import, the cost model, drawings and
the op builders agree on what a loop or a back edge is. Besides control flow: transfers
(``_Send``/``_Recv`` and their host variants), placeholders and variable ops.

Invariant: nothing else in dflab lists these op types; a new variant is added here once.
"""

from __future__ import annotations

import enum


class ControlFlowKind(enum.Enum):
    """A control-flow primitive; its value is the plain (non-reference) op type."""

    SWITCH = "Switch"
    MERGE = "Merge"
    ENTER = "Enter"
    EXIT = "Exit"
    NEXT_ITERATION = "NextIteration"
    LOOP_COND = "LoopCond"


def _control_flow_table() -> dict[str, ControlFlowKind]:
    table = {}
    for kind in ControlFlowKind:
        table[kind.value] = kind
        if kind is not ControlFlowKind.LOOP_COND:  # a predicate is never a reference
            table["Ref" + kind.value] = kind
    return table


_CONTROL_FLOW = _control_flow_table()


def control_flow_kind(op_type: str) -> ControlFlowKind | None:
    """The control-flow primitive ``op_type`` is (a reference variant as its plain kind), or
    None for every other op."""
    return _CONTROL_FLOW.get(op_type)


def _types_of(*kinds: ControlFlowKind) -> frozenset[str]:
    return frozenset(t for t, k in _CONTROL_FLOW.items() if k in kinds)


CONTROL_FLOW_OPS = frozenset(_CONTROL_FLOW)
SWITCH_OPS = _types_of(ControlFlowKind.SWITCH)
MERGE_OPS = _types_of(ControlFlowKind.MERGE)
ENTER_OPS = _types_of(ControlFlowKind.ENTER)
EXIT_OPS = _types_of(ControlFlowKind.EXIT)
# A while loop's back edges (NextIteration -> Merge): they never order nodes.
BACK_EDGE_OPS = _types_of(ControlFlowKind.NEXT_ITERATION)
# The ops that make and run a loop frame (a cond alone needs only Switch and Merge).
LOOP_OPS = _types_of(ControlFlowKind.ENTER, ControlFlowKind.EXIT,
                     ControlFlowKind.NEXT_ITERATION, ControlFlowKind.LOOP_COND)

# Transfers between devices (``_Host*``: TF's variants for values kept in host memory).
SEND_OPS = frozenset({"_Send", "_HostSend"})
RECV_OPS = frozenset({"_Recv", "_HostRecv"})
TRANSFER_OPS = SEND_OPS | RECV_OPS

# Ops whose value the client feeds (a fed placeholder stands for its feed, control edges too).
PLACEHOLDER_OPS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})

# Ops that own a variable's state: reference variables, and resource variables' handles.
REF_VARIABLE_OPS = frozenset({"VariableV2", "Variable"})
VARIABLE_OPS = REF_VARIABLE_OPS | {"VarHandleOp"}
