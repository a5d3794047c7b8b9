"""Graph drawing: DOT structure, SVG ids and classes, scopes, fetch pruning, colour modes and
escaping of graph text."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from visualize_helpers import CPU0, CPU1, SVG_NS, all_text, classes, groups_by_id, parse_svg

import dflab as tf
from dflab.ops.io_ops import string_join
from dflab.runtime.placer import explain_placement
from dflab.runtime.subgraph import prune
from dflab.visualize import COLOR_MODES, layout_graph
from dflab.visualize import model as vmodel
from dflab.visualize import style as vstyle
from dflab.visualize.graph import FAST_ABOVE, layout_effort
from dflab.visualize.model import HUB_DEGREE, HUB_MIN_UNITS

COLLAPSE_ABOVE = 60  # ops: a graph this big no longer fits its space drawn whole

XSS = "<img src=x onerror=alert(1)>"


def _dot_line(dot: str, node_id: str) -> str:
    return next(line for line in dot.splitlines() if line.strip().startswith(node_id + " ["))


def _dot_edge(dot: str, src: str, dst: str) -> str:
    return next(line for line in dot.splitlines() if line.strip().startswith(f"{src} -> {dst} "))


def _fill(svg_group) -> str:
    shape = next(el for el in svg_group if el.tag in (SVG_NS + "path", SVG_NS + "polygon",
                                                      SVG_NS + "ellipse"))
    return shape.get("fill")


def _mlp():
    x = tf.placeholder(tf.float32, [None, 784], name="x")
    with tf.name_scope("layer"):
        w = tf.Variable(tf.zeros([784, 10]), name="w")
        y = tf.matmul(x, w, name="y")
    loss = tf.reduce_mean(tf.square(y), name="loss")
    unrelated = tf.constant(3.0, name="unrelated") * 2.0
    return x, w, y, loss, unrelated


# --- ids, edges, shapes -----------------------------------------------------------------------
@pytest.mark.parametrize("use_resource, ops", [
    (True, {"w": "VarHandleOp", "w/Assign": "AssignVariableOp",
            "w/Read/ReadVariableOp": "ReadVariableOp"}),
    (False, {"w": "VariableV2", "w/Assign": "Assign"})])
def test_both_kinds_of_variable_are_drawn_as_variables(use_resource, ops):
    w = tf.Variable(tf.zeros([2]), name="w", use_resource=use_resource)
    tf.reduce_sum(w * 2.0, name="y")
    layout = layout_graph(tf.get_default_graph(), collapse=False)
    for name, op_type in ops.items():
        node = layout.nodes[layout.name_to_id[name]]
        assert node["op_type"] == op_type and node["family"] == "variable", node
    node_line = next(line for line in layout.dot.splitlines()
                     if line.strip().startswith(layout.name_to_id["w"] + " ["))
    assert 'shape="cylinder"' in node_line and vstyle.family_fill("variable") in node_line


def test_every_op_gets_an_opaque_id_that_names_its_svg_group():
    x, w, y, loss, _ = _mlp()
    layout = layout_graph(tf.get_default_graph(), collapse=False)
    ops = tf.get_default_graph().get_operations()
    assert set(layout.name_to_id) == {op.name for op in ops}
    groups = groups_by_id(parse_svg(layout.svg))
    for op in ops:
        node_id = layout.name_to_id[op.name]
        assert re.fullmatch(r"n\d+", node_id)
        assert layout.nodes[node_id]["name"] == op.name
        assert layout.nodes[node_id]["op_type"] == op.type
        assert "node" in classes(groups[node_id]) and "op" in classes(groups[node_id])
    assert len(set(layout.name_to_id.values())) == len(ops)  # small graph: one node per op


def test_data_edges_are_solid_with_dtype_and_shape_control_edges_dotted():
    x = tf.placeholder(tf.float32, [None, 784], name="x")
    w = tf.constant(np.zeros((784, 10), np.float32), name="w")
    first = tf.no_op(name="first")
    with tf.control_dependencies([first]):
        y = tf.matmul(x, w, name="y")
    layout = layout_graph(tf.get_default_graph())
    ids = layout.name_to_id
    data = _dot_edge(layout.dot, ids["x"], ids["y"])
    control = _dot_edge(layout.dot, ids["first"], ids["y"])
    assert 'style="solid"' in data and "float32 [?,784]" in data
    assert 'style="dotted"' in control
    kinds = {(e["source"], e["target"]): e["kind"] for e in layout.edges}
    assert kinds[(ids["x"], ids["y"])] == "data"
    assert kinds[(ids["first"], ids["y"])] == "control"
    groups = groups_by_id(parse_svg(layout.svg))
    by_kind = {e["kind"]: groups[e["id"]] for e in layout.edges}
    assert {"edge", "data"} <= classes(by_kind["data"])
    assert {"edge", "control"} <= classes(by_kind["control"])
    control_path = by_kind["control"].find(SVG_NS + "path")
    assert control_path.get("stroke-dasharray")  # dotted in the SVG too
    assert by_kind["data"].find(SVG_NS + "path").get("stroke-dasharray") is None
    assert "float32 [?,784]" in all_text(parse_svg(layout.svg))
    assert y.op.name in layout.name_to_id


def test_dynamic_control_flow_ops_have_distinct_shapes_and_a_frame_cluster():
    i = tf.constant(0, name="i")
    tf.while_loop(lambda i: i < 3, lambda i: i + 1, [i], name="loop")
    layout = layout_graph(tf.get_default_graph(), collapse=False)
    shapes = {}
    for node_id in layout.name_to_id.values():
        op_type = layout.nodes[node_id]["op_type"]
        shapes[op_type] = re.search(r'shape="(\w+)"', _dot_line(layout.dot, node_id)).group(1)
    loop_types = ["Enter", "Merge", "Switch", "LoopCond", "NextIteration", "Exit"]
    assert all(shapes[t] != "box" for t in loop_types)
    assert len({shapes[t] for t in loop_types}) == len(loop_types)
    frames = [c for c in layout.clusters if c["kind"] == "frame"]
    assert [c["name"] for c in frames] == ["loop"]
    assert 'subgraph cluster_' + frames[0]["id"] in layout.dot
    groups = groups_by_id(parse_svg(layout.svg))
    assert {"cluster", "frame"} <= classes(groups[frames[0]["id"]])


def _viewbox_height(svg: str) -> float:
    return float(re.search(r'viewBox="[-0-9.]+ [-0-9.]+ [0-9.]+ ([0-9.]+)"', svg).group(1))


def test_a_loop_is_drawn_compactly_with_its_edge_labels_beside_the_edges(monkeypatch):
    from dflab.visualize import graph as vgraph

    tf.while_loop(lambda i, p: i < 5, lambda i, p: (i + 1, p * 2.0),
                  [tf.constant(0, name="i0"), tf.constant(1.0, name="p0")], name="loop")
    compact = layout_graph(tf.get_default_graph(), collapse=False)
    edge_lines = [ln for ln in compact.dot.splitlines() if " -> " in ln]
    labelled = [ln for ln in edge_lines if "<FONT" in ln]  # control edges have no label
    assert len(labelled) >= 20 and all(" xlabel=<" in ln for ln in labelled)
    assert all(" label=" not in ln for ln in edge_lines)
    # The labels are still drawn, inside their edge's group (the front-end relies on it).
    groups = groups_by_id(parse_svg(compact.svg))
    assert "int32 []" in all_text(groups[compact.edges[0]["id"]])

    # The same loop laid out the way loop-free graphs are: labels on ranks of their own.
    monkeypatch.setattr(vgraph, "has_loops", lambda view: False)
    spaced = layout_graph(tf.get_default_graph(), collapse=False)
    assert " label=<" in spaced.dot
    assert _viewbox_height(compact.svg) < 0.85 * _viewbox_height(spaced.svg)


def test_a_graph_without_loops_keeps_its_edge_labels_on_the_edges():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    tf.reduce_sum(x * 2.0, name="total")
    dot = layout_graph(tf.get_default_graph()).dot
    assert " label=<" in dot and "xlabel" not in dot


def test_a_static_layout_is_sized_for_a_notebook_cell():
    from dflab.visualize.svg import CELL_WIDTH_PX, MIN_SCALE

    for k in range(6):
        tf.negative(tf.constant(float(k), name=f"a_long_name_{k}"), name=f"neg_{k}")
    layout = layout_graph(tf.get_default_graph(), collapse=False)
    drawn = re.search(r'<svg\b[^>]*\bwidth="([0-9.]+)(pt|px)"', layout.svg)
    natural = float(drawn.group(1)) * (4 / 3 if drawn.group(2) == "pt" else 1)
    # wide enough to be cut off as is, narrow enough to fit at the smallest scale allowed
    assert CELL_WIDTH_PX < natural < CELL_WIDTH_PX / MIN_SCALE
    shown = re.search(r'<svg\b[^>]*\bwidth="([0-9.]+)px"', layout._repr_svg_())
    assert float(shown.group(1)) == pytest.approx(CELL_WIDTH_PX, abs=1)
    view_box = re.compile(r'viewBox="[^"]+"')
    assert view_box.search(layout._repr_svg_()).group(0) == view_box.search(layout.svg).group(0)

def test_a_static_layout_also_carries_the_graph_document_for_the_lab_renderer():
    # JupyterLab with dflab's renderer draws %%dflab's drawing with pan and zoom: a drawing too
    # wide for a cell stays readable there instead of being cut off.
    from dflab.visualize.document import GRAPH_MIME, SVG

    x = tf.placeholder(tf.float32, [None, 3], name="x")
    tf.reduce_sum(tf.square(x, name="sq"), name="total")
    layout = layout_graph(tf.get_default_graph())
    bundle = layout._repr_mimebundle_()
    assert bundle[SVG] == layout._repr_svg_()
    doc = bundle[GRAPH_MIME]
    assert doc["svg"] == layout.svg
    by_name = {n["name"]: n for n in doc["nodes"].values() if n.get("kind") == "op"}
    assert {"x", "sq", "total"} <= set(by_name)
    assert [t["name"] for t in by_name["sq"]["inputs"]] == ["x:0"]
    assert by_name["sq"]["consumers"] == ["total"]
    assert set(layout._repr_mimebundle_(include=[SVG])) == {SVG}
    assert GRAPH_MIME not in layout._repr_mimebundle_(exclude=[GRAPH_MIME])


# --- scopes ------------------------------------------------------------------------------------
def _scoped_graph(n_per_scope=25):
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    outs = {}
    for scope in ("a", "b", "c"):
        with tf.name_scope(scope):
            h = x
            with tf.name_scope("inner"):
                for _ in range(n_per_scope // 2):
                    h = tf.tanh(h)
            with tf.name_scope("other"):
                for _ in range(n_per_scope - n_per_scope // 2):
                    h = h * 2.0
            outs[scope] = h
    total = tf.add_n(list(outs.values()), name="total")
    return x, outs, total


def test_small_graph_shows_every_op_with_scope_clusters():
    with tf.name_scope("dense"):
        a = tf.constant(1.0, name="a")
        b = tf.add(a, 2.0, name="b")
    tf.negative(b, name="top")
    layout = layout_graph(tf.get_default_graph())
    assert all(layout.nodes[i]["kind"] == "op" for i in layout.name_to_id.values())
    (cluster,) = [c for c in layout.clusters if c["name"] == "dense"]
    assert cluster["kind"] == "scope"
    members = {op.name for op in tf.get_default_graph().get_operations()
               if op.name.startswith("dense/")}
    assert len(members) == 3
    assert {layout.nodes[u]["name"] for u in cluster["units"]} == members
    assert layout.nodes[layout.name_to_id["dense/b"]]["parent"] == cluster["id"]


def test_large_graph_collapses_top_level_scopes_with_counts_and_aggregated_edges():
    _scoped_graph()
    ops = tf.get_default_graph().get_operations()
    assert len(ops) > COLLAPSE_ABOVE
    layout = layout_graph(tf.get_default_graph(), collapse=True)
    for scope in ("a", "b", "c"):
        members = [op.name for op in ops if op.name.startswith(scope + "/")]
        node_ids = {layout.name_to_id[n] for n in members}
        assert len(node_ids) == 1
        info = layout.nodes[node_ids.pop()]
        assert (info["kind"], info["name"], info["n_ops"]) == ("scope", scope, len(members))
    texts = all_text(parse_svg(layout.svg))
    assert any(t.startswith(f"{layout.nodes[layout.name_to_id['a/inner/Tanh']]['n_ops']} ops")
               for t in texts)
    # x feeds each scope once; each scope feeds `total` once.
    ids = layout.name_to_id
    into_total = [e for e in layout.edges if e["target"] == ids["total"]]
    assert sorted(layout.nodes[e["source"]]["name"] for e in into_total) == ["a", "b", "c"]
    assert all(e["count"] == 1 for e in into_total)
    assert not any(e["source"] == e["target"] for e in layout.edges)


def test_edges_between_collapsed_scopes_are_aggregated_with_a_count():
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    with tf.name_scope("src"):
        parts = [tf.tanh(x) for _ in range(3)]
        filler = x
        for _ in range(40):
            filler = filler + 1.0
    with tf.name_scope("dst"):
        tf.add_n(parts + [filler])
    layout = layout_graph(tf.get_default_graph())
    ids = layout.name_to_id
    (edge,) = [e for e in layout.edges
               if e["source"] == ids["src/Tanh"] and e["target"] == ids["dst/AddN"]]
    assert edge["count"] == 4
    assert sorted(edge["tensors"]) == sorted(
        [p.name for p in parts] + [filler.name])
    assert "4\u00d7 float32 [?,4]" in _dot_edge(layout.dot, ids["src/Tanh"], ids["dst/AddN"])


def test_expanding_a_nested_scope_opens_it_and_its_parents_only():
    _scoped_graph()
    layout = layout_graph(tf.get_default_graph(), expanded=["a/inner"], collapse=True)
    ids = layout.name_to_id
    tanhs = [n for n in ids if n.startswith("a/inner/")]
    assert tanhs and all(layout.nodes[ids[n]]["kind"] == "op" for n in tanhs)
    other = {ids[n] for n in ids if n.startswith("a/other/")}
    assert len(other) == 1 and layout.nodes[other.pop()]["kind"] == "scope"
    assert layout.nodes[ids["b/inner/Tanh"]]["kind"] == "scope"
    cluster_names = {c["name"]: c["kind"] for c in layout.clusters}
    assert cluster_names.get("a") == "scope" and "a/inner" in cluster_names
    assert layout.nodes[ids[tanhs[0]]]["label"] == tanhs[0][len("a/inner/"):]


# --- fetches and highlights --------------------------------------------------------------------
def test_fetch_highlighting_is_what_prune_executes():
    x, w, y, loss, unrelated = _mlp()
    graph = tf.get_default_graph()
    layout = layout_graph(graph, fetches=loss, feeds={x: None}, collapse=False)
    needed = {op.name for op in prune([loss], [], [x])}
    shown = {n for n, i in layout.name_to_id.items() if layout.nodes[i]["in_fetch_subgraph"]}
    assert shown == needed
    assert unrelated.op.name not in shown and "x" not in shown  # x is fed, not run
    groups = groups_by_id(parse_svg(layout.svg))
    for name, node_id in layout.name_to_id.items():
        cls = classes(groups[node_id])
        assert ("faded" in cls) == (name not in needed and name != "x"), name
    assert "fed" in classes(groups[layout.name_to_id["x"]])
    assert "fetched" in classes(groups[layout.name_to_id["loss"]])


def test_fetching_a_target_op_prunes_through_control_inputs():
    x, w, y, loss, unrelated = _mlp()
    init = tf.global_variables_initializer()
    layout = layout_graph(tf.get_default_graph(), collapse=False, fetches=[init])
    shown = {n for n, i in layout.name_to_id.items() if layout.nodes[i]["in_fetch_subgraph"]}
    assert shown == {op.name for op in prune([], [init], [])}
    assert "layer/w/Assign" in shown and "loss" not in shown


def test_highlight_emphasises_ops_and_their_collapsed_scope():
    x, outs, total = _scoped_graph()
    target = tf.get_default_graph().get_operation_by_name("b/inner/Tanh")
    layout = layout_graph(tf.get_default_graph(), highlight=[target, "total"], collapse=True)
    highlighted = {layout.nodes[i]["name"] for i in layout.nodes if layout.nodes[i]["highlighted"]}
    assert highlighted == {"b", "total"}
    groups = groups_by_id(parse_svg(layout.svg))
    assert "highlighted" in classes(groups[layout.name_to_id["total"]])
    assert "highlighted" not in classes(groups[layout.name_to_id["a/inner/Tanh"]])


# --- colours -----------------------------------------------------------------------------------
def test_color_by_op_fills_each_family_with_its_colour_and_lists_it_in_the_legend():
    _mlp()
    layout = layout_graph(tf.get_default_graph(), color_by="op")
    groups = groups_by_id(parse_svg(layout.svg))
    matmul = groups[layout.name_to_id["layer/y"]]
    placeholder = groups[layout.name_to_id["x"]]
    assert _fill(matmul) == vstyle.family_fill("math")
    assert _fill(placeholder) == vstyle.family_fill("input")
    assert {"fam-math"} <= classes(matmul)
    labels = [s["label"] for s in layout.legend["swatches"]]
    assert "math" in labels and "input" in labels
    legend = [g for g in parse_svg(layout.svg).iter(SVG_NS + "g") if "legend" in classes(g)]
    assert legend and "math" in all_text(legend[0])


def _two_device_graph():
    with tf.device("/cpu:0"):
        a = tf.constant(np.ones((2, 2), np.float32), name="a")
        b = tf.matmul(a, a, name="b")
    with tf.device("/cpu:1"):
        c = tf.tanh(b, name="c")
    return c


@pytest.mark.parametrize("as_report", [True, False])
def test_color_by_device_uses_the_assigned_device(as_report):
    c = _two_device_graph()
    report = explain_placement(c, tf.ConfigProto(device_count={"CPU": 2}))
    placement = report if as_report else {op: p for op, p in report.placement.items()}
    layout = layout_graph(tf.get_default_graph(), color_by="device", placement=placement)
    groups = groups_by_id(parse_svg(layout.svg))
    fills = {n: _fill(groups[i]) for n, i in layout.name_to_id.items()}
    assert fills["a"] == fills["b"] != fills["c"]
    info = layout.nodes[layout.name_to_id["c"]]
    assert info["assigned_device"] == CPU1 and info["placement_reason"]
    assert layout.nodes[layout.name_to_id["b"]]["assigned_device"] == CPU0
    assert [s["label"] for s in layout.legend["swatches"]] == ["CPU:0", "CPU:1"]


def test_color_by_device_without_placement_uses_the_requested_device():
    _two_device_graph()
    layout = layout_graph(tf.get_default_graph(), color_by="device")
    groups = groups_by_id(parse_svg(layout.svg))
    assert _fill(groups[layout.name_to_id["b"]]) != _fill(groups[layout.name_to_id["c"]])
    assert layout.nodes[layout.name_to_id["c"]]["device"] == "/device:CPU:1"


def test_a_collapsed_scope_spanning_devices_is_striped():
    with tf.name_scope("mixed"):
        c = _two_device_graph()
        h = c
        with tf.device("/cpu:1"):
            for _ in range(COLLAPSE_ABOVE):
                h = h + 1.0
    layout = layout_graph(tf.get_default_graph(), color_by="device", collapse=True)
    node_id = layout.name_to_id["mixed/c"]
    assert 'style="striped"' in _dot_line(layout.dot, node_id)
    # Devices are counted under one spelling each, whether requested or assigned.
    assert set(layout.nodes[node_id]["devices"]) == {
        "/job:localhost/replica:0/task:0/device:CPU:0",
        "/job:localhost/replica:0/task:0/device:CPU:1"}


def test_a_device_requested_and_assigned_is_one_legend_entry():
    from dflab.runtime.placer import explain_placement

    with tf.device("/gpu:0"):
        a = tf.constant(1.0, name="a")
        needed = tf.multiply(a, 2.0, name="needed")
        tf.add(a, 3.0, name="unneeded")  # not placed: drawn by its request, "/device:GPU:0"
    report = explain_placement([needed], tf.ConfigProto(device_count={"GPU": 1}))
    layout = layout_graph(tf.get_default_graph(), color_by="device", fetches=[needed],
                          placement=report.placement)
    legend = re.search(r'<g class="legend".*?</g>', layout.svg, re.S).group(0)
    labels = re.findall(r">([^<>]+)<", legend)
    assert labels.count("GPU:0") == 1, labels


@pytest.mark.parametrize("mode,key", [("time", "time_us"), ("memory", "output_bytes")])
def test_color_by_time_and_memory_follow_the_step_stats(mode, key, two_cpu_run):
    run = two_cpu_run
    layout = layout_graph(run.graph, color_by=mode, run_metadata=run.md, collapse=False)
    stats = {}
    for ds in run.md.step_stats.dev_stats:
        for ns in ds.node_stats:
            if mode == "time":
                stats[ns.node_name] = stats.get(ns.node_name, 0) + ns.op_end_rel_nanos / 1000
            else:
                stats[ns.node_name] = sum(o.tensor_description.allocation_description
                                          .requested_bytes for o in ns.output)
    groups = groups_by_id(parse_svg(layout.svg))
    for name, node_id in layout.name_to_id.items():
        info = layout.nodes[node_id]
        if name in stats:
            assert info[key] == pytest.approx(stats[name])
        else:  # not part of this step (the initializer, the fed placeholder)
            assert key not in info and "not-run" in classes(groups[node_id])
    hottest = max((n for n in stats if n in layout.name_to_id), key=stats.get)
    assert _fill(groups[layout.name_to_id[hottest]]) == vstyle.heat(stats[hottest],
                                                                   stats[hottest])[0]
    assert layout.legend["heat"] is not None


def test_unknown_color_mode_is_rejected():
    _mlp()
    with pytest.raises(ValueError, match="color_by must be one of"):
        layout_graph(tf.get_default_graph(), color_by="rainbow")
    assert "partition" in COLOR_MODES


# --- escaping ------------------------------------------------------------------------------------
def test_graph_text_is_escaped_never_markup():
    evil = tf.constant([XSS], name="evil")
    joined = string_join([evil, evil], separator="<script>alert(2)</script>")
    layout = layout_graph(tf.get_default_graph())
    root = parse_svg(layout.svg)  # well-formed XML
    tags = {el.tag.rsplit("}", 1)[-1] for el in root.iter()}
    assert not tags & {"img", "image", "script", "foreignObject"}
    assert not any(k.lower().startswith("on") for el in root.iter() for k in el.attrib)
    texts = "\n".join(all_text(root))
    assert XSS in texts  # the constant's value survives as text (in its tooltip)
    assert "<script>alert(2)</script>" in texts  # and so does the attribute
    assert "<img" not in layout.dot and "&lt;img" in layout.dot
    assert layout.nodes[layout.name_to_id["evil"]]["attrs"]["value"] == repr([XSS])
    assert joined.op.name in layout.name_to_id


def test_control_characters_and_odd_bytes_stay_printable():
    tf.constant(np.array([b"line\nbreak\x00\xff", b"tab\tand \xe2\x80\xa8"], dtype=object),
                name="odd")
    layout = layout_graph(tf.get_default_graph())
    parse_svg(layout.svg)  # no character XML cannot carry
    value = layout.nodes[layout.name_to_id["odd"]]["attrs"]["value"]
    assert "\\n" in value and "\\x00" in value and "\n" not in value


# --- metadata and edge cases ---------------------------------------------------------------------
def test_to_json_is_plain_json_with_what_a_front_end_needs():
    x, w, y, loss, _ = _mlp()
    layout = layout_graph(tf.get_default_graph(), fetches=loss)
    data = json.loads(json.dumps(layout.to_json()))
    assert set(data) >= {"nodes", "name_to_id", "edges", "clusters", "legend"}
    node = data["nodes"][data["name_to_id"]["layer/y"]]
    assert node["op_type"] == "MatMul" and node["dtypes"] == ["float32"]
    assert node["output_shapes"] == ["[?,10]"]
    assert node["site"].endswith(f"{__file__}:{_mlp.__code__.co_firstlineno + 4}")
    assert all(set(e) >= {"id", "source", "target", "kind", "count"} for e in data["edges"])


def test_an_empty_graph_draws_a_small_note():
    layout = layout_graph(tf.Graph())
    root = parse_svg(layout.svg)
    assert "empty graph" in all_text(root)
    assert layout.nodes == {} and layout.name_to_id == {}


def test_a_list_of_ops_draws_only_those_ops():
    x, w, y, loss, _ = _mlp()
    layout = layout_graph([y.op, loss.op, y])
    assert set(layout.name_to_id) == {"layer/y", "loss"}


# --- big drawings -------------------------------------------------------------------------------
def _fan(n_consumers: int):
    shared = tf.constant(np.ones(4, np.float32), name="shared")
    x = tf.placeholder(tf.float32, [4], name="x")
    h = x
    for _ in range(n_consumers):
        h = tf.add(h, shared)
    return shared


def test_a_hub_in_a_big_drawing_keeps_its_edges_in_the_data_but_not_in_the_svg():
    _fan(HUB_MIN_UNITS + 5)
    layout = layout_graph(tf.get_default_graph())
    hub = layout.name_to_id["shared"]
    hidden = [e for e in layout.edges if not e["drawn"]]
    assert {e["source"] for e in hidden} == {hub}
    assert len(hidden) == HUB_MIN_UNITS + 5
    assert sorted(layout.nodes[hub]["hub_neighbours"]) == sorted(e["target"] for e in hidden)
    groups = groups_by_id(parse_svg(layout.svg))
    assert not any(e["id"] in groups for e in hidden)
    assert all(e["id"] in groups for e in layout.edges if e["drawn"])
    # A hub at the top level is set aside with the auxiliary units, as TensorBoard does.
    assert {"hub", "aux"} <= classes(groups[hub])
    assert layout.nodes[hub]["auxiliary"] == "hub"
    (aux,) = [c for c in layout.clusters if c["kind"] == "aux"]
    assert aux["units"] == [hub]
    assert any("auxiliary" in s["label"] for s in layout.legend["swatches"])


def test_a_small_drawing_shows_every_edge_even_from_a_busy_node():
    _fan(HUB_DEGREE + 2)
    layout = layout_graph(tf.get_default_graph())
    assert len(layout.nodes) < HUB_MIN_UNITS
    assert all(e["drawn"] for e in layout.edges)


def test_effort_follows_the_size_of_the_layout():
    _mlp()
    small = layout_graph(tf.get_default_graph())
    assert 'splines="line"' not in small.dot and "float32 [?,784]" in small.dot
    with tf.Graph().as_default() as big:
        h = tf.placeholder(tf.float32, [None, 8], name="x")
        for _ in range(FAST_ABOVE):
            h = tf.tanh(h) + h
    layout = layout_graph(big)
    assert layout_effort(_build_view_of(big)) == (False, True)
    assert 'splines="line"' in layout.dot and 'nslimit="0.2"' in layout.dot
    assert "float32 [?,8]" not in layout.dot  # labels only in the tooltips
    titles = [t for t in all_text(parse_svg(layout.svg)) if "float32 [?,8]" in t]
    assert titles


def _build_view_of(graph):
    records = vmodel.records_of_ops(graph.get_operations())
    return vmodel.build_view(records, collapse=True)


def test_sites_of_notebook_cells_read_as_cells():
    from IPython.core.interactiveshell import InteractiveShell

    from dflab.visualize.graph import layout_graph

    shell = InteractiveShell.instance()
    shell.user_ns["tf"] = tf
    shell.run_cell("pass", store_history=True)
    result = shell.run_cell("a = tf.constant(1.0, name='in_cell')\n", store_history=True)
    assert result.success
    layout = layout_graph(tf.get_default_graph())
    info = layout.nodes[layout.name_to_id["in_cell"]]
    assert info["site"] == f"Cell In[{result.execution_count}], line 1"


@pytest.mark.parametrize("op_type,want", [
    ("MatMul", "math"), ("Sum", "math"), ("Range", "math"), ("Einsum", "math"),
    ("ArgMax", "math"), ("Slice", "array"), ("GatherV2", "array"), ("Tile", "array"),
    ("Select", "array"), ("Reshape", "array"), ("VariableV2", "variable"),
])
def test_every_module_of_a_family_colours_its_ops_alike(op_type, want):
    from dflab.visualize.style import family

    assert family(op_type) == want
