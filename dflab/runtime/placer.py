"""The placer: assign every op of a pruned graph to a device, and keep the reason.

TF 1.x's rules (``placer.cc``), in order:

1. **Colocation groups.** Ops that must share a device form one group: ``colocate_with``
   (``op._colocation``, e.g. a variable with its initializer, ``read`` and the optimizer's update
   ops) and reference edges (an op writing through a ref input sits with the ref's producer).
   Groups are formed over the whole graph, as TF places the whole graph: ops outside the plan
   that share a group with plan ops constrain it too, so every plan puts a variable on the same
   device (unless those constraints cannot be met: then the plan's own ops decide, and the
   conflicting op fails only in plans that run it); and a group holding a stateful op that an
   earlier plan of the session placed stays on that device (TF's ``stateful_placements``).
2. **Explicit requests** of a group's members are merged (partial specs combine); conflicting
   types or indices are an ``InvalidArgumentError`` ("Cannot colocate nodes …"), or are dropped
   under ``allow_soft_placement``; conflicting jobs or tasks are always an error.
3. **Kernel availability.** A device can run an op when the kernel registry has a kernel for
   the device's ``kernel_device_type`` and the device does not exclude it: simulated GPUs mirror
   TF, which has no GPU kernels for string tensors or for ops whose kernel is registered
   ``host_only`` (``registry.is_host_only``).
4. The group goes to the first device, in TF's preference order (GPU before CPU, then by
   index), that matches the request and can run every member. Without one, the request is an
   ``InvalidArgumentError`` naming op and device; with ``allow_soft_placement`` the request is
   relaxed (type and index first, then everything).
5. Heuristics for lone ops: a *metadata* op (Shape, Size, Rank) joins its input's device, a
   *generator* (no inputs, one non-ref output, e.g. Const) joins its consumers' device.

``ConfigProto(dflab={"placement": "cost_model"})`` swaps rule 4 for unconstrained groups with
the greedy scheduler of ``cost_model``. Every decision is a ``Placement`` (device, reason, rule,
requested, group); ``PlacementReport`` renders them as a table. ``log_device_placement`` prints
TF's ``name: (Type): device`` lines to stderr.
"""

from __future__ import annotations

import copy
import dataclasses
import html
import sys
from dataclasses import dataclass

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.framework import ops as _ops
from dflab.framework.device_spec import DeviceSpec
from dflab.framework.display import RichDisplay
from dflab.kernels.registry import has_kernel, is_host_only, kernel_device_types
from dflab.runtime.config import PLACEMENT_POLICIES, ConfigProto
from dflab.runtime.devices import DeviceSet, spec_matches
from dflab.runtime.fetches import mapper_for
from dflab.runtime.subgraph import prune, topological_order

METADATA_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank"})
POLICIES = PLACEMENT_POLICIES

# Rules a Placement can name.
EXPLICIT, COLOCATION, KERNEL, SOFT, DEFAULT, METADATA, GENERATOR, COST_MODEL, STATEFUL = (
    "explicit", "colocation", "kernel", "soft", "default", "metadata", "generator", "cost_model",
    "stateful")


@dataclass
class Placement:
    """Where one op goes and why.

    ``rule``: which rule decided (``explicit``, ``colocation``, ``kernel``, ``soft``,
    ``default``, ``metadata``, ``generator``, ``cost_model``); ``requested``: the op's own device
    request; ``group``: its colocation group's name, or None when it is alone."""

    device: str
    reason: str
    rule: str = DEFAULT
    requested: str = ""
    group: str | None = None
    simulated: bool = False


# --- what a device can run ------------------------------------------------------------------------

def _has_string(op) -> bool:
    """Whether ``op`` reads or makes strings: a string tensor, or a string resource (a
    variable of strings, whose handle TF makes on the host)."""
    return any(t.dtype.base_dtype is _dt.string for t in list(op.inputs) + list(op.outputs)) \
        or holds_strings(op.attrs, [t.dtype.base_dtype for t in op.outputs])


def holds_strings(attrs, out_dtypes) -> bool:
    """Whether an op of these attributes and output dtypes makes a resource of strings."""
    return _dt.resource in out_dtypes and attrs.get("dtype") is _dt.string


def unsupported_reason(op, device) -> str | None:
    """Why ``device`` cannot run ``op``, or None when it can."""
    ktype = device.kernel_device_type
    if not has_kernel(op.type, ktype):
        return f"no {ktype} kernel for {op.type}"
    if device.type.accelerator:  # TF has no accelerator kernels for these (nor do we)
        if is_host_only(op.type):
            return f"TensorFlow has no {device.device_type} kernel for {op.type}"
        if _has_string(op):
            return f"TensorFlow keeps string tensors off {device.device_type} devices"
    return None


def can_run(op, device) -> bool:
    return unsupported_reason(op, device) is None


# --- colocation groups ----------------------------------------------------------------------------

class _UnionFind:
    def __init__(self):
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def _colocation_targets(op) -> list[str]:
    """The names of the ops ``op`` asked to be colocated with (TF's ``_class`` attr)."""
    groups = (c.decode() for c in op.get_attr("_class"))
    return [c[5:] if c.startswith("loc:@") else c for c in groups]


class _Group:
    """A colocation group: its members, merged request, candidate devices and decision."""

    def __init__(self, key: str, members: list):
        self.key = key
        self.members = members
        self.request = DeviceSpec()
        self.requesters: list = []
        self.candidates: list = []  # devices matching the request that run every member
        self.capable: list = []  # devices that run every member
        self.partners: list = []  # ops outside the plan colocated with the members
        self.device = None
        self.rule = DEFAULT
        self.reason = ""

    def reset(self) -> None:
        """Forget the partners and every decision, to place the group by its members."""
        self.partners = []
        self.request, self.requesters = DeviceSpec(), []
        self.candidates, self.capable = [], []
        self.device, self.rule, self.reason = None, DEFAULT, ""

    @property
    def constrained_by(self) -> list:
        """Every op whose request and kernels the group's device must satisfy."""
        return self.members + self.partners

    @property
    def name(self) -> str | None:
        return self.key if len(self.members) > 1 else None


def _is_variable_handle(t) -> bool:
    return t.op.type == "VarHandleOp"


def _ref_edge(consumer, i: int, t) -> bool:
    """Whether ``consumer`` reads its input ``i`` (``t``) as a reference: it must then share
    the device of the ref's producer (an op writing a variable sits with the variable). Every
    op taking a resource variable's handle sits with it too (TF colocates resource ops)."""
    if _is_variable_handle(t):
        return True
    if not t.dtype.is_ref_dtype:
        return False
    ref_in = consumer.op_def.ref_inputs if consumer.op_def is not None else ()
    return i in ref_in or any(o.dtype.is_ref_dtype for o in consumer.outputs)


def _colocated_with_index(graph) -> dict[str, list]:
    """name -> the graph's ops that asked to be colocated with it."""
    index: dict[str, list] = {}
    for op in graph.get_operations():
        for target in _colocation_targets(op):
            index.setdefault(target, []).append(op)
    return index


def _neighbours(op, colocated_with: dict) -> list:
    """The ops that TF's rules put on ``op``'s device, in the whole graph."""
    out = []
    for target in _colocation_targets(op):
        other = op.graph.find_operation(target)
        if other is not None:
            out.append(other)
    out += colocated_with.get(op.name, ())
    out += [t.op for i, t in enumerate(op.inputs) if _ref_edge(op, i, t)]
    for t in op.outputs:
        if t.dtype.is_ref_dtype or _is_variable_handle(t):
            out += [c for c in t.consumers()
                    if any(x is t and _ref_edge(c, i, x) for i, x in enumerate(c.inputs))]
    return out


def _build_groups(ops) -> tuple[list[_Group], dict]:
    """Colocation groups of ``ops``, formed over the *whole graph*: ops outside the plan that
    are colocated with plan ops (an optimizer's update of a variable, a ``CountUpTo``) are the
    group's ``partners``. Their requests and kernels constrain the group as TF's placer, which
    places the whole graph, lets them, so a variable lands on the same device in every plan."""
    uf = _UnionFind()
    colocated_with = _colocated_with_index(ops[0].graph) if ops else {}
    partners: dict[int, object] = {}
    stack = list(ops)
    seen = {id(op) for op in ops}
    while stack:
        op = stack.pop()
        uf.find(op.name)
        for other in _neighbours(op, colocated_with):
            uf.union(op.name, other.name)
            if id(other) not in seen:
                seen.add(id(other))
                partners[id(other)] = other
                stack.append(other)
    members: dict[str, list] = {}
    for op in ops:
        members.setdefault(uf.find(op.name), []).append(op)
    outside: dict[str, list] = {}
    for op in partners.values():
        outside.setdefault(uf.find(op.name), []).append(op)
    groups, group_of = [], {}
    for root, ms in members.items():
        # Name the group after the op the others were colocated with (the variable, say).
        names = {m.name for m in ms}
        targets = [t for m in ms for t in _colocation_targets(m) if t in names]
        g = _Group(targets[0] if targets else ms[0].name, ms)
        g.partners = sorted(outside.get(root, ()), key=lambda o: o.creation_index)
        groups.append(g)
        for m in ms:
            group_of[id(m)] = g
    return groups, group_of


# --- requests -------------------------------------------------------------------------------------

def _merge_request(group: _Group, op, soft: bool) -> None:
    """Fold ``op``'s device request into the group's (TF's ``MergeDevNames``)."""
    spec = DeviceSpec.from_string(op.device)
    acc = group.request
    for field in ("job", "replica", "task"):
        a, b = getattr(acc, field), getattr(spec, field)
        if a is not None and b is not None and a != b:
            raise errors.InvalidArgumentError(
                None, op, f"Cannot colocate nodes {group.requesters[0].name!r} and "
                f"{op.name!r}: Cannot merge devices with incompatible {field}s: "
                f"'{acc.to_string()}' and '{spec.to_string()}'")
    merged = acc.make_merged_spec(spec)
    conflict = None
    if acc.device_type and spec.device_type and acc.device_type != spec.device_type:
        conflict = "types"
    elif acc.device_index is not None and spec.device_index is not None \
            and acc.device_index != spec.device_index:
        conflict = "ids"
    if conflict:
        if not soft:
            raise errors.InvalidArgumentError(
                None, op, f"Cannot colocate nodes {group.requesters[0].name!r} and "
                f"{op.name!r}: Cannot merge devices with incompatible {conflict}: "
                f"'{acc.to_string()}' and '{spec.to_string()}'")
        merged.device_index = None
        if conflict == "types":
            merged.device_type = None
    group.request = merged
    group.requesters.append(op)


# --- placing one group ----------------------------------------------------------------------------

def _names(ops, n=3) -> str:
    out = ", ".join(o.name for o in ops[:n])
    return out + (f" and {len(ops) - n} more" if len(ops) > n else "")


def _place_group(g: _Group, devices: list, config, pinned) -> None:
    if g.partners:
        try:
            _place_group_on(g, devices, config, pinned)
            return
        except errors.InvalidArgumentError:
            # An op outside this plan that cannot share the group's device (a deliberately
            # conflicting request, say) fails in its own plans; it must not break plans that
            # never run it. Place the group by its members alone.
            g.reset()
    _place_group_on(g, devices, config, pinned)


def _overridden_by_ref_source(op) -> str | None:
    """The device of the variable ``op`` reads or writes through a reference edge, when that
    variable has one and ``op`` asks for another: TF's placer then ignores ``op``'s request
    ("Ignoring device specification … because the input edge from … is a reference
    connection and already has a device field set"), as an update built under a worker's
    device scope must run where its ps variable lives."""
    for i, t in enumerate(op.inputs):
        if _ref_edge(op, i, t) and t.op.device and \
                not _compatible(DeviceSpec.from_string(t.op.device),
                                DeviceSpec.from_string(op.device)):
            return t.op.device
    return None


def _compatible(a: DeviceSpec, b: DeviceSpec) -> bool:
    """No field set in both to different values (TF's ``AreCompatibleDevNames``)."""
    return all(getattr(a, f) is None or getattr(b, f) is None or getattr(a, f) == getattr(b, f)
               for f in ("job", "replica", "task", "device_type", "device_index"))


def _place_group_on(g: _Group, devices: list, config, pinned) -> None:
    soft = bool(getattr(config, "allow_soft_placement", False))
    for op in g.constrained_by:
        if op.device and _overridden_by_ref_source(op) is None:
            _merge_request(g, op, soft)
    g.capable = [d for d in devices if all(can_run(op, d) for op in g.constrained_by)]
    if not g.capable:
        _no_capable_device(g, devices)
    if _keep_stateful_placement(g, devices, pinned):
        return
    g.candidates = [d for d in g.capable if spec_matches(g.request, d.spec)]
    req = g.request.to_string()
    if g.candidates:
        g.device = g.candidates[0]
        if g.requesters:
            g.rule = EXPLICIT
            g.reason = f"explicit request {req} by {_names(g.requesters)}"
        elif g.device is devices[0]:
            g.rule, g.reason = DEFAULT, "no constraint: the preferred device"
        else:
            why = unsupported_reason(next(o for o in g.constrained_by
                                          if not can_run(o, devices[0])), devices[0])
            g.rule = KERNEL
            g.reason = (f"no constraint, but {devices[0].short_name} cannot run it ({why}): "
                        f"first device that can")
        return
    # The request names no device that can run the group.
    matching = [d for d in devices if spec_matches(g.request, d.spec)]
    if matching:
        blocker = next(o for o in g.constrained_by if not can_run(o, matching[0]))
        why = (f"no supported kernel for {matching[0].device_type} devices is available "
               f"({unsupported_reason(blocker, matching[0])})")
        if blocker not in g.requesters:
            why += f"; it is colocated with {blocker.name} ({blocker.type})"
    else:
        why = "no such device exists"
    if soft:
        relaxed = g.request.replace(device_type=None, device_index=None)
        near = [d for d in g.capable if spec_matches(relaxed, d.spec)]
        g.device = (near or g.capable)[0]
        g.candidates = [g.device]
        g.rule = SOFT
        g.reason = (f"soft placement: requested {req} but {why}; "
                    f"{'same task' if near else 'first'} device that can run it")
        return
    op = g.requesters[0]
    if not matching:
        available = ", ".join(d.name for d in devices)
        raise errors.InvalidArgumentError(
            None, op, f"Cannot assign a device for operation {op.name}: Operation was explicitly "
            f"assigned to {op.device} but available devices are [ {available} ]. Make sure the "
            "device specification refers to a valid device.")
    raise errors.InvalidArgumentError(
        None, op, f"Cannot assign a device for operation {op.name}: Could not satisfy explicit "
        f"device specification '{op.device}' because {why}. Set allow_soft_placement=True to "
        "let the placer choose another device.")


def _keep_stateful_placement(g: _Group, devices: list, pinned) -> bool:
    """Put ``g`` where an earlier plan of the session put one of its stateful members (TF's
    ``stateful_placements``): a variable or queue must not move between runs, or a run would
    see another device's (uninitialized) state."""
    if not pinned:
        return False
    held = next(((m, pinned[m]) for m in g.members if m in pinned), None)
    if held is None:
        return False
    op, name = held
    dev = next((d for d in devices if d.name == name), None)
    if dev is None or dev not in g.capable:
        blocker = next((o for o in g.constrained_by if dev is not None and not can_run(o, dev)),
                       op)
        raise errors.InvalidArgumentError(
            None, blocker, f"Cannot place {blocker.name}: it is colocated with the stateful op "
            f"{op.name}, which an earlier run of this session placed on {name}, and "
            f"{blocker.name} ({blocker.type}) cannot run there")
    g.device, g.candidates, g.rule = dev, [dev], STATEFUL
    g.reason = (f"stateful: {op.name} stays on {dev.short_name}, where an earlier run of this "
                "session placed it")
    return True


def _no_capable_device(g: _Group, devices: list) -> None:
    for op in g.constrained_by:
        if not any(can_run(op, d) for d in devices):
            raise errors.InvalidArgumentError(
                None, op, f"No registered kernel for op {op.type} ({op.name}) on any available "
                f"device (kernels exist for {kernel_device_types(op.type)}; devices: "
                f"{', '.join(d.short_name for d in devices)})")
    raise errors.InvalidArgumentError(
        None, g.members[0], f"Cannot place colocation group {g.key}: no available device can "
        f"run all of {_names(g.constrained_by, 6)}")


# --- heuristics for lone ops ----------------------------------------------------------------------

def _is_generator(op) -> bool:
    return not op.inputs and len(op.outputs) == 1 and not op.outputs[0].dtype.is_ref_dtype


def _consumers(op, in_set) -> list:
    out = [c for t in op.outputs for c in t.consumers() if id(c) in in_set]
    out += [c for c in op.control_outputs if id(c) in in_set]
    return out


def _apply_heuristics(ops, groups, group_of, in_set, policy) -> None:
    lone = [g for g in groups if len(g.members) == 1 and g.rule in (DEFAULT, KERNEL, EXPLICIT)]
    if policy == "tf":  # the cost model already weighed where metadata ops should go
        for g in lone:
            op = g.members[0]
            if op.type in METADATA_OPS and op.inputs and id(op.inputs[0].op) in in_set:
                src = group_of[id(op.inputs[0].op)].device
                if src is not g.device and src in g.candidates:
                    g.device, g.rule = src, METADATA
                    g.reason = f"metadata op: placed with its input {op.inputs[0].op.name}"
    for g in lone:
        op = g.members[0]
        if not _is_generator(op) or g.rule == COST_MODEL:
            continue
        consumers = _consumers(op, in_set)
        if not consumers:
            continue
        where = {id(group_of[id(c)].device) for c in consumers}
        dev = group_of[id(consumers[0])].device
        if len(where) == 1 and dev is not g.device and dev in g.candidates:
            g.device, g.rule = dev, GENERATOR
            g.reason = f"generator: placed with its consumer {consumers[0].name}"


# --- entry point ----------------------------------------------------------------------------------

def _policy(config) -> str:
    return config.dflab.placement  # one of POLICIES: ConfigProto checks it


def place(ops, devices, config, pinned=None) -> dict:
    """Place ``ops`` (topologically ordered) on ``devices``: op -> ``Placement``.

    ``pinned`` (op -> device name) holds where earlier plans of the session put stateful ops;
    their groups stay there."""
    devs = list(getattr(devices, "prioritized", None) or devices)
    policy = _policy(config)
    in_set = {id(op) for op in ops}
    groups, group_of = _build_groups(ops)
    for g in groups:
        _place_group(g, devs, config, pinned)
    if policy == "cost_model":
        _apply_cost_model(ops, devs, groups, group_of, config)
    _apply_heuristics(ops, groups, group_of, in_set, policy)
    result = {}
    for op in ops:
        g = group_of[id(op)]
        rule, reason = g.rule, g.reason
        if g.name is not None:
            # The op the others were colocated with carries the group's rule; the others say
            # they follow it.
            if op.name == g.key:
                reason = f"{reason}; colocation group {g.name} ({len(g.members)} ops)"
            else:
                rule = COLOCATION
                reason = f"colocated with {g.name} ({len(g.members)} ops), placed by " \
                         f"{g.rule}: {g.reason}"
        result[op] = Placement(g.device.name, reason, rule, op.device, g.name,
                               bool(getattr(g.device, "simulated", False)))
    if getattr(config, "log_device_placement", False):
        for op in ops:
            print(f"{op.name}: ({op.type}): {result[op].device}", file=sys.stderr)
    return result


def _preferred_type(capable: list) -> list:
    """The cost model spreads an op over the devices of the type TF's rules would give it (the
    GPUs, when the op has a GPU kernel and GPUs exist), not over every device: simulated devices
    share the host's cores, so adding the CPU as one more "device" would only add transfers."""
    if not capable:
        return capable
    best = capable[0].device_type
    return [d for d in capable if d.device_type == best]


def _apply_cost_model(ops, devs, groups, group_of, config) -> None:
    from dflab.runtime import cost_model

    unknown = config.dflab.cost_model.get("unknown_dim_size", cost_model.UNKNOWN_DIM_SIZE)
    movable = {g.key for g in groups if g.rule in (DEFAULT, KERNEL)}
    fixed = {id(op): g.device for g in groups if g.key not in movable for op in g.members}
    floating = {id(g.members[0]): g.capable for g in groups
                if g.key in movable and len(g.members) == 1 and _is_generator(g.members[0])}
    candidates = {g.key: _preferred_type(g.capable) for g in groups}
    keys = {id(op): group_of[id(op)].key for op in ops}
    chosen, _ = cost_model.cost_model_placement(ops, devs, candidates, fixed, keys, floating,
                                                unknown)
    for g in groups:
        if g.key not in movable:
            continue
        dev, reason = chosen[id(g.members[0])]  # one decision per group
        g.device, g.rule, g.reason = dev, COST_MODEL, reason
        if id(g.members[0]) in floating:
            g.rule = GENERATOR
        g.candidates = [dev]


# --- reports --------------------------------------------------------------------------------------

@dataclass
class ReportRow:
    op: str
    type: str
    requested: str
    assigned: str
    rule: str
    reason: str
    group: str | None
    simulated: bool


class PlacementReport(RichDisplay):
    """A whole-graph view of a placement: one row per op, grouped views, text and HTML."""

    COLUMNS = ("op", "type", "requested", "assigned", "rule", "group", "reason")

    def __init__(self, placement: dict):
        self.placement = placement
        self.rows = [ReportRow(op.name, op.type, p.requested, p.device, p.rule, p.reason,
                               p.group, p.simulated) for op, p in placement.items()]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, op_name: str) -> ReportRow:
        for r in self.rows:
            if r.op == op_name:
                return r
        raise KeyError(op_name)

    def by_device(self) -> dict[str, list[ReportRow]]:
        out: dict[str, list[ReportRow]] = {}
        for r in self.rows:
            out.setdefault(r.assigned, []).append(r)
        return out

    def by_rule(self) -> dict[str, list[ReportRow]]:
        out: dict[str, list[ReportRow]] = {}
        for r in self.rows:
            out.setdefault(r.rule, []).append(r)
        return out

    @staticmethod
    def _short(name: str) -> str:
        return name.rsplit("/", 1)[-1].replace("device:", "") if name else ""

    def _cells(self, r: ReportRow) -> list[str]:
        assigned = self._short(r.assigned) + (" (simulated)" if r.simulated else "")
        return [r.op, r.type, r.requested or "-", assigned, r.rule, r.group or "-", r.reason]

    def text(self) -> str:
        table = [list(self.COLUMNS)] + [self._cells(r) for r in self.rows]
        widths = [max(len(row[i]) for row in table) for i in range(len(self.COLUMNS) - 1)]
        lines = []
        for k, row in enumerate(table):
            cells = [c.ljust(w) for c, w in zip(row, widths)] + [row[-1]]
            lines.append("  ".join(cells).rstrip())
            if k == 0:
                lines.append("  ".join("-" * w for w in widths) + "  ------")
        counts = ", ".join(f"{self._short(d)}{' (simulated)' if rows[0].simulated else ''}: "
                           f"{len(rows)}" for d, rows in self.by_device().items())
        lines.append(f"{len(self.rows)} ops; {counts}")
        return "\n".join(lines)

    __str__ = text

    def __repr__(self):
        return f"<PlacementReport {len(self.rows)} ops on {len(self.by_device())} devices>"

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th style='text-align:left'>{esc(c)}</th>" for c in self.COLUMNS)
        body = []
        for r in self.rows:
            cells = self._cells(r)
            body.append("<tr>" + "".join(
                f"<td style='text-align:left'"
                f"{' class=simulated' if i == 3 and r.simulated else ''}>{esc(c)}</td>"
                for i, c in enumerate(cells)) + "</tr>")
        # Left-aligned: JupyterLab's table style right-aligns cells, which scatters the
        # reasons' text.
        return (f"<table class='dflab-placement' style='text-align:left'>"
                f"<thead><tr>{head}</tr></thead>"
                f"<tbody>{''.join(body)}</tbody></table>")


def placement_report(placement: dict) -> PlacementReport:
    return PlacementReport(placement)


def explain_placement(fetches, config=None, feed_tensors=(), graph=None,
                      report_unsatisfiable=False) -> PlacementReport:
    """Place what ``fetches`` need (as ``Session.run`` would) without running it.

    A request no device here can satisfy fails as in ``Session.run``; with
    ``report_unsatisfiable`` the report instead places such ops as soft placement would and
    marks their rows (rule ``unsatisfiable``) with the reason and what to change."""
    config = config if config is not None else ConfigProto()
    graph = graph if graph is not None else _ops.get_default_graph()
    mapper = mapper_for(graph, fetches)
    ops = topological_order(prune(mapper.tensors, mapper.targets, feed_tensors), feed_tensors)
    devices = DeviceSet.from_config(config)
    try:
        try:
            return PlacementReport(place(ops, devices, config))
        except errors.InvalidArgumentError as e:
            if not report_unsatisfiable or getattr(config, "allow_soft_placement", False):
                raise
            soft = _with_soft_placement(config)
            placement = place(ops, devices, soft)
            return PlacementReport(_mark_unsatisfiable(placement, devices, e))
    finally:
        devices.close()


UNSATISFIABLE = "unsatisfiable"


def _with_soft_placement(config):
    soft = copy.copy(config)
    soft.allow_soft_placement = True
    return soft


def _mark_unsatisfiable(placement: dict, devices, error) -> dict:
    """The rows of ``placement`` (made with soft placement) whose own request it could not
    honour, re-labelled with why and what would honour it."""
    kinds = {d.device_type for d in devices}
    out = {}
    for op, p in placement.items():
        wanted = DeviceSpec.from_string(p.requested) if p.requested else None
        if wanted is None or wanted.is_compatible_with(DeviceSpec.from_string(p.device)):
            out[op] = p
            continue
        kind = wanted.device_type
        if kind is not None and kind not in kinds:
            hint = (f"no {kind} device here: ConfigProto(device_count={{'{kind}': 1}}) gives "
                    "a simulated one, or ")
        else:
            hint = "no device here matches the request: "
        hint += "allow_soft_placement=True runs it where shown"
        reason = f"cannot be placed as requested ({p.requested}); {hint}"
        out[op] = dataclasses.replace(p, rule=UNSATISFIABLE, reason=reason)
    if all(p.rule != UNSATISFIABLE for p in out.values()):
        raise error  # the failure was not about a request (a colocation conflict): as before
    return out
