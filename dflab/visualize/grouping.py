"""What keeps a drawing readable, after TensorBoard's graph dashboard (Wongsuphasawat et al.,
"Visualizing Dataflow Graphs of Deep Learning Models in TensorFlow", VAST 2017): repeated units
grouped into a *series*, and *auxiliary* units set aside.

* A **series** is five or more sibling units that differ only by a numeric suffix (``layer_1``
  … ``layer_8``, ``ReadVariableOp`` … ``ReadVariableOp_6``), are alike (the same op type, or
  scopes of the same size) and side by side (none reads another: a chain is structure worth
  seeing). It is drawn as one unit, ``layer_[1-8]``, which opens like a name scope (its name in
  ``expanded``).
* **Auxiliary** units are the plumbing every training graph has, which TensorBoard pulls out of
  the main structure: gradients, optimizer updates, initializers, savers, summaries, the global
  step, and *hubs* (units joined to very many others), with the ``_Send``/``_Recv`` units
  that only serve them. In a drawing of ten or more units they are set aside into an
  ``auxiliary`` cluster beside the main structure (one per device partition in a partitioned
  drawing), stacked in a column, and their edges are hidden (kept in the data, the units
  they lead to listed in their tooltips).

Invariants: grouping only merges sibling units or moves units into the auxiliary cluster; every
record keeps exactly one unit (``View.unit_of``); the edges of auxiliary units are hidden, and
no other edge is hidden by this module.
"""

from __future__ import annotations

import re

from dflab.framework.op_kinds import VARIABLE_OPS
from dflab.visualize import style as _style

SERIES_MIN = 5  # TensorBoard's default: fewer alike siblings are drawn one by one
CHAIN_SEARCH_LIMIT = 20_000  # ops visited looking for a path between a series' members
AUX_MIN_UNITS = 10  # smaller drawings keep everything in the main structure
AUX_CLUSTER = "auxiliary"

_SUFFIX = re.compile(r"^(.*?)(?:_(\d+))?$")
_AUX_NAMES = {
    "gradients": "gradients", "save": "saver", "init": "initializer",
    "init_all_tables": "initializer", "report_uninitialized_variables": "initializer",
    "summaries": "summaries", "global_step": "global step",
}
_SAVER_TYPES = ("SaveV2", "RestoreV2", "MergeV2Checkpoints", "Save", "Restore", "SaveSlices",
                "RestoreSlice")


# --- series ----------------------------------------------------------------------------------
def _series_key(unit) -> tuple | None:
    """(what the unit is, its name without a numeric suffix, the suffix) when it may join a
    series, else None. Ops are alike by type, scopes by size."""
    if unit.kind not in ("op", "scope"):
        return None
    head, _, last = unit.name.rpartition("/")
    m = _SUFFIX.match(last)
    base, number = m.group(1), int(m.group(2)) if m.group(2) else 0
    if not base:
        return None
    like = unit.members[0].type if unit.kind == "op" else len(unit.members)
    return (unit.kind, like, f"{head}/{base}" if head else base), number


def series_name(prefix: str, numbers) -> str:
    """``layer_[1-8]``: the name a series is drawn and opened by."""
    return f"{prefix}_[{min(numbers)}-{max(numbers)}]"


def find_series(units: list, opened: set, by_name: dict) -> list[tuple[str, list]]:
    """(series name, its units) for each group of SERIES_MIN or more alike siblings in
    ``units`` (one parent's units, in drawing order) that is not named in ``opened``;
    ``by_name``: every record by op name (to tell a chain from repeats)."""
    groups: dict = {}
    for u in units:
        keyed = _series_key(u)
        if keyed is not None:
            groups.setdefault(keyed[0], []).append((keyed[1], u))
    out = []
    for (_, _, prefix), members in groups.items():
        if len(members) < SERIES_MIN or _chained([u for _, u in members], by_name):
            continue
        name = series_name(prefix, [n for n, _ in members])
        if name not in opened:
            out.append((name, [u for _, u in sorted(members, key=lambda m: m[0])]))
    return out


def _chained(units, by_name: dict) -> bool:
    """Whether one of ``units`` depends, however indirectly, on another: a chain (``h = tanh(h)
    * 2`` ten times) is structure worth seeing, only side-by-side repeats make a series (and
    grouping a chain would draw the series feeding itself). ``by_name``: record by op name."""
    owner = {r.name: k for k, u in enumerate(units) for r in u.members}
    budget = CHAIN_SEARCH_LIMIT
    for k, u in enumerate(units):
        seen: set = set()
        stack = [src for r in u.members for src in _sources(r) if owner.get(src) != k]
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            if name in owner:
                return True
            seen.add(name)
            budget -= 1
            if budget < 0:
                return True  # too far to tell: draw them one by one
            rec = by_name.get(name)
            if rec is not None:
                stack.extend(_sources(rec))
    return False


def _sources(rec) -> list:
    return [src for src, _ in rec.inputs] + list(rec.control_inputs)


# --- auxiliary units -------------------------------------------------------------------------
def _last(name: str) -> str:
    return _SUFFIX.match(name.rsplit("/", 1)[-1]).group(1)


def auxiliary_reason(unit, hub: bool) -> str:
    """Why ``unit`` is plumbing rather than the model's main structure ("" when it is not)."""
    if unit.kind not in ("op", "scope", "series"):
        return ""
    return plumbing(unit.name, unit.members, single_op=unit.kind == "op") or \
        ("hub" if hub else "")


def plumbing(name: str, records, single_op: bool = False) -> str:
    """What kind of plumbing the scope (or, ``single_op``, the op) ``name`` holding ``records``
    is: "gradients", "optimizer", "initializer", "saver", "summaries", "global step", or ""."""
    reason = _AUX_NAMES.get(_last(name), "")
    types = {r.type for r in records}
    if reason == "initializer" and single_op and types != {"NoOp"}:
        reason = ""  # an op merely named like one
    if not reason and any(_style.family(t) == "training" for t in types):
        reason = "optimizer"
    if not reason and types & set(_SAVER_TYPES):
        reason = "saver"
    if not reason and types and all("Summary" in t for t in types):
        reason = "summaries"
    if not reason and single_op and types == {"NoOp"} and \
            len(records[0].control_inputs) >= 3:
        reason = "initializer"  # a group of many updates (init, group_deps)
    return reason


def _transfers_of_plumbing(view, reasons: dict) -> None:
    """``_Send``/``_Recv`` units that only serve auxiliary units (a gradient sent to the ps,
    an update's token sent back) are auxiliary too."""
    local: dict = {}
    for e in view.edges:
        if e.kind != "transfer":
            local.setdefault(e.source, set()).add(e.target)
            local.setdefault(e.target, set()).add(e.source)
    for uid, unit in view.units.items():
        if uid in reasons or unit.kind != "op" or not unit.members[0].is_comm:
            continue
        near = local.get(uid, set())
        if near and near <= reasons.keys():
            reasons[uid] = "transfer"


def is_variable_scope(scope: str, records) -> bool:
    """Whether ``scope`` is a variable's own scope (``W`` around the variable ``W``: its
    initializer, assignment and reads), drawn as the variable while it is collapsed."""
    return any(r.name == scope and r.type in VARIABLE_OPS for r in records)


def set_aside(view, keep: set, new_id, cluster_type) -> None:
    """Mark the auxiliary units of ``view`` (see the module docstring), move them into an
    ``auxiliary`` cluster per parent and hide their edges. ``keep``: unit ids that stay in the
    main structure (highlighted ops); ``new_id()`` names a cluster, ``cluster_type`` makes one
    (the model's ``Cluster``)."""
    if len(view.units) < AUX_MIN_UNITS:
        return
    reasons = {}
    for uid, unit in view.units.items():
        if uid in keep:
            continue
        reason = auxiliary_reason(unit, uid in view.hubs and unit.parent is None)
        if reason:
            reasons[uid] = reason
    # One scope split over device partitions is one thing: plumbing in one, plumbing in all.
    named = {view.units[u].name: r for u, r in reasons.items()}
    for uid, unit in view.units.items():
        if uid not in reasons and uid not in keep and unit.name in named:
            reasons[uid] = named[unit.name]
    _transfers_of_plumbing(view, reasons)
    if len(view.units) - len(reasons) < 3:
        return  # nothing would be left to call the main structure
    for uid, reason in reasons.items():
        view.units[uid].aux = reason
    by_parent: dict = {}
    for uid in reasons:
        by_parent.setdefault(view.units[uid].parent, []).append(uid)
    for parent, ids in by_parent.items():
        _move_into_cluster(view, parent, ids, new_id(), cluster_type)
    hidden: dict = {uid: set() for uid in reasons}
    for e in view.edges:
        if e.source in reasons or e.target in reasons:
            e.hidden = True
            for end, other in ((e.source, e.target), (e.target, e.source)):
                if end in reasons and other not in reasons:
                    hidden[end].add(other)
    view.aux = {uid: sorted(n, key=lambda v: int(v[1:])) for uid, n in hidden.items()}


def _move_into_cluster(view, parent, ids: list, cid: str, cluster_cls) -> None:
    """Put the units ``ids`` of ``parent`` (a cluster id, or None for the top level) into a
    new auxiliary cluster ``cid`` inside it."""
    n_ops = sum(len(view.units[u].members) for u in ids)
    view.clusters[cid] = cluster_cls(cid, "aux", AUX_CLUSTER, AUX_CLUSTER, parent,
                                     units=list(ids), n_ops=n_ops)
    for uid in ids:
        view.units[uid].parent = cid
    if parent is None:
        view.top = [i for i in view.top if i not in ids] + [cid]
    else:
        box = view.clusters[parent]
        box.units = [u for u in box.units if u not in ids]
        box.clusters.append(cid)
