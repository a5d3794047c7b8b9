// GraphView and Stepper outputs carry the graph document beside their widget view. JupyterLab
// prefers the widget view, and in a notebook reopened without the widgets' saved state it can
// only say "Error displaying widget: model not found". This plugin draws the output's graph
// document in place of that message, so those outputs are explorable like rich display ones.
// A widget whose model is still alive (a running kernel) is never touched.

import { MIME_TYPE, renderDocument } from "./index.js";

const WIDGET_MIME = "application/vnd.jupyter.widget-view+json";
const MISSING = "Error displaying widget: model not found"; // jupyterlab_widgets' message

function missingWidgetNode(output) {
  for (const node of output.node.querySelectorAll(".jupyter-widgets")) {
    if (node.textContent.trim() === MISSING) return node;
  }
  return null;
}

// Each output of a cell whose widget view failed and that has a graph document.
function replaceInArea(area) {
  const model = area.model;
  const children = area.widgets || [];
  for (let i = 0; i < model.length && i < children.length; i++) {
    const data = model.get(i).data || {};
    if (!data[MIME_TYPE] || !data[WIDGET_MIME]) continue;
    const node = missingWidgetNode(children[i]);
    if (!node) continue;
    node.classList.remove("jupyter-widgets");
    node.classList.add("dflab-mime-graph");
    renderDocument(node, data[MIME_TYPE]);
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
  description: "Draws a graph widget's saved document where its widget state is gone",
  autoStart: true,
  activate,
};
