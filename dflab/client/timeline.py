"""Chrome trace of a traced step, laid out as TF's ``tensorflow.python.client.timeline``.

``Timeline(run_metadata.step_stats).generate_chrome_trace_format()`` returns the JSON that
chrome://tracing and Perfetto load. TF's layout is kept: one process ("pid") per device for
compute (``<device> Compute``) and one for its tensors (``<device> Tensors``), plus an
``Allocators`` process for memory counters; within a device, ops are spread over lanes ("tid")
so that no two overlap; each op is an ``X`` event named after its type with
``args = {name, op, input0, input1, ...}``; dataflow arrows are ``s``/``t`` flow events drawn
when producer and consumer sit on different lanes or devices; with ``show_memory`` each
allocator gets a ``C`` counter series of bytes in use.

Two dflab additions, both read from the step stats alone: a ``_Send`` is joined to its ``_Recv``
by an arrow (their labels carry the tensor name and the other device, as TF's do), and inside
loops an input is matched to the producer in the same frame iteration (the label's
``[frame:iteration]`` suffix) rather than to whichever ran last. Lanes treat an op that starts
exactly when the previous one ended as not overlapping (TF starts a new lane), so
microsecond-short ops on one thread stay on one lane. The step stats are never modified.
"""

from __future__ import annotations

import bisect
import collections
import copy
import json
import re

from dflab.framework.op_kinds import RECV_OPS, SEND_OPS

AllocationMaximum = collections.namedtuple(
    "AllocationMaximum", ("timestamp", "num_bytes", "tensors"))
AllocationMaximum.__doc__ = "The peak of one allocator: when, how many bytes, which tensors."

StepStatsAnalysis = collections.namedtuple(
    "StepStatsAnalysis", ("chrome_trace", "allocator_maximums"))

_LABEL = re.compile(
    r"^(?P<name>.*?) = (?P<op>[^()]*)\((?P<inputs>.*)\)(?: \[(?P<frame>.*):(?P<iter>\d+)\])?$")


def parse_timeline_label(label: str):
    """``(name, op, inputs, frame, iteration)`` of a ``NodeExecStats.timeline_label``.

    Root-frame nodes have frame ``""`` and iteration 0; an unparseable label gives
    ``("unknown", "unknown", [], "", 0)`` as TF's timeline does.
    """
    m = _LABEL.match(label or "")
    if m is None:
        return "unknown", "unknown", [], "", 0
    inputs = m.group("inputs")
    return (m.group("name"), m.group("op"), inputs.split(", ") if inputs else [],
            m.group("frame") or "", int(m.group("iter") or 0))


class _ChromeTraceFormatter:
    """Builds the event list of a Chrome trace (TF's helper of the same name)."""

    def __init__(self, show_memory=False):
        self._show_memory = show_memory
        self._events: list[dict] = []
        self._metadata: list[dict] = []

    def _create_event(self, ph, category, name, pid, tid, timestamp):
        return {"ph": ph, "cat": category, "name": name, "pid": pid, "tid": tid,
                "ts": timestamp}

    def emit_pid(self, name, pid):
        self._metadata.append({"name": "process_name", "ph": "M", "pid": pid,
                               "args": {"name": name}})

    def emit_tid(self, name, pid, tid):
        self._metadata.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                               "args": {"name": name}})

    def emit_region(self, timestamp, duration, pid, tid, category, name, args):
        event = self._create_event("X", category, name, pid, tid, timestamp)
        event["dur"] = duration
        event["args"] = args
        self._events.append(event)

    def emit_obj_create(self, category, name, timestamp, pid, tid, object_id):
        event = self._create_event("N", category, name, pid, tid, timestamp)
        event["id"] = object_id
        self._events.append(event)

    def emit_obj_delete(self, category, name, timestamp, pid, tid, object_id):
        event = self._create_event("D", category, name, pid, tid, timestamp)
        event["id"] = object_id
        self._events.append(event)

    def emit_obj_snapshot(self, category, name, timestamp, pid, tid, object_id, snapshot):
        event = self._create_event("O", category, name, pid, tid, timestamp)
        event["id"] = object_id
        event["args"] = {"snapshot": snapshot}
        self._events.append(event)

    def emit_flow_start(self, name, timestamp, pid, tid, flow_id):
        event = self._create_event("s", "DataFlow", name, pid, tid, timestamp)
        event["id"] = flow_id
        self._events.append(event)

    def emit_flow_end(self, name, timestamp, pid, tid, flow_id):
        event = self._create_event("t", "DataFlow", name, pid, tid, timestamp)
        event["id"] = flow_id
        self._events.append(event)

    def emit_counter(self, category, name, pid, timestamp, counter, value):
        event = self._create_event("C", category, name, pid, 0, timestamp)
        event["args"] = {counter: value}
        self._events.append(event)

    def emit_counters(self, category, name, pid, timestamp, counters):
        event = self._create_event("C", category, name, pid, 0, timestamp)
        event["args"] = dict(counters)
        self._events.append(event)

    def trace_events(self) -> list[dict]:
        return self._metadata + self._events

    def format_to_string(self, pretty=False) -> str:
        trace = {"traceEvents": self.trace_events()}
        if pretty:
            return json.dumps(trace, indent=4, separators=(",", ": "))
        return json.dumps(trace, separators=(",", ":"))


class _TensorTracker:
    """One produced output value: when it was created, referenced and last released."""

    def __init__(self, name, object_id, timestamp, pid, allocator, num_bytes, alloc_key, tag):
        self.name = name
        self.object_id = object_id
        self.create_time = timestamp
        self.pid = pid
        self.allocator = allocator
        self.num_bytes = num_bytes
        self.alloc_key = alloc_key
        self.tag = tag
        self.last_unref = timestamp
        self.flow_start = None  # (time, pid, tid) where arrows from this tensor start

    def add_unref(self, timestamp):
        if timestamp > self.last_unref:
            self.last_unref = timestamp


def _side_by_side(all_stats):
    """One StepStats holding several steps, each device's stats renamed ``device (step N)``."""
    from dflab.runtime.config import DeviceStepStats, StepStats

    merged = StepStats()
    for stats in all_stats:
        for ds in stats.dev_stats:
            copy = DeviceStepStats(f"{ds.device} (step {stats.step_id})")
            copy.node_stats = list(ds.node_stats)
            copy.thread_names = dict(getattr(ds, "thread_names", {}) or {})
            merged.dev_stats.append(copy)
    return merged


class Timeline:
    """A Chrome trace of one ``StepStats`` (TF's ``timeline.Timeline``)."""

    def __init__(self, step_stats, graph=None):
        """``step_stats``: a ``StepStats`` (or a ``RunMetadata``), or a list of them: the
        steps of concurrent runs then appear side by side, one process per step and device."""
        if isinstance(step_stats, (list, tuple)):
            step_stats = _side_by_side([getattr(s, "step_stats", s) for s in step_stats])
        self._step_stats = getattr(step_stats, "step_stats", step_stats)
        self._graph = graph

    # --- public API ------------------------------------------------------------------------
    def analyze_step_stats(self, show_dataflow=True, show_memory=True, op_time="schedule"):
        """Build the trace; returns ``StepStatsAnalysis(chrome_trace, allocator_maximums)``.

        ``op_time`` is accepted for TF compatibility; dflab records one interval per op.
        """
        self._chrome_trace = _ChromeTraceFormatter(show_memory=show_memory)
        self._next_pid = 0
        self._next_flow_id = 0
        self._device_pids: dict[str, int] = {}
        self._tensor_pids: dict[str, int] = {}
        self._lanes: dict[int, int] = {}
        self._tensors: dict[str, list[_TensorTracker]] = {}
        self._all_tensors: list[_TensorTracker] = []
        self._allocator_maximums: dict = {}
        self._assign_lanes()
        self._allocate_pids()
        self._analyze_tensors(show_memory)
        self._show_compute(show_dataflow)
        if show_memory:
            self._show_memory_counters()
        return StepStatsAnalysis(chrome_trace=self._chrome_trace,
                                 allocator_maximums=self._allocator_maximums)

    def generate_chrome_trace_format(self, show_dataflow=True, show_memory=False,
                                     op_time="schedule") -> str:
        """The trace as a JSON string (pretty-printed, as TF does)."""
        analysis = self.analyze_step_stats(show_dataflow=show_dataflow,
                                           show_memory=show_memory, op_time=op_time)
        return analysis.chrome_trace.format_to_string(pretty=True)

    def events(self, show_dataflow=True, show_memory=False) -> list[dict]:
        """The trace's events (metadata first) as plain dicts."""
        analysis = self.analyze_step_stats(show_dataflow=show_dataflow, show_memory=show_memory)
        return analysis.chrome_trace.trace_events()

    def to_dict(self, show_dataflow=True, show_memory=False) -> dict:
        """``{"traceEvents": [...]}``: the trace as data, for JSON transport."""
        return {"traceEvents": self.events(show_dataflow, show_memory)}

    # --- layout -----------------------------------------------------------------------------
    def _alloc_pid(self) -> int:
        pid = self._next_pid
        self._next_pid += 1
        return pid

    def _alloc_flow_id(self) -> int:
        flow_id = self._next_flow_id
        self._next_flow_id += 1
        return flow_id

    def _allocate_pids(self):
        self._allocators_pid = self._alloc_pid()
        self._chrome_trace.emit_pid("Allocators", self._allocators_pid)
        tasks = _tasks_of(self._step_stats.dev_stats)
        if len(tasks) > 1:
            self._allocate_task_pids(tasks)
            return
        for dev_stats in self._step_stats.dev_stats:
            if dev_stats.device in self._device_pids:
                continue
            device_pid = self._alloc_pid()
            self._device_pids[dev_stats.device] = device_pid
            tensors_pid = self._alloc_pid()
            self._tensor_pids[dev_stats.device] = tensors_pid
            self._chrome_trace.emit_pid(dev_stats.device + " Compute", device_pid)
            self._chrome_trace.emit_pid(dev_stats.device + " Tensors", tensors_pid)

    def _allocate_task_pids(self, tasks: dict):
        """A step of a cluster: one process row per task (its compute, then its tensors), the
        task's devices as threads in it, each device's lanes one after the other."""
        for task, devices in tasks.items():
            pid = self._alloc_pid()
            tensors_pid = self._alloc_pid()
            self._chrome_trace.emit_pid(task, pid)
            self._chrome_trace.emit_pid(task + " Tensors", tensors_pid)
            base = 0
            for dev_stats in devices:
                device = dev_stats.device
                if device in self._device_pids:
                    continue
                self._device_pids[device] = pid
                self._tensor_pids[device] = tensors_pid
                short = device[len(task):].lstrip("/").replace("device:", "")
                lanes = self._lane_counts.get(device, 1)
                for k in range(lanes):
                    self._chrome_trace.emit_tid(short if lanes == 1 else f"{short} #{k}",
                                                pid, base + k)
                for ns in dev_stats.node_stats:
                    self._lanes[id(ns)] += base
                base += lanes

    def _assign_lanes(self):
        """Greedy non-overlapping lanes per device, in start order (TF's rule)."""
        self._lane_counts: dict[str, int] = {}
        for dev_stats in self._step_stats.dev_stats:
            lanes: list[int] = []
            for ns in sorted(dev_stats.node_stats, key=lambda n: n.all_start_micros):
                end = ns.all_start_micros + ns.all_end_rel_micros
                for i, lane_end in enumerate(lanes):
                    if ns.all_start_micros >= lane_end:
                        lanes[i] = end
                        self._lanes[id(ns)] = i
                        break
                else:
                    self._lanes[id(ns)] = len(lanes)
                    lanes.append(end)
            self._lane_counts[dev_stats.device] = max(len(lanes), 1)

    # --- ops, tensors, arrows ----------------------------------------------------------------
    @staticmethod
    def _is_gputrace_device(device_name) -> bool:
        return "/stream:" in device_name or "/memcpy" in device_name

    @staticmethod
    def _parse_kernel_label(label, node_name):
        start = label.find("@@")
        end = label.find("#")
        if start >= 0 and end >= 0 and start + 2 < end:
            node_name = label[start + 2:end]
        fields = node_name.split(":") + ["unknown"]
        return node_name, fields[1]

    def _emit_op(self, ns, pid, is_gputrace):
        node_name = ns.node_name
        inputs = []
        if is_gputrace:
            node_name, op = self._parse_kernel_label(ns.timeline_label, node_name)
        elif node_name == "RecvTensor":
            op = "RecvTensor"
        else:
            _, op, inputs, _, _ = parse_timeline_label(ns.timeline_label)
        args = {"name": node_name, "op": op}
        for i, iname in enumerate(inputs):
            args[f"input{i}"] = iname
        if getattr(ns, "fused_ops", None):
            args["fused_ops"] = ", ".join(ns.fused_ops)
        self._chrome_trace.emit_region(ns.all_start_micros, ns.all_end_rel_micros, pid,
                                       self._lanes[id(ns)], "Op", op, args)

    def _analyze_tensors(self, show_memory):
        for dev_stats in self._step_stats.dev_stats:
            device_pid = self._device_pids[dev_stats.device]
            tensors_pid = self._tensor_pids[dev_stats.device]
            for ns in dev_stats.node_stats:
                tid = self._lanes[id(ns)]
                start_time = ns.all_start_micros
                end_time = ns.all_start_micros + ns.all_end_rel_micros
                _, _, _, frame, iteration = parse_timeline_label(ns.timeline_label)
                for index, output in enumerate(ns.output):
                    slot = output.slot if output.slot else index
                    output_name = f"{ns.node_name}:{slot}" if slot else ns.node_name
                    alloc = output.tensor_description.allocation_description
                    if alloc.allocation_id:
                        alloc_key = ("id", alloc.allocation_id)
                        num_bytes = alloc.allocated_bytes
                    else:  # step stats from elsewhere: every output is its own buffer
                        alloc_key = ("tensor", len(self._all_tensors))
                        num_bytes = alloc.requested_bytes
                    tensor = _TensorTracker(output_name, len(self._all_tensors), start_time,
                                            tensors_pid, alloc.allocator_name, num_bytes,
                                            alloc_key, (frame, iteration))
                    tensor.add_unref(end_time)
                    tensor.flow_start = (end_time, device_pid, tid)
                    self._all_tensors.append(tensor)
                    self._tensors.setdefault(output_name, []).append(tensor)
                    if show_memory:
                        self._chrome_trace.emit_obj_create("Tensor", output_name, start_time,
                                                           tensors_pid, tid, tensor.object_id)
                        desc = str(output.tensor_description).replace('"', "")
                        self._chrome_trace.emit_obj_snapshot(
                            "Tensor", output_name, end_time - 1, tensors_pid, tid,
                            tensor.object_id, {"tensor_description": desc})
        for trackers in self._tensors.values():
            trackers.sort(key=lambda t: t.create_time)

    def _find_tensor(self, name, start_time, tag):
        """The output ``name`` a consumer read: from its own frame iteration when there is one,
        else the one created last before the consumer started."""
        trackers = self._tensors.get(name)
        if trackers is None:
            # Partitioning may have renamed the producer (``x/_3``): credit the original node.
            index = name.rfind("/_")
            if index > 0:
                trackers = self._tensors.get(name[:index])
        if not trackers:
            return None
        same = [t for t in trackers if t.tag == tag]
        pool = same or trackers
        times = [t.create_time for t in pool]
        return pool[max(bisect.bisect_right(times, start_time) - 1, 0)]

    def _show_compute(self, show_dataflow):
        sends, recvs = {}, []
        for dev_stats in self._step_stats.dev_stats:
            device_name = dev_stats.device
            device_pid = self._device_pids[device_name]
            is_gputrace = self._is_gputrace_device(device_name)
            for ns in dev_stats.node_stats:
                tid = self._lanes[id(ns)]
                start_time = ns.all_start_micros
                end_time = ns.all_start_micros + ns.all_end_rel_micros
                self._emit_op(ns, device_pid, is_gputrace)
                if is_gputrace or ns.node_name == "RecvTensor":
                    continue
                _, op, inputs, frame, iteration = parse_timeline_label(ns.timeline_label)
                transfer = transfer_key(op, inputs, device_name)
                if transfer is not None:
                    if op in SEND_OPS:
                        sends[transfer] = (end_time, device_pid, tid)
                    else:
                        recvs.append((transfer, start_time, end_time, device_pid, tid))
                    continue
                for input_name in inputs:
                    if input_name.startswith("^"):
                        continue
                    tensor = self._find_tensor(input_name, start_time, (frame, iteration))
                    if tensor is None:
                        continue
                    tensor.add_unref(end_time - 1)
                    if not show_dataflow:
                        continue
                    create_time, create_pid, create_tid = tensor.flow_start
                    # Same pid and lane: the horizontal order already shows the dataflow.
                    if create_pid != device_pid or create_tid != tid:
                        flow_id = self._alloc_flow_id()
                        self._chrome_trace.emit_flow_start(input_name, create_time, create_pid,
                                                           create_tid, flow_id)
                        self._chrome_trace.emit_flow_end(input_name, start_time, device_pid,
                                                         tid, flow_id)
        if show_dataflow:
            for key, start_time, end_time, pid, tid in recvs:
                sent = sends.get(key)
                if sent is None or (sent[1], sent[2]) == (pid, tid):
                    continue
                # The arrow lands inside the Recv's slice, when the value became available.
                arrive = min(max(sent[0], start_time), end_time)
                flow_id = self._alloc_flow_id()
                self._chrome_trace.emit_flow_start(key[0], sent[0], sent[1], sent[2], flow_id)
                self._chrome_trace.emit_flow_end(key[0], arrive, pid, tid, flow_id)

    def _show_memory_counters(self):
        """A cumulative bytes-in-use counter series per allocator, and each one's maximum."""
        buffers: dict = {}
        for tensor in self._all_tensors:
            self._chrome_trace.emit_obj_delete("Tensor", tensor.name, tensor.last_unref,
                                               tensor.pid, 0, tensor.object_id)
            buf = buffers.get(tensor.alloc_key)
            if buf is None:
                buffers[tensor.alloc_key] = [tensor.allocator, tensor.num_bytes,
                                             tensor.create_time, tensor.last_unref,
                                             tensor.name]
            else:  # a forwarded output keeps the buffer it shares alive
                buf[1] = max(buf[1], tensor.num_bytes)
                buf[3] = max(buf[3], tensor.last_unref)
        allocations: dict[str, list] = {}
        for allocator, num_bytes, created, freed, name in buffers.values():
            if num_bytes <= 0:
                continue
            allocations.setdefault(allocator, []).append((created, num_bytes, name))
            allocations[allocator].append((freed, -num_bytes, name))
        for allocator, alloc_list in allocations.items():
            # At one instant frees come first (TF's order: sorted by time, then bytes).
            alloc_list.sort()
            total_bytes = 0
            live: set = set()
            best = AllocationMaximum(timestamp=0, num_bytes=0, tensors=set())
            for timestamp, num_bytes, name in alloc_list:
                total_bytes += num_bytes
                if num_bytes < 0:
                    live.discard(name)
                else:
                    live.add(name)
                if total_bytes > best.num_bytes:
                    best = AllocationMaximum(timestamp=timestamp, num_bytes=total_bytes,
                                             tensors=copy.copy(live))
                self._chrome_trace.emit_counter("Memory", allocator, self._allocators_pid,
                                                timestamp, allocator, total_bytes)
            self._allocator_maximums[allocator] = best


def _tasks_of(dev_stats) -> dict:
    """Task name -> its devices' stats, in order, when every device names a job and task."""
    tasks: dict = {}
    for ds in dev_stats:
        if "/job:" not in ds.device or "/device:" not in ds.device:
            return {}
        tasks.setdefault(ds.device.split("/device:")[0], []).append(ds)
    return tasks


def transfer_key(op, inputs, device):
    """``(tensor_name, send_device, recv_device)`` of a Send/Recv label, else None."""
    if op not in SEND_OPS and op not in RECV_OPS:
        return None
    text = ", ".join(inputs)  # a tensor name may itself contain ", "
    if " @" not in text:
        return None
    tensor_name, other = text.rsplit(" @", 1)
    if op in SEND_OPS:
        return (tensor_name, device, other)
    return (tensor_name, other, device)
