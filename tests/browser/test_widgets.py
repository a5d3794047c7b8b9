"""The notebook widgets (GraphView, Stepper, Timeline) rendered by JupyterLab in Chromium.

Each test runs its notebook through JupyterLab's Run menu, then works the widget as a user
does (clicks), and checks the DOM against facts the kernel prints in the same notebook.
"""

from __future__ import annotations

import re

import lab_harness as lh


def _widget(nb, marker: str, kind: str):
    """The widget root of ``kind`` in the output of the cell marked ``marker``, once drawn."""
    root = nb.output(marker).locator(f".dflab-widget.dflab-{kind}")
    root.wait_for()
    return root


def _one_drawing(root) -> dict:
    root.locator("svg g.node").first.wait_for()
    drawings = lh.svg_drawings(root)
    assert len(drawings) == 1, f"expected one graph drawing, found {len(drawings)}"
    assert drawings[0]["rendered"], "the graph SVG has no size on the page"
    return drawings[0]


def test_graph_view_draws_the_graph_and_shows_node_details(notebook, expect):
    nb = notebook.open_and_run("graph_view.ipynb")
    op_types = nb.output_json("# [names]")
    root = _widget(nb, "# [view]", "graphview")

    _one_drawing(root)
    names = lh.hover_names(root)
    assert sorted(names.values()) == sorted(op_types)

    detail = root.locator(".dflab-detail")
    assert "loss" not in detail.inner_text()
    # Nothing selected: the details panel is folded away and the drawing takes the width.
    side, hint = root.locator(".dflab-side"), root.locator(".dflab-side-hint")
    expect(side).to_be_hidden()
    expect(hint).to_be_visible()
    graph_box, root_box = root.locator("div.dflab-graph").bounding_box(), root.bounding_box()
    assert graph_box["width"] > 0.9 * root_box["width"], (graph_box, root_box)
    root.locator(f"g.node#{lh.node_id(names, 'loss')}").click()
    expect(side).to_be_visible()
    expect(hint).to_be_hidden()
    expect(detail).to_contain_text("loss")
    expect(detail).to_contain_text(op_types["loss"])  # "Sum"
    nb.screenshot("graph_view", root)

    root.locator(f"g.node#{lh.node_id(names, 'w')}").click()  # another node replaces it
    expect(detail).to_contain_text(op_types["w"])
    expect(detail).not_to_contain_text(op_types["loss"])


def _states(root, names: dict[str, str]) -> dict[str, str]:
    """Op name -> data-state of its node."""
    return {names[n["id"]]: n["state"] for n in lh.svg_drawings(root)[0]["nodes"]}


def test_stepper_buttons_drive_the_kernel(notebook, expect):
    nb = notebook.open_and_run("stepper.ipynb")
    assert nb.output_json("# [executed]") == {"executed": [], "result": None}
    root = _widget(nb, "# [stepper]", "stepper")
    _one_drawing(root)
    names = lh.hover_names(root)
    states = _states(root, names)
    assert "done" not in states.values() and "ready" in states.values(), states

    legend = root.locator(".dflab-state-legend")
    for meaning in ("ran", "ready", "pending", "dead", "failed", "breakpoint", "iteration",
                    "step k of ?"):
        expect(legend).to_contain_text(meaning)
    status = root.locator(".dflab-status")
    status_before = status.inner_text()
    root.locator("button[data-action='step']").click()
    done = root.locator("g.node[data-state='done']")
    expect(done).to_have_count(1)
    expect(status).not_to_have_text(status_before)
    done_name = next(name for name, s in _states(root, names).items() if s == "done")
    nb.screenshot("stepper_after_one_step", root)

    nb.rerun("# [executed]")
    assert nb.output_json("# [executed]") == {"executed": [done_name], "result": None}

    root.locator("button[data-action='resume']").click()
    expect(root.locator("g.node:not([data-state='done'])")).to_have_count(0)
    nb.rerun("# [executed]")
    facts = nb.output_json("# [executed]")
    assert facts["result"] == 13.0  # (3 * 4) + 1, computed by the kernel's executor
    assert facts["executed"][0] == done_name and set(facts["executed"]) == set(names.values())
    nb.screenshot("stepper_finished", root)


def _bar_names_shown(root) -> list[bool]:
    return root.locator("text.dflab-bar-name").evaluate_all(
        "ts => ts.map(t => getComputedStyle(t).display !== 'none')")


def _name_fits(name: str, width: float) -> bool:
    return width >= 6 * min(len(name), 24) + 6


def test_timeline_draws_a_bar_per_traced_op(notebook, expect):
    nb = notebook.open_and_run("timeline.ipynb")
    traced = nb.output_json("# [trace]")
    root = _widget(nb, "# [timeline]", "timeline")
    bars = root.locator("rect.dflab-bar")
    expect(bars.first).to_be_attached()

    drawn = bars.evaluate_all(
        "bars => bars.map(b => [b.getAttribute('data-name'), b.getBBox().width])")
    assert sorted({name for name, _ in drawn}) == traced
    assert all(width > 0 for _, width in drawn), drawn
    # Op names sit on the bars wide enough for them (about 6 px a character), on no others.
    assert _bar_names_shown(root) == [_name_fits(name, width) for name, width in drawn]
    # Zooming in on the widest bar (the wheel, over it) widens it until its name shows.
    widest = max(range(len(drawn)), key=lambda i: drawn[i][1])
    box = bars.nth(widest).bounding_box()
    nb.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    for _ in range(12):
        nb.page.mouse.wheel(0, -300)
        nb.page.wait_for_timeout(50)
        if _bar_names_shown(root)[widest]:
            break
    assert _bar_names_shown(root)[widest], drawn[widest]
    assert bars.nth(widest).bounding_box()["width"] > box["width"]
    # Every tick label stays inside the chart (the last one used to run off its right edge).
    svg_right = root.locator("svg.dflab-gantt").bounding_box()
    for box in root.locator("text.dflab-tick-label").evaluate_all(
            "ts => ts.map(t => t.getBoundingClientRect().right)"):
        assert box <= svg_right["x"] + svg_right["width"] + 0.5
    legend = root.locator(".dflab-timeline-legend")
    for meaning in ("op execution", "_Send / _Recv", "crossing devices", "whole step"):
        expect(legend).to_contain_text(meaning)
    nb.screenshot("timeline", root)


def test_training_monitor_follows_a_training_loop(notebook, expect):
    nb = notebook.open_and_run("monitor.ipynb")
    facts = nb.output_json("# [train]")
    root = _widget(nb, "# [monitor]", "monitor")

    expect(root.locator(".dflab-title")).to_have_text("linear regression")
    status = root.locator(".dflab-status")
    expect(status).to_contain_text(f"step {facts['steps']} / 30")
    expect(status).to_contain_text(f"loss {facts['last']:.4g}")
    expect(root.locator(".dflab-progress-fill")).to_have_attribute(
        "style", re.compile(r"width: 100(\.0)?%"))
    line = root.locator(".dflab-curve path.dflab-line")
    expect(line).to_have_count(1)
    points = line.get_attribute("d").count("L") + 1
    assert points == facts["steps"], f"the loss curve has {points} points"
    assert facts["last"] < facts["first"]  # it trained: the curve goes down
    nb.screenshot("training_monitor", root)


def test_a_fused_node_opens_into_its_ops_on_a_click(notebook, expect):
    nb = notebook.open_and_run("fused_view.ipynb")
    facts = nb.output_json("# [facts]")
    root = _widget(nb, "# [view]", "graphview")
    _one_drawing(root)
    # A fused node's tooltip reads "z — 4 ops fused into one kernel:" and lists them below.
    names = {i: n.split(" — ")[0] for i, n in lh.hover_names(root).items()}
    [fused] = facts["fused"]
    members = set(facts["members"]) - {fused}
    assert fused in names.values() and not members & set(names.values())

    fused_node = root.locator(f"g.node#{lh.node_id(names, fused)}")
    fused_node.hover()
    expect(root.locator(".dflab-tip")).to_contain_text("click to expand")
    nb.screenshot("graph_view_fused_collapsed", root)
    fused_node.click()  # opens it: laid out again with one node per fused op
    root.locator("svg g.node").nth(len(names)).wait_for()
    opened = {n.split(" — ")[0] for n in lh.hover_names(root).values()}
    assert members <= opened and fused in opened
    nb.screenshot("graph_view_fused_expanded", root)


def test_stepper_back_restores_a_variable_in_the_panel(notebook, expect):
    nb = notebook.open_and_run("time_travel.ipynb")
    assert nb.output_json("# [facts]") == {"v": 1.0, "cursor": 0, "total": 0}
    root = _widget(nb, "# [stepper]", "stepper")
    _one_drawing(root)
    value = root.locator(".dflab-var .dflab-var-value")
    expect(value).to_have_text("float32 1")

    root.locator("button[data-action='resume']").click()
    expect(value).to_have_text("float32 11")  # the step's assign_add wrote it
    expect(root.locator(".dflab-var-changed")).to_have_count(1)
    expect(root.locator("button[data-action='forward']")).to_be_disabled()
    nb.rerun("# [facts]")
    after = nb.output_json("# [facts]")
    assert after["v"] == 11.0 and after["cursor"] == after["total"] > 0

    root.locator("button[data-action='back']").click()  # undoes the assign_add
    expect(value).to_have_text("float32 1")
    expect(root.locator(".dflab-var-changed .dflab-var-name")).to_have_text("v")
    message = root.locator(".dflab-message")
    expect(message).to_have_text(
        f"restored 1 variable (v) to their values after event {after['total'] - 1}")
    expect(message).to_have_attribute("data-kind", "info")  # not an error's colour
    expect(root.locator("g.node[data-state='ready']")).to_have_count(1)  # add runs next
    nb.screenshot("stepper_time_travel_back", root)
    nb.rerun("# [facts]")
    assert nb.output_json("# [facts]") == {"v": 1.0, "cursor": after["total"] - 1,
                                           "total": after["total"]}

    root.locator("button[data-action='forward']").click()  # re-executes it
    expect(value).to_have_text("float32 11")
    expect(message).to_contain_text("replayed 1 recorded event")
    nb.rerun("# [facts]")
    assert nb.output_json("# [facts]")["v"] == 11.0
