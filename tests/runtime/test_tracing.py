"""Step tracing (RunOptions/RunMetadata), the Chrome-trace timeline and the memory summary."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import dflab as tf
from dflab.client import timeline
from dflab.runtime import tracing
from dflab.runtime.config import (
    AllocationDescription,
    DeviceStepStats,
    NodeExecStats,
    NodeOutput,
    StepStats,
    TensorDescription,
)

FULL = tf.RunOptions.FULL_TRACE
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default() as g:
        yield g


def _traced(fetches, feed_dict=None, config=None, **opts):
    md = tf.RunMetadata()
    with tf.Session(config=config) as s:
        value = s.run(fetches, feed_dict, options=tf.RunOptions(trace_level=FULL, **opts),
                      run_metadata=md)
    return value, md


def _all_stats(md):
    return [(d.device, ns) for d in md.step_stats.dev_stats for ns in d.node_stats]


def _two_device_graph():
    with tf.device("/cpu:0"):
        a = tf.constant(np.arange(16.0).reshape(4, 4), name="a")
        b = tf.matmul(a, a, name="mm")
    with tf.device("/cpu:1"):
        c = tf.add(b, 1.0, name="c")
        d = tf.reduce_sum(c * b, name="d")
    return d


def _chain_graph():
    x = tf.constant(np.linspace(0.0, 1.0, 12).reshape(3, 4), name="x")
    y = tf.tanh(x, name="y")
    return tf.reduce_sum(y * 2.0, name="z")


def _loop_graph():
    i0 = tf.constant(0)
    x0 = tf.constant(np.ones(5))
    return tf.while_loop(lambda i, x: i < 4, lambda i, x: (i + 1, x * 1.5), [i0, x0])


def _cond_graph():
    p = tf.constant(False)
    v = tf.constant(np.arange(3.0))
    return tf.cond(p, lambda: v * 2.0, lambda: v - 1.0)


GRAPHS = {"chain": (_chain_graph, None), "loop": (_loop_graph, None),
          "cond": (_cond_graph, None),
          "two_devices": (_two_device_graph, tf.ConfigProto(device_count={"CPU": 2}))}


# --- RunMetadata.step_stats ---------------------------------------------------------------------
def test_one_node_stats_per_executed_node_with_plausible_times():
    z = _chain_graph()
    ops = {op.name for op in tf.get_default_graph().get_operations()}
    _, md = _traced(z)
    stats = _all_stats(md)
    assert sorted(ns.node_name for _, ns in stats) == sorted(ops)
    for device, ns in stats:
        assert device == CPU0
        assert ns.all_start_micros > 0
        assert 0 <= ns.op_start_rel_micros <= ns.op_end_rel_micros <= ns.all_end_rel_micros
        assert ns.all_end_rel_nanos >= 0 and ns.all_start_nanos // 1000 == ns.all_start_micros
        assert ns.scheduled_micros <= ns.all_start_micros
        assert isinstance(ns.thread_id, int) and ns.thread_id > 0
        assert ns.timeline_label.startswith(f"{ns.node_name} = ")
    # Within one device, nodes are listed in start order.
    starts = [ns.all_start_nanos for _, ns in stats]
    assert starts == sorted(starts)
    dev = md.step_stats.dev_stats[0]
    assert set(dev.thread_names) >= {ns.thread_id for ns in dev.node_stats}


def test_labels_and_outputs_follow_tf_fields():
    x = tf.constant(np.ones((2, 3), np.float32), name="x")
    y = tf.multiply(x, 3.0, name="y")
    _, md = _traced(y)
    by_name = {ns.node_name: ns for _, ns in _all_stats(md)}
    assert by_name["y"].timeline_label == f"y = Mul(x, {y.op.inputs[1].op.name})"
    out = by_name["y"].output[0]
    assert out.slot == 0
    td = out.tensor_description
    assert td.dtype == tf.float32
    assert [d.size for d in td.shape.dim] == [2, 3]
    assert td.allocation_description.requested_bytes == 2 * 3 * 4
    mem = by_name["y"].memory[0]
    assert mem.allocator_name == "CPU_0"
    assert mem.total_bytes == 24 and mem.live_bytes == 24  # y is fetched: alive at the end


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_full_trace_gives_the_same_values_as_no_trace(name):
    build, config = GRAPHS[name]
    fetch = build()
    with tf.Session(config=config) as s:
        plain = s.run(fetch)
        untraced = s.run(fetch, options=tf.RunOptions(trace_level=tf.RunOptions.NO_TRACE),
                         run_metadata=tf.RunMetadata())
        md = tf.RunMetadata()
        traced = s.run(fetch, options=tf.RunOptions(trace_level=FULL), run_metadata=md)
    as_list = (lambda v: list(v)) if isinstance(plain, (list, tuple)) else (lambda v: [v])
    for a, b, c in zip(as_list(plain), as_list(untraced), as_list(traced)):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    assert _all_stats(md)


def test_no_trace_attaches_no_tracer(monkeypatch):
    z = _chain_graph()

    class Boom:
        def __init__(self, *a, **k):
            raise AssertionError("a tracer was built for an untraced run")

    monkeypatch.setattr(tracing, "StepTracer", Boom)
    md = tf.RunMetadata()
    with tf.Session() as s:
        s.run(z)
        s.run(z, options=tf.RunOptions(), run_metadata=md)
        s.run(z, options=tf.RunOptions(trace_level=FULL))  # no RunMetadata to fill
    assert md.step_stats.dev_stats == []


def test_loop_nodes_get_one_entry_per_iteration_with_their_frame():
    result = _loop_graph()
    mul = [op for op in tf.get_default_graph().get_operations() if op.type == "Mul"][0]
    _, md = _traced(result)
    muls = [ns for _, ns in _all_stats(md) if ns.node_name == mul.name]
    assert len(muls) == 4  # the final, dead iteration is not reported (as in TF)
    frames = [timeline.parse_timeline_label(ns.timeline_label)[3:] for ns in muls]
    assert sorted(it for _, it in frames) == [0, 1, 2, 3]
    assert all(f and f == frames[0][0] for f, _ in frames)
    assert all(ns.timeline_label.endswith("]") for ns in muls)


def test_run_metadata_is_replaced_on_each_traced_run():
    z = _chain_graph()
    md = tf.RunMetadata()
    opts = tf.RunOptions(trace_level=FULL, output_partition_graphs=True)
    with tf.Session() as s:
        s.run(z, options=opts, run_metadata=md)
        first = len(_all_stats(md))
        s.run(z, options=opts, run_metadata=md)
    assert len(_all_stats(md)) == first
    assert len(md.partition_graphs) == 1


# --- partition graphs and cost graph ------------------------------------------------------------
def test_output_partition_graphs():
    z = _chain_graph()
    _, md = _traced(z)
    assert md.partition_graphs == []
    _, md = _traced(z, output_partition_graphs=True)
    assert len(md.partition_graphs) == 1
    names = {n.name for n in md.partition_graphs[0].node}
    assert names == {op.name for op in tf.get_default_graph().get_operations()}
    assert all(n.device == CPU0 for n in md.partition_graphs[0].node)


def test_output_partition_graphs_two_devices():
    d = _two_device_graph()
    _, md = _traced(d, config=tf.ConfigProto(device_count={"CPU": 2}),
                    output_partition_graphs=True)
    devices = {n.device for g in md.partition_graphs for n in g.node}
    assert devices == {CPU0, CPU1}
    names = {n.name for g in md.partition_graphs for n in g.node}
    assert {"a", "mm", "c", "d"} <= names


@pytest.mark.parametrize("devices", [1, 2])
def test_partition_graphs_come_without_a_trace_as_in_tf(devices):
    """TF fills ``RunMetadata.partition_graphs`` whenever they are asked for: no trace level
    needed, and then no step stats."""
    out = _two_device_graph() if devices == 2 else _chain_graph()
    md = tf.RunMetadata()
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": devices})) as sess:
        sess.run(out, options=tf.RunOptions(output_partition_graphs=True), run_metadata=md)
        assert len(md.partition_graphs) == devices
        assert md.step_stats.dev_stats == []
        md = tf.RunMetadata()
        sess.run(out, options=tf.RunOptions(), run_metadata=md)
        assert md.partition_graphs == []


def test_cost_graph_has_devices_costs_and_output_sizes():
    d = _two_device_graph()
    _, md = _traced(d, config=tf.ConfigProto(device_count={"CPU": 2}))
    nodes = {n.name: n for n in md.cost_graph.node}
    assert [n.id for n in md.cost_graph.node] == list(range(len(md.cost_graph.node)))
    assert nodes["mm"].device == CPU0 and nodes["c"].device == CPU1
    assert nodes["mm"].output_info[0].size == 16 * 8
    assert [d.size for d in nodes["mm"].output_info[0].shape.dim] == [4, 4]
    assert nodes["mm"].compute_cost >= 0
    assert nodes["d"].is_final and not nodes["mm"].is_final
    mm_inputs = {i.preceding_node for i in nodes["mm"].input_info}
    assert mm_inputs == {nodes["a"].id}


# --- memory ---------------------------------------------------------------------------------------
def test_memory_summary_counts_fresh_buffers_and_peak():
    n = 1000
    x = tf.constant(np.ones(n), name="x")  # a constant is graph memory, not the step's
    y = tf.multiply(x, 2.0, name="y")
    w = tf.identity(y, name="w")  # forwards y's buffer
    z = tf.add(w, 1.0, name="z")
    _, md = _traced(z)
    summary = tracing.memory_summary(md)
    assert set(summary) == {CPU0}
    entry = summary[CPU0]
    # Fresh buffers: y, z and the two scalar constants' products are not counted (constants).
    assert entry["bytes_allocated"] == 2 * n * 8
    # z is computed while y is still alive.
    assert entry["peak_bytes"] == 2 * n * 8
    assert entry["nodes"] == len(tf.get_default_graph().get_operations())
    by_name = {ns.node_name: ns for _, ns in _all_stats(md)}
    assert by_name["w"].memory[0].total_bytes == 0
    assert by_name["w"].referenced_tensor[0].allocation_id == \
        by_name["y"].output[0].tensor_description.allocation_description.allocation_id
    assert by_name["x"].memory_stats.persistent_memory_size == n * 8
    assert tracing.memory_summary(md.step_stats) == summary


def test_memory_per_device():
    d = _two_device_graph()
    _, md = _traced(d, config=tf.ConfigProto(device_count={"CPU": 2}))
    summary = tracing.memory_summary(md)
    assert set(summary) == {CPU0, CPU1}
    assert summary[CPU0]["bytes_allocated"] >= 16 * 8  # mm
    assert summary[CPU1]["bytes_allocated"] >= 2 * 16 * 8  # c and c * b
    for entry in summary.values():
        assert 0 < entry["peak_bytes"] <= entry["bytes_allocated"]


# --- timeline -------------------------------------------------------------------------------------
def _events(md, **kw):
    text = timeline.Timeline(md.step_stats).generate_chrome_trace_format(**kw)
    return json.loads(text)["traceEvents"]


def test_timeline_json_has_an_op_event_per_node_stats_and_a_process_per_device():
    d = _two_device_graph()
    _, md = _traced(d, config=tf.ConfigProto(device_count={"CPU": 2}))
    events = _events(md)
    xs = [e for e in events if e["ph"] == "X"]
    assert len(xs) == len(_all_stats(md))
    procs = {e["args"]["name"]: e["pid"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    for dev in md.step_stats.dev_stats:
        assert dev.device + " Compute" in procs and dev.device + " Tensors" in procs
    assert "Allocators" in procs
    by_name = {e["args"]["name"]: e for e in xs}
    mm = by_name["mm"]
    assert mm["name"] == "MatMul" and mm["cat"] == "Op"
    assert mm["args"] == {"name": "mm", "op": "MatMul", "input0": "a", "input1": "a"}
    assert mm["pid"] == procs[CPU0 + " Compute"]
    assert by_name["c"]["pid"] == procs[CPU1 + " Compute"]
    assert timeline.Timeline(md.step_stats).to_dict()["traceEvents"] == events


def test_timeline_flow_arrows_between_devices():
    d = _two_device_graph()
    _, md = _traced(d, config=tf.ConfigProto(device_count={"CPU": 2}))
    events = _events(md, show_dataflow=True)
    procs = {e["args"]["name"]: e["pid"] for e in events if e["ph"] == "M"}
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "t"}
    assert starts and set(starts) == set(ends)
    assert all(e["cat"] == "DataFlow" for e in list(starts.values()) + list(ends.values()))
    crossing = [i for i in starts
                if starts[i]["pid"] == procs[CPU0 + " Compute"]
                and ends[i]["pid"] == procs[CPU1 + " Compute"]]
    assert crossing
    # Once the step is partitioned, each _Send is joined to its _Recv by an arrow.
    for send in [e for e in events if e["ph"] == "X" and e["name"] == "_Send"]:
        tensor_name = send["args"]["input0"].rsplit(" @", 1)[0]
        assert any(starts[i]["name"] == tensor_name and starts[i]["pid"] == send["pid"]
                   for i in starts)
    assert not [e for e in _events(md, show_dataflow=False) if e["ph"] in "st"]


def test_timeline_memory_counters():
    d = _two_device_graph()
    _, md = _traced(d, config=tf.ConfigProto(device_count={"CPU": 2}))
    assert not [e for e in _events(md) if e["ph"] == "C"]
    events = _events(md, show_memory=True)
    counters = [e for e in events if e["ph"] == "C"]
    allocators = {e["name"] for e in counters}
    assert allocators == {"CPU_0", "CPU_1"}
    allocators_pid = [e["pid"] for e in events
                      if e["ph"] == "M" and e["args"]["name"] == "Allocators"][0]
    for name in allocators:
        series = [e for e in counters if e["name"] == name]
        assert all(e["pid"] == allocators_pid for e in series)
        values = [e["args"][name] for e in series]
        assert min(values) >= 0 and values[-1] == 0
        assert [e["ts"] for e in series] == sorted(e["ts"] for e in series)
    analysis = timeline.Timeline(md.step_stats).analyze_step_stats(show_memory=True)
    assert analysis.allocator_maximums["CPU_1"].num_bytes == max(
        e["args"]["CPU_1"] for e in counters if e["name"] == "CPU_1")


def _stats(device, *entries):
    ds = DeviceStepStats(device)
    for name, label, start, dur, nbytes in entries:
        out = [NodeOutput(0, TensorDescription(
            allocation_description=AllocationDescription(requested_bytes=nbytes,
                                                         allocator_name="cpu")))]
        ds.node_stats.append(NodeExecStats(
            node_name=name, all_start_micros=start, all_end_rel_micros=dur,
            op_end_rel_micros=dur, timeline_label=label, output=out if nbytes else []))
    return ds


def test_timeline_send_recv_arrow_and_lanes_from_hand_built_stats():
    send = _stats(CPU0, ("a", "a = Const()", 10, 5, 8),
                  ("s", f"s = _Send(edge_a @{CPU1})", 16, 2, 0),
                  ("b", "b = Neg(a)", 12, 10, 8))  # overlaps a: a second lane
    recv = _stats(CPU1, ("r", f"r = _Recv(edge_a @{CPU0})", 11, 10, 8),
                  ("c", "c = Neg(r)", 22, 3, 8))
    events = timeline.Timeline(StepStats([send, recv])).events(show_memory=True)
    xs = {e["args"]["name"]: e for e in events if e["ph"] == "X"}
    assert xs["a"]["tid"] != xs["b"]["tid"]
    flows = [e for e in events if e["ph"] in "st" and e["name"] == "edge_a"]
    assert [e["ph"] for e in flows] == ["s", "t"]
    assert flows[0]["pid"] == xs["s"]["pid"] and flows[1]["pid"] == xs["r"]["pid"]
    assert xs["r"]["ts"] <= flows[1]["ts"] <= xs["r"]["ts"] + xs["r"]["dur"]
    # Without transfer attributes a Send/Recv is an ordinary node: no arrow, no error.
    bare = _stats(CPU0, ("s", "s = _Send(a)", 1, 1, 0))
    bare_recv = _stats(CPU1, ("r", "r = _Recv()", 1, 1, 8))
    events = timeline.Timeline(StepStats([bare, bare_recv])).events()
    assert not [e for e in events if e["ph"] in "st"]


@pytest.mark.parametrize("label,expected", [
    ("x = Add(a, b:1, ^c)", ("x", "Add", ["a", "b:1", "^c"], "", 0)),
    ("k = Const()", ("k", "Const", [], "", 0)),
    ("w/mul = Mul(w/x, w/y) [w/while_context:7]",
     ("w/mul", "Mul", ["w/x", "w/y"], "w/while_context", 7)),
    ("not a label", ("unknown", "unknown", [], "", 0)),
])
def test_parse_timeline_label(label, expected):
    assert timeline.parse_timeline_label(label) == expected


def test_import_paths():
    from dflab.client import timeline as tl
    from dflab.client.timeline import Timeline

    assert tl.Timeline is Timeline


# --- the observer directly ------------------------------------------------------------------------
class _Placement:
    def __init__(self, device):
        self.device = device


class _Plan:
    def __init__(self, ops, devices):
        self.ops = ops
        self.placement = {op: _Placement(dev) for op, dev in zip(ops, devices)}
        self.executor_plan = None


class _Node:
    def __init__(self, op, index, out_base=0):
        self.op = op
        self.index = index
        self.out_base = out_base
        self.n_out = len(op.outputs)


class _Frame:
    def __init__(self, name, parent=None, parent_iter=0):
        self.name = name
        self.parent = parent
        self.parent_iter = parent_iter


class _Exec:
    def __init__(self, slots=()):
        self.slots = list(slots)
        self.plan = None


def _fake_graph():
    x = tf.constant(np.ones(4), name="x")
    y = tf.negative(x, name="y")
    z = tf.abs(y, name="z")
    return [x.op, y.op, z.op]


def test_tracer_records_every_execution_from_many_threads():
    ops = _fake_graph()
    plan = _Plan(ops, [CPU0, CPU1, CPU1])
    nodes = [_Node(op, i) for i, op in enumerate(ops)]
    tracer = tracing.StepTracer(plan)
    root = _Frame("")
    loop = _Frame("loop/while_context", root, 0)
    n_threads, n_iters = 6, 50
    barrier = threading.Barrier(n_threads)

    def worker(k):
        ex = _Exec()
        barrier.wait()
        for it in range(n_iters):
            for node in nodes:
                frame = loop if node.index else root
                tracer.node_start(ex, node, frame, it)
                tracer.node_end(ex, node, frame, it, (np.full(4, float(k)),))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(tracer.records) == n_threads * n_iters * len(nodes)
    md = tf.RunMetadata()
    tracer.fill(md, tf.RunOptions(trace_level=FULL))
    per_device = {d.device: len(d.node_stats) for d in md.step_stats.dev_stats}
    assert per_device == {CPU0: n_threads * n_iters, CPU1: 2 * n_threads * n_iters}
    labels = {ns.timeline_label for _, ns in _all_stats(md) if ns.node_name == "y"}
    assert labels == {f"y = Neg(x) [loop/while_context:{i}]" for i in range(n_iters)}
    assert all(ns.timeline_label == "x = Const()" for _, ns in _all_stats(md)
               if ns.node_name == "x")
    assert len({ns.thread_id for _, ns in _all_stats(md)}) == n_threads
    for _, ns in _all_stats(md):
        assert ns.all_end_rel_micros >= 0
        assert ns.output[0].tensor_description.allocation_description.requested_bytes == 32


def test_tracer_accepts_the_two_argument_observer_calls():
    ops = _fake_graph()
    plan = _Plan(ops, [CPU0] * 3)
    tracer = tracing.StepTracer(plan)
    ex = _Exec([np.ones(4), np.zeros(4), None])
    for i, op in enumerate(ops):
        node = _Node(op, i, out_base=i)
        tracer.node_start(ex, node)
        tracer.node_end(ex, node)
    md = tf.RunMetadata()
    tracer.fill(md, tf.RunOptions(trace_level=FULL, output_partition_graphs=True))
    stats = {ns.node_name: ns for _, ns in _all_stats(md)}
    assert set(stats) == {"x", "y", "z"}
    assert stats["y"].output[0].tensor_description.allocation_description.requested_bytes == 32
    assert stats["z"].output == []  # a missing (None) value has no output entry
    assert len(md.partition_graphs) == 1
    graphs = ["given"]
    tracer.fill(md, tf.RunOptions(trace_level=FULL, output_partition_graphs=True),
                partition_graphs=graphs)
    assert md.partition_graphs == graphs


def test_tracer_reports_a_node_that_never_ended():
    ops = _fake_graph()
    tracer = tracing.StepTracer(_Plan(ops, [CPU0] * 3))
    tracer.node_start(_Exec(), _Node(ops[1], 1), _Frame(""), 0)
    md = tf.RunMetadata()
    tracer.fill(md, tf.RunOptions(trace_level=FULL))
    (_, ns), = _all_stats(md)
    assert ns.node_name == "y" and ns.all_end_rel_micros == 0 and ns.output == []


@pytest.mark.parametrize("record_dead", [False, True])
def test_tracer_dead_nodes(record_dead):
    from dflab.kernels.control_flow_kernels import DEAD

    ops = _fake_graph()
    tracer = tracing.StepTracer(_Plan(ops, [CPU0] * 3), record_dead=record_dead)
    ex, root = _Exec(), _Frame("")
    for node, outputs in [(_Node(ops[1], 1), (DEAD,)), (_Node(ops[2], 2), (np.ones(2),))]:
        tracer.node_start(ex, node, root, 0)
        tracer.node_end(ex, node, root, 0, outputs)
    md = tf.RunMetadata()
    tracer.fill(md, tf.RunOptions(trace_level=FULL))
    stats = {ns.node_name: ns for _, ns in _all_stats(md)}
    # Like TF, a dead node (every output dead) is left out unless asked for.
    assert set(stats) == ({"y", "z"} if record_dead else {"z"})
    if record_dead:
        assert stats["y"].output == [] and stats["y"].memory[0].total_bytes == 0
    assert stats["z"].memory[0].total_bytes == 16
    assert not tracer._pending


def test_untaken_cond_branch_is_not_reported():
    p = tf.placeholder(tf.bool, [], name="p")
    v = tf.constant(np.arange(3.0), name="v")
    out = tf.cond(p, lambda: tf.multiply(v, 2.0, name="taken_if_true"),
                  lambda: tf.subtract(v, 1.0, name="taken_if_false"))
    for pred, ran, skipped in [(True, "taken_if_true", "taken_if_false"),
                               (False, "taken_if_false", "taken_if_true")]:
        value, md = _traced(out, {p: pred})
        np.testing.assert_array_equal(value, np.arange(3.0) * 2 if pred else np.arange(3.0) - 1)
        names = {ns.node_name.rsplit("/", 1)[-1] for _, ns in _all_stats(md)}
        assert ran in names and skipped not in names


def test_concurrent_traced_runs_have_their_own_step_ids_side_by_side():
    import json
    import threading

    from dflab.client import timeline

    x = tf.placeholder(tf.float64, [64, 64])
    shared = tf.matmul(x, x)
    a = tf.reduce_sum(shared + 1.0)
    b = tf.reduce_max(shared * 2.0)
    metas = [tf.RunMetadata(), tf.RunMetadata()]
    value = np.ones((64, 64))
    with tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=3)) as s:
        opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        threads = [threading.Thread(target=s.run, args=(f, {x: value}),
                                    kwargs={"options": opts, "run_metadata": m})
                   for f, m in zip((a, b), metas)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    ids = [m.step_stats.step_id for m in metas]
    assert all(ids) and ids[0] != ids[1]
    trace = json.loads(timeline.Timeline(metas).generate_chrome_trace_format())
    names = {e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    for step in ids:
        assert any(f"(step {step})" in n and "Compute" in n for n in names)


def test_session_memory_account_per_device_over_traced_steps():
    cfg = tf.ConfigProto(device_count={"CPU": 2})
    with tf.device("/cpu:0"):
        a = tf.ones([256, 256], tf.float64) * 2.0  # 512 KiB on CPU:0
    with tf.device("/cpu:1"):
        b = tf.reduce_sum(a * 3.0)
    with tf.Session(config=cfg) as s:
        opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        for _ in range(3):
            s.run(b, options=opts, run_metadata=tf.RunMetadata())
        s.run(b)  # untraced steps are not measured
        stats = s.memory_stats()
    cpu0 = next(v for k, v in stats.items() if k.endswith("CPU:0"))
    cpu1 = next(v for k, v in stats.items() if k.endswith("CPU:1"))
    assert cpu0["steps"] == cpu1["steps"] == 3
    assert cpu0["peak_bytes_in_use"] >= 256 * 256 * 8
    assert cpu1["peak_bytes_in_use"] >= 256 * 256 * 8  # the product a * 3.0
    assert cpu0["total_bytes_allocated"] >= 3 * 256 * 256 * 8


def test_memory_figures_print_as_a_table_and_stay_a_dict():
    from dflab.runtime.tracing import memory_summary

    x = tf.matmul(tf.ones([64, 64]), tf.ones([64, 64]))
    meta = tf.RunMetadata()
    with tf.Session() as sess:
        sess.run(x, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                 run_metadata=meta)
        stats = sess.memory_stats()
    summary = memory_summary(meta)
    (entry,) = summary.values()
    assert entry["bytes_allocated"] == 3 * 64 * 64 * 4  # two ones, one product
    lines = str(summary).splitlines()
    assert lines[0].split() == ["device", "bytes_allocated", "peak_bytes", "nodes"]
    assert lines[2].split()[:3] == ["CPU:0", "48.0", "KB"]
    assert "{" not in str(stats) and "steps" in str(stats)
    assert "<td style='text-align:left'>CPU:0</td>" in summary._repr_html_()
