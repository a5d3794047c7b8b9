"""Step tracing: an executor observer recording what ran where, when, on which thread, and what
memory it used; ``fill`` turns the records into TF's ``RunMetadata`` messages.

A ``StepTracer`` exists only while ``RunOptions.trace_level`` asks for tracing, so untraced runs
pay nothing. One tracer may be shared by several executions (one per device partition) running
on several threads, and a node inside a loop runs many times per step, so each *execution* of a
node is a record appended under a lock — never a slot keyed by the node's index.

Observer interface (what the executor calls)::

    node_start(execution, node, frame, iteration)
    node_end(execution, node, frame, iteration, outputs)

``frame`` has ``.name`` ("" for the root), ``.parent`` and ``.parent_iter``. The older two-argument
form ``node_start(ex, node)`` / ``node_end(ex, node)`` (outputs read from ``ex.slots``) is still
accepted.

Memory model. Each output value is classified once, when its node ends: a *fresh* buffer is one
this step allocated on the node's device; a *forwarded* one is a buffer already seen on that
device (Identity and reshapes return views of their input; detected through the NumPy base
array, tracked with weak references so a recycled ``id`` is never mistaken for an alias); a
*persistent* one belongs to the graph or a variable (``Const`` outputs, ref-typed outputs, reads
of a ref). A fresh buffer lives from its producer's start to the end of the last node that read
it (fetched tensors to the end of the step). Per device this gives the bytes allocated in the
step and, by a sweep over those lifetimes, the peak bytes in use.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import threading
import time
import weakref

import numpy as np

from dflab.framework.op_kinds import RECV_OPS, SEND_OPS
from dflab.framework.rendezvous import parse_key
from dflab.runtime.config import (
    AllocationDescription,
    AllocatorMemoryUsed,
    CostGraphDef,
    DeviceStepStats,
    MemoryStats,
    NodeExecStats,
    NodeOutput,
    TensorDescription,
    TensorShapeProto,
    TransferStats,
)
from dflab.runtime.memory_table import MemoryTable
from dflab.runtime.partition import user_op

# Ops whose outputs are graph-owned buffers created once, not per step.
_PERSISTENT_OPS = frozenset({"Const", "HostConst"})
_ROOT_PATH = (("", 0),)


class _Out:
    """One output value of one node execution, described when the node ended."""

    __slots__ = ("slot", "dtype", "shape", "nbytes", "alloc_id", "fresh", "persistent")

    def __init__(self, slot, dtype, shape, nbytes, alloc_id, fresh, persistent):
        self.slot = slot
        self.dtype = dtype
        self.shape = shape
        self.nbytes = nbytes
        self.alloc_id = alloc_id
        self.fresh = fresh
        self.persistent = persistent


class _Record:
    """One execution of one node: in which execution, frame iteration, device, thread, when."""

    __slots__ = ("exec_id", "node", "path", "device", "start", "end", "thread", "outputs",
                 "finished")

    def __init__(self, exec_id, node, path, device, start, end, thread, outputs, finished):
        self.exec_id = exec_id
        self.node = node
        self.path = path  # ((frame name, iteration), (parent name, parent iteration), ...)
        self.device = device
        self.start = start  # ns since the epoch
        self.end = end
        self.thread = thread
        self.outputs = outputs  # list of _Out, None for dead / absent values
        self.finished = finished

    @property
    def frame_key(self):
        return (self.exec_id, self.path)


def _frame_path(frame, iteration) -> tuple:
    if frame is None or not frame.name:
        return _ROOT_PATH
    path = [(frame.name, iteration)]
    it = getattr(frame, "parent_iter", 0)
    parent = getattr(frame, "parent", None)
    while parent is not None:
        path.append((parent.name, it))
        it = getattr(parent, "parent_iter", 0)
        parent = getattr(parent, "parent", None)
    return tuple(path)


def _root_buffer(v):
    while isinstance(v.base, np.ndarray):
        v = v.base
    return v


class StepTracer:
    """Executor observer for one traced step (see the module docstring)."""

    def __init__(self, plan=None, record_dead: bool = False):
        self.plan = plan
        # TF leaves dead nodes (untaken branches, a loop's final test) out of the step stats.
        self.record_dead = record_dead
        self.step_id = 0
        self.records: list[_Record] = []
        self._pending: dict = {}
        self._lock = threading.Lock()
        self._buffers: dict = {}  # (device, id(base array)) -> (weakref, alloc id, persistent)
        self._alloc_ids = itertools.count(1)
        self._plans: dict = {}  # execution id -> its executor plan (for its fetches)
        self._threads: dict = {}  # native thread id -> thread name
        # What other processes traced of the step (a cluster's tasks): their device stats,
        # and the tensors that crossed tasks: (rendezvous key, bytes, start ns, end ns).
        self.remote_stats: list = []
        self.transfers: list = []
        self._wall0 = time.time_ns()
        self._perf0 = time.perf_counter_ns()
        from dflab.kernels.control_flow_kernels import DEAD

        self._dead = DEAD

    def _now(self) -> int:
        # Wall-clock anchored, perf-counter resolution: comparable across threads and devices.
        return self._wall0 + (time.perf_counter_ns() - self._perf0)

    # --- observer interface -------------------------------------------------------------------
    def node_start(self, execution, node, frame=None, iteration=0) -> None:
        t = self._now()
        tid = threading.get_native_id()
        self.step_id = getattr(execution, "step_id", 0)
        with self._lock:
            self._pending[(id(execution), node.index, id(frame), iteration)] = (
                execution, node, frame, iteration, t, tid)

    def node_end(self, execution, node, frame=None, iteration=0, outputs=None) -> None:
        t = self._now()
        tid = threading.get_native_id()
        if outputs is None:  # the two-argument form: outputs sit in the root frame's slots
            base = getattr(node, "out_base", 0)
            outputs = execution.slots[base:base + getattr(node, "n_out", 0)]
        key = (id(execution), node.index, id(frame), iteration)
        if not self.record_dead and outputs and all(v is self._dead for v in outputs):
            with self._lock:
                self._pending.pop(key, None)
            return
        device = self._device_of(execution, node.op)
        path = _frame_path(frame, iteration)
        with self._lock:
            started = self._pending.pop(key, None)
            start = started[4] if started is not None else t
            outs = self._describe(node.op, outputs, device)
            self.records.append(_Record(id(execution), node, path, device, start, t, tid, outs,
                                        True))
            if id(execution) not in self._plans:
                self._plans[id(execution)] = getattr(execution, "plan", None)
            if tid not in self._threads:
                self._threads[tid] = threading.current_thread().name

    def add_device_stats(self, dev_stats) -> None:
        """Device stats another process traced for this step (a task of a cluster)."""
        with self._lock:
            self.remote_stats.extend(dev_stats)

    def add_transfers(self, transfers) -> None:
        """Tensors that crossed tasks: ``(rendezvous key, bytes, start ns, end ns)`` each."""
        with self._lock:
            self.transfers.extend(transfers)

    # --- classification of outputs ------------------------------------------------------------
    def _device_of(self, execution, op) -> str:
        placement = getattr(self.plan, "placement", None)
        if placement is not None and hasattr(placement, "get"):
            p = placement.get(op)
            if p is not None:
                return p.device
        # Partition nodes (views of user ops, _Send/_Recv) know their device themselves.
        assigned = getattr(op, "assigned_device", None)
        if assigned:
            return assigned
        attrs = getattr(op, "attrs", None) or {}
        if op.type in SEND_OPS and attrs.get("send_device"):
            return attrs["send_device"]
        if op.type in RECV_OPS and attrs.get("recv_device"):
            return attrs["recv_device"]
        return getattr(execution, "device", None) or op.device or "unknown"

    def _describe(self, op, outputs, device) -> list:
        """``_Out`` per output (None for a dead or missing value); call with the lock held."""
        outs = []
        graph_outs = op.outputs
        reads_ref = op.type == "Identity" and bool(op.inputs) and \
            op.inputs[0].dtype.is_ref_dtype
        for slot, v in enumerate(outputs):
            if v is None or v is self._dead:
                outs.append(None)
                continue
            gdtype = graph_outs[slot].dtype if slot < len(graph_outs) else None
            persistent = (op.type in _PERSISTENT_OPS or reads_ref
                          or (gdtype is not None and gdtype.is_ref_dtype))
            nbytes = int(getattr(v, "nbytes", 0) or 0)
            shape = getattr(v, "shape", None)
            shape = tuple(int(d) for d in shape) if isinstance(shape, tuple) else None
            fresh = not persistent and nbytes > 0
            alloc_id = 0
            if isinstance(v, np.ndarray):
                root = _root_buffer(v)
                key = (device, id(root))
                known = self._buffers.get(key)
                if known is not None and known[0]() is root:
                    alloc_id, fresh = known[1], False
                    persistent = persistent or known[2]
                else:
                    alloc_id = next(self._alloc_ids)
                    try:
                        self._buffers[key] = (weakref.ref(root), alloc_id, persistent)
                    except TypeError:  # not weak-referenceable: never treated as an alias
                        pass
            elif nbytes:
                alloc_id = next(self._alloc_ids)
            dtype = gdtype.base_dtype if gdtype is not None else None
            outs.append(_Out(slot, dtype, shape, nbytes, alloc_id, fresh, persistent))
        return outs

    # --- RunMetadata ------------------------------------------------------------------------
    def fill(self, run_metadata, options, partition_graphs=None) -> None:
        """Replace ``run_metadata``'s contents with this step's stats, cost graph and (when
        ``options.output_partition_graphs``) partition graphs: ``partition_graphs`` if given,
        else the plan's graphs (one per device when the plan can tell)."""
        with self._lock:
            records = list(self.records)
            # A node that started but never reported its end (e.g. an asynchronous kernel the
            # executor does not report) still appears, with zero duration.
            for ex, node, frame, iteration, t, tid in self._pending.values():
                records.append(_Record(id(ex), node, _frame_path(frame, iteration),
                                       self._device_of(ex, node.op), t, t, tid, [], False))
            threads = dict(self._threads)
            plans = dict(self._plans)
            remote = list(self.remote_stats)
            transfers = list(self.transfers)
        records.sort(key=lambda r: (r.start, r.end))
        memory = _MemoryModel(records, _fetch_keys(plans.values(), self.plan))

        by_device: dict[str, DeviceStepStats] = {}
        for r in records:
            ds = by_device.get(r.device)
            if ds is None:
                ds = by_device[r.device] = DeviceStepStats(r.device)
            ds.node_stats.append(_node_stats(r, memory))
            if r.thread in threads:
                ds.thread_names.setdefault(r.thread, threads[r.thread])
        for ds in remote:
            by_device[ds.device] = ds
        step_stats = run_metadata.step_stats
        step_stats.dev_stats[:] = [by_device[d] for d in sorted(by_device)]
        run_metadata.transfers[:] = [_transfer_stats(*t) for t in sorted(transfers,
                                                                        key=lambda t: t[2])]
        step_stats.step_id = self.step_id
        run_metadata.cost_graph = _cost_graph(self.plan, records, plans.values())
        graphs = []
        if getattr(options, "output_partition_graphs", False):
            if partition_graphs is None:
                graphs = _plan_graph_defs(self.plan) if self.plan is not None else []
            else:
                graphs = list(partition_graphs)
        run_metadata.partition_graphs[:] = graphs


def _transfer_stats(key: str, nbytes: int, start_ns: int, end_ns: int) -> TransferStats:
    parsed = parse_key(key)
    return TransferStats(key, parsed.edge_name, parsed.src_device, parsed.dst_device,
                         int(nbytes), start_ns // 1000, end_ns // 1000)


def _fetch_keys(exec_plans, plan) -> set:
    keys = set()
    for p in list(exec_plans) + [getattr(plan, "executor_plan", None)]:
        for t in getattr(p, "fetches", ()) or ():
            keys.add((id(t.op), t.value_index))
    return keys


class _MemoryModel:
    """Buffer lifetimes and per-device in-use curves computed from the records."""

    def __init__(self, records, fetch_keys):
        # alloc id -> [device, bytes, created, freed, fetched]
        self.allocs: dict[int, list] = {}
        producers: dict = {}  # (id(op), slot) -> [(record, out)], in start order
        by_frame: dict = {}  # (id(op), slot, frame key) -> [(record, out)]
        step_end = max((r.end for r in records), default=0)
        for r in records:
            for o in r.outputs:
                if o is None:
                    continue
                key = (id(r.node.op), o.slot)
                producers.setdefault(key, []).append((r, o))
                by_frame.setdefault(key + (r.frame_key,), []).append((r, o))
                if o.fresh:
                    self.allocs[o.alloc_id] = [r.device, o.nbytes, r.start, r.end, False]
        starts = {k: [r.start for r, _ in v] for k, v in producers.items()}
        for c in records:
            for t in c.node.op.inputs:
                key = (id(t.op), t.value_index)
                found = _pick(by_frame.get(key + (c.frame_key,)), c.start) or \
                    _pick(producers.get(key), c.start, starts.get(key))
                if found is not None:
                    self._extend(found[1].alloc_id, c.end)
        for key in fetch_keys:  # fetched values stay allocated until the step returns
            for _, o in producers.get(key, ()):
                self._extend(o.alloc_id, step_end)
                if o.alloc_id in self.allocs:
                    self.allocs[o.alloc_id][4] = True
        self._curves = self._sweep()

    def _extend(self, alloc_id, t) -> None:
        a = self.allocs.get(alloc_id)
        if a is not None and t > a[3]:
            a[3] = t

    def _sweep(self) -> dict:
        """Per device: sorted event times, the level just after each time's allocations (before
        its frees), and the level after both. Allocations at one instant count before its
        frees, so a node's inputs and outputs are in use together."""
        per_dev: dict[str, list] = {}
        for dev, nbytes, created, freed, _ in self.allocs.values():
            per_dev.setdefault(dev, []).append((created, nbytes, 0))
            per_dev.setdefault(dev, []).append((freed, 0, nbytes))
        curves = {}
        for dev, events in per_dev.items():
            events.sort()
            times, peaks, afters = [], [], []
            level = 0
            for t, plus, minus in events:
                if times and times[-1] == t:
                    peaks[-1] += plus
                    afters[-1] += plus - minus
                    level = afters[-1]
                    continue
                times.append(t)
                peaks.append(level + plus)
                level += plus - minus
                afters.append(level)
            curves[dev] = (times, peaks, afters)
        return curves

    def in_use_during(self, device, start, end) -> int:
        curve = self._curves.get(device)
        if curve is None:
            return 0
        times, peaks, afters = curve
        i0 = bisect.bisect_left(times, start)
        i1 = bisect.bisect_right(times, end)
        level = afters[i0 - 1] if i0 else 0
        if i1 > i0:
            level = max(level, max(peaks[i0:i1]))
        return level

    def live_after(self, out, t) -> bool:
        a = self.allocs.get(out.alloc_id)
        return a is not None and (a[3] > t or a[4])


def _pick(cands, t, starts=None):
    """The candidate producer that started last at or before ``t`` (else the first one)."""
    if not cands:
        return None
    if starts is None:
        starts = [r.start for r, _ in cands]
    i = bisect.bisect_right(starts, t) - 1
    return cands[max(i, 0)]


@functools.lru_cache(maxsize=256)
def allocator_name(device: str) -> str:
    """The allocator name dflab reports for a device: ``CPU_0``, ``GPU_1`` …"""
    from dflab.framework.device_spec import DeviceSpec

    try:
        spec = DeviceSpec.from_string(device)
    except (ValueError, TypeError):
        return device or "unknown"
    if spec.device_type is None:
        return device or "unknown"
    return f"{spec.device_type}_{spec.device_index or 0}"


def _input_names(op) -> list:
    names = [t.op.name if t.value_index == 0 else t.name for t in op.inputs]
    return names + ["^" + c.name for c in op.control_inputs]


def kernel_type(node) -> str | None:
    """What the node's kernel calls the op it ran, where that is not the op's type: a kernel
    on a library names itself as TF's do (``_MklConv2D``, see ``dflab.kernels.onednn``)
    through its ``kernel_label``; None otherwise. Looks through the executor's wrappers
    (``fn`` attributes)."""
    fn = getattr(node, "fn", None)
    for _ in range(4):  # a kernel is wrapped at most a few times
        if fn is None:
            return None
        label = getattr(fn, "kernel_label", None)
        if label:
            return label
        fn = getattr(fn, "fn", None)
    return None


def timeline_label(op, path=_ROOT_PATH, kernel: str | None = None) -> str:
    """TF's label ``name = Type(input, ...)``; a node inside a loop gets `` [frame:iteration]``.
    ``kernel``: the kernel's own name for the op (``kernel_type``), in place of its type.

    Transfers use TF's own form, ``name = _Send(tensor_name @recv_device)`` and
    ``name = _Recv(tensor_name @send_device)`` (with the closing parenthesis TF leaves out),
    which lets a timeline pair each Send with its Recv from the step stats alone.
    """
    attrs = getattr(op, "attrs", {})
    inside = None
    if op.type in SEND_OPS and attrs.get("tensor_name") and attrs.get("recv_device"):
        inside = f"{attrs['tensor_name']} @{attrs['recv_device']}"
    elif op.type in RECV_OPS and attrs.get("tensor_name") and attrs.get("send_device"):
        inside = f"{attrs['tensor_name']} @{attrs['send_device']}"
    if inside is None:
        inside = ", ".join(_input_names(op))
    label = f"{op.name} = {kernel or op.type}({inside})"
    if path[0][0]:
        label += f" [{path[0][0]}:{path[0][1]}]"
    return label


def _shape_proto(shape) -> TensorShapeProto:
    if shape is None:
        return TensorShapeProto(unknown_rank=True)
    return TensorShapeProto(dim=list(shape))


def _static_shape_proto(tensor) -> TensorShapeProto:
    dims = tensor.shape.as_list() if tensor.shape.ndims is not None else None
    return _shape_proto(None if dims is None else [-1 if d is None else d for d in dims])


def _node_stats(r: _Record, memory: _MemoryModel) -> NodeExecStats:
    start_us = r.start // 1000
    rel_us = r.end // 1000 - start_us
    rel_ns = r.end - r.start
    alloc = allocator_name(r.device)
    outputs, referenced = [], []
    fresh_bytes = live_bytes = persistent_bytes = 0
    for o in r.outputs:
        if o is None:
            continue
        desc = AllocationDescription(
            requested_bytes=o.nbytes, allocated_bytes=o.nbytes if o.fresh else 0,
            allocator_name=alloc, allocation_id=o.alloc_id)
        outputs.append(NodeOutput(o.slot, TensorDescription(o.dtype, _shape_proto(o.shape),
                                                            desc)))
        if o.fresh:
            fresh_bytes += o.nbytes
            if memory.live_after(o, r.end):
                live_bytes += o.nbytes
        else:
            referenced.append(desc)
            if o.persistent:
                persistent_bytes += o.nbytes
    mem = []
    if r.finished:
        mem.append(AllocatorMemoryUsed(
            allocator_name=alloc, total_bytes=fresh_bytes, peak_bytes=fresh_bytes,
            live_bytes=live_bytes,
            allocator_bytes_in_use=memory.in_use_during(r.device, r.start, r.end)))
    return NodeExecStats(
        node_name=r.node.op.name, all_start_micros=start_us, op_start_rel_micros=0,
        op_end_rel_micros=rel_us, all_end_rel_micros=rel_us, memory=mem, output=outputs,
        timeline_label=timeline_label(r.node.op, r.path, kernel_type(r.node)),
        scheduled_micros=start_us,
        thread_id=r.thread, referenced_tensor=referenced,
        memory_stats=MemoryStats(persistent_memory_size=persistent_bytes),
        all_start_nanos=r.start, op_start_rel_nanos=0, op_end_rel_nanos=rel_ns,
        all_end_rel_nanos=rel_ns, scheduled_nanos=r.start,
        fused_ops=r.node.op.attrs.get("fused_ops"),
    )


def _cost_graph(plan, records, exec_plans) -> CostGraphDef:
    """TF's cost graph: one node per op of the step (user ops, then transfer nodes), with the
    measured compute time summed over all its executions and its largest output sizes."""
    ops = list(getattr(plan, "ops", None) or [])
    known = {id(op) for op in ops}
    for r in records:
        op = user_op(r.node.op)
        if id(op) not in known:
            known.add(id(op))
            ops.append(op)
    ids = {id(op): k for k, op in enumerate(ops)}
    devices, micros, outs = {}, {}, {}
    for r in records:
        key = id(user_op(r.node.op))
        devices.setdefault(key, r.device)
        micros[key] = micros.get(key, 0) + (r.end - r.start) // 1000
        for o in r.outputs:
            if o is not None:
                slot = outs.setdefault(key, {})
                prev = slot.get(o.slot)
                if prev is None or o.nbytes >= prev.nbytes:
                    slot[o.slot] = o
    final_ops = set()
    for p in list(exec_plans) + [getattr(plan, "executor_plan", None)]:
        for t in getattr(p, "fetches", None) or ():
            final_ops.add(id(user_op(t.op)))
    placement = getattr(plan, "placement", None) or {}
    nodes = []
    for k, op in enumerate(ops):
        p = placement.get(op) if hasattr(placement, "get") else None
        device = p.device if p is not None else devices.get(id(op), op.device)
        seen = outs.get(id(op), {})
        out_info = []
        for slot, t in enumerate(op.outputs):
            o = seen.get(slot)
            if o is None:
                out_info.append(CostGraphDef.Node.OutputInfo(
                    size=0, shape=_static_shape_proto(t), dtype=t.dtype.base_dtype))
            else:
                out_info.append(CostGraphDef.Node.OutputInfo(
                    size=o.nbytes, shape=_shape_proto(o.shape), dtype=o.dtype))
        inputs = [(ids.get(id(user_op(t.op))), t.value_index) for t in op.inputs]
        controls = [ids.get(id(user_op(c))) for c in op.control_inputs]
        nodes.append(CostGraphDef.Node(
            name=op.name, device=device, id=k,
            input_info=[CostGraphDef.Node.InputInfo(i, port) for i, port in inputs
                        if i is not None],
            output_info=out_info,
            persistent_memory_size=sum(o.nbytes for o in seen.values() if o.persistent),
            compute_cost=micros.get(id(op), 0), compute_time=micros.get(id(op), 0),
            is_final=id(op) in final_ops,
            control_input=[i for i in controls if i is not None],
        ))
    return CostGraphDef(node=nodes)


def _plan_graph_defs(plan) -> list:
    """The plan's graphs per device when the plan can say, else one graph of all its ops."""
    if hasattr(plan, "partition_graph_defs"):
        return list(plan.partition_graph_defs())
    from dflab.framework.graph_io import GraphDef, node_def_of

    nodes = []
    for op in plan.ops:
        nd = node_def_of(op)
        nd.device = plan.placement[op].device
        nodes.append(nd)
    return [GraphDef(nodes)]


def memory_summary(run_metadata) -> MemoryTable:
    """Per device of a traced step: ``{"bytes_allocated", "peak_bytes", "nodes"}``.

    ``bytes_allocated`` sums the fresh output buffers the step allocated on the device,
    ``peak_bytes`` is the most bytes in use at once, ``nodes`` counts node executions. Accepts
    a ``RunMetadata`` or a ``StepStats``.
    """
    step_stats = getattr(run_metadata, "step_stats", run_metadata)
    summary = MemoryTable()
    for ds in step_stats.dev_stats:
        entry = summary.setdefault(ds.device, {"bytes_allocated": 0, "peak_bytes": 0,
                                               "nodes": 0})
        entry["nodes"] += len(ds.node_stats)
        for ns in ds.node_stats:
            for m in ns.memory:
                entry["bytes_allocated"] += m.total_bytes
                entry["peak_bytes"] = max(entry["peak_bytes"], m.allocator_bytes_in_use,
                                          m.peak_bytes)
    return summary

