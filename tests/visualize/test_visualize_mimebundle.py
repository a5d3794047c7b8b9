"""Rich display: the bundle of every displayable type, include/exclude, IPython's formatter, and
the text-only fallback without Graphviz."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from visualize_helpers import SVG_NS, all_text, classes, groups_by_id, parse_svg

import dflab as tf
from dflab.runtime.placer import explain_placement
from dflab.visualize import layout_graph, mimebundle
from dflab.visualize.document import GRAPH_MIME
from dflab.visualize.mimebundle import neighbourhood

SVG, TEXT, HTML = "image/svg+xml", "text/plain", "text/html"
REPO = Path(__file__).resolve().parents[2]


def _graph():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    w = tf.constant([[1.0], [2.0], [3.0]], name="w")
    y = tf.matmul(x, w, name="y")
    z = tf.nn.relu(y, name="z")
    other = tf.negative(y, name="other")
    return x, y, z, other


def _displayables(run):
    g = run.graph
    report = explain_placement(run.out, run.config, feed_tensors=[run.x], graph=g)
    return {"Graph": g, "Operation": run.h.op, "Tensor": run.h, "RunMetadata": run.md,
            "PlacementReport": report}


@pytest.mark.parametrize("kind", ["Graph", "Operation", "Tensor", "RunMetadata",
                                  "PlacementReport"])
def test_every_type_gets_an_svg_and_its_repr(kind, two_cpu_run):
    obj = _displayables(two_cpu_run)[kind]
    bundle = mimebundle(obj)
    assert bundle[TEXT] == repr(obj)
    root = parse_svg(bundle[SVG])
    assert not any(el.tag.endswith("script") for el in root.iter())
    assert obj._repr_mimebundle_()[SVG] == bundle[SVG]  # the display hook uses it


def test_operation_shows_its_one_hop_neighbourhood_highlighted():
    x, y, z, other = _graph()
    bundle = mimebundle(y.op)
    expected = layout_graph(neighbourhood(y.op), highlight=[y.op])
    assert {op.name for op in neighbourhood(y.op)} == {"x", "w", "y", "z", "other"}
    root = parse_svg(bundle[SVG])
    groups = groups_by_id(root)
    shown = {g.find(SVG_NS + "title").text.split(" ")[0] for g in groups.values()
             if "op" in classes(g)}
    assert shown == {"x", "w", "y", "z", "other"}
    assert "highlighted" in classes(groups[expected.name_to_id["y"]])
    assert "highlighted" not in classes(groups[expected.name_to_id["z"]])


def test_tensor_emphasises_its_edges():
    x, y, z, other = _graph()
    layout = layout_graph(neighbourhood(y.op), highlight=[y.op], emphasize=[y])
    root = parse_svg(mimebundle(y)[SVG])
    groups = groups_by_id(root)
    ids = layout.name_to_id
    emph = {(e["source"], e["target"]) for e in layout.edges if "emph" in e["classes"]}
    assert emph == {(ids["y"], ids["z"]), (ids["y"], ids["other"])}
    for e in layout.edges:
        assert ("emph" in classes(groups[e["id"]])) == ((e["source"], e["target"]) in emph)


def test_run_metadata_shows_the_timeline_and_the_partitions(two_cpu_run):
    root = parse_svg(mimebundle(two_cpu_run.md)[SVG])
    parts = [el for el in root if el.tag == SVG_NS + "svg"]
    assert [classes(p) for p in parts] == [{"dflab-timeline"}, {"dflab-graph"}]
    assert any("partition" in classes(g) for g in parts[1].iter(SVG_NS + "g"))
    untraced = tf.RunMetadata(step_stats=two_cpu_run.md.step_stats)
    assert "dflab-timeline" in classes(parse_svg(mimebundle(untraced)[SVG]))


def test_placement_report_is_coloured_by_device_with_its_table(two_cpu_run):
    report = _displayables(two_cpu_run)["PlacementReport"]
    bundle = mimebundle(report)
    assert bundle[HTML] == report._repr_html_()
    layout = layout_graph(list(report.placement), color_by="device", placement=report)
    assert bundle[SVG] == layout.svg
    assert {"CPU:0", "CPU:1"} <= set(all_text(parse_svg(bundle[SVG])))


def test_include_and_exclude_are_respected():
    _graph()
    g = tf.get_default_graph()
    assert set(mimebundle(g, include=[TEXT])) == {TEXT}
    assert set(mimebundle(g, exclude=[SVG, GRAPH_MIME])) == {TEXT}
    assert set(mimebundle(g, include=[SVG, TEXT], exclude=[TEXT])) == {SVG}


def test_objects_it_does_not_draw_get_text_only():
    assert mimebundle(42) == {TEXT: "42"}


def test_an_empty_graph_draws_a_small_empty_svg():
    root = parse_svg(mimebundle(tf.Graph())[SVG])
    assert "empty graph" in all_text(root)
    assert float(root.get("height").rstrip("px")) < 100


def test_ipython_display_formatter_gets_an_svg_for_a_graph():
    from IPython.core.formatters import DisplayFormatter

    _graph()
    data, _ = DisplayFormatter().format(tf.get_default_graph())
    assert SVG in data and data[TEXT] == repr(tf.get_default_graph())
    assert "dflab-graph" in classes(parse_svg(data[SVG]))


def test_without_graphviz_display_falls_back_to_text_and_timelines_still_draw():
    code = (
        "import sys; sys.modules['pygraphviz'] = None\n"
        "import dflab as tf\n"
        "x = tf.constant(1.0, name='x')\n"
        "b = tf.get_default_graph()._repr_mimebundle_()\n"
        "assert set(b) == {'text/plain'}, b\n"
        "from dflab.visualize import timeline_svg\n"
        "assert timeline_svg(tf.RunMetadata()).startswith('<svg')\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(REPO), check=True).stdout
    assert out.strip() == "ok"


def test_an_op_with_many_consumers_draws_them_as_a_series():
    shared = tf.constant(1.0, name="shared")
    consumers = [tf.add(shared, float(k)) for k in range(40)]
    # Forty alike consumers side by side are one series unit, joined to the op by one edge.
    layout = layout_graph(neighbourhood(shared.op), highlight=[shared.op])
    (series,) = [n for n in layout.nodes.values() if n["kind"] == "series"]
    assert series["name"] == "Add_[0-39]" and series["count"] == 40
    assert {layout.name_to_id[c.op.name] for c in consumers} == {series["id"]}
    (edge,) = layout.edges
    assert edge["drawn"] and edge["count"] == 40
    assert (edge["source"], edge["target"]) == (layout.name_to_id["shared"], series["id"])
    root = parse_svg(mimebundle(shared.op)[SVG])
    assert "40 \u00d7 AddV2" in all_text(root)
    # Drawn one by one when asked: every edge is there.
    every = layout_graph(neighbourhood(shared.op), highlight=[shared.op], collapse=False)
    assert len(every.nodes) > 40 and all(e["drawn"] for e in every.edges)
    assert {every.nodes[e["target"]]["name"] for e in every.edges} >= \
        {c.op.name for c in consumers}


def test_static_drawings_are_sized_for_a_notebook_cell():
    from dflab.visualize.svg import CELL_WIDTH_PX, MIN_SCALE, fit_to_width

    narrow = '<svg width="300pt" height="90pt" viewBox="0 0 300 90">'
    assert fit_to_width(narrow) == narrow  # 400 px: left as drawn
    wide = '<svg width="840pt" height="150pt" viewBox="0 0 840 150"><g/></svg>'
    scaled = fit_to_width(wide)
    scale = CELL_WIDTH_PX / 1120
    assert f'width="{CELL_WIDTH_PX:.0f}px"' in scaled and f'height="{200 * scale:.0f}px"' in scaled
    assert 'viewBox="0 0 840 150"' in scaled and scaled.endswith("<g/></svg>")
    huge = fit_to_width('<svg width="6000px" height="100px" viewBox="0 0 6000 100">')
    assert f'width="{6000 * MIN_SCALE:.0f}px"' in huge  # never below 11 px names
