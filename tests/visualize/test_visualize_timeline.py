"""Timeline data and the static Gantt chart, from real traced runs and from hand-made stats."""

from __future__ import annotations

import json

import pytest
from visualize_helpers import CPU0, CPU1, SVG_NS, all_text, classes, parse_svg

import dflab as tf
from dflab.runtime.config import DeviceStepStats, NodeExecStats, StepStats
from dflab.visualize import timeline_data, timeline_svg


def _node_stats(md):
    return [(ds, ns) for ds in md.step_stats.dev_stats for ns in ds.node_stats]


def test_one_lane_per_device_thread_and_one_bar_per_execution(two_cpu_run):
    md = two_cpu_run.md
    data = json.loads(json.dumps(timeline_data(md)))  # JSON-able
    stats = _node_stats(md)
    assert {(lane["device"], lane["thread_id"]) for lane in data["lanes"]} == \
        {(ds.device, ns.thread_id) for ds, ns in stats}
    assert len(data["bars"]) == len(stats)
    assert data["devices"] == [CPU0, CPU1]
    assert data["step_id"] == md.step_stats.step_id
    t0 = min(ns.all_start_nanos for _, ns in stats)
    lanes = {lane["id"]: lane for lane in data["lanes"]}
    by_name = {ns.node_name: (ds, ns) for ds, ns in stats}
    for bar in data["bars"]:
        ds, ns = by_name[bar["name"]]
        assert bar["start_us"] == pytest.approx((ns.all_start_nanos - t0) / 1000)
        assert bar["end_us"] - bar["start_us"] == pytest.approx(ns.all_end_rel_nanos / 1000)
        lane = lanes[bar["lane"]]
        assert (lane["device"], lane["thread_id"]) == (ds.device, ns.thread_id)
        assert bar["step_id"] == md.step_stats.step_id
    assert min(b["start_us"] for b in data["bars"]) == 0
    assert data["duration_us"] == max(b["end_us"] for b in data["bars"])
    types = {b["name"]: b["op_type"] for b in data["bars"]}
    assert types["h"] == "MatMul" and types["branch/a"] == "Tanh"


def test_rows_keep_bars_of_one_lane_apart(two_cpu_run):
    data = timeline_data(two_cpu_run.md)
    for lane in data["lanes"]:
        bars = [b for b in data["bars"] if b["lane"] == lane["id"]]
        assert 1 <= lane["rows"] and {b["row"] for b in bars} <= set(range(lane["rows"]))
        for a in bars:
            for b in bars:
                if a is not b and a["row"] == b["row"]:
                    assert a["end_us"] <= b["start_us"] or b["end_us"] <= a["start_us"]


def test_each_send_gets_an_arrow_to_its_recv(two_cpu_run):
    md = two_cpu_run.md
    data = timeline_data(md)
    nodes = {nd.name: nd for gd in md.partition_graphs for nd in gd.node}
    sends = [b for b in data["bars"] if b["op_type"] == "_Send"]
    assert len(sends) == 2 and len(data["arrows"]) == len(sends)
    for arrow in data["arrows"]:
        send, recv = data["bars"][arrow["from"]], data["bars"][arrow["to"]]
        assert (send["op_type"], recv["op_type"]) == ("_Send", "_Recv")
        s, r = nodes[send["name"]].attr, nodes[recv["name"]].attr
        assert s["tensor_name"] == r["tensor_name"] == arrow["tensor"]
        assert (arrow["send_device"], arrow["recv_device"]) == (s["send_device"],
                                                                s["recv_device"])
        assert send["device"] == s["send_device"] and recv["device"] == r["recv_device"]
        assert arrow["start_us"] == send["start_us"]
        assert arrow["end_us"] == max(recv["end_us"], send["start_us"])


def _ns(name, op, inputs, start, dur, thread=1, frame=""):
    label = f"{name} = {op}({inputs})" + (f" [{frame}]" if frame else "")
    return NodeExecStats(node_name=name, all_start_micros=start, all_end_rel_micros=dur,
                         op_end_rel_micros=dur, timeline_label=label, thread_id=thread)


def test_sends_and_recvs_inside_loops_are_matched_per_iteration():
    def send(it, start):
        return _ns(f"s{it}", "_Send", f"t:0 @{CPU1}", start, 2, frame=f"w/while_context:{it}")

    def recv(it, start):
        return _ns(f"r{it}", "_Recv", f"t:0 @{CPU0}", start, 5, frame=f"w/while_context:{it}")

    stats = StepStats(step_id=7, dev_stats=[
        DeviceStepStats(CPU0, [send(0, 100), send(1, 200)], {1: "main"}),
        DeviceStepStats(CPU1, [recv(1, 190), recv(0, 95)], {1: "main"}),
    ])
    data = timeline_data(stats)
    pairs = {(data["bars"][a["from"]]["name"], data["bars"][a["to"]]["name"])
             for a in data["arrows"]}
    assert pairs == {("s0", "r0"), ("s1", "r1")}
    assert {b["iteration"] for b in data["bars"]} == {0, 1}
    assert [lane["label"] for lane in data["lanes"]] == ["CPU:0 \u00b7 main", "CPU:1 \u00b7 main"]


def test_gantt_chart_has_a_bar_per_execution_and_the_arrows(two_cpu_run):
    md = two_cpu_run.md
    data = timeline_data(md)
    root = parse_svg(timeline_svg(md))
    bars = [g for g in root.iter(SVG_NS + "g") if "bar" in classes(g)]
    assert len(bars) == len(data["bars"])
    arrows = [g for g in root.iter(SVG_NS + "g") if "transfer" in classes(g)]
    assert len(arrows) == len(data["arrows"])
    texts = all_text(root)
    assert "CPU:0" in texts and "CPU:1" in texts
    assert any(t.startswith("h (MatMul)") for t in texts)  # each bar's tooltip
    assert not any(el.tag.endswith("script") for el in root.iter())


def test_untraced_metadata_draws_a_note():
    md = tf.RunMetadata()
    assert timeline_data(md)["bars"] == []
    assert "no traced ops in this step" in all_text(parse_svg(timeline_svg(md)))


def test_op_names_in_the_chart_are_text():
    evil = "<img src=x onerror=alert(1)>"
    stats = StepStats(dev_stats=[DeviceStepStats(CPU0, [_ns(evil, "Const", "", 0, 10)])])
    root = parse_svg(timeline_svg(stats))
    assert not any(el.tag.rsplit("}", 1)[-1] in ("img", "image") for el in root.iter())
    assert any(evil in t for t in all_text(root))
