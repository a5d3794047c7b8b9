"""The default drawing of a graph fits its space readably, TensorBoard-style: scopes open only
while the drawing fits, auxiliary units (gradients, optimizer, initializer, global step, hubs)
set aside with their edges hidden, alike siblings drawn as one series, and legends that say
what every look means."""

from __future__ import annotations

import re

import pytest
from visualize_helpers import all_text, classes, groups_by_id, parse_svg

import dflab as tf
from dflab.visualize import grouping
from dflab.visualize import model as vmodel
from dflab.visualize.graph import FIT, layout_graph
from dflab.visualize.looks import task_palette


def _size(svg: str) -> tuple[float, float]:
    m = re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) ([\d.]+)"', svg)
    return float(m.group(1)), float(m.group(2))


def _training_graph():
    """Tutorial 01's softmax regression: 55 ops, a 31-op ``gradients`` scope."""
    points = tf.placeholder(tf.float32, [None, 2], name="points")
    labels = tf.placeholder(tf.int64, [None], name="labels")
    w = tf.Variable(tf.zeros([2, 3]), name="W")
    b = tf.Variable(tf.zeros([3]), name="b")
    logits = tf.add(tf.matmul(points, w), b, name="logits")
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits), name="loss")
    return tf.train.GradientDescentOptimizer(0.5).minimize(loss, name="train")


def test_a_training_graph_is_drawn_within_its_space_with_the_plumbing_set_aside():
    _training_graph()
    graph = tf.get_default_graph()
    layout = layout_graph(graph)
    width, height = _size(layout.svg)
    assert width <= FIT[0] + 1 and height <= FIT[1] + 1, (width, height)
    nodes = layout.nodes
    # The model's ops are drawn one by one, the variables as variables.
    for name in ("points", "labels", "logits", "loss"):
        assert nodes[layout.name_to_id[name]]["kind"] == "op", name
    w = nodes[layout.name_to_id["W"]]
    assert (w["kind"], w["name"]) == ("scope", "W")
    assert 'shape="cylinder"' in next(ln for ln in layout.dot.splitlines()
                                      if ln.strip().startswith(w["id"] + " ["))
    # gradients and the optimizer's updates: collapsed, in the auxiliary cluster, no edges.
    (aux,) = [c for c in layout.clusters if c["kind"] == "aux"]
    aside = {nodes[u]["name"]: nodes[u]["auxiliary"] for u in aux["units"]}
    assert aside == {"gradients": "gradients", "train": "optimizer"}
    assert "gradients" not in layout.expanded
    for e in layout.edges:
        touches = {e["source"], e["target"]} & set(aux["units"])
        assert e["drawn"] == (not touches), e
    grads = nodes[layout.name_to_id["gradients/loss_grad/Shape"]]
    assert grads["n_ops"] == sum(1 for op in graph.get_operations()
                                 if op.name.startswith("gradients/"))
    assert {nodes[u]["name"] for u in grads["hidden_neighbours"]} >= {"loss", "points"}
    svg = parse_svg(layout.svg)
    assert "aux" in classes(groups_by_id(svg)[grads["id"]])
    assert any(t.startswith("\u2194 ") for t in all_text(svg))  # "↔ 6 nodes"
    assert any("auxiliary" in s["label"] for s in layout.legend["swatches"])


def test_a_graph_that_fits_is_drawn_op_by_op():
    with tf.name_scope("layer"):
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        y = tf.reduce_sum(x * 2.0, name="y")
    tf.negative(y, name="out")
    layout = layout_graph(tf.get_default_graph())
    assert all(n["kind"] == "op" for n in layout.nodes.values() if n["kind"] != "cluster")
    assert layout.expanded == ["layer"]
    assert not any(c["kind"] == "aux" for c in layout.clusters)


def test_scopes_open_only_while_the_drawing_fits():
    h = tf.placeholder(tf.float32, [None, 8], name="x")
    for k in range(3):
        with tf.name_scope(f"block{k}"):
            for _ in range(12):
                h = tf.tanh(h) * 2.0
    layout = layout_graph(tf.get_default_graph())
    width, height = _size(layout.svg)
    assert width <= FIT[0] + 1 and height <= FIT[1] + 1
    kinds = {layout.nodes[layout.name_to_id[f"block{k}/Tanh"]]["kind"] for k in range(3)}
    assert kinds == {"scope"}  # each chain alone is taller than the space
    # The same graph with more room opens what fits in it.
    roomy = layout_graph(tf.get_default_graph(), fit=(4000, 4000))
    assert roomy.nodes[roomy.name_to_id["block0/Tanh"]]["kind"] == "op"
    assert set(roomy.expanded) >= {"block0", "block1", "block2"}


def test_named_scopes_are_open_whatever_fits():
    _training_graph()
    layout = layout_graph(tf.get_default_graph(), expanded=["gradients"])
    assert "gradients" in layout.expanded
    (box,) = [c for c in layout.clusters if c["name"] == "gradients"]
    in_scope = [op for op in tf.get_default_graph().get_operations()
                if op.name.startswith("gradients/")]
    assert box["kind"] == "scope" and box["n_ops"] == len(in_scope) > 20
    inside = layout.nodes[layout.name_to_id["gradients/loss_grad/Shape"]]
    assert inside["name"].startswith("gradients/") and not inside.get("auxiliary")


def test_alike_siblings_side_by_side_are_one_series_and_a_chain_is_not():
    x = tf.placeholder(tf.float32, [4], name="x")
    reads = [tf.identity(x, name="read") for _ in range(6)]  # read, read_1 … read_5
    tf.add_n(reads, name="total")
    h = x
    for _ in range(6):
        h = tf.tanh(h, name="step")  # step, step_1 … chained
    layout = layout_graph(tf.get_default_graph(), collapse=True)
    series = [n for n in layout.nodes.values() if n["kind"] == "series"]
    assert [(s["name"], s["count"]) for s in series] == [("read_[0-5]", 6)]
    assert {layout.name_to_id[t.op.name] for t in reads} == {series[0]["id"]}
    assert all(layout.nodes[layout.name_to_id[n]]["kind"] == "op"
               for n in layout.name_to_id if n.startswith("step"))
    assert "6 \u00d7 Identity" in all_text(parse_svg(layout.svg))
    assert any(s.get("style") == "stacked" for s in layout.legend["swatches"])
    # A series opens like a scope.
    opened = layout_graph(tf.get_default_graph(), collapse=True, expanded=["read_[0-5]"])
    assert opened.nodes[opened.name_to_id["read_3"]]["kind"] == "op"


def test_grouping_keeps_every_op_in_exactly_one_unit():
    _training_graph()
    records = vmodel.records_of_ops(tf.get_default_graph().get_operations())
    for collapse in (False, True):
        view = vmodel.build_view(records, collapse=collapse)
        owned = [r.name for u in view.units.values() for r in u.members]
        assert sorted(owned) == sorted(r.name for r in records)
        assert all(view.unit_of[r.name] in view.units for r in records)
        aux_units = {u for u, unit in view.units.items() if unit.aux}
        for e in view.edges:
            if {e.source, e.target} & aux_units:
                assert e.hidden


def test_plumbing_is_named_by_scope_and_by_what_it_holds():
    _training_graph()
    init = tf.global_variables_initializer()
    records = {r.name: r for r in vmodel.records_of_ops(tf.get_default_graph().get_operations())}
    members = vmodel.scope_members(list(records.values()))
    assert grouping.plumbing("gradients", members["gradients"]) == "gradients"
    assert grouping.plumbing("train", members["train"]) == "optimizer"
    assert grouping.plumbing(init.name, [records[init.name]], single_op=True) == "initializer"
    assert grouping.plumbing("W", members["W"]) == ""
    assert grouping.is_variable_scope("W", members["W"])


def test_highlighted_ops_stay_in_the_main_structure():
    _training_graph()
    layout = layout_graph(tf.get_default_graph(), highlight=["train"])
    train = layout.nodes[layout.name_to_id["train"]]
    assert train["highlighted"] and not train.get("auxiliary")


def test_fetched_ops_double_border_is_in_the_legend():
    x = tf.placeholder(tf.float32, [], name="x")
    y = tf.square(x, name="y")
    layout = layout_graph(tf.get_default_graph(), fetches=[y])
    (fetched,) = [s for s in layout.legend["swatches"] if s["label"] == "fetched"]
    assert fetched["style"] == "double"
    legend = re.search(r'<g class="legend".*?</g>', layout.svg, re.S).group(0)
    assert "fetched" in legend and legend.count("<rect") >= 2


def test_the_stepper_mode_draws_plain_nodes_and_no_op_type_legend():
    x = tf.placeholder(tf.float32, [], name="x")
    tf.square(x, name="y")
    layout = layout_graph(tf.get_default_graph(), color_by="state")
    assert layout.legend["swatches"] == [] and layout.legend["caption"] == ""
    assert 'fillcolor="#ffffff"' in layout.dot
    with pytest.raises(ValueError, match="color_by must be one of"):
        layout_graph(tf.get_default_graph(), color_by="nonsense")


def test_task_shades_are_far_apart_and_a_task_without_device_says_so():
    devices = ["/job:ps/replica:0/task:0/device:CPU:0", "/job:ps/task:0",
               "/job:ps/replica:0/task:0/device:CPU:1", "/job:worker/task:1"]
    palette = task_palette(devices)

    def rgb(c):
        return [int(c[i:i + 2], 16) for i in (1, 3, 5)]

    ps = [palette[d] for d in devices[:3]]
    for a in range(3):
        for b in range(a + 1, 3):
            distance = sum(abs(u - v) for u, v in zip(rgb(ps[a]), rgb(ps[b])))
            assert distance > 80, (ps[a], ps[b])
    with tf.device("/job:ps/task:0"):
        tf.constant(1.0, name="c")
    layout = layout_graph(tf.get_default_graph(), color_by="task")
    (entry,) = [s for s in layout.legend["swatches"] if s["label"].startswith("ps/0")]
    assert entry["label"] == "ps/0 (task only, no device)"
    assert 'penwidth="2"' in next(ln for ln in layout.dot.splitlines()
                                  if ln.strip().startswith(layout.name_to_id["c"] + " ["))
