// Every dflab widget output carries a static rendering of the widget's last state beside its
// widget view: GraphView and Stepper their graph document (and SVG), ClusterView and
// WorkerProgress an HTML table, Timeline and TrainingMonitor an SVG chart. JupyterLab prefers
// the widget view, and in a notebook reopened without the widgets' saved state it can only say
// "Error displaying widget: model not found". This plugin draws the output's static rendering
// in place of that message: the graph document as the interactive drawing, anything else with
// JupyterLab's own renderer for it (so untrusted HTML is sanitised as anywhere else). A widget
// whose model is still alive (a running kernel) is never touched.

import { Widget } from "@lumino/widgets";
import { MIME_TYPE, renderDocument } from "./index.js";

const WIDGET_MIME = "application/vnd.jupyter.widget-view+json";
const MISSING = "Error displaying widget: model not found"; // jupyterlab_widgets' message
// What a saved widget output can be shown as, best first.
const FALLBACKS = ["text/html", "image/svg+xml", "text/plain"];

function missingWidgetNode(output) {
  for (const node of output.node.querySelectorAll(".jupyter-widgets")) {
    if (node.textContent.trim() === MISSING) return node;
  }
  return null;
}

// Draws `data` (an output's bundle) in `node` without its widget view; false if it has none.
function renderStatic(area, node, data, metadata, trusted) {
  node.classList.add("dflab-saved-widget");
  if (data[MIME_TYPE]) {
    node.classList.add("dflab-mime-graph");
    renderDocument(node, data[MIME_TYPE]);
    return true;
  }
  const mime = FALLBACKS.find((m) => m in data && area.rendermime?.createRenderer);
  if (!mime) return false;
  let renderer;
  try {
    renderer = area.rendermime.createRenderer(mime);
  } catch (err) {
    return false; // no renderer for it in this JupyterLab: leave the message
  }
  node.replaceChildren();
  Widget.attach(renderer, node);
  void renderer.renderModel({ data, metadata: metadata || {}, trusted: Boolean(trusted) });
  return true;
}

// Each output of a cell whose widget view failed.
function replaceInArea(area) {
  const model = area.model;
  const children = area.widgets || [];
  for (let i = 0; i < model.length && i < children.length; i++) {
    const output = model.get(i);
    const data = output.data || {};
    if (!data[WIDGET_MIME]) continue;
    const node = missingWidgetNode(children[i]);
    if (!node) continue;
    const rest = { ...data };
    delete rest[WIDGET_MIME];
    node.classList.remove("jupyter-widgets");
    renderStatic(area, node, rest, output.metadata, output.trusted);
  }
}

// Notebook panels in the main area, found by shape (a content with cells that have output
// areas), which needs no import of the notebook package.
function replaceAll(app) {
  for (const widget of app.shell.widgets("main")) {
    const cells = widget?.content?.widgets;
    if (!Array.isArray(cells) && !cells?.[Symbol.iterator]) continue;
    for (const cell of cells) if (cell?.outputArea?.model) replaceInArea(cell.outputArea);
  }
}

function activate(app) {
  let pending = false;
  const check = () => {
    pending = false;
    const failed = [...document.querySelectorAll(".jupyter-widgets")]
      .some((n) => n.textContent.trim() === MISSING);
    if (failed) replaceAll(app);
  };
  new MutationObserver(() => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(check);
  }).observe(document.body, { childList: true, subtree: true, characterData: true });
}

export default {
  id: "dflab-graph-renderer:widget-fallback",
  description: "Draws a widget's saved static rendering where its widget state is gone",
  autoStart: true,
  activate,
};
