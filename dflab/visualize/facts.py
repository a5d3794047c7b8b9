"""Everything a drawing may say about an op besides its structure, gathered once per drawing.

Placement (a ``{op: Placement}`` dict, a ``{op: device}`` dict or a ``PlacementReport``), a traced
step (``RunMetadata``: where each op ran, for how long, how many output bytes), what
``Session.run(fetches, feeds)`` would execute (``dflab.runtime.subgraph.prune``), and which ops
and tensors the caller wants emphasised. All keyed by op name, so they apply equally to a graph's
ops and to the nodes of its partition graphs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dflab.framework import ops as _ops
from dflab.runtime import fetches as _fetches
from dflab.runtime.subgraph import prune
from dflab.visualize import text as _text


@dataclass
class Facts:
    assigned: dict = field(default_factory=dict)  # op name -> assigned device
    reasons: dict = field(default_factory=dict)  # op name -> placement reason
    time_us: dict = field(default_factory=dict)  # op name -> summed op time in a traced step
    out_bytes: dict = field(default_factory=dict)  # op name -> largest output bytes per run
    observed: dict = field(default_factory=dict)  # op name -> [(dtype, shape)] seen at run time
    ran_on: dict = field(default_factory=dict)  # op name -> device it ran on (step stats)
    fused_into: dict = field(default_factory=dict)  # op name -> fused node it ran inside
    needed: set | None = None  # ops Session.run(fetches) executes; None when no fetches given
    fetched: set = field(default_factory=set)  # ops whose outputs (or themselves) are fetched
    fed: set = field(default_factory=set)  # ops with a fed output (fed, so not executed)
    highlighted: set = field(default_factory=set)
    emphasized: set = field(default_factory=set)  # tensor names "op:slot"
    stale: set = field(default_factory=set)  # ops reading what a re-run cell replaced
    traced: bool = False

    def device_of(self, name: str, requested: str) -> str:
        """Assigned device when known (placement, then the traced step), else the request."""
        return self.assigned.get(name) or self.ran_on.get(name) or requested


# --- placement --------------------------------------------------------------------------------
def _placement_facts(placement, facts: Facts) -> None:
    if placement is None:
        return
    rows = getattr(placement, "rows", None)
    if rows is not None:  # a PlacementReport
        for r in rows:
            facts.assigned[r.op] = r.assigned
            facts.reasons[r.op] = r.reason
        return
    if not isinstance(placement, Mapping):
        raise TypeError("placement must be a PlacementReport or a dict mapping ops (or op "
                        f"names) to Placements or device strings, not {type(placement).__name__}")
    for op, p in placement.items():
        name = op if isinstance(op, str) else op.name
        facts.assigned[name] = p if isinstance(p, str) else p.device
        reason = getattr(p, "reason", "")
        if reason:
            facts.reasons[name] = reason


# --- a traced step ----------------------------------------------------------------------------
def _step_facts(run_metadata, facts: Facts) -> None:
    step_stats = getattr(run_metadata, "step_stats", run_metadata)
    dev_stats = getattr(step_stats, "dev_stats", None) or []
    for ds in dev_stats:
        for ns in ds.node_stats:
            name = ns.node_name
            facts.traced = True
            facts.ran_on.setdefault(name, ds.device)
            for member in getattr(ns, "fused_ops", None) or ():
                if member != name:  # the sink's own stats are the fused node's
                    facts.fused_into[member] = name
            nanos = ns.op_end_rel_nanos - ns.op_start_rel_nanos
            us = nanos / 1000 if nanos > 0 else float(ns.op_end_rel_micros - ns.op_start_rel_micros)
            facts.time_us[name] = facts.time_us.get(name, 0.0) + max(us, 0.0)
            total = 0
            outs = []
            for o in ns.output:
                td = o.tensor_description
                total += td.allocation_description.requested_bytes
                shape = None if td.shape.unknown_rank else td.shape.as_list()
                outs.append((o.slot, _text.dtype_text(td.dtype), _text.shape_text(shape)))
            facts.out_bytes[name] = max(facts.out_bytes.get(name, 0), total)
            if outs and name not in facts.observed:
                n = max(s for s, _, _ in outs) + 1
                desc = [("", "")] * n
                for slot, dt, sh in outs:
                    desc[slot] = (dt, sh)
                facts.observed[name] = desc


# --- fetches, feeds, emphasis -----------------------------------------------------------------
def _feed_tensors(graph, feeds) -> list:
    if feeds is None:
        return []
    keys = feeds.keys() if isinstance(feeds, Mapping) else feeds
    if isinstance(keys, (_ops.Tensor, str)):
        keys = [keys]
    out = []
    for k in keys:
        el = graph.as_graph_element(k, allow_tensor=True, allow_operation=False)
        out.append(el)
    return out


def _fetch_facts(graph, fetches, feeds, facts: Facts) -> None:
    if fetches is None:
        return
    if graph is None:
        raise ValueError("fetches need a graph to prune; pass a Graph or its ops")
    m = _fetches.mapper_for(graph, fetches)
    fed = _feed_tensors(graph, feeds)
    facts.needed = {op.name for op in prune(m.tensors, m.targets, fed)}
    facts.fetched = {t.op.name for t in m.tensors} | {op.name for op in m.targets}
    facts.fed = {t.op.name for t in fed}


def _names(items) -> set:
    """Op names of ops, tensors (their producers) or names."""
    out = set()
    for x in items or ():
        if isinstance(x, str):
            base, _, slot = x.rpartition(":")
            out.add(base if base and slot.isdigit() else x)
        elif isinstance(x, _ops.Tensor):
            out.add(x.op.name)
        elif hasattr(x, "op") and hasattr(x.op, "name"):  # Variables and friends
            out.add(x.op.name)
        else:
            out.add(x.name)
    return out


def _tensor_names(items) -> set:
    out = set()
    for x in items or ():
        if isinstance(x, str):
            out.add(x if ":" in x else x + ":0")
        else:
            out.add(f"{x.op.name}:{x.value_index}")
    return out


def gather(graph, *, placement=None, run_metadata=None, fetches=None, feeds=None,
           highlight=None, emphasize=None) -> Facts:
    facts = Facts()
    _placement_facts(placement, facts)
    if run_metadata is not None:
        _step_facts(run_metadata, facts)
    _fetch_facts(graph, fetches, feeds, facts)
    if isinstance(highlight, (str, _ops.Operation, _ops.Tensor)):
        highlight = [highlight]
    facts.highlighted = _names(highlight)
    if isinstance(emphasize, (str, _ops.Tensor)):
        emphasize = [emphasize]
    facts.emphasized = _tensor_names(emphasize)
    # Stale ops cannot run until their code is re-run: drawn so, whatever the colouring.
    stale_marks = getattr(graph, "stale_marks", None)  # graphs have them; partitions do not
    facts.stale = {m.op.name for m in stale_marks()} if stale_marks is not None else set()
    return facts
