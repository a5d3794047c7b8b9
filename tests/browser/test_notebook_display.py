"""Rich display and ``%%dflab`` cells, as JupyterLab shows them in Chromium.

The facts to compare with (op names) are printed by the kernel in the same notebook, so these
tests check what the browser draws against what the graph holds, not against hard-coded lists.
"""

from __future__ import annotations

import re


def _titles(drawing: dict) -> set[str]:
    """Op names of the drawn nodes (as read from their tooltips)."""
    return {n["name"] for n in drawing["nodes"]}


def _only_drawing(notebook, marker: str) -> dict:
    drawings = notebook.drawings(marker)
    assert len(drawings) == 1, f"cell {marker}: expected one drawing, found {len(drawings)}"
    assert drawings[0]["rendered"], f"cell {marker}: the browser could not render the SVG"
    return drawings[0]


def test_graph_renders_as_svg_with_one_node_per_op(notebook):
    nb = notebook.open_and_run("rich_display.ipynb")
    op_names = set(nb.output_json("# [names]"))

    graph = _only_drawing(nb, "# [graph]")
    assert _titles(graph) == op_names
    nb.screenshot("rich_display_graph", nb.cell("# [graph]"))

    op = _only_drawing(nb, "# [op]")
    assert "loss" in _titles(op) and _titles(op) <= op_names


def test_a_wide_drawing_fits_the_cell_instead_of_being_cut_off(notebook):
    nb = notebook.open_and_run("rich_display.ipynb")
    _only_drawing(nb, "# [wide]")
    area = nb.output("# [wide]")
    shown = area.locator("svg.dflab-graph, img").first
    box, cell = shown.bounding_box(), area.bounding_box()
    assert box["width"] > 0 and box["x"] + box["width"] <= cell["x"] + cell["width"] + 1, (
        box, cell)
    nb.screenshot("rich_display_wide", area)


def test_dflab_cell_rerun_replaces_its_ops(notebook):
    nb = notebook.open_and_run("magics.ipynb")
    first = _only_drawing(nb, "# [model]")
    assert {"Variable", "y"} <= _titles(first)

    nb.rerun("# [model]")
    again = _only_drawing(nb, "# [model]")
    assert {"Variable", "y"} <= _titles(again)
    duplicates = {t for t in _titles(again) if re.fullmatch(r"(Variable|y)_\d+(/.*)?", t)}
    assert not duplicates, f"re-running the cell added ops instead of replacing: {duplicates}"

    nb.rerun("# [names]")
    names = nb.output_json("# [names]")
    assert "Variable" in names and "y" in names
    assert not [n for n in names if re.match(r"(Variable|y)_\d+", n)], names
    nb.screenshot("magics_rerun", nb.cell("# [model]"))
