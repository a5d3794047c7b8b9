"""Where the time goes: ops run eagerly, against the same work traced into a graph.

``record_eager_ops()`` listens to the eager context while a block runs: each op's type, device
and start/end (``EagerContext.op_listeners``). The ``EagerProfile`` it yields turns them into a
``RunMetadata`` (TF's step stats: one node per op run, in order, on its device), which
``client.timeline`` and the notebook's ``Timeline`` draw like a traced ``Session.run``, and into
per-op-type costs. ``trace_function(f, *args)`` runs one call of a traced function's graph on
the eager context's worker with the executor's step tracer, giving the graph side of the
comparison: the same ops, one plan, no Python between them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass

from dflab.eager import context as _ctx
from dflab.runtime.config import (
    DeviceStepStats,
    NodeExecStats,
    RunMetadata,
    RunOptions,
    StepStats,
)
from dflab.runtime.master import Master
from dflab.runtime.tracing import StepTracer
from dflab.runtime.worker import next_step_id


@dataclass
class OpCost:
    """What one op type cost: how many ran and their total time (seconds)."""

    op_type: str
    count: int
    total_s: float

    @property
    def mean_us(self) -> float:
        return self.total_s / self.count * 1e6 if self.count else 0.0


class EagerProfile:
    """The ops run eagerly while recording: ``records`` are (op type, device, start, end)."""

    def __init__(self):
        self.records: list = []
        self.wall_s = 0.0
        self._lock = threading.Lock()

    def add(self, op_type, device, start, end) -> None:
        with self._lock:
            self.records.append((op_type, device, start, end))

    def run_metadata(self) -> RunMetadata:
        """The ops as TF's step stats (node names ``Type_k``, in the order they ran)."""
        by_device: dict = {}
        counts: dict = {}
        thread = threading.get_ident()
        for op_type, device, start, end in self.records:
            k = counts.get(op_type, 0)
            counts[op_type] = k + 1
            start_ns = int(start * 1e9)
            dur_ns = max(int((end - start) * 1e9), 1)
            ns = NodeExecStats(
                node_name=f"{op_type}_{k}" if k else op_type,
                all_start_micros=start_ns // 1000, op_start_rel_micros=0,
                op_end_rel_micros=dur_ns // 1000, all_end_rel_micros=dur_ns // 1000,
                timeline_label=f"{op_type} (eager)", thread_id=thread,
                all_start_nanos=start_ns, op_start_rel_nanos=0, op_end_rel_nanos=dur_ns,
                all_end_rel_nanos=dur_ns)
            by_device.setdefault(device, []).append(ns)
        md = RunMetadata()
        md.step_stats = StepStats([DeviceStepStats(d, stats) for d, stats in by_device.items()])
        return md

    def op_costs(self) -> list[OpCost]:
        """Per op type: count and total time, most expensive first."""
        totals: dict = {}
        for op_type, _, start, end in self.records:
            c, t = totals.get(op_type, (0, 0.0))
            totals[op_type] = (c + 1, t + end - start)
        return sorted((OpCost(k, c, t) for k, (c, t) in totals.items()),
                      key=lambda c: -c.total_s)

    @property
    def kernel_s(self) -> float:
        """Time inside kernels; the rest of ``wall_s`` is Python and dispatch."""
        return sum(end - start for _, _, start, end in self.records)


@contextlib.contextmanager
def record_eager_ops(context=None):
    """Record every op the eager context runs inside the block (see the module docstring)."""
    ctx = context or _ctx.eager_context()
    profile = EagerProfile()
    ctx.op_listeners.append(profile.add)
    start = time.perf_counter()
    try:
        yield profile
    finally:
        profile.wall_s = time.perf_counter() - start
        ctx.op_listeners.remove(profile.add)


def trace_function(function, *args, **kwargs) -> RunMetadata:
    """Run one call of ``function``'s graph for these arguments (a ``tf.function`` or a
    concrete function) with the step tracer; its ``RunMetadata`` (ops, devices, times)."""
    concrete = function.get_concrete_function(*args, **kwargs) if hasattr(
        function, "get_concrete_function") else function
    ctx = _ctx.eager_context()
    master = Master(concrete.graph, ctx.config, ctx.worker)
    stateful = [op for op in concrete.graph.get_operations()
                if op.op_def.stateful and op.type != "Placeholder"]
    plan = master.build_plan(concrete.outputs, stateful, concrete.inputs)
    flat = [a for a in _flat_tensors(args, kwargs)]
    values = [t.value_in_memory() for t in flat] + [
        c.value_in_memory() for c in concrete.captured_inputs]
    tracer = StepTracer(plan)
    options = RunOptions(trace_level=RunOptions.FULL_TRACE)
    md = RunMetadata()
    if plan.partitioned:
        result = ctx.worker.run_step(plan.parts, values, next_step_id(), None, tracer,
                                     plan.main_partition)
        if result.error is not None:
            raise result.error
    else:
        ctx.worker.run_partition(plan.parts[0], values, next_step_id(), None, tracer)
    tracer.fill(md, options)
    return md


def _flat_tensors(args, kwargs) -> list:
    from dflab.framework import nest
    from dflab.framework import ops as _ops

    out = []
    for v in nest.flatten((list(args), kwargs)):
        if isinstance(v, _ops.Tensor):
            out.append(v)
        elif hasattr(v, "shape") and hasattr(v, "dtype"):
            out.append(_ops.convert_to_tensor(v))
    return out


def graph_op_costs(run_metadata) -> list[OpCost]:
    """Per op type of a traced step: count and total time, most expensive first."""
    totals: dict = {}
    for ds in run_metadata.step_stats.dev_stats:
        for ns in ds.node_stats:
            label = ns.timeline_label or ns.node_name
            op_type = label.split("(")[0].split("=")[-1].strip() or ns.node_name
            c, t = totals.get(op_type, (0, 0.0))
            dur = (ns.all_end_rel_nanos or ns.all_end_rel_micros * 1000) / 1e9
            totals[op_type] = (c + 1, t + dur)
    return sorted((OpCost(k, c, t) for k, (c, t) in totals.items()), key=lambda c: -c.total_s)
