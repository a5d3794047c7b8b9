// JupyterLab renderer for application/vnd.dflab.graph+json: the document dflab puts next to the
// SVG in the rich display of graphs, ops, tensors, placement reports and graph widgets. It draws
// the same interactive graph as GraphView (pan/zoom, tooltips, a click shows a node's details)
// from the saved document alone, so a reopened notebook explores its graphs without a kernel.
//
// The GraphView front-end is reused as it is: it talks to an anywidget-style model, and here
// that model is a read-only snapshot whose "click" message selects a node locally. Name scopes
// cannot be opened (that needs a new layout from the kernel); a click shows what they hold.

import { Widget } from "@lumino/widgets";
import { mountGraph } from "../../src/graph_view.js";
import { renderWiring, snapshotModel } from "./snapshot.js";
import { el, widgetRoot } from "../../src/lib/dom.js";

export const MIME_TYPE = "application/vnd.dflab.graph+json";

// Below JupyterLab's SVG (80) and HTML (50) renderers, so a front-end with this extension
// prefers the interactive drawing; front-ends without it never see this type and show the SVG.
const RANK = 20;

function validDocument(doc) {
  return Boolean(doc) && typeof doc === "object" && typeof doc.svg === "string"
    && doc.nodes !== null && typeof doc.nodes === "object" && !Array.isArray(doc.nodes);
}

// Draws a graph document into `host` (replacing what it held); false when it is not one.
export function renderDocument(host, doc) {
  host.replaceChildren();
  if (!validDocument(doc)) {
    host.appendChild(el("div", "dflab-muted", "This dflab drawing could not be read."));
    return false;
  }
  const root = widgetRoot(host, "graphview");
  root.classList.add("dflab-snapshot");
  root.appendChild(el("div", "dflab-title", typeof doc.title === "string" ? doc.title : ""));
  const snapshot = snapshotModel(doc);
  const { side } = mountGraph(snapshot, root);
  const detail = side.querySelector(".dflab-detail");
  snapshot.on("change:detail", () => renderWiring(detail, snapshot.get("detail")));
  if (typeof doc.selected === "string" && doc.selected) {
    snapshot.send({ type: "click", id: doc.selected });
  }
  return true;
}

export class GraphRenderer extends Widget {
  constructor(options) {
    super();
    this.mimeType = options.mimeType;
    this.addClass("dflab-mime-graph");
  }

  renderModel(model) {
    renderDocument(this.node, model.data[this.mimeType]);
    return Promise.resolve();
  }
}

export const rendererFactory = {
  safe: true, // everything from the document goes in as text or through the SVG scrubber
  mimeTypes: [MIME_TYPE],
  defaultRank: RANK,
  createRenderer: (options) => new GraphRenderer(options),
};

export default {
  id: "dflab-graph-renderer:plugin",
  name: "dflab graph",
  rendererFactory,
  rank: RANK,
  dataType: "json",
};
