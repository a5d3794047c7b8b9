// Stepper: the real executor driven one node at a time. Buttons send actions to the kernel,
// which steps the StepRun and answers with small state updates (node states, ready set, lanes,
// values as text); the SVG is only replaced when the layout changes.

import { button, clear, el, perFrame, widgetRoot } from "./lib/dom.js";
import { mountGraph } from "./graph_view.js";

const ACTIONS = [
  ["back", "\u25c0 back", "Undo the last event: variables and queues get their values back"],
  ["forward", "forward \u21b7", "Re-execute the next recorded event (same results)"],
  ["step", "step \u25b6", "Run the next ready node (or re-execute the next recorded one)"],
  ["run-to", "run to \u21e5", "Run until the selected node has run"],
  ["resume", "resume \u25b6\u25b6", "Run until the step finishes or a breakpoint"],
  ["reset", "reset \u21ba", "Start the step again (variables keep their values)"],
];

// What the node colours mean (the same colours as the graph's states in widgets.css).
const STATE_KEY = [
  ["ran", "#c8e6c9", "var(--dflab-done)", "solid", 1],
  ["ready", "#fff3c4", "var(--dflab-ready)", "solid", 1],
  ["running", "#ffe0b2", "var(--dflab-running)", "solid", 1],
  ["pending (inputs not ready)", "#ffffff", "#9e9e9e", "solid", 0.55],
  ["dead (branch not taken)", "#eeeeee", "var(--dflab-dead)", "dashed", 1],
  ["failed", "#ffcdd2", "var(--dflab-failed)", "solid", 1],
  ["breakpoint (shift-click)", "#ffffff", "#d32f2f", "dashed", 1],
];

function stateLegend() {
  const legend = el("div", "dflab-legend dflab-state-legend");
  for (const [label, fill, line, style, opacity] of STATE_KEY) {
    const swatch = el("span", "dflab-swatch");
    Object.assign(swatch.style, { background: fill, borderColor: line, borderStyle: style,
      borderWidth: "2px", opacity: String(opacity) });
    const item = el("span", "dflab-legend-item");
    item.append(swatch, el("span", null, label));
    legend.appendChild(item);
  }
  legend.appendChild(el("span", "dflab-legend-item dflab-legend-note",
    "name #n: a node in loop iteration n \u00b7 step k of ?: how many nodes the step runs is "
    + "known once it has run to the end (loops and conds decide at run time)"));
  return legend;
}

function chip(text, className) {
  const c = el("span", `dflab-chip ${className || ""}`.trim(), text);
  return c;
}

function render({ model, el: host }) {
  const root = widgetRoot(host, "stepper");
  const head = el("div", "dflab-title");
  const bar = el("div", "dflab-toolbar");
  for (const [action, label, title] of ACTIONS) bar.appendChild(button(action, label, title));
  const status = el("div", "dflab-status");
  const message = el("div", "dflab-message");
  const ready = el("div", "dflab-ready");
  root.append(head, bar, status, ready, message, stateLegend());

  const { side, refreshSide } = mountGraph(model, root, {
    onNodeClick: (id, ev) => {
      if (!(ev.shiftKey || ev.altKey)) return false;
      model.send({ type: "toggle-breakpoint", id });
      return true;
    },
  });
  const frames = el("div", "dflab-frames");
  const vars = el("div", "dflab-vars");
  side.append(frames, vars);
  const lanes = el("div", "dflab-lanes");
  root.appendChild(lanes);

  bar.addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-action]");
    if (b) model.send({ type: "action", action: b.dataset.action });
  });
  ready.addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-key]");
    if (b) model.send({ type: "step", key: b.dataset.key });
  });

  const showHead = () => {
    head.textContent = model.get("title") || "";
    status.textContent = model.get("status") || "";
    message.textContent = model.get("message") || "";
    message.hidden = !model.get("message");
    message.dataset.kind = model.get("message_kind") || "error";
    const finished = model.get("finished");
    const behind = model.get("cursor") < model.get("total");
    for (const b of bar.querySelectorAll("button[data-action]")) {
      const a = b.dataset.action;
      b.disabled = (a === "back" && model.get("cursor") === 0)
        || (a === "forward" && !behind)
        || ((a === "step" || a === "resume" || a === "run-to") && finished && !behind);
    }
  };
  const showReady = () => {
    clear(ready);
    const items = model.get("ready_items") || [];
    ready.appendChild(el("span", "dflab-label", items.length ? "ready:" : "nothing ready"));
    for (const r of items) {
      const b = button(null, r.label || r.key, `step ${r.key}`);
      b.className = "dflab-chip dflab-ready-chip";
      b.dataset.key = r.key;
      ready.appendChild(b);
    }
  };
  const showLanes = perFrame(() => {
    clear(lanes);
    const byDevice = model.get("lanes") || {};
    const devices = Object.keys(byDevice);
    lanes.hidden = devices.length === 0;
    for (const device of devices) {
      const lane = el("div", "dflab-lane");
      lane.appendChild(el("span", "dflab-lane-label", device));
      const track = el("div", "dflab-lane-track");
      for (const e of byDevice[device]) track.appendChild(chip(e.label, `dflab-${e.state}`));
      lane.appendChild(track);
      lanes.appendChild(lane);
    }
  });
  const showSide = perFrame(() => {
    clear(frames);
    const fl = model.get("frames") || [];
    if (fl.length) frames.appendChild(el("div", "dflab-subtitle", "loop frames"));
    for (const f of fl) frames.appendChild(el("div", "dflab-frame", f));
    clear(vars);
    const vl = model.get("variables") || [];
    // Highlighted: the values the last action changed (a write, or a restore by back).
    const changed = new Set(model.get("changed_variables") || []);
    if (vl.length) vars.appendChild(el("div", "dflab-subtitle", "variables (shared state)"));
    for (const [name, text] of vl) {
      const row = el("div", changed.has(name) ? "dflab-var dflab-var-changed" : "dflab-var");
      if (changed.has(name)) row.title = "changed by the last action";
      row.append(el("span", "dflab-var-name", name), el("span", "dflab-var-value", text));
      vars.appendChild(row);
    }
    refreshSide();
  });
  for (const name of ["title", "status", "message", "message_kind", "finished", "cursor",
    "total"]) {
    model.on(`change:${name}`, showHead);
  }
  model.on("change:ready_items", showReady);
  model.on("change:lanes", showLanes);
  model.on("change:frames", showSide);
  model.on("change:variables", showSide);
  model.on("change:changed_variables", showSide);
  showHead();
  showReady();
  showLanes();
  showSide();
  return () => host.replaceChildren();
}

export default { render };
