// The graph drawing shared by GraphView, Stepper and the MIME renderer: Graphviz SVG inserted
// once per layout, then cheap updates that only touch attributes of existing node groups
// (data-state, classes, one badge <text> per node), a hover tooltip and pan/zoom.

import { button, clear, el, svgEl } from "./dom.js";
import { panZoom } from "./panzoom.js";
import { importSvg } from "./safe_svg.js";

const STATES = new Set(["pending", "ready", "running", "done", "dead", "failed"]);

export class GraphCanvas {
  // hooks: onNodeClick(id, event), onClusterClick(id, event), tooltip(id) -> array of lines
  constructor(parent, hooks = {}) {
    this.hooks = hooks;
    this.root = el("div", "dflab-graph");
    this.stage = el("div", "dflab-stage");
    this.tip = el("div", "dflab-tip");
    this.tip.hidden = true;
    this.zoomBar = el("div", "dflab-zoombar");
    for (const [k, label, title] of [["in", "+", "Zoom in"], ["out", "\u2212", "Zoom out"],
      ["fit", "\u2922", "Fit the whole graph"]]) {
      const b = button(null, label, title);
      b.dataset.zoom = k;
      this.zoomBar.appendChild(b);
    }
    this.root.append(this.stage, this.zoomBar, this.tip);
    parent.appendChild(this.root);
    this.svg = null;
    this.pz = null;
    this.byId = new Map();
    this.states = {};
    this.nodes = {};
    this.badges = new Map();
    this.selected = "";
    this.marked = new Set();
    this._wire();
  }

  _wire() {
    this.zoomBar.addEventListener("click", (ev) => {
      const k = ev.target.closest("button")?.dataset.zoom;
      if (!this.pz || !k) return;
      if (k === "fit") this.pz.fit();
      else this.pz.zoom(k === "in" ? 0.7 : 1 / 0.7);
    });
    this.stage.addEventListener("click", (ev) => {
      if (this.pz?.wasDrag()) return;
      const node = ev.target.closest?.("g.node");
      if (node && this.byId.get(node.id) === node) {
        this.hooks.onNodeClick?.(node.id, ev);
        return;
      }
      const cluster = ev.target.closest?.("g.cluster");
      if (cluster) this.hooks.onClusterClick?.(cluster.id, ev);
    });
    this.stage.addEventListener("mouseover", (ev) => {
      const node = ev.target.closest?.("g.node");
      if (!node || !this.byId.has(node.id)) return;
      const lines = this.hooks.tooltip?.(node.id) || [];
      if (!lines.length) return;
      this.tip.textContent = lines.join("\n");
      this.tip.hidden = false;
      this._placeTip(ev);
    });
    this.stage.addEventListener("mousemove", (ev) => {
      if (!this.tip.hidden) this._placeTip(ev);
    });
    this.stage.addEventListener("mouseout", (ev) => {
      const from = ev.target.closest?.("g.node");
      const to = ev.relatedTarget?.closest?.("g.node");
      if (from && from !== to) this.tip.hidden = true;
    });
  }

  _placeTip(ev) {
    const box = this.root.getBoundingClientRect();
    const x = Math.min(ev.clientX - box.left + 14, Math.max(0, box.width - 260));
    this.tip.style.left = `${x}px`;
    this.tip.style.top = `${ev.clientY - box.top + 14}px`;
  }

  // A new layout: the only time the SVG is (re)inserted.
  setSvg(text) {
    clear(this.stage);
    this.byId.clear();
    this.badges.clear();
    this.tip.hidden = true;
    this.svg = importSvg(text);
    if (!this.svg) {
      this.stage.appendChild(el("div", "dflab-muted", text ? "Could not read the drawing." : ""));
      this.pz = null;
      return;
    }
    this.stage.appendChild(this.svg);
    this._takeTitles();
    for (const g of this.svg.querySelectorAll("g.node")) if (g.id) this.byId.set(g.id, g);
    this.pz = panZoom(this.svg);
    const prev = this.states;
    this.states = {};
    this.setNodes(this.nodes);
    this.setStates(prev);
    this.setSelected(this.selected);
    this.setMarked([...this.marked]);
  }

  // Node info (from the layout). Fading and highlighting are already drawn by the kernel;
  // scopes and fused nodes (what a click opens) get a class so they can show they are clickable.
  setNodes(nodes) {
    this.nodes = nodes || {};
    for (const [id, g] of this.byId) {
      const info = this.nodes[id] || {};
      g.classList.toggle("dflab-scope", info.kind === "scope" || Boolean(info.expandable));
    }
  }

  // The drawing's own <title> tooltips would compete with the widget's: keep their text for
  // the widget tooltip and remove them from the live SVG.
  _takeTitles() {
    this.titles = new Map();
    for (const g of this.svg.querySelectorAll("g.node, g.cluster, g.edge")) {
      const title = g.querySelector(":scope > title");
      if (!title) continue;
      if (g.id) this.titles.set(g.id, title.textContent);
      title.remove();
    }
  }

  title(id) {
    return this.titles?.get(id) || "";
  }

  // states: node id -> pending|ready|running|done|dead|failed; only changed nodes are touched.
  setStates(states) {
    states = states || {};
    for (const [id, g] of this.byId) {
      const next = STATES.has(states[id]) ? states[id] : undefined;
      if (this.states[id] === next) continue;
      if (next) g.dataset.state = next;
      else delete g.dataset.state;
    }
    this.states = { ...states };
  }

  setSelected(id) {
    this.byId.get(this.selected)?.classList.remove("dflab-selected");
    this.selected = id || "";
    this.byId.get(this.selected)?.classList.add("dflab-selected");
  }

  // Nodes carrying a marker (breakpoints): data-breakpoint on the node group.
  setMarked(ids) {
    for (const id of this.marked) this.byId.get(id)?.removeAttribute("data-breakpoint");
    this.marked = new Set(ids || []);
    for (const id of this.marked) this.byId.get(id)?.setAttribute("data-breakpoint", "");
  }

  // Small labels at a node's top-right corner (loop frame and iteration): id -> text.
  setBadges(badges) {
    badges = badges || {};
    for (const [id, t] of this.badges) {
      if (!(id in badges)) {
        t.remove();
        this.badges.delete(id);
      }
    }
    for (const [id, text] of Object.entries(badges)) {
      const g = this.byId.get(id);
      if (!g) continue;
      let t = this.badges.get(id);
      if (!t) {
        const box = g.getBBox();
        t = svgEl("text", { class: "dflab-badge", x: box.x + box.width, y: box.y + 1,
          "text-anchor": "end" });
        g.appendChild(t);
        this.badges.set(id, t);
      }
      if (t.textContent !== text) t.textContent = text;
    }
  }
}
