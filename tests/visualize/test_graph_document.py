"""The graph document (``application/vnd.dflab.graph+json``) in rich display bundles: what it
holds, that it matches the drawing, that it stays bounded, and that hostile text is kept as data.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from visualize_helpers import SVG_NS, groups_by_id, parse_svg

import dflab as tf
from dflab.runtime.placer import explain_placement
from dflab.visualize import layout_graph, mimebundle
from dflab.visualize.document import GRAPH_MIME, MAX_LISTED_TENSORS, graph_document
from dflab.visualize.mimebundle import neighbourhood

SVG, TEXT = "image/svg+xml", "text/plain"
EVIL = "<img src=x onerror=alert(1)>"


def _graph():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    with tf.name_scope("layer"):
        w = tf.constant(np.ones((3, 2), np.float32), name="w")
        y = tf.matmul(x, w, name="y")
    loss = tf.reduce_sum(tf.square(y, name="sq"), name="loss")
    return x, w, y, loss


def _ops(doc) -> dict:
    return {n["name"]: n for n in doc["nodes"].values() if n["kind"] == "op"}


def test_a_graph_document_describes_every_drawn_node_with_its_wiring():
    x, w, y, loss = _graph()
    g = tf.get_default_graph()
    doc = mimebundle(g)[GRAPH_MIME]
    # A graph needs no title (its repr would be no title for a reader).
    assert doc["version"] == 1 and doc["source"] == "graph" and doc["title"] == ""
    assert doc["svg"] == layout_graph(g).svg and doc["selected"] == ""
    # The drawing's node groups are the document's nodes, by id.
    drawn = {i for i, el in groups_by_id(parse_svg(doc["svg"])).items()
             if "node" in (el.get("class") or "").split()}
    assert drawn == {i for i, n in doc["nodes"].items() if n["kind"] != "cluster"}
    ops = _ops(doc)
    assert set(ops) == {op.name for op in g.get_operations()}
    my = ops["layer/y"]
    assert (my["op_type"], my["scope"]) == ("MatMul", "layer")
    assert my["inputs"] == [{"name": "x:0", "dtype": "float32", "shape": "[?,3]"},
                            {"name": "layer/w:0", "dtype": "float32", "shape": "[3,2]"}]
    assert my["outputs"] == [{"name": "layer/y:0", "dtype": "float32", "shape": "[?,2]"}]
    assert my["consumers"] == ["sq"] and my["control_inputs"] == []
    assert ops["x"]["scope"] == "" and ops["x"]["inputs"] == []
    assert json.loads(json.dumps(doc)) == doc  # plain JSON


def test_an_op_or_tensor_document_selects_the_op_it_shows():
    x, w, y, loss = _graph()
    for obj, source in ((y.op, "operation"), (y, "tensor")):
        doc = mimebundle(obj)[GRAPH_MIME]
        assert doc["source"] == source
        assert doc["nodes"][doc["selected"]]["name"] == "layer/y"
        assert set(_ops(doc)) == {op.name for op in neighbourhood(y.op)}


def test_a_placement_report_document_has_the_assigned_devices(two_cpu_run):
    report = explain_placement(two_cpu_run.out, two_cpu_run.config,
                               feed_tensors=[two_cpu_run.x], graph=two_cpu_run.graph)
    ops = _ops(mimebundle(report)[GRAPH_MIME])
    assert ops["branch/a"]["assigned_device"].endswith("CPU:1")
    assert ops["h"]["assigned_device"].endswith("CPU:0")
    assert ops["h"]["inputs"][0]["name"] == "x:0"


def test_run_metadata_has_no_document(two_cpu_run):
    assert GRAPH_MIME not in mimebundle(two_cpu_run.md)  # a timeline and partitions: SVG only


def test_include_and_exclude_choose_the_drawings():
    _graph()
    g = tf.get_default_graph()
    assert set(mimebundle(g, include=[GRAPH_MIME])) == {GRAPH_MIME}
    assert set(mimebundle(g, exclude=[GRAPH_MIME])) == {TEXT, SVG}
    assert set(mimebundle(tf.Graph())) == {TEXT, SVG}  # an empty graph: nothing to explore


def test_hostile_text_is_kept_as_data_and_escaped_in_the_svg():
    evil = tf.constant(EVIL, name="evil")
    with tf.device("/job:" + EVIL + "/device:CPU:0"):
        tf.identity(evil, name="placed")
    doc = mimebundle(tf.get_default_graph())[GRAPH_MIME]
    ops = _ops(doc)
    assert EVIL in ops["evil"]["attrs"]["value"]
    assert ops["placed"]["device"] == "/job:" + EVIL + "/device:CPU:0"
    root = parse_svg(doc["svg"])
    assert not any(el.tag in (SVG_NS + "img", SVG_NS + "script", "img") for el in root.iter())
    assert EVIL not in doc["svg"]  # only in escaped form


def test_a_large_graph_stays_bounded_and_lists_few_inputs():
    parts = [tf.constant(float(i), name=f"part_{i}") for i in range(MAX_LISTED_TENSORS + 8)]
    total = tf.add_n(parts, name="total")
    for k in range(30):  # scopes collapse above 60 ops
        with tf.name_scope(f"block_{k}"):
            tf.multiply(total, float(k), name="m")
    g = tf.get_default_graph()
    doc = mimebundle(g)[GRAPH_MIME]
    assert len(doc["nodes"]) < len(g.get_operations())  # collapsed scopes, as in the SVG
    inputs = _ops(doc)["total"]["inputs"]
    assert len(inputs) == MAX_LISTED_TENSORS + 1
    assert inputs[-1]["name"] == "\u2026 8 more"


def test_a_document_over_the_size_cap_is_left_out(monkeypatch):
    _graph()
    monkeypatch.setattr(sys.modules["dflab.visualize.document"], "MAX_DOCUMENT_BYTES", 1000)
    bundle = mimebundle(tf.get_default_graph())
    assert GRAPH_MIME not in bundle and bundle[SVG].startswith("<svg")
    assert graph_document("<svg/>", {"n0": {"name": "a" * 2000, "kind": "op"}}) is None


def test_graph_view_bundle_carries_the_document_with_values():
    pytest.importorskip("anywidget", reason="the notebook extra provides the widgets")
    from dflab.notebook import GraphView

    with tf.Graph().as_default() as g:
        x = tf.constant([1.0, 2.0, 3.0], name="x")
        y = tf.negative(x, name="y")
        view = GraphView(g, title=EVIL)
    view.show_values({"x:0": np.array([1.0, 2.0, 3.0], np.float32)})
    view.select("y")
    bundle, _ = view._repr_mimebundle_()
    doc = bundle[GRAPH_MIME]
    assert (doc["source"], doc["title"], doc["svg"]) == ("GraphView", EVIL, view.svg)
    assert doc["selected"] == view.node_id("y")
    ops = _ops(doc)
    assert ops["x"]["value"] == "float32[3] [1, 2, 3]"
    assert ops["y"]["inputs"] == [{"name": "x:0", "dtype": "float32", "shape": "[3]"}]
    del y


def test_the_prebuilt_renderer_is_complete_and_packaged():
    """The committed build (extension/lab -> dflab/labextension) names the file JupyterLab loads,
    that file exists, the bundle handles GRAPH_MIME, and the wheel installs it all."""
    repo = Path(__file__).resolve().parents[2]
    ext = repo / "dflab" / "labextension"
    meta = json.loads((ext / "package.json").read_text(encoding="utf-8"))
    assert meta["name"] == "dflab-graph-renderer"
    build = meta["jupyterlab"]["_build"]
    assert build["mimeExtension"] and (ext / build["load"]).is_file()
    assert any(GRAPH_MIME in f.read_text(encoding="utf-8") for f in (ext / "static").glob("*.js"))
    pyproject = (repo / "pyproject.toml").read_text(encoding="utf-8")
    target = '"share/jupyter/labextensions/dflab-graph-renderer'
    assert f'{target}/static" = ["dflab/labextension/static/*"]' in pyproject
    assert f'{target}" = [' in pyproject and '"dflab/labextension/package.json"' in pyproject
