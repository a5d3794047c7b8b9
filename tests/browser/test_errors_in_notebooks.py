"""The first errors a student meets, in JupyterLab: a few lines naming the cell and the line, with
or without ``%load_ext dflab``, and ops built in a ``%%dflab`` cell named after that cell."""

from __future__ import annotations

import re

import lab_harness as lh

STDERR = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"


def _write(nb, name: str, sources: list[str]) -> str:
    """A notebook ``name`` of code cells (nbformat: as a student would start one)."""
    import nbformat

    cells = [nbformat.v4.new_code_cell(src, id=f"c{k}") for k, src in enumerate(sources)]
    book = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": {
        "display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}})
    nbformat.write(book, nb.server.root_dir / name)
    return name


def _run_all(nb, name: str) -> None:
    lh.open_notebook(nb.page, nb.server, name)
    lh.run_all_cells(nb.page)


def _prompt(nb, marker: str) -> int:
    text = nb.cell(marker).locator(".jp-InputPrompt").inner_text()
    return int(re.search(r"\[(\d+)\]", text).group(1))


def test_a_missing_feed_in_a_fresh_notebook_is_a_short_error_naming_cells(tutorial):
    nb = tutorial
    name = _write(nb, "fresh_error.ipynb", [
        "import dflab as tf",
        "x = tf.placeholder(tf.float32, name='x')\ny = x * 2.0  # [build]",
        "sess = tf.Session()\nsess.run(y)  # [run]",
    ])
    _run_all(nb, name)
    error = nb.cell("# [run]").locator(STDERR)
    text = error.inner_text().strip()
    lines = text.splitlines()
    assert len(lines) <= 10, text
    run, build = _prompt(nb, "# [run]"), _prompt(nb, "# [build]")
    assert f"Cell In[{run}], line 2" in text
    assert "InvalidArgumentError: You must feed a value for placeholder tensor 'x'" in text
    assert f"(defined at Cell In[{build}], line 1)" in text
    for internal in ("session.py", "executor.py", "worker.py", "straight-line", "/tmp/",
                     "ipykernel"):
        assert internal not in text, internal
    nb.screenshot("error_missing_feed", nb.cell("# [run]"))


def test_with_the_extension_errors_and_sites_name_the_cell_they_come_from(tutorial, expect):
    nb = tutorial
    name = _write(nb, "magic_error.ipynb", [
        "%load_ext dflab\nimport dflab as tf",
        "%%dflab\n# [build]\nx = tf.placeholder(tf.float32, [None, 3], name='x')\n"
        "y = tf.reduce_sum(x * 2.0, name='y')",
        "# [shape]\ntry:\n    tf.matmul(x, tf.ones([4, 2]), name='bad')\n"
        "except ValueError as err:\n    print(err)",
        "# [run]\ntf.Session().run(y)",
    ])
    _run_all(nb, name)
    build, shape = _prompt(nb, "# [build]"), _prompt(nb, "# [shape]")
    printed = lh.stdout_text(nb.cell("# [shape]"))
    assert f"Created at Cell In[{shape}], line 3" in printed and "ipykernel" not in printed
    text = nb.cell("# [run]").locator(STDERR).inner_text().strip()
    assert len(text.splitlines()) <= 10, text
    # Not the next cell's number: the ops were built in the %%dflab cell, on its line 3.
    assert f"(defined at Cell In[{build}], line 3)" in text
    # The drawing the cell shows says the same in a node's details.
    drawing = nb.output("# [build]").locator(".dflab-mime-graph .dflab-graphview")
    names = lh.hover_names(drawing)
    drawing.locator(f"g.node#{lh.node_id(names, 'x')}").click()
    expect(drawing.locator(".dflab-detail")).to_contain_text(f"Cell In[{build}], line 3")
