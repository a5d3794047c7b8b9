"""dflab's JupyterLab graph renderer (``extension/lab``, shipped as ``dflab/labextension``), in
JupyterLab and headless Chromium.

Graph outputs carry ``application/vnd.dflab.graph+json`` next to their SVG. With the renderer
installed, JupyterLab prefers it: the output is GraphView's interactive drawing (pan/zoom,
tooltips, a details panel that opens on a click), drawn from the saved document alone. These
tests run the notebook, save it, shut its kernel down and open the saved file again: what is
drawn then comes from the file, not from a kernel. A GraphView output, whose widget model is gone
then, is drawn from its document too.
"""

from __future__ import annotations

import json
import re
import time

import lab_harness as lh

GRAPH_MIME = "application/vnd.dflab.graph+json"
NOTEBOOK = "graph_renderer.ipynb"
SAVE_TIMEOUT_S = 60  # a guard against a save that never lands, not a speed requirement
FOLDED = re.compile(r"\bdflab-folded\b")


def _rendered(nb, marker: str):
    """The renderer's root in the output of the cell marked ``marker``."""
    return nb.output(marker).locator(".dflab-mime-graph .dflab-graphview")


def _saved_documents(path) -> dict[str, dict]:
    """Cell marker -> the graph document saved in that cell's outputs (none while the server
    is still writing the file: it truncates, then writes)."""
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return {}
    docs = {}
    for cell in saved["cells"]:
        source = "".join(cell.get("source", ""))
        for out in cell.get("outputs", []):
            if GRAPH_MIME in out.get("data", {}):
                docs[source.splitlines()[0]] = out["data"][GRAPH_MIME]
    return docs


def _save_and_wait(nb, path) -> dict[str, dict]:
    lh.run_menu_command(nb.page, "File", "Save Notebook")
    deadline = time.monotonic() + SAVE_TIMEOUT_S
    while True:
        docs = _saved_documents(path)
        if "# [graph]" in docs:
            return docs
        assert time.monotonic() < deadline, f"{path} was not saved with its graph outputs"
        time.sleep(0.5)


def _check_interactive_graph(nb, expect, names: set[str]) -> None:
    """The ``# [graph]`` output is the renderer's drawing of every op, not the SVG image; a
    click on an op opens the folded details panel with the op's type, scope and inputs."""
    view = _rendered(nb, "# [graph]")
    expect(view.locator("svg g.node").first).to_be_visible()
    assert nb.output("# [graph]").locator("img").count() == 0, "the SVG fallback was shown"
    drawn = lh.hover_names(view)
    assert set(drawn.values()) == names

    side = view.locator(".dflab-side")
    expect(side).to_have_class(FOLDED)  # nothing selected: folded away
    view.locator(f"g.node#{lh.node_id(drawn, 'layer/y')}").click()
    detail = view.locator(".dflab-detail")
    expect(detail.locator(".dflab-detail-title")).to_have_text("layer/y")
    expect(side).not_to_have_class(FOLDED)
    for text in ("MatMul", "layer", "x:0 (float32 [?,3])", "layer/w:0 (float32 [3,2])",
                 "layer/y:0 (float32 [?,2])", "sq"):
        expect(detail).to_contain_text(text)
    assert "dflab-selected" in view.locator(
        f"g.node#{lh.node_id(drawn, 'layer/y')}").get_attribute("class")

    # An op's output starts with that op selected.
    op_view = _rendered(nb, "# [op]")
    expect(op_view.locator(".dflab-detail .dflab-detail-title")).to_have_text("layer/y")


def _open_written(nb, name: str, expression: str, bundle: dict):
    """Write ``name``.ipynb outside JupyterLab (nbformat: untrusted), one cell ``# [name]``
    whose saved output is ``bundle``, and open it in ``nb``'s page."""
    import nbformat

    cell = nbformat.v4.new_code_cell(f"# [{name}]\n{expression}", id=name, execution_count=1)
    cell.outputs = [nbformat.v4.new_output("execute_result", data=bundle, execution_count=1)]
    book = nbformat.v4.new_notebook(cells=[cell], metadata={"kernelspec": {
        "display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}})
    nbformat.write(book, nb.server.root_dir / f"{name}.ipynb")
    lh.open_notebook(nb.page, nb.server, f"{name}.ipynb")
    return nb


def test_saved_notebook_reopened_without_its_kernel_shows_the_interactive_graph(
        renderer_notebook, expect):
    nb = renderer_notebook.open_and_run(NOTEBOOK)
    names = set(nb.output_json("# [names]"))
    _check_interactive_graph(nb, expect, names)
    # A live GraphView is the widget itself, not the document's drawing.
    widget = nb.output("# [view]").locator(".dflab-graphview")
    expect(widget.locator("svg g.node").first).to_be_visible()
    assert nb.output("# [view]").locator(".dflab-mime-graph").count() == 0

    docs = _save_and_wait(nb, nb.server.root_dir / NOTEBOOK)
    assert {"# [graph]", "# [op]", "# [view]", "# [evil]"} <= set(docs)
    assert {n["name"] for n in docs["# [graph]"]["nodes"].values() if n["kind"] == "op"} \
        == names
    [before] = [s["kernel"]["id"] for s in nb.server.api("GET", "/api/sessions")]
    nb.shutdown_kernels()

    nb.page.reload()
    nb.page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for()
    lh.wait_kernel_idle(nb.page)
    # A new kernel that has run no cell: the outputs shown are the ones saved in the file.
    [after] = [s["kernel"]["id"] for s in nb.server.api("GET", "/api/sessions")]
    assert after != before
    _check_interactive_graph(nb, expect, names)
    nb.screenshot("graph_renderer_reopened", nb.output("# [graph]"))

    # The GraphView's model is gone with its kernel: its output is drawn from its document,
    # with the widget's title and selection.
    view = _rendered(nb, "# [view]")
    expect(view.locator(".dflab-title")).to_have_text("the widget")
    expect(view.locator(".dflab-detail .dflab-detail-title")).to_have_text("sq")
    expect(view.locator(".dflab-detail")).to_contain_text("float64 4")  # its saved value
    drawn = lh.hover_names(view)
    assert set(drawn.values()) == names
    view.locator(f"g.node#{lh.node_id(drawn, 'sq')}").hover()
    expect(view.locator(".dflab-tip")).to_contain_text("value: float64 4")
    view.locator(f"g.node#{lh.node_id(drawn, 'loss')}").click()
    expect(view.locator(".dflab-detail")).to_contain_text("Sum")
    nb.screenshot("graph_renderer_reopened_widget", nb.output("# [view]"))


def test_a_notebook_written_elsewhere_is_drawn_although_untrusted(renderer_notebook, expect):
    """A .ipynb written outside JupyterLab (here: by nbformat, with a bundle made in this
    process) is untrusted: JupyterLab then renders only "safe" types, which excludes the SVG.
    The renderer is safe, so the graph is still drawn and explorable."""
    import dflab as tf

    with tf.Graph().as_default() as g:
        a = tf.constant([1.0, 2.0], name="a")
        tf.nn.relu(tf.negative(a, name="neg"), name="out")
    bundle = g._repr_mimebundle_()
    assert GRAPH_MIME in bundle
    nb = _open_written(renderer_notebook, "written", "g", bundle)
    view = _rendered(nb, "# [written]")
    expect(view.locator("svg g.node").first).to_be_visible()
    drawn = lh.hover_names(view)
    assert set(drawn.values()) == {"a", "neg", "out"}
    view.locator(f"g.node#{lh.node_id(drawn, 'neg')}").click()
    expect(view.locator(".dflab-detail")).to_contain_text("a:0 (float32 [2])")


def test_a_drawing_too_wide_for_the_cell_is_drawn_inside_it_to_pan_across(
        renderer_notebook, expect):
    """What a ``%%dflab`` cell shows (a ``GraphLayout``) carries the graph document too: a
    drawing more than twice a cell's width, which the SVG image cuts off, is drawn by the
    renderer inside the cell, showing a part of it at the canvas's first scale."""
    import dflab as tf
    from dflab.visualize.graph import layout_graph

    with tf.Graph().as_default() as g:
        for k in range(24):  # side by side: far wider than a cell (no numbered series)
            tag = chr(ord("a") + k) * 2
            tf.negative(tf.constant(float(k), name=f"a_rather_long_input_name_{tag}"),
                        name=f"negated_value_{tag}")
        bundle = layout_graph(g)._repr_mimebundle_()
    assert GRAPH_MIME in bundle
    nb = _open_written(renderer_notebook, "wide", "layout", bundle)
    view = _rendered(nb, "# [wide]")
    expect(view.locator("svg g.node").first).to_be_visible()
    assert nb.output("# [wide]").locator("img").count() == 0, "the SVG image was shown"
    drawing = view.locator("div.dflab-graph svg").bounding_box()
    cell_box = nb.output("# [wide]").bounding_box()
    assert drawing["x"] + drawing["width"] <= cell_box["x"] + cell_box["width"] + 0.5
    view_box = [float(v) for v in view.locator("div.dflab-graph svg")
                .get_attribute("viewBox").split()]
    full_width = float(re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+)',
                                 bundle[GRAPH_MIME]["svg"]).group(1))
    assert view_box[2] < 0.5 * full_width, view_box  # a part of it, not all of it shrunk
    nb.screenshot("graph_renderer_wide", nb.output("# [wide]"))
