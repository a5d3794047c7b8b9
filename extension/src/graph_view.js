// GraphView: a Graphviz drawing of a dataflow graph with pan/zoom, expandable name scopes
// (the kernel re-lays out), a node detail panel and value tooltips. The SVG is inserted once
// per layout; other model changes only touch attributes of existing elements.

import { el, perFrame, widgetRoot } from "./lib/dom.js";
import { renderDetail } from "./lib/detail.js";
import { GraphCanvas } from "./lib/graph_canvas.js";

// The hover text: the drawing's own description of the node (from the kernel), its value
// when one is known, and what a click does.
export function tooltipLines(info, title, value) {
  const lines = [];
  if (title) lines.push(title);
  else if (info.name) lines.push(info.op_type ? `${info.name} (${info.op_type})` : info.name);
  if (value) lines.push(`value: ${value}`);
  if (info.kind === "scope" || info.expandable) lines.push("click to expand");
  return lines;
}

// Builds the shared graph part of GraphView and Stepper: canvas + side panel with the detail.
export function mountGraph(model, root, { onNodeClick } = {}) {
  const body = el("div", "dflab-body");
  const side = el("div", "dflab-side");
  const detail = el("div", "dflab-detail");
  side.appendChild(detail);
  root.appendChild(body);
  const canvas = new GraphCanvas(body, {
    onNodeClick: (id, ev) => {
      if (onNodeClick?.(id, ev)) return;
      model.send({ type: "click", id });
    },
    onClusterClick: (id) => model.send({ type: "cluster-click", id }),
    tooltip: (id) => tooltipLines((model.get("nodes") || {})[id] || {}, canvas.title(id),
      (model.get("values") || {})[id]),
  });
  body.appendChild(side);

  const showSvg = () => {
    canvas.nodes = model.get("nodes") || {};
    canvas.setSvg(model.get("svg"));
    canvas.setStates(model.get("states"));
    canvas.setSelected(model.get("selected"));
    canvas.setMarked(model.get("breakpoint_ids"));
    canvas.setBadges(model.get("badges"));
  };
  const showStates = perFrame(() => canvas.setStates(model.get("states")));
  // With nothing selected (and nothing else in it) the side panel folds away, leaving the
  // drawing the whole width and a one-line hint; it opens again on a click.
  const hint = el("div", "dflab-muted dflab-side-hint", "Click a node for its details.");
  root.appendChild(hint);
  const refreshSide = () => {
    const selected = Boolean(model.get("detail")?.name);
    const other = [...side.children].some((c) => c !== detail && c.childElementCount > 0);
    const folded = !selected && !other;
    side.classList.toggle("dflab-folded", folded);
    hint.hidden = !folded;
  };
  const showDetail = () => {
    renderDetail(detail, model.get("detail"));
    refreshSide();
  };

  model.on("change:svg", showSvg);
  model.on("change:nodes", () => canvas.setNodes(model.get("nodes")));
  model.on("change:states", showStates);
  model.on("change:selected", () => canvas.setSelected(model.get("selected")));
  model.on("change:detail", showDetail);
  model.on("change:badges", perFrame(() => canvas.setBadges(model.get("badges"))));
  model.on("change:breakpoint_ids", () => canvas.setMarked(model.get("breakpoint_ids")));
  model.on("change:height", () => canvas.setHeight(model.get("height")));
  canvas.fixedHeight = model.get("height") || 0;
  showSvg();
  showDetail();
  return { canvas, side, body, refreshSide };
}

function render({ model, el: host }) {
  const root = widgetRoot(host, "graphview");
  const title = el("div", "dflab-title");
  root.appendChild(title);
  const showTitle = () => {
    title.textContent = model.get("title") || "";
  };
  model.on("change:title", showTitle);
  showTitle();
  mountGraph(model, root);
  return () => host.replaceChildren();
}

export default { render };
