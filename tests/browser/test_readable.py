"""Widgets readable in a classroom: loop graphs drawn with names of a readable size, canvases
that fit the cell and can be dragged taller, legends, errors shown rather than swallowed, and a
wide ``%%dflab`` drawing that fits its cell. All measured in JupyterLab in Chromium.
"""

from __future__ import annotations

import json

MIN_FONT_PX = 11  # extension/src/lib/graph_canvas.js: node names are never drawn smaller

# Per drawn node, the on-screen size of its name (its largest text): the font size times the
# scale the drawing is shown at, and the height of the name's box on the page.
_NAME_SIZES_JS = """(svg) => [...svg.querySelectorAll('g.node')].map(g => {
    const texts = [...g.querySelectorAll('text')];
    const name = texts.reduce((a, t) => (parseFloat(t.getAttribute('font-size')) || 0)
        > (parseFloat(a.getAttribute('font-size')) || 0) ? t : a);
    const ctm = name.getScreenCTM();
    return {font: parseFloat(name.getAttribute('font-size')) * Math.hypot(ctm.a, ctm.b),
            box: name.getBoundingClientRect().height, text: name.textContent};
})"""


def _widget(nb, marker: str, kind: str):
    root = nb.output(marker).locator(f".dflab-widget.dflab-{kind}")
    root.locator("svg g.node").first.wait_for()
    return root


def _name_sizes(root) -> list[dict]:
    return root.locator("div.dflab-graph svg").evaluate(_NAME_SIZES_JS)


def _view_box(root) -> list[float]:
    text = root.locator("div.dflab-graph svg").get_attribute("viewBox")
    return [float(v) for v in text.split()]


def _assert_readable_and_inside(nb, marker: str, root) -> None:
    sizes = _name_sizes(root)
    assert sizes, "no node names drawn"
    small = [s for s in sizes if s["font"] < MIN_FONT_PX - 0.05 or s["box"] < MIN_FONT_PX]
    assert not small, f"names drawn smaller than {MIN_FONT_PX} px: {small[:5]}"
    svg_box = root.locator("div.dflab-graph svg").bounding_box()
    cell = nb.output(marker).bounding_box()
    assert svg_box["x"] >= cell["x"] - 0.5
    assert svg_box["x"] + svg_box["width"] <= cell["x"] + cell["width"] + 0.5, (svg_box, cell)


def _assert_rest_reachable(root) -> None:
    """Either all of the drawing is in view, or the wheel pans to the rest."""
    hint = root.locator(".dflab-pan-hint")
    if hint.is_hidden():
        return
    before = _view_box(root)
    svg_box = root.locator("div.dflab-graph svg").bounding_box()
    page = root.page
    page.mouse.move(svg_box["x"] + svg_box["width"] / 2, svg_box["y"] + svg_box["height"] / 2)
    page.mouse.wheel(0, 300)
    page.wait_for_function(
        "([svg, y]) => parseFloat(svg.getAttribute('viewBox').split(' ')[1]) !== y",
        arg=[root.locator("div.dflab-graph svg").element_handle(), before[1]])
    after = _view_box(root)
    assert after[1] > before[1] and after[2:] == before[2:], (before, after)


def test_loop_graphs_draw_readable_names_inside_the_cell(notebook, expect):
    nb = notebook.open_and_run("readable.ipynb")
    view = _widget(nb, "# [loop-view]", "graphview")
    stepper = _widget(nb, "# [loop-stepper]", "stepper")
    for marker, root in (("# [loop-view]", view), ("# [loop-stepper]", stepper)):
        _assert_readable_and_inside(nb, marker, root)
        _assert_rest_reachable(root)
    # The op-type legend is part of the drawing.
    expect(view.locator("svg g.legend")).to_contain_text("control flow")
    assert not nb.page_errors, nb.page_errors  # sizing and resizing raise nothing
    nb.screenshot("readable_loop_view", view)
    nb.screenshot("readable_loop_stepper", stepper)


def test_canvas_drags_taller_keeping_its_view_and_fit_buttons_reset_it(notebook, expect):
    nb = notebook.open_and_run("readable.ipynb")
    root = _widget(nb, "# [loop-view]", "graphview")
    canvas = root.locator("div.dflab-graph")
    assert canvas.evaluate("c => getComputedStyle(c).resize") == "vertical"
    home_font = min(s["font"] for s in _name_sizes(root))
    canvas.scroll_into_view_if_needed()
    box, view = canvas.bounding_box(), _view_box(root)

    page = root.page  # the browser's own resize handle, bottom-right corner
    page.mouse.move(box["x"] + box["width"] - 4, box["y"] + box["height"] - 4)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] - 4, box["y"] + box["height"] + 146, steps=8)
    page.mouse.up()
    taller = canvas.bounding_box()
    assert abs(taller["height"] - (box["height"] + 150)) < 6, (box, taller)
    page.wait_for_function("([svg, h]) => svg.viewBox.baseVal.height > h + 100",
                           arg=[root.locator("div.dflab-graph svg").element_handle(), view[3]])
    resized = _view_box(root)
    assert resized[:3] == view[:3]  # same corner, same width: same scale
    assert abs(min(s["font"] for s in _name_sizes(root)) - home_font) < 0.05

    def smallest_name() -> float:
        return min(s["font"] for s in _name_sizes(root))

    root.locator("button[data-zoom='in']").click()
    assert smallest_name() > home_font * 1.3
    # Fit: as wide as the (now taller) canvas allows, never below the minimum; the same view
    # whatever the zoom was before.
    root.locator("button[data-zoom='fit']").click()
    fitted = smallest_name()
    assert fitted >= home_font - 0.05 and fitted >= MIN_FONT_PX - 0.05
    for _ in range(3):
        root.locator("button[data-zoom='out']").click()
    assert smallest_name() < fitted * 0.5
    root.locator("button[data-zoom='fit']").click()
    assert abs(smallest_name() - fitted) < 0.05
    root.locator("button[data-zoom='all']").click()
    expect(root.locator(".dflab-pan-hint")).to_be_hidden()
    svg_box = root.locator("div.dflab-graph svg").bounding_box()
    drawing = root.locator("div.dflab-graph svg > g.graph").bounding_box()
    assert drawing["y"] >= svg_box["y"] - 1
    assert drawing["y"] + drawing["height"] <= svg_box["y"] + svg_box["height"] + 1
    assert not nb.page_errors, nb.page_errors
    nb.screenshot("readable_canvas_resized", root)


def test_a_failing_step_and_a_refused_action_show_on_the_message_line(notebook, expect):
    nb = notebook.open_and_run("readable.ipynb")
    failing = _widget(nb, "# [failing]", "stepper")
    message = failing.locator(".dflab-message")
    expect(message).to_be_hidden()
    failing.locator("button[data-action='resume']").click()
    expect(message).to_be_visible()
    expect(message).to_contain_text("InvalidArgumentError")
    expect(message).to_contain_text("bad")
    expect(failing.locator("g.node[data-state='failed']")).to_have_count(1)
    nb.screenshot("readable_failed_step", failing)

    looping = _widget(nb, "# [loop-stepper]", "stepper")
    looping.locator("button[data-action='run-to']").click()  # nothing selected
    expect(looping.locator(".dflab-message")).to_contain_text("Select a node first")


def test_the_device_legend_lists_each_device_once_in_a_canvas_of_the_height_asked(notebook):
    nb = notebook.open_and_run("readable.ipynb")
    devices = json.loads(nb.output("# [devices]").locator(
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stdout']").inner_text())
    assert len(devices) == 2
    root = _widget(nb, "# [devices]", "graphview")
    texts = root.locator("svg g.legend text").evaluate_all("ts => ts.map(t => t.textContent)")
    for device in devices:
        short = device.rsplit("device:", 1)[-1]  # CPU:0
        assert texts.count(short) == 1, (short, texts)
    assert root.locator("div.dflab-graph").bounding_box()["height"] == 420


def test_a_wide_dflab_drawing_is_scaled_to_fit_its_cell(notebook):
    nb = notebook.open_and_run("readable.ipynb")
    area = nb.output("# [wide]")
    img = area.locator("img").first
    img.wait_for()
    box, cell = img.bounding_box(), area.bounding_box()
    assert box["x"] + box["width"] <= cell["x"] + cell["width"] + 1, (box, cell)
    natural_px = img.evaluate(r"""img => {
        const m = /^data:image\/svg\+xml(;base64)?,(.*)$/s.exec(img.getAttribute('src'));
        const text = m[1] ? atob(m[2]) : decodeURIComponent(m[2]);
        const svg = new DOMParser().parseFromString(text, 'image/svg+xml').documentElement;
        return svg.viewBox.baseVal.width * 4 / 3;  // points to pixels
    }""")
    assert natural_px > cell["width"] and box["width"] < 0.9 * natural_px, (natural_px, box)
    nb.screenshot("readable_wide_dflab", area)
