"""Front-end benchmark: a 2,000-op graph drawn in JupyterLab, and one stepper step's round trip.

Runs a real JupyterLab server and headless Chromium (the harness of the browser tests,
``tests/browser/lab_harness.py``) on a generated notebook, and times what a user waits for:

* **layout in the kernel**: ``dflab.visualize.layout_graph`` of a 2,000-op graph (40 layers of
  50 ``Add`` ops, each reading two random ops of the layer before; no name scopes, so every op
  is drawn), median over repeats, timed inside the kernel;
* **display → SVG in the DOM**: from the key press that executes ``GraphView(graph)`` (Ctrl+Enter
  on the cell, seen by a capture-phase listener in the page) to the widget's SVG with all 2,000
  nodes being in the document (a MutationObserver), and to the next frame after that; this
  includes the kernel's layout, the transfer of the SVG over the widget comm and the browser's
  parsing; the page clock (``performance.now``) measures both ends;
* **stepper round trip**: from the click on a Stepper's *step* button to the data-state change
  of the node that ran (click → comm message → ``StepRun.step()`` in the kernel → state
  update → redraw), on a 5-op graph and on the 2,000-op graph.

Target: a step round trip of at most 100 ms on the 2,000-op graph (the classic limit for a UI
to feel instantaneous). When Chromium or JupyterLab is missing, reports "not run" and exits 0.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

import _harness as h

sys.path.insert(0, str(h.REPO / "tests" / "browser"))
import lab_harness as lh  # noqa: E402

LAYERS, WIDTH = 40, 50
N_OPS = LAYERS * WIDTH
TARGET_STEP_MS = 100.0

SETUP = f"""
# [setup]
import json
import statistics
import time

import numpy as np

import dflab as tf
from dflab.notebook import GraphView, Stepper
from dflab.visualize import layout_graph


def layered_graph(layers={LAYERS}, width={WIDTH}, seed=0):
    rng = np.random.default_rng(seed)
    graph = tf.Graph()
    with graph.as_default():
        prev = [tf.constant(float(i), name=f"c{{i}}") for i in range(width)]
        for layer in range(1, layers):
            prev = [tf.add(*(prev[j] for j in rng.choice(width, 2, replace=False)),
                           name=f"l{{layer}}_{{i}}") for i in range(width)]
    return graph, prev


big, big_outputs = layered_graph()
small = tf.Graph()
with small.as_default():
    small_out = tf.add(tf.multiply(tf.constant(3.0, name="a"), tf.constant(4.0, name="b")),
                       1.0, name="d")
"""

LAYOUT = """
# [layout]
times, layout = [], None
for _ in range({repeats}):
    t0 = time.perf_counter()
    layout = layout_graph(big)
    times.append(time.perf_counter() - t0)
print(json.dumps({{"ops": len(big.get_operations()), "median_s": statistics.median(times),
                  "svg_bytes": len(layout.svg)}}))
"""

DISPLAY = """
# [display]
view = GraphView(big)
view
"""

SMALL_STEPPER = """
# [small]
small_stepper = Stepper(tf.Session(graph=small), small_out)
small_stepper
"""

BIG_STEPPER = """
# [bigstep]
big_stepper = Stepper(tf.Session(graph=big), big_outputs)
big_stepper
"""

# Armed before the key press: records when Enter goes down and when the output holds a new
# drawing with at least `min` nodes, then waits one frame for the paint.
_ARM_DISPLAY_JS = """(host, min) => {
    const old = host.querySelector('.dflab-graphview svg');
    const st = window.__dflabBench = {start: null, inDom: null, frame: null};
    document.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' && st.start === null) st.start = performance.now();
    }, {capture: true});
    const obs = new MutationObserver(() => {
        const svg = host.querySelector('.dflab-graphview svg');
        if (!svg || svg === old || svg.querySelectorAll('g.node').length < min) return;
        st.inDom = performance.now();
        obs.disconnect();
        requestAnimationFrame(() => setTimeout(() => { st.frame = performance.now(); }, 0));
    });
    obs.observe(host, {childList: true, subtree: true});
}"""

# Armed before the click: records the click (capture phase) and the first data-state change
# that increases the number of done nodes.
_ARM_STEP_JS = """(root) => {
    const done = () => root.querySelectorAll('g.node[data-state="done"]').length;
    const before = done();
    const st = window.__dflabBench = {start: null, end: null};
    root.addEventListener('click', () => { st.start = performance.now(); },
                          {capture: true, once: true});
    const obs = new MutationObserver(() => {
        if (st.start !== null && done() > before) { st.end = performance.now(); obs.disconnect(); }
    });
    obs.observe(root, {subtree: true, attributes: true, attributeFilter: ['data-state']});
}"""


def _write_notebook(root: Path, layout_repeats: int) -> str:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    sources = [SETUP, LAYOUT.format(repeats=layout_repeats), DISPLAY, SMALL_STEPPER, BIG_STEPPER]
    nb.cells = [nbformat.v4.new_code_cell(s.strip()) for s in sources]
    nbformat.write(nb, root / "bench_frontend.ipynb")
    return "bench_frontend.ipynb"


def _time_display(page, repeats: int) -> tuple[list[float], list[float]]:
    host = lh.code_cell(page, "# [display]").locator(".jp-OutputArea")
    in_dom, frame = [], []
    for _ in range(repeats):
        host.evaluate(_ARM_DISPLAY_JS, N_OPS)
        lh.rerun_cell(page, "# [display]", timeout_ms=600_000)
        page.wait_for_function("() => window.__dflabBench.frame !== null", timeout=600_000)
        st = page.evaluate("() => window.__dflabBench")
        in_dom.append(st["inDom"] - st["start"])
        frame.append(st["frame"] - st["start"])
    return in_dom, frame


def _time_steps(page, marker: str, steps: int) -> list[float]:
    root = lh.code_cell(page, marker).locator(".dflab-stepper")
    root.locator("svg g.node").first.wait_for(timeout=600_000)
    button = root.locator("button[data-action='step']")
    times = []
    for _ in range(steps):
        root.evaluate(_ARM_STEP_JS)
        button.click()
        page.wait_for_function("() => window.__dflabBench.end !== null", timeout=120_000)
        st = page.evaluate("() => window.__dflabBench")
        times.append(st["end"] - st["start"])
    return times


def _why_not_run() -> str | None:
    if lh.find_chromium() is None:
        return "Chromium not found (Debian: apt-get install chromium)"
    missing = lh.jupyterlab_missing()
    if missing:
        return missing
    try:
        import nbformat  # noqa: F401
        import playwright  # noqa: F401
    except ImportError as e:
        return f"the dev extra is not installed ({e})"
    return None


def _measure(args, result: h.Result) -> None:
    from playwright.sync_api import sync_playwright

    display_repeats = h.repeats(args, 5)
    steps = 5 if args.quick else 25
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "notebooks"
        root.mkdir()
        path = _write_notebook(root, layout_repeats=display_repeats)
        server = lh.start_lab(root, Path(tmp) / "jupyter", Path(tmp) / "jupyterlab.log")
        try:
            with sync_playwright() as pw:
                browser = lh.launch_chromium(pw)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                lh.open_notebook(page, server, path)
                lh.run_all_cells(page, timeout_ms=900_000)  # also the warm-up of every path
                errors = lh.error_outputs(page)
                if errors:
                    raise RuntimeError("the benchmark notebook failed:\n" + errors[0])
                kernel = json.loads(lh.stdout_text(lh.code_cell(page, "# [layout]")))
                in_dom, frame = _time_display(page, display_repeats)
                small = _time_steps(page, "# [small]", min(steps, 4))
                big = _time_steps(page, "# [bigstep]", steps)
                browser.close()
        finally:
            server.stop()

    med = statistics.median
    result.add(f"kernel: layout_graph, {kernel['ops']:,} ops", kernel["median_s"] * 1e3, "ms",
               f"SVG of {kernel['svg_bytes'] / 1e6:.1f} MB")
    result.add("browser: execute GraphView cell -> SVG in DOM", med(in_dom), "ms",
               f"{N_OPS:,} nodes; min {min(in_dom):.0f} ms over {len(in_dom)}")
    result.add("browser: execute GraphView cell -> next frame", med(frame), "ms")
    result.add("stepper step round trip, 5-op graph", med(small), "ms",
               f"click -> data-state; {len(small)} steps")
    result.add(f"stepper step round trip, {N_OPS:,}-op graph", med(big), "ms",
               f"max {max(big):.0f} ms over {len(big)} steps")
    result.target = f"step round trip <= {TARGET_STEP_MS:g} ms on the {N_OPS:,}-op graph"
    result.measured = f"{med(big):.0f} ms"
    result.met = med(big) <= TARGET_STEP_MS
    result.notes.append("times from the page clock (performance.now) in headless Chromium "
                        "(software rendering, --disable-gpu) on the same machine as the kernel")


def main() -> h.Result:
    args = h.parse_args(__doc__.splitlines()[0])
    result = h.Result("frontend", f"Front-end: {N_OPS:,}-op graph in JupyterLab, stepper round "
                      "trip")
    reason = _why_not_run()
    if reason is None:
        _measure(args, result)
    else:
        result.target = f"step round trip <= {TARGET_STEP_MS:g} ms on the {N_OPS:,}-op graph"
        result.measured = "not run"
        result.notes.append(f"not run: {reason}")
    h.report(result, args)
    return result


if __name__ == "__main__":
    main()
