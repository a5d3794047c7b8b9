"""GraphView: layout traits, clicks on ops and scopes, colouring, runs with partitions, values,
escaping of hostile names and values, the static fallback, and a 2,000-op graph."""

import numpy as np
import pytest

import dflab as tf
from dflab.notebook import GraphView
from dflab.runtime.placer import explain_placement

TWO_CPUS = dict(device_count={"CPU": 2}, inter_op_parallelism_threads=2)


def node_of(view, name):
    return view.nodes[view.node_id(name)]


def test_layout_is_sent_once_with_node_info_and_fetch_subgraph():
    with tf.Graph().as_default() as g:
        a = tf.constant(1.0, name="a")
        with tf.name_scope("s"):
            b = tf.add(a, 2.0, name="b")
        tf.negative(a, name="unused")
        view = GraphView(g, fetches=b)
    assert view.svg.startswith("<svg") and f'id="{view.node_id("s/b")}"' in view.svg
    assert node_of(view, "s/b")["op_type"] == "AddV2"
    assert node_of(view, "s/b")["in_fetch_subgraph"] is True
    assert node_of(view, "unused")["in_fetch_subgraph"] is False
    assert view.states == {} and view.selected == ""


def test_click_on_an_op_shows_its_details_with_placement():
    with tf.Graph().as_default() as g:
        with tf.device("/cpu:1"):
            x = tf.constant(np.ones((2, 3), np.float32), name="x")
            y = tf.reduce_sum(x, axis=1, name="y")
        report = explain_placement(y, tf.ConfigProto(**TWO_CPUS), graph=g)
        view = GraphView(g, fetches=y, placement=report, color_by="device")
    view._handle_message({"type": "click", "id": view.node_id("y")})
    d = view.detail
    assert view.selected == view.node_id("y")
    assert d["name"] == "y" and d["op_type"] == "Sum"
    assert d["dtypes"] == ["float32"] and d["output_shapes"] == ["[2]"]
    assert d["device"] == "/device:CPU:1"
    assert d["assigned_device"].endswith("CPU:1") and d["placement_reason"]
    assert d["site"].endswith(f"{__file__.rsplit('/', 1)[-1]}:{y.op.creation_site.split(':')[-1]}")
    assert "keep_dims" in d["attrs"] or "keepdims" in d["attrs"] or d["attrs"]
    # A stale click (an id from an earlier layout) is ignored.
    view._handle_message({"type": "click", "id": "n9999"})
    assert view.selected == view.node_id("y")


def _big_graph(n_layers=40, per_layer=50):
    """n_layers name scopes of per_layer ops each (2,000 ops for the defaults)."""
    x = tf.constant(np.ones(4, np.float32), name="x")
    for i in range(n_layers):
        with tf.name_scope(f"layer{i}"):
            parts = [tf.multiply(x, float(k), name=f"m{k}") for k in range(per_layer - 1)]
            x = tf.add_n(parts, name="sum")
    return x


def test_scopes_collapse_and_expand_on_click_in_a_2000_op_graph():
    with tf.Graph().as_default() as g:
        out = _big_graph()
        assert len(g.get_operations()) >= 2000
        view = GraphView(g, fetches=out)
    scopes = [n for n in view.nodes.values() if n["kind"] == "scope"]
    assert len(scopes) == 40 and len(view.nodes) < 100  # drawn as metanodes
    scope_id = view.node_id("layer3/m7")
    in_scope = [op for op in g.get_operations() if op.name.startswith("layer3/")]
    assert view.nodes[scope_id]["name"] == "layer3"
    assert view.nodes[scope_id]["n_ops"] == len(in_scope)
    view._handle_message({"type": "click", "id": scope_id})  # the kernel re-lays out
    assert view.expanded == ["layer3"]
    assert node_of(view, "layer3/m7")["kind"] == "op"
    cluster = next(nid for nid, n in view.nodes.items()
                   if n["kind"] == "cluster" and n["name"] == "layer3")
    view._handle_message({"type": "cluster-click", "id": cluster})
    assert view.expanded == [] and node_of(view, "layer3/m7")["kind"] == "scope"
    view.expand("layer1")
    view.expand("layer2")
    view.collapse()
    assert view.expanded == []


def test_selection_survives_a_relayout_and_color_by_relayouts():
    with tf.Graph().as_default() as g:
        out = _big_graph(n_layers=3, per_layer=30)
        view = GraphView(g, fetches=out)
    view.select("layer2/sum")  # hidden in a collapsed scope: the scope opens
    assert view.expanded == ["layer2"] and view.detail["name"] == "layer2/sum"
    old_svg = view.svg
    view.expand("layer0")
    assert view.detail["name"] == "layer2/sum" and view.selected == view.node_id("layer2/sum")
    view.color_by = "device"
    assert view.svg != old_svg and view.layout.color_by == "device"
    with pytest.raises(ValueError, match="color_by"):
        GraphView(g, color_by="rainbow")
    with pytest.raises(KeyError):
        view.select("nope")


def test_from_run_draws_partitions_send_recv_and_fetched_values():
    with tf.Graph().as_default():
        with tf.device("/cpu:0"):
            a = tf.constant(2.0, name="a")
            b = tf.square(a, name="b")
        with tf.device("/cpu:1"):
            c = tf.add(b, 1.0, name="c")
        with tf.Session(config=tf.ConfigProto(**TWO_CPUS)) as sess:
            view = GraphView.from_run(sess, c, color_by="partition")
    clusters = [n for n in view.nodes.values() if n["kind"] == "cluster"]
    assert sorted(n["cluster_kind"] for n in clusters) == ["partition", "partition"]
    assert {"_Send", "_Recv"} <= {n["op_type"] for n in view.nodes.values()
                                  if n["kind"] == "op"}
    assert view.values[view.node_id("c")] == "float32 5"
    view.select("c")
    assert view.detail["value"] == "float32 5"
    assert view.detail["assigned_device"].endswith("CPU:1")


def test_from_run_metadata_colours_by_time():
    with tf.Graph().as_default() as g:
        x = tf.constant(np.ones((8, 8), np.float32), name="x")
        y = tf.matmul(x, x, name="y")
        md = tf.RunMetadata()
        with tf.Session() as sess:
            sess.run(y, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                     run_metadata=md)
        view = GraphView.from_run(md, graph=g, color_by="time")
    assert node_of(view, "y").get("time_us", 0) > 0
    view.select("y")
    assert view.detail["time_us"] > 0


def test_hostile_names_and_values_stay_text():
    evil = "<img src=x onerror=alert(1)>"
    with tf.Graph().as_default() as g:
        s = tf.constant(evil, name="s")
        view = GraphView(g, values={s: np.array(evil.encode())})
    assert "<img" not in view.svg and "&lt;img src=x onerror=alert(1)&gt;" in view.svg
    view.select("s")
    assert evil in view.detail["value"]  # sent as text; the front-end inserts it as text
    assert evil in view.detail["attrs"]["value"]


def test_show_values_and_the_static_fallback():
    with tf.Graph().as_default() as g:
        x = tf.constant([1.0, 2.0, 3.0], name="x")
        view = GraphView(g)
    view.show_values({"x:0": np.array([1.0, 2.0, 3.0], np.float32)})
    assert view.values[view.node_id("x")] == "float32[3] [1, 2, 3]"
    bundle, _ = view._repr_mimebundle_()
    assert bundle["text/plain"].startswith("GraphView: 1 ops")
    assert bundle["image/svg+xml"] == view.svg
    assert "application/vnd.jupyter.widget-view+json" in bundle
    del x


def test_canvas_height_is_automatic_unless_set_and_refuses_nonsense():
    import traitlets

    with tf.Graph().as_default():
        tf.constant(1.0, name="a")
        view = GraphView()
    assert view.height == 0  # the front-end follows the drawing's shape
    view.height = 600
    assert view.height == 600
    with pytest.raises(traitlets.TraitError, match="height must be 0"):
        view.height = -5
    assert view.height == 600
