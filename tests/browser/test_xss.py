"""Text from a graph never runs as script, wherever it reaches the page.

``xss.ipynb`` puts ``<img src=x onerror=alert(1)>`` into a string constant's value, a device
string, widget titles, a stepped value, an error message and a curve name. If any of them were
inserted as HTML, an ``img`` element would appear and its ``onerror`` would open a dialog (the
fixture records every dialog and fails the test on one). Each must instead be readable as text.
The graph renderer (dflab's JupyterLab extension) gets the same text from ``graph_renderer.ipynb``.
"""

from __future__ import annotations

import lab_harness as lh

EVIL = "<img src=x onerror=alert(1)>"


def _assert_inert(nb) -> None:
    page = nb.page
    page.wait_for_timeout(500)  # give a broken image's onerror the time to fire
    assert page.locator("img[src='x'], [onerror]").count() == 0
    assert not nb.dialogs, nb.dialogs


def test_hostile_text_in_graphs_stays_text(notebook, expect):
    nb = notebook.open_and_run("xss.ipynb")

    # Rich display: the SVG is well-formed (it renders) and shows the value as text.
    [rich] = nb.drawings("# [rich]")
    assert rich["rendered"] and "img" not in rich["elements"]
    assert any(t.startswith("'<img src=x onerror=") for t in rich["texts"]), rich["texts"]
    assert any(EVIL in n["title"] for n in rich["nodes"] if n["name"] == "evil")

    # GraphView: title, node details (selected from the kernel, then by a click), tooltip.
    view = nb.output("# [graphview]").locator(".dflab-graphview")
    expect(view.locator(".dflab-title")).to_have_text(EVIL)
    detail = view.locator(".dflab-detail")
    expect(detail).to_contain_text(EVIL)
    [drawing] = lh.svg_drawings(view)
    assert "img" not in drawing["elements"]
    placed = lh.node_id(lh.hover_names(view), "placed")  # hovering shows every tooltip once
    view.locator(f"g.node#{placed}").click()
    expect(detail).to_contain_text("/job:" + EVIL)
    nb.screenshot("xss_graph_view", view)

    # Stepper: its title, and the assertion error carrying the constant, shown after resume.
    stepper = nb.output("# [stepper]").locator(".dflab-stepper")
    expect(stepper.locator(".dflab-title")).to_have_text(EVIL)
    stepper.locator("button[data-action='resume']").click()
    expect(stepper).to_contain_text("assertion failed")
    expect(stepper).to_contain_text(EVIL)
    nb.screenshot("xss_stepper", stepper)

    # Timeline: its title, and bars for the traced ops.
    timeline = nb.output("# [timeline]").locator(".dflab-timeline")
    expect(timeline.locator(".dflab-title")).to_have_text(EVIL)
    expect(timeline.locator("rect.dflab-bar").first).to_be_attached()
    nb.screenshot("xss_timeline", timeline)

    # TrainingMonitor: its title and a curve named by the hostile text.
    monitor = nb.output("# [monitor]").locator(".dflab-monitor")
    expect(monitor.locator(".dflab-title")).to_have_text(EVIL)
    expect(monitor.locator(".dflab-curve-title")).to_contain_text(EVIL)
    nb.screenshot("xss_monitor", monitor)

    _assert_inert(nb)


def test_hostile_text_in_a_graph_document_stays_text(renderer_notebook, expect):
    """dflab's JupyterLab renderer draws graph documents without a kernel: the same text,
    now coming from the notebook file, must stay text there too."""
    nb = renderer_notebook.open_and_run("graph_renderer.ipynb")
    view = nb.output("# [evil]").locator(".dflab-mime-graph")
    detail = view.locator(".dflab-detail")
    expect(detail.locator(".dflab-detail-title")).to_have_text("evil")  # the op displayed
    expect(detail).to_contain_text(EVIL)  # its value attribute
    [drawing] = lh.svg_drawings(view)
    assert "img" not in drawing["elements"]
    placed = lh.node_id(lh.hover_names(view), "placed")
    view.locator(f"g.node#{placed}").click()
    expect(detail).to_contain_text("/job:" + EVIL)
    expect(view.locator(".dflab-tip")).to_contain_text("/job:" + EVIL)  # hovered: tooltip
    nb.screenshot("xss_graph_renderer", view)
    _assert_inert(nb)
