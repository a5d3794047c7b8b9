"""A static cost model of a placed graph, and the cost-model placement policy built on it.

Costs come from static shapes only (no profiling): an op's *work* is its FLOPs (MatMul,
BatchMatMul, Conv2D and its gradients, elementwise math, reductions, softmax) and the bytes it
reads and writes; on a device it takes ``op_overhead_s + max(flops / flops_per_s,
bytes / bytes_per_s)`` (a roofline). A tensor crossing devices costs ``latency_s +
bytes / bandwidth_bytes_per_s`` (the slower endpoint's figures), once per tensor and destination
device, as the partitioner sends it. Unknown dimensions count as ``unknown_dim_size`` (32).
Device parameters live on each ``Device`` (``devices.DEFAULT_PARAMS``, overridable).

``estimate_step_time`` simulates one step of a given placement in the manner of the 2015 TF
white paper's simulated execution: ops start in order of readiness, each device runs one op at
a time, an input arrives after its producer finishes plus the transfer. ``cost_model_placement``
is the greedy list scheduler that uses the same simulation to *choose*: it takes ready ops in
order and puts each on the candidate device where it would finish earliest. Groups the placer
has pinned (explicit requests, soft placement) keep their device; a colocation group moves as
one (its first scheduled member decides); "generator" ops (no inputs, e.g. Const) follow their
first consumer, as in TF's placer.

Invariant: the model is deterministic (ties go to the device listed first) and never changes
the graph.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from dflab.framework import dtypes as _dt
from dflab.framework.op_kinds import BACK_EDGE_OPS, CONTROL_FLOW_OPS

UNKNOWN_DIM_SIZE = 32
_OPAQUE_ELEMENT_BYTES = 64  # strings, resources: a guess per element

# Ops that run in O(1) regardless of their tensors' size: they hand over a stored array, a view
# or nothing at all.
FREE_OPS = frozenset({
    "Const", "Placeholder", "PlaceholderWithDefault", "VariableV2", "Identity", "NoOp",
    "StopGradient", "Shape", "ShapeN", "Size", "Rank", "Reshape", "ExpandDims", "Squeeze",
    "IsVariableInitialized",
}) | CONTROL_FLOW_OPS
# Elementwise ops: one FLOP per output element; transcendental ones count as several.
ELEMENTWISE_OPS = frozenset({
    "Abs", "AddV2", "Add", "Sub", "Mul", "RealDiv", "Div", "FloorDiv", "FloorMod", "Maximum",
    "Minimum", "Neg", "Square", "SquaredDifference", "Sign", "Reciprocal", "Relu", "Relu6",
    "ReluGrad", "Relu6Grad", "LeakyRelu", "LeakyReluGrad", "SigmoidGrad", "TanhGrad", "Floor",
    "Ceil", "Round", "Cast",
    "Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd",
    "LogicalOr", "LogicalNot", "Select", "SelectV2", "BiasAdd", "Softsign", "SoftsignGrad",
    "IsFinite", "IsInf", "IsNan", "ZerosLike", "OnesLike", "Fill",
    "ApplyGradientDescent", "ApplyMomentum",
})
TRANSCENDENTAL_OPS = frozenset({
    "Exp", "Log", "Log1p", "Tanh", "Sigmoid", "Sin", "Cos", "Pow", "Sqrt", "Rsqrt",
    "Softplus", "SoftplusGrad", "Elu", "EluGrad", "Selu", "SeluGrad", "ApplyAdam",
    "ApplyRMSProp", "ApplyCenteredRMSProp", "ApplyAdagrad",
})
TRANSCENDENTAL_FLOPS = 4
REDUCTION_OPS = frozenset({
    "Sum", "Mean", "Max", "Min", "Prod", "All", "Any", "ArgMax", "ArgMin", "L2Loss",
    "BiasAddGrad", "Cumsum", "Cumprod",
})
SOFTMAX_OPS = frozenset({
    "Softmax", "LogSoftmax", "SoftmaxCrossEntropyWithLogits",
    "SparseSoftmaxCrossEntropyWithLogits",
})
SOFTMAX_FLOPS = 5
# Per input element: statistics, then the normalisation (forward); two sums, then dx (grad).
BATCH_NORM_FLOPS = {**dict.fromkeys(("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"),
                                    5),
                    **dict.fromkeys(("FusedBatchNormGrad", "FusedBatchNormGradV2",
                                     "FusedBatchNormGradV3"), 8)}


@dataclass(frozen=True)
class OpCost:
    """The device-independent work of one op."""

    flops: float
    bytes: float
    free: bool = False  # O(1): only the per-op overhead


# --- sizes ----------------------------------------------------------------------------------------

def _dims(shape, unknown: int) -> list[int] | None:
    if shape.ndims is None:
        return None
    return [unknown if d is None else int(d) for d in shape.as_list()]


def num_elements(t, unknown: int = UNKNOWN_DIM_SIZE) -> int:
    """Elements of tensor ``t`` from its static shape; unknown rank counts as a vector."""
    dims = _dims(t.shape, unknown)
    return unknown if dims is None else math.prod(dims)


def element_size(dtype) -> int:
    base = dtype.base_dtype
    if base is _dt.string:
        return _OPAQUE_ELEMENT_BYTES
    return getattr(base, "size", 0) or _OPAQUE_ELEMENT_BYTES


def tensor_bytes(t, unknown: int = UNKNOWN_DIM_SIZE) -> int:
    return num_elements(t, unknown) * element_size(t.dtype)


# --- per-op work ----------------------------------------------------------------------------------

def op_cost(op, unknown: int = UNKNOWN_DIM_SIZE) -> OpCost:
    """FLOPs and bytes moved by ``op``, from static shapes (see the module docstring)."""
    nbytes = sum(tensor_bytes(t, unknown) for t in op.inputs if not t.dtype.is_ref_dtype)
    nbytes += sum(tensor_bytes(t, unknown) for t in op.outputs if not t.dtype.is_ref_dtype)
    if op.type in FREE_OPS:
        return OpCost(0.0, 0.0, free=True)
    out = num_elements(op.outputs[0], unknown) if op.outputs else 0
    t = op.type
    if t == "MatMul":
        a = _dims(op.inputs[0].shape, unknown) or [unknown, unknown]
        k = a[0] if op.attrs.get("transpose_a") else a[-1]
        flops = 2.0 * out * k
    elif t == "BatchMatMulV2":
        a = _dims(op.inputs[0].shape, unknown) or [unknown, unknown]
        k = a[-2] if op.attrs.get("adj_x") else a[-1]
        flops = 2.0 * out * k
    elif t in ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"):
        # Every variant does the forward conv's multiply-adds: 2 * |forward output| * kh*kw*ci.
        filt = op.outputs[0] if t == "Conv2DBackpropFilter" else op.inputs[1]
        f = _dims(filt.shape, unknown) or [3, 3, unknown, unknown]
        fwd_out = out if t == "Conv2D" else num_elements(op.inputs[2], unknown)
        flops = 2.0 * fwd_out * f[0] * f[1] * f[2]
    elif t in ELEMENTWISE_OPS:
        flops = float(out)
    elif t in TRANSCENDENTAL_OPS:
        flops = float(TRANSCENDENTAL_FLOPS * out)
    elif t in REDUCTION_OPS:
        flops = float(num_elements(op.inputs[0], unknown)) if op.inputs else 0.0
    elif t in SOFTMAX_OPS:
        flops = float(SOFTMAX_FLOPS * num_elements(op.inputs[0], unknown))
    elif t in BATCH_NORM_FLOPS:
        flops = float(BATCH_NORM_FLOPS[t] * num_elements(op.inputs[0], unknown))
    elif t == "AddN":
        flops = float(max(len(op.inputs) - 1, 0) * out)
    else:
        flops = 0.0  # data movement: the bytes term decides
    return OpCost(flops, float(nbytes))


def compute_time(cost: OpCost, device) -> float:
    """Seconds ``device`` needs for an op of this cost (roofline plus per-op overhead)."""
    if cost.free:
        return device.op_overhead_s
    return device.op_overhead_s + max(cost.flops / device.flops_per_s,
                                      cost.bytes / device.bytes_per_s)


def transfer_time(nbytes: float, src, dst) -> float:
    """Seconds to move ``nbytes`` from ``src`` to ``dst``; 0 on the same device."""
    if src is dst:
        return 0.0
    bandwidth = min(src.bandwidth_bytes_per_s, dst.bandwidth_bytes_per_s)
    return max(src.latency_s, dst.latency_s) + nbytes / bandwidth


# --- simulation -----------------------------------------------------------------------------------

@dataclass
class StepEstimate:
    """The simulated timeline of one step of a placed graph."""

    step_time: float  # seconds from the first op's start to the last op's end
    start: dict = field(default_factory=dict)  # op -> seconds
    finish: dict = field(default_factory=dict)  # op -> seconds
    device_busy: dict = field(default_factory=dict)  # device name -> seconds computing
    transfers: int = 0  # tensors that crossed devices (one per tensor and destination)
    transfer_bytes: float = 0.0
    transfer_time: float = 0.0  # sum over transfers

    def __float__(self):
        return self.step_time

    def summary(self) -> str:
        busy = ", ".join(f"{name.rsplit('/', 1)[-1]} {s * 1e3:.3f} ms"
                         for name, s in self.device_busy.items())
        return (f"estimated step {self.step_time * 1e3:.3f} ms; busy: {busy}; "
                f"{self.transfers} transfers, {self.transfer_bytes / 1e6:.3f} MB")


class _Simulator:
    """Shared state of a simulated step: device clocks, op finish times, tensor locations."""

    def __init__(self, ops, devices, unknown):
        self.ops = list(ops)
        self.devices = list(devices)
        self.host = next((d for d in self.devices if d.device_type == "CPU"), self.devices[0])
        self.unknown = unknown
        self.in_set = {id(op) for op in self.ops}
        self.order = {id(op): i for i, op in enumerate(self.ops)}
        self.free_at = {d.name: 0.0 for d in self.devices}
        self.busy = {d.name: 0.0 for d in self.devices}
        self.loc: dict[int, object] = {}  # id(op) -> Device
        self.finish: dict[int, float] = {}
        self.start: dict[int, float] = {}
        self.arrivals: dict[tuple, float] = {}  # (id(tensor) or id(op), device name) -> time
        self.n_transfers = 0
        self.bytes_moved = 0.0
        self.time_moving = 0.0
        self._costs: dict[int, OpCost] = {}

    def cost(self, op) -> OpCost:
        c = self._costs.get(id(op))
        if c is None:
            c = self._costs[id(op)] = op_cost(op, self.unknown)
        return c

    def preds(self, op):
        """(producer or None, tensor or None) per data and control input. A loop's back edges
        (out of NextIteration) are left out: the model sees one iteration of each loop."""
        for t in op.inputs:
            if t.op.type in BACK_EDGE_OPS:
                continue
            yield (t.op if id(t.op) in self.in_set else None), t
        for c in op.control_inputs:
            if id(c) in self.in_set:
                yield c, None

    def data_ready(self, op, dev, commit=False, floating=None) -> float:
        """When all of ``op``'s inputs can be on ``dev``; with ``commit`` record transfers."""
        ready = 0.0
        for src_op, t in self.preds(op):
            if floating and src_op is not None and id(src_op) in floating \
                    and id(src_op) not in self.loc:
                continue  # an unplaced generator will be put next to its consumer: no copy
            src = self.loc[id(src_op)] if src_op is not None else self.host
            produced = self.finish[id(src_op)] if src_op is not None else 0.0
            if src is dev:
                ready = max(ready, produced)
                continue
            key = (id(t) if t is not None else id(src_op), dev.name)
            arrival = self.arrivals.get(key)
            if arrival is None:
                nbytes = 0.0 if t is None or t.dtype.is_ref_dtype else tensor_bytes(
                    t, self.unknown)
                dt = transfer_time(nbytes, src, dev)
                arrival = produced + dt
                if commit:
                    self.arrivals[key] = arrival
                    self.n_transfers += 1
                    self.bytes_moved += nbytes
                    self.time_moving += dt
            ready = max(ready, arrival)
        return ready

    def finish_on(self, op, dev, floating=None) -> float:
        start = max(self.free_at[dev.name], self.data_ready(op, dev, floating=floating))
        return start + compute_time(self.cost(op), dev)

    def run_on(self, op, dev, floating=None) -> None:
        # Generators that are still floating land on their consumer's device first (or on
        # their own first choice where they cannot run there).
        for src_op, _ in self.preds(op):
            if floating and src_op is not None and id(src_op) in floating \
                    and id(src_op) not in self.loc:
                allowed = floating[id(src_op)]
                self.run_on(src_op, dev if dev in allowed else allowed[0])
        start = max(self.free_at[dev.name],
                    self.data_ready(op, dev, commit=True, floating=floating))
        took = compute_time(self.cost(op), dev)
        self.loc[id(op)] = dev
        self.start[id(op)] = start
        self.finish[id(op)] = start + took
        self.free_at[dev.name] = start + took
        self.busy[dev.name] += took

    def ready_order(self, skip=frozenset()):
        """Yield ops in order of readiness (latest predecessor finish, then graph order)."""
        succ: dict[int, list] = {}
        pending = {}
        for op in self.ops:
            n = 0
            for src_op, _ in self.preds(op):
                if src_op is not None:
                    n += 1
                    succ.setdefault(id(src_op), []).append(op)
            pending[id(op)] = n
        heap = [(0.0, self.order[id(op)], op) for op in self.ops if pending[id(op)] == 0]
        heapq.heapify(heap)
        while heap:
            _, _, op = heapq.heappop(heap)
            if id(op) not in skip:
                yield op
            for s in succ.get(id(op), ()):
                pending[id(s)] -= 1
                if pending[id(s)] == 0:
                    ready = max((self.finish.get(id(p), 0.0) for p, _ in self.preds(s)
                                 if p is not None), default=0.0)
                    heapq.heappush(heap, (ready, self.order[id(s)], s))

    def result(self) -> StepEstimate:
        t0 = min(self.start.values(), default=0.0)
        t1 = max(self.finish.values(), default=0.0)
        by_id = {id(op): op for op in self.ops}
        return StepEstimate(
            step_time=t1 - t0,
            start={by_id[k]: v for k, v in self.start.items()},
            finish={by_id[k]: v for k, v in self.finish.items()},
            device_busy=dict(self.busy), transfers=self.n_transfers,
            transfer_bytes=self.bytes_moved, transfer_time=self.time_moving)


def _device_list(devices):
    return list(getattr(devices, "prioritized", None) or devices)


def _resolve(devices, where):
    if hasattr(where, "device") and isinstance(where.device, str):  # a Placement
        where = where.device
    if isinstance(where, str):
        for d in devices:
            if d.name == where or d.short_name == where:
                return d
        raise KeyError(f"placement names unknown device {where!r}")
    return where


def estimate_step_time(ops, placement, devices, unknown_dim_size: int = UNKNOWN_DIM_SIZE
                       ) -> StepEstimate:
    """Simulate one step of ``ops`` placed as ``placement`` (op -> Placement, device name or
    Device) on ``devices``. Returns a ``StepEstimate``; ``float(est)`` is the step time."""
    devs = _device_list(devices)
    sim = _Simulator(ops, devs, unknown_dim_size)
    where = {id(op): _resolve(devs, placement[op]) for op in sim.ops}
    for op in sim.ready_order():
        sim.run_on(op, where[id(op)])
    return sim.result()


def cost_model_placement(ops, devices, candidates, fixed, group_of, floating=None,
                         unknown_dim_size: int = UNKNOWN_DIM_SIZE):
    """Choose devices greedily by earliest estimated finish.

    ``candidates``: group key -> devices the group may use (in preference order);
    ``fixed``: id(op) -> Device for ops whose placement is decided already;
    ``group_of``: id(op) -> group key; ``floating``: id(op) -> allowed devices, for generator
    ops that follow their first consumer. Returns (id(op) -> (Device, reason), StepEstimate).
    """
    devs = _device_list(devices)
    sim = _Simulator(ops, devs, unknown_dim_size)
    floating = dict(floating or {})
    chosen_group: dict = {}
    out = {}
    for op in sim.ready_order(skip=floating):
        key = group_of[id(op)]
        if id(op) in fixed:
            sim.run_on(op, fixed[id(op)], floating)
            out[id(op)] = (fixed[id(op)], None)
            continue
        if key in chosen_group:
            dev, reason = chosen_group[key]
            sim.run_on(op, dev, floating)
            out[id(op)] = (dev, reason)
            continue
        best, best_t, others = None, math.inf, []
        for dev in candidates[key]:
            t = sim.finish_on(op, dev, floating)
            others.append((dev, t))
            if t < best_t - 1e-15:
                best, best_t = dev, t
        alts = ", ".join(f"{d.short_name} {t * 1e6:.1f} µs" for d, t in others if d is not best)
        reason = (f"cost model: earliest estimated finish on {best.short_name} at "
                  f"{best_t * 1e6:.1f} µs" + (f" (vs {alts})" if alts else ""))
        chosen_group[key] = (best, reason)
        sim.run_on(op, best, floating)
        out[id(op)] = (best, reason)
    for op in sim.ops:  # generators nobody consumed in the set: where the rules put them
        if id(op) in floating and id(op) not in sim.loc:
            sim.run_on(op, floating[id(op)][0])
    for op in sim.ops:
        if id(op) in floating:
            dev = sim.loc[id(op)]
            out[id(op)] = (dev, f"generator: placed with its first consumer on {dev.short_name}")
    return out, sim.result()
