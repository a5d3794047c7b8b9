// A saved graph document as the model GraphView's front-end reads (get/on/send), and the
// wiring rows (scope, inputs, outputs) the document adds to a node's details.

import { el } from "../../src/lib/dom.js";

// The document's node info for `id`, as a details panel shows it; {} for unknown ids.
function detailOf(nodes, id) {
  const info = Object.prototype.hasOwnProperty.call(nodes, id) ? nodes[id] : null;
  if (!info || typeof info !== "object" || info.kind === "cluster") return {};
  return { ...info, id };
}

// id -> info[key] for the nodes that have a text under `key` (a saved widget's node states
// and last values, which colour the nodes and fill the tooltips as in the widget).
function perNode(nodes, key) {
  const out = {};
  for (const [id, info] of Object.entries(nodes)) {
    if (info && typeof info[key] === "string" && info[key]) out[id] = info[key];
  }
  return out;
}

export function snapshotModel(doc) {
  const state = {
    svg: doc.svg,
    nodes: doc.nodes,
    states: perNode(doc.nodes, "state"),
    values: perNode(doc.nodes, "value"),
    selected: "",
    detail: {},
  };
  const listeners = new Map();
  const set = (key, value) => {
    state[key] = value;
    for (const fn of listeners.get(`change:${key}`) || []) fn();
  };
  return {
    get: (key) => state[key],
    on: (event, fn) => {
      if (!listeners.has(event)) listeners.set(event, []);
      listeners.get(event).push(fn);
    },
    // What the kernel does with a click, done here: show the node's details. A scope cannot
    // open (that needs a new layout), so it shows what it holds; a click on an open scope's
    // box clears the selection.
    send: (msg) => {
      if (msg?.type === "click") {
        const detail = detailOf(state.nodes, msg.id);
        set("selected", detail.name ? msg.id : "");
        set("detail", detail);
      } else if (msg?.type === "cluster-click") {
        set("selected", "");
        set("detail", {});
      }
    },
  };
}

function tensorText(t) {
  if (!t || typeof t !== "object") return String(t ?? "");
  const shape = t.shape ? ` ${t.shape}` : "";
  return t.dtype ? `${t.name} (${t.dtype}${shape})` : String(t.name ?? "");
}

function field(label, lines) {
  const row = el("div", "dflab-field");
  const value = el("div", "dflab-field-value");
  for (const line of lines) value.appendChild(el("div", "dflab-wire", line));
  row.append(el("div", "dflab-field-label", label), value);
  return row;
}

// Appends "scope", "inputs", "outputs", "control inputs" and "consumers" to a rendered detail
// panel, for the node infos that carry them (ops from a document with its graph's wiring).
export function renderWiring(panel, detail) {
  if (!panel || !detail || !detail.name) return;
  const rows = [];
  if (detail.scope) rows.push(field("scope", [String(detail.scope)]));
  for (const [label, key] of [["inputs", "inputs"], ["outputs", "outputs"],
    ["control inputs", "control_inputs"], ["consumers", "consumers"]]) {
    const list = Array.isArray(detail[key]) ? detail[key] : [];
    if (list.length) rows.push(field(label, list.map(tensorText)));
  }
  if (!rows.length) return;
  const box = el("div", "dflab-fields dflab-wiring");
  box.append(...rows);
  panel.append(el("div", "dflab-subtitle", "wiring"), box);
}
