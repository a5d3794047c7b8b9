"""Fused nodes in partition drawings: collapsed into one unit by default, expanded into a cluster
of the ops they replaced (wired as the partition runs them), their details, their SVG, and the
GraphView opening and closing them as it does name scopes."""

from __future__ import annotations

import types

import numpy as np
import pytest
from visualize_helpers import CPU0, CPU1, all_text, classes, groups_by_id, parse_svg

import dflab as tf
from dflab.notebook import GraphView
from dflab.visualize import layout_graph
from dflab.visualize import model as vmodel

FUSED = "_FusedElementwise"
Z_OPS = ["a", "b", "y", "z"]  # x * 2 + 1 -> relu -> sigmoid, on CPU:0
R_OPS = ["branch/m", "branch/s", "branch/w", "branch/q", "branch/p", "branch/r"]  # on CPU:1
TRACE = dict(trace_level=tf.RunOptions.FULL_TRACE, output_partition_graphs=True)


def _traced_run(remapping):
    """z = sigmoid(relu(x * 2 + 1)) on CPU:0; on CPU:1 (through a _Send/_Recv pair)
    r = sum(square(tanh(z * 3 - 1)) * z), which reads z twice; out = identity(z) on CPU:0."""
    g = tf.Graph()
    with g.as_default():
        with tf.device("/cpu:0"):
            x = tf.placeholder(tf.float32, [None, 3], name="x")
            a = tf.multiply(x, 2.0, name="a")
            b = tf.add(a, 1.0, name="b")
            z = tf.sigmoid(tf.nn.relu(b, name="y"), name="z")
            out = tf.identity(z, name="out")
        with tf.device("/cpu:1"), tf.name_scope("branch"):
            m = tf.multiply(z, 3.0, name="m")
            w = tf.tanh(tf.subtract(m, 1.0, name="s"), name="w")
            r = tf.reduce_sum(tf.multiply(tf.square(w, name="q"), z, name="p"), name="r")
    config = tf.ConfigProto(device_count={"CPU": 2}, graph_options=tf.GraphOptions(
        rewrite_options=tf.RewriterConfig(remapping=remapping)))
    md = tf.RunMetadata()
    with tf.Session(graph=g, config=config) as sess:
        sess.run([r, out], {x: np.ones((2, 3), np.float32)},
                 options=tf.RunOptions(**TRACE), run_metadata=md)
    nodes = {nd.name: nd for gd in md.partition_graphs for nd in gd.node}
    return types.SimpleNamespace(graph=g, md=md, nodes=nodes)


@pytest.fixture(scope="module")
def fused_run():
    run = _traced_run(tf.RewriterConfig.ON)
    assert {n: nd.attr["fused_ops"] for n, nd in run.nodes.items() if nd.op == FUSED} == \
        {"z": Z_OPS, "branch/r": R_OPS}
    return run


@pytest.fixture(scope="module")
def unfused_run():
    return _traced_run(tf.RewriterConfig.OFF)


def _draw(run, expanded=(), graph=True, color_by="partition"):
    # Every scope open: these tests are about fused nodes, not about what fits a cell.
    return layout_graph(run.graph if graph else None, color_by=color_by, run_metadata=run.md,
                        expanded=expanded, collapse=False)


def _edges_by_name(layout) -> set:
    return {(layout.nodes[e["source"]]["name"], layout.nodes[e["target"]]["name"], e["kind"])
            for e in layout.edges}


def _partition_of(layout, node_id: str) -> str:
    parent = layout.nodes[node_id]["parent"]
    while layout.nodes[parent]["cluster_kind"] != "partition":
        parent = layout.nodes[parent]["parent"]
    return layout.nodes[parent]["name"]


def _check_invariants(view) -> None:
    """model.py's invariants: drawn records have one unit each, no self edges, strict nesting."""
    for uid, u in view.units.items():
        for r in u.members:
            assert view.unit_of[r.name] == uid
        assert u.parent is None or uid in view.clusters[u.parent].units
    assert all(e.source != e.target for e in view.edges)
    for cid, c in view.clusters.items():
        assert c.parent is None or cid in view.clusters[c.parent].clusters
        seen, p = set(), c.parent
        while p is not None:
            assert p not in seen
            seen.add(p)
            p = view.clusters[p].parent


# --- collapsed -------------------------------------------------------------------------------
def test_a_fused_node_is_drawn_collapsed_as_one_unit_standing_for_its_ops(fused_run):
    layout = _draw(fused_run)
    fused = {n["name"]: i for i, n in layout.nodes.items() if n["kind"] == "fused"}
    assert set(fused) == {"z", "branch/r"}
    for name, ops in (("z", Z_OPS), ("branch/r", R_OPS)):
        info = layout.nodes[fused[name]]
        assert [o["name"] for o in info["fused_ops"]] == ops
        assert all(layout.name_to_id[op] == fused[name] for op in ops)  # the names find it
        assert info["op_type"] == FUSED and info["expandable"] is True
    ops_drawn = {n["name"] for n in layout.nodes.values() if n["kind"] == "op"}
    assert not ops_drawn & (set(Z_OPS) | set(R_OPS))  # no separate units for the members
    assert not any(n.get("cluster_kind") == "fused" for n in layout.nodes.values())
    assert _partition_of(layout, fused["z"]) == CPU0
    assert _partition_of(layout, fused["branch/r"]) == CPU1
    assert layout.nodes[layout.nodes[fused["branch/r"]]["parent"]]["name"] == "branch"


def test_edges_of_a_collapsed_fused_node_attach_to_it(fused_run):
    layout = _draw(fused_run)
    recv = fused_run.nodes["branch/r"].input[0]
    assert fused_run.nodes[recv].op == "_Recv"
    edges = _edges_by_name(layout)
    assert (recv, "branch/r", "data") in edges  # one edge, though two members read it
    assert ("z", "out", "data") in edges
    assert ("z", "_send/z/0/to/CPU_1", "data") in edges
    for _, nd in fused_run.nodes.items():
        if nd.op == FUSED:
            for src in nd.input[1:]:
                if src in fused_run.nodes:
                    assert (src, nd.name, "data") in edges


def test_fused_node_details_list_its_ops_their_types_and_the_expression(fused_run):
    layout = _draw(fused_run)
    nd = fused_run.nodes["z"]
    info = layout.nodes[layout.name_to_id["z"]]
    assert info["fused_ops"] == [{"name": "a", "op_type": "Mul"}, {"name": "b", "op_type": "AddV2"},
                                 {"name": "y", "op_type": "Relu"},
                                 {"name": "z", "op_type": "Sigmoid"}]
    assert info["expression"] == nd.attr["expression"]
    assert info["expression"].startswith("t0 = Mul(in0, in1); t1 = AddV2(t0, in2)")
    assert info["attrs"]["expression"] == nd.attr["expression"]  # whole, not cut short
    assert info["n_ops"] == 4 and info["op_types"] == {"Mul": 1, "AddV2": 1, "Relu": 1,
                                                        "Sigmoid": 1}
    assert info["dtypes"] == ["float32"] and info["output_shapes"] == ["[?,3]"]  # the sink's
    assert info["assigned_device"] == CPU0
    r_info = layout.nodes[layout.name_to_id["branch/r"]]
    assert [o["op_type"] for o in r_info["fused_ops"]] == ["Mul", "Sub", "Tanh", "Square",
                                                           "Mul", "Sum"]
    assert "Sum(t4, axes=in3" in r_info["expression"]


def test_the_collapsed_svg_shows_a_marked_fused_node_with_its_tooltip(fused_run):
    layout = _draw(fused_run)
    root = parse_svg(layout.svg)
    group = groups_by_id(root)[layout.name_to_id["z"]]
    assert {"node", "fused", "expandable"} <= classes(group)
    texts = all_text(group)
    assert "z" in texts and "fused \u00d74" in texts
    assert "Mul \u00b7 AddV2 \u00b7 Relu \u00b7 Sigmoid" in texts
    title = next(t for t in texts if t.startswith("z \u2014 4 ops fused"))
    assert "  a (Mul)" in title and fused_run.nodes["z"].attr["expression"] in title
    assert "fused ops (one kernel)" in all_text(root)  # the legend says what the box is


# --- expanded --------------------------------------------------------------------------------
def test_an_expanded_fused_node_is_a_cluster_of_its_ops(fused_run):
    layout = _draw(fused_run, expanded=["z", "branch/r"])
    assert not any(n["kind"] == "fused" for n in layout.nodes.values())
    clusters = {n["name"]: i for i, n in layout.nodes.items() if n.get("cluster_kind") == "fused"}
    assert set(clusters) == {"z", "branch/r"}
    for name, ops, types_ in (("z", Z_OPS, ["Mul", "AddV2", "Relu", "Sigmoid"]),
                              ("branch/r", R_OPS, ["Mul", "Sub", "Tanh", "Square", "Mul",
                                                   "Sum"])):
        cid = clusters[name]
        members = [layout.nodes[layout.name_to_id[op]] for op in ops]
        assert [m["kind"] for m in members] == ["op"] * len(ops)
        assert [m["op_type"] for m in members] == types_
        assert all(m["parent"] == cid for m in members)
        part = _partition_of(layout, cid)
        assert part == fused_run.nodes[name].device
        assert {m["assigned_device"] for m in members} == {part}
        (c,) = [c for c in layout.clusters if c["id"] == cid]
        assert c["units"] == [layout.name_to_id[op] for op in ops] and c["n_ops"] == len(ops)
    assert layout.nodes[layout.name_to_id["branch/m"]]["label"] == "m"  # relative to its scope


def test_an_expanded_fused_node_is_wired_as_its_partition_runs_it(fused_run):
    layout = _draw(fused_run, expanded=["z", "branch/r"])
    edges = _edges_by_name(layout)
    z_in = fused_run.nodes["z"].input  # x (fed: no node), the 2., the 1.
    r_in = fused_run.nodes["branch/r"].input  # z's _Recv, the 3., the 1., the axes
    assert {(z_in[1], "a"), (z_in[2], "b"), ("a", "b"), ("b", "y"), ("y", "z")} <= \
        {(s, t) for s, t, k in edges if k == "data"}
    expected = {(r_in[0], "branch/m"), (r_in[0], "branch/p"),  # the _Recv feeds both readers
                (r_in[1], "branch/m"), (r_in[2], "branch/s"), (r_in[3], "branch/r"),
                ("branch/m", "branch/s"), ("branch/s", "branch/w"), ("branch/w", "branch/q"),
                ("branch/q", "branch/p"), ("branch/p", "branch/r")}
    into_r = {(s, t) for s, t, k in edges if k == "data" and t in R_OPS}
    assert into_r == expected
    assert fused_run.nodes[r_in[0]].op == "_Recv"
    # Consumers of the fused node attach to the sink, which has its name.
    assert ("z", "out", "data") in edges and ("z", "_send/z/0/to/CPU_1", "data") in edges
    (recv_edge,) = [e for e in layout.edges if layout.nodes[e["source"]]["name"] == r_in[0]
                    and layout.nodes[e["target"]]["name"] == "branch/p"]
    assert recv_edge["label"] == "float32 [?,3]"


def test_the_expanded_svg_draws_the_fused_cluster(fused_run):
    layout = _draw(fused_run, expanded=["branch/r"])
    groups = groups_by_id(parse_svg(layout.svg))
    (cid,) = [i for i, n in layout.nodes.items() if n.get("cluster_kind") == "fused"]
    assert {"cluster", "fused"} <= classes(groups[cid])
    texts = all_text(groups[cid])
    assert "6 ops fused into one kernel" in texts and "r" in texts
    assert {"node", "op", "fused-member"} <= classes(groups[layout.name_to_id["branch/w"]])
    assert layout.nodes[layout.name_to_id["z"]]["kind"] == "fused"  # the other stays closed


def test_without_the_graph_a_fused_node_stays_collapsed(fused_run):
    layout = _draw(fused_run, expanded=["z", "branch/r"], graph=False)
    info = layout.nodes[layout.name_to_id["z"]]
    assert info["kind"] == "fused" and info["expandable"] is False
    assert [o["name"] for o in info["fused_ops"]] == Z_OPS
    assert not any(n.get("cluster_kind") == "fused" for n in layout.nodes.values())
    assert "expandable" not in classes(groups_by_id(parse_svg(layout.svg))[info["id"]])


def test_views_keep_their_invariants_collapsed_expanded_and_in_collapsed_scopes(fused_run):
    records = vmodel.records_of_graph_defs(fused_run.md.partition_graphs, fused_run.graph)
    for collapse in (False, True):
        for expanded in ((), ("z",), ("z", "branch/r")):
            _check_invariants(vmodel.build_view(records, collapse=collapse, expanded=expanded,
                                                partitioned=True))
    # Inside a collapsed scope the fused node and the ops it replaced are the scope's.
    view = vmodel.build_view(records, collapse=True, partitioned=True)
    scope = view.units[view.unit_of["branch/r"]]
    assert scope.kind == "scope" and scope.name == "branch"
    assert all(view.unit_of[op] == scope.id for op in R_OPS)
    # Opening the fused node opens the scope it sits in.
    view = vmodel.build_view(records, collapse=True, expanded=["branch/r"], partitioned=True)
    sink = view.units[view.unit_of["branch/r"]]
    assert sink.kind == "op" and sink.members[0].type == "Sum"
    assert view.clusters[sink.parent].kind == "fused"


def test_member_records_are_the_graph_ops_rewired_to_the_partition(fused_run):
    records = vmodel.records_of_graph_defs(fused_run.md.partition_graphs, fused_run.graph)
    (r,) = [rec for rec in records if rec.name == "branch/r"]
    assert r.is_fused and [m.name for m in r.fused] == R_OPS
    recv = fused_run.nodes["branch/r"].input[0]
    p = r.fused[4]
    assert p.inputs == [("branch/q", 0), (recv, 0)]  # z:0 is read through the _Recv
    assert {m.partition for m in r.fused} == {CPU1} and {m.fused_into for m in r.fused} == \
        {"branch/r"}


# --- time colouring --------------------------------------------------------------------------
def test_ops_that_ran_fused_are_not_drawn_as_not_run(fused_run):
    layout = _draw(fused_run, expanded=["z"], color_by="time")  # the user's graph, unfused
    groups = groups_by_id(parse_svg(layout.svg))
    assert "ran-fused" in classes(groups[layout.name_to_id["a"]])
    assert "not-run" not in classes(groups[layout.name_to_id["a"]])
    assert layout.nodes[layout.name_to_id["z"]].get("time_us", 0) > 0  # the group's time
    assert any(s["label"].startswith("ran fused") for s in layout.legend["swatches"])


# --- the widget ------------------------------------------------------------------------------
def test_graph_view_opens_and_closes_a_fused_node_as_it_does_scopes(fused_run):
    view = GraphView(fused_run.graph, color_by="partition", run_metadata=fused_run.md)
    assert view.expanded == ["branch"]  # the small graph's one scope: open, it fits
    fused_id = view.node_id("z")
    assert view.nodes[fused_id]["kind"] == "fused"
    assert "2 fused nodes" in view._text()
    view._handle_message({"type": "click", "id": fused_id})  # the kernel re-lays out
    assert view.expanded == ["branch", "z"]
    assert view.nodes[view.node_id("a")]["kind"] == "op"
    cluster = view.nodes[view.node_id("a")]["parent"]
    assert view.nodes[cluster]["cluster_kind"] == "fused"
    view._handle_message({"type": "cluster-click", "id": cluster})
    assert view.expanded == ["branch"] and view.nodes[view.node_id("a")]["kind"] == "fused"
    detail = view.select("branch/p")  # hidden in a fused node: it opens
    assert view.expanded == ["branch", "branch/r"] and detail["name"] == "branch/p"
    assert detail["op_type"] == "Mul"


def test_a_fused_node_that_cannot_open_shows_its_details_on_click(fused_run):
    # A graph without the fused ops (not the one that ran): nothing to open the node into.
    view = GraphView(tf.Graph(), color_by="partition", run_metadata=fused_run.md)
    fused_id = view.node_id("z")
    view._handle_message({"type": "click", "id": fused_id})
    assert "z" not in view.expanded and view.selected == fused_id
    assert view.detail["kind"] == "fused" and view.detail["expression"]


# --- fusion off ------------------------------------------------------------------------------
def test_without_fusion_the_drawing_is_unchanged(unfused_run):
    assert not any(nd.op == FUSED for nd in unfused_run.nodes.values())
    layout = _draw(unfused_run)
    assert not any(n["kind"] == "fused" or n.get("cluster_kind") == "fused"
                   for n in layout.nodes.values())
    assert set(layout.name_to_id) == set(unfused_run.nodes)
    assert all(layout.nodes[layout.name_to_id[op]]["kind"] == "op" for op in Z_OPS + R_OPS)
    groups = groups_by_id(parse_svg(layout.svg)).values()
    assert not any(classes(g) & {"fused", "fused-member", "ran-fused"} for g in groups)
    assert not any("fused" in s["label"] for s in layout.legend["swatches"])
    # Naming an op in ``expanded`` opens nothing when nothing is fused.
    assert _draw(unfused_run, expanded=["z", "branch/r"]).dot == layout.dot
