"""The subgraph a run needs: ``prune`` to what fetches and targets depend on (cut at feeds),
then ``topological_order`` (creation order among ready ops, so plans are deterministic).

Used by ``Session`` when it builds a plan, and by everything that must see the same subgraph a
run would see without running it (placement reports, graph views, the magics).
"""

from __future__ import annotations

import heapq

from dflab.framework import errors
from dflab.framework.op_kinds import BACK_EDGE_OPS, PLACEHOLDER_OPS


def prune(fetch_tensors, targets, feed_tensors) -> list:
    """The ops the fetches and targets transitively need, cutting at fed tensors."""
    fed = {id(t) for t in feed_tensors}
    seen = {}
    stack = [t.op for t in fetch_tensors if id(t) not in fed] + list(targets)
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen[id(op)] = op
        for t in op.inputs:
            if id(t) not in fed:
                stack.append(t.op)
        stack.extend(c for c in op.control_inputs if not _fed_placeholder(c, fed))
    return list(seen.values())


def _fed_placeholder(op, fed: set) -> bool:
    """A placeholder whose value is fed: the feed stands for it, control edges included.

    TF rewires a fed placeholder's control edges to the feed, so ``control_dependencies([x])``
    on a fed ``x`` orders nothing and must not ask for ``x`` to run."""
    return op.type in PLACEHOLDER_OPS and id(op.outputs[0]) in fed


def topological_order(ops, feed_tensors) -> list:
    """Kahn's algorithm in creation order; a cycle raises ``InvalidArgumentError``.

    Edges out of ``NextIteration`` are a while loop's back edges: they do not order nodes.
    """
    fed = {id(t) for t in feed_tensors}
    ids = {id(op) for op in ops}
    indeg = {}
    succ = {}
    for op in ops:
        n = 0
        for t in op.inputs:
            if id(t) not in fed and id(t.op) in ids and t.op.type not in BACK_EDGE_OPS:
                n += 1
                succ.setdefault(id(t.op), []).append(op)
        for c in op.control_inputs:
            if id(c) in ids:
                n += 1
                succ.setdefault(id(c), []).append(op)
        indeg[id(op)] = n
    heap = [(op.creation_index, id(op), op) for op in ops if indeg[id(op)] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, _, op = heapq.heappop(heap)
        order.append(op)
        for s in succ.get(id(op), ()):
            indeg[id(s)] -= 1
            if indeg[id(s)] == 0:
                heapq.heappush(heap, (s.creation_index, id(s), s))
    if len(order) != len(ops):
        stuck = sorted((op for op in ops if indeg[id(op)] > 0), key=lambda o: o.creation_index)
        names = ", ".join(o.name for o in stuck[:5])
        raise errors.InvalidArgumentError(
            None, stuck[0], f"Graph is invalid, contains a cycle with {len(stuck)} nodes, "
            f"including: {names}"
        )
    return order
