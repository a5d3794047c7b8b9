// The graph drawing shared by GraphView, Stepper and the MIME renderer: Graphviz SVG inserted
// once per layout, then cheap updates that only touch attributes of existing node groups
// (data-state, classes, one badge <text> per node), a hover tooltip and pan/zoom.
//
// Sizing (see fitScale): the drawing is shown as wide as the canvas allows but never so small
// that node names fall below MIN_FONT_PX on screen; what does not fit then is panned to. The
// canvas height follows the drawing's shape within limits, and the user can drag it taller
// (CSS resize); a resize keeps the scale and the corner in view. The zoom buttons and the pan
// hint sit in a bar under the canvas, where they cover no part of the drawing (its legend is
// at its top); a minimap in the canvas's corner shows where the view is while part of the
// drawing is out of view.

import { button, clear, el, svgEl } from "./dom.js";
import { Minimap } from "./minimap.js";
import { panZoom } from "./panzoom.js";
import { importSvg } from "./safe_svg.js";

const STATES = new Set(["pending", "ready", "running", "done", "dead", "failed"]);

export const MIN_FONT_PX = 11; // node names are never drawn smaller than this at first
export const MAX_SCALE = 1.5; // pixels per drawing unit: small graphs are not blown up further
export const MIN_HEIGHT_PX = 180;

// The tallest canvas the widget picks by itself: most of a window (a projector shows about
// 700 pixels), however tall the drawing; a user can still drag it taller.
export function maxHeight(windowHeight) {
  return Math.round(Math.max(360, Math.min(780, 0.75 * (windowHeight || 900))));
}

// The first view of a drawing of `size` (drawing units) whose smallest node name is
// `fontUnits` tall, in a canvas `width` pixels wide that may grow up to `maxH`: the scale
// (pixels per unit) and the canvas height. The whole drawing when that keeps names readable,
// else names at MIN_FONT_PX and the rest reached by panning.
export function fitScale(size, fontUnits, width, maxH) {
  const fits = Math.min(width / size.w, maxH / size.h, MAX_SCALE);
  const readable = MIN_FONT_PX / Math.max(fontUnits, 1);
  const scale = Math.max(fits, Math.min(readable, MAX_SCALE * 2));
  const height = Math.min(Math.max(size.h * scale, MIN_HEIGHT_PX), maxH);
  return { scale, height: Math.ceil(height) };
}

// The size, in drawing units, of the smallest node name: a node's largest text is its name.
function nameFontUnits(svg) {
  let smallest = Infinity;
  for (const g of svg.querySelectorAll("g.node")) {
    let largest = 0;
    for (const t of g.querySelectorAll("text")) {
      largest = Math.max(largest, parseFloat(t.getAttribute("font-size")) || 0);
    }
    if (largest > 0) smallest = Math.min(smallest, largest);
  }
  return Number.isFinite(smallest) ? smallest : 11;
}

export class GraphCanvas {
  // hooks: onNodeClick(id, event), onClusterClick(id, event), tooltip(id) -> array of lines
  constructor(parent, hooks = {}) {
    this.hooks = hooks;
    this.outer = el("div", "dflab-canvas");
    this.root = el("div", "dflab-graph");
    this.stage = el("div", "dflab-stage");
    this.tip = el("div", "dflab-tip");
    this.tip.hidden = true;
    this.zoomBar = el("div", "dflab-zoombar");
    for (const [k, label, title] of [["in", "+", "Zoom in (or Ctrl + wheel)"],
      ["out", "\u2212", "Zoom out (or Ctrl + wheel)"],
      ["fit", "\u2194", "Fit to the width, names readable"],
      ["all", "\u2922", "Show the whole graph, however small"]]) {
      const b = button(null, label, title);
      b.dataset.zoom = k;
      this.zoomBar.appendChild(b);
    }
    this.panHint = el("div", "dflab-pan-hint",
      "drag or scroll for the rest \u00b7 the map shows where you are \u00b7 \u2922 shows all");
    this.panHint.hidden = true;
    this.root.append(this.stage, this.tip);
    const bar = el("div", "dflab-canvas-bar");
    bar.append(this.panHint, this.zoomBar);
    this.outer.append(this.root, bar);
    // Beside the canvas, over its corner: the canvas holds the drawing's <svg> alone.
    this.minimap = new Minimap(this.outer, { onMove: (x, y) => this.pz?.centerOn(x, y) });
    parent.appendChild(this.outer);
    this.svg = null;
    this.pz = null;
    this.byId = new Map();
    this.states = {};
    this.nodes = {};
    this.badges = new Map();
    this.selected = "";
    this.marked = new Set();
    this.fontUnits = 11;
    this.fixedHeight = 0; // pixels asked for by the kernel (0: follow the drawing)
    this.autoHeight = ""; // the inline height this canvas set itself (another one: the user's)
    this.needsHome = false;
    this.lastWidth = 0;
    this.resizer = new ResizeObserver(() => this._resized());
    this.resizer.observe(this.stage);
    this._wire();
  }

  _wire() {
    this.zoomBar.addEventListener("click", (ev) => {
      const k = ev.target.closest("button")?.dataset.zoom;
      if (!this.pz || !k) return;
      if (k === "fit") this.home();
      else if (k === "all") this.pz.fit();
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
    this.fontUnits = nameFontUnits(this.svg);
    this.pz = panZoom(this.svg, { onChange: () => this._showPanHint() });
    this.minimap.setDrawing(this.svg, this.pz.home());
    this.needsHome = true;
    this._resized();
    const prev = this.states;
    this.states = {};
    this.setNodes(this.nodes);
    this.setStates(prev);
    this.setSelected(this.selected);
    this.setMarked([...this.marked]);
  }

  // --- size and first view --------------------------------------------------------------
  // The canvas height the user chose by dragging its corner, if any.
  _userHeight() {
    const h = this.root.style.height;
    return h && h !== this.autoHeight ? h : "";
  }

  // The first view of a drawing (also the fit button): see fitScale.
  home() {
    const width = this.stage.clientWidth;
    if (!this.pz || width === 0) return;
    const size = this.pz.size();
    const fixed = this.fixedHeight || parseFloat(this._userHeight()) || 0;
    const { scale, height } = fitScale(size, this.fontUnits, width,
      fixed || maxHeight(window.innerHeight));
    if (!fixed) {
      const border = this.root.offsetHeight - this.root.clientHeight;
      this.autoHeight = `${height + border}px`;
      this.root.style.height = this.autoHeight;
    } else if (this.fixedHeight) {
      this.autoHeight = `${this.fixedHeight}px`;
      this.root.style.height = this.autoHeight;
    }
    this.needsHome = false;
    this.pz.show(scale, width, this.stage.clientHeight);
  }

  // A height in pixels asked for by the kernel; 0 lets the canvas follow the drawing.
  setHeight(px) {
    this.fixedHeight = Math.max(0, Number(px) || 0);
    if (!this.fixedHeight && !this._userHeight()) this.root.style.height = "";
    this.home();
  }

  // The stage changed size (a new cell width, the side panel opening, the user dragging the
  // canvas taller): a view the user has not moved is fitted again, a moved one keeps its
  // scale and corner.
  _resized() {
    const w = this.stage.clientWidth;
    const h = this.stage.clientHeight;
    // A panel beside the canvas (details, variables) is as tall as the canvas, no taller.
    this.outer.parentElement?.style.setProperty("--dflab-canvas-h",
      `${this.outer.offsetHeight}px`);
    if (!this.pz || w === 0 || h === 0) return;
    if (this.needsHome || !this.pz.touched()) {
      if (this.needsHome || Math.abs(w - this.lastWidth) > 1) {
        this.lastWidth = w;
        this.home();
        return;
      }
    }
    this.lastWidth = w;
    this.pz.resize(w, h);
  }

  _showPanHint() {
    const all = !this.pz || this.pz.showsAll();
    this.panHint.hidden = all;
    this.minimap.update(this.pz?.view(), all);
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
