// Timeline: a Gantt chart of one or more traced steps, one lane per device and thread, bars
// per node execution, arrows from each _Send to its _Recv. Wheel zooms the time axis around
// the pointer, dragging pans, double-click shows everything again. Zooming only moves
// existing rectangles; new data (a live training loop) redraws the chart.

import { clear, el, svgEl, widgetRoot } from "./lib/dom.js";

const LABEL_W = 190;
const ROW_H = 16;
const LANE_PAD = 3;
const AXIS_H = 22;

export function formatMicros(us) {
  const a = Math.abs(us);
  if (a >= 1e6) return `${(us / 1e6).toFixed(a >= 1e7 ? 1 : 2)} s`;
  if (a >= 1e3) return `${(us / 1e3).toFixed(a >= 1e4 ? 1 : 2)} ms`;
  return `${Math.round(us)} \u00b5s`;
}

// Tick positions at a 1-2-5 step giving about `n` ticks over [t0, t1].
export function ticks(t0, t1, n = 8) {
  const span = Math.max(t1 - t0, 1e-9);
  const raw = span / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  const out = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1 + 1e-9; t += step) out.push(t);
  return out;
}

class Gantt {
  constructor(parent, tip) {
    this.parent = parent;
    this.tip = tip;
    this.view = null;
    this.full = null;
    this.data = { lanes: [], bars: [], arrows: [] };
  }

  setData(data) {
    this.data = {
      lanes: data?.lanes || [], bars: data?.bars || [], arrows: data?.arrows || [],
    };
    const ends = this.data.bars.map((b) => b.end_us);
    // New data (a later step) shows all of it again.
    this.full = { t0: 0, t1: Math.max(ends.length ? Math.max(...ends) : 1, 1) };
    this.view = { ...this.full };
    this.draw();
  }

  x(t) {
    const w = this.width - LABEL_W - 8;
    return LABEL_W + ((t - this.view.t0) / (this.view.t1 - this.view.t0)) * w;
  }

  draw() {
    clear(this.parent);
    const { lanes, bars, arrows } = this.data;
    this.width = Math.max(this.parent.clientWidth || 0, 600);
    const laneTop = new Map();
    let y = AXIS_H;
    for (const lane of lanes) {
      laneTop.set(lane.id, y);
      y += Math.max(lane.rows || 1, 1) * ROW_H + 2 * LANE_PAD;
    }
    const height = Math.max(y, AXIS_H + ROW_H) + 6;
    const svg = svgEl("svg", { width: this.width, height, class: "dflab-gantt" });
    this.svg = svg;
    const defs = svgEl("defs");
    const uid = `dflab-${Math.random().toString(36).slice(2)}`;
    const clip = svgEl("clipPath", { id: `${uid}-clip` });
    clip.appendChild(svgEl("rect", { x: LABEL_W, y: 0, width: this.width - LABEL_W, height }));
    const marker = svgEl("marker", { id: `${uid}-arrow`, viewBox: "0 0 10 10", refX: 9,
      refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" });
    marker.appendChild(svgEl("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "dflab-arrowhead" }));
    defs.append(clip, marker);
    svg.appendChild(defs);

    lanes.forEach((lane, i) => {
      const top = laneTop.get(lane.id);
      const h = Math.max(lane.rows || 1, 1) * ROW_H + 2 * LANE_PAD;
      svg.appendChild(svgEl("rect", { x: 0, y: top, width: this.width, height: h,
        class: i % 2 ? "dflab-lane-bg odd" : "dflab-lane-bg" }));
      const label = svgEl("text", { x: 4, y: top + LANE_PAD + ROW_H - 4, class: "dflab-lane-name" });
      label.textContent = lane.label || lane.id;
      svg.appendChild(label);
    });
    this.axis = svgEl("g", { class: "dflab-axis" });
    svg.appendChild(this.axis);
    const plot = svgEl("g", { "clip-path": `url(#${uid}-clip)` });
    svg.appendChild(plot);

    const barY = (b) => (laneTop.get(b.lane) ?? AXIS_H) + LANE_PAD + (b.row || 0) * ROW_H;
    this.rects = bars.map((b) => {
      const r = svgEl("rect", { class: "dflab-bar", y: barY(b) + 1, height: ROW_H - 2, rx: 2 });
      r.dataset.name = b.name;
      if (b.op_type) r.dataset.op = b.op_type;
      if (b.color && /^#[0-9a-fA-F]{3,8}$/.test(b.color)) r.style.fill = b.color;
      if (b.stroke && /^#[0-9a-fA-F]{3,8}$/.test(b.stroke)) r.style.stroke = b.stroke;
      plot.appendChild(r);
      return r;
    });
    // Op names on the bars wide enough to hold one (as the static SVG timeline has them).
    this.names = bars.map((b) => {
      const t = svgEl("text", { y: barY(b) + ROW_H - 5, class: "dflab-bar-name" });
      t.textContent = b.name;
      plot.appendChild(t);
      return t;
    });
    this.lines = arrows.filter((a) => bars[a.from] && bars[a.to]).map((a) => {
      const l = svgEl("line", { class: "dflab-arrow", "marker-end": `url(#${uid}-arrow)` });
      plot.appendChild(l);
      return { l, a, y1: barY(bars[a.from]) + ROW_H / 2, y2: barY(bars[a.to]) + ROW_H / 2 };
    });
    svg.addEventListener("mouseover", (ev) => {
      const i = this.rects.indexOf(ev.target);
      if (i < 0) return;
      const b = bars[i];
      const lines = [`${b.name} (${b.op_type || "?"})`,
        `${formatMicros(b.end_us - b.start_us)}, from ${formatMicros(b.start_us)}`];
      if (b.frame) lines.push(`frame ${b.frame}, iteration ${b.iteration}`);
      if (b.step_id !== undefined && b.step_id !== null) lines.push(`step ${b.step_id}`);
      if (b.label) lines.push(b.label);
      this.tip.textContent = lines.join("\n");
      this.tip.hidden = false;
      const box = this.parent.getBoundingClientRect();
      this.tip.style.left = `${Math.max(0, Math.min(ev.clientX - box.left + 12, box.width - 260))}px`;
      this.tip.style.top = `${ev.clientY - box.top + 12}px`;
    });
    svg.addEventListener("mouseout", () => {
      this.tip.hidden = true;
    });
    this._wireZoom(svg);
    this.parent.appendChild(svg);
    this.place();
  }

  // Moves bars, arrows and ticks for the current time window: attributes only.
  place() {
    const bars = this.data.bars;
    this.rects.forEach((r, i) => {
      const x0 = this.x(bars[i].start_us);
      const w = Math.max(this.x(bars[i].end_us) - x0, 1);
      r.setAttribute("x", x0);
      r.setAttribute("width", w);
      const name = this.names[i];
      name.setAttribute("x", x0 + 3);
      // About 6 px per character at this size: show the name only where it fits.
      name.style.display = w >= 6 * Math.min(bars[i].name.length, 24) + 6 ? "" : "none";
    });
    for (const { l, a, y1, y2 } of this.lines) {
      l.setAttribute("x1", this.x(a.start_us));
      l.setAttribute("x2", this.x(a.end_us));
      l.setAttribute("y1", y1);
      l.setAttribute("y2", y2);
    }
    clear(this.axis);
    for (const t of ticks(this.view.t0, this.view.t1)) {
      const x = this.x(t);
      this.axis.appendChild(svgEl("line", { x1: x, x2: x, y1: AXIS_H - 4,
        y2: this.svg.getAttribute("height"), class: "dflab-tick" }));
      // A label near the right edge ends at its tick instead of running off the chart.
      const nearEnd = x > this.width - 60;
      const label = svgEl("text", { x: nearEnd ? x - 2 : x + 2, y: AXIS_H - 8,
        class: "dflab-tick-label", "text-anchor": nearEnd ? "end" : "start" });
      label.textContent = formatMicros(t);
      this.axis.appendChild(label);
    }
  }

  _wireZoom(svg) {
    const timeAt = (clientX) => {
      const box = svg.getBoundingClientRect();
      const w = this.width - LABEL_W - 8;
      const f = (clientX - box.left - LABEL_W) / w;
      return this.view.t0 + f * (this.view.t1 - this.view.t0);
    };
    svg.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const k = Math.exp(Math.max(-0.5, Math.min(0.5, ev.deltaY / 600)));
      const t = timeAt(ev.clientX);
      const span = Math.max((this.view.t1 - this.view.t0) * k, 1);
      const f = (t - this.view.t0) / (this.view.t1 - this.view.t0);
      this.view = { t0: t - f * span, t1: t - f * span + span };
      this.place();
    }, { passive: false });
    let drag = null;
    svg.addEventListener("pointerdown", (ev) => {
      drag = { x: ev.clientX, view: { ...this.view } };
    });
    svg.addEventListener("pointermove", (ev) => {
      if (!drag) return;
      const dt = ((ev.clientX - drag.x) / (this.width - LABEL_W - 8))
        * (drag.view.t1 - drag.view.t0);
      this.view = { t0: drag.view.t0 - dt, t1: drag.view.t1 - dt };
      this.place();
    });
    const end = () => {
      drag = null;
    };
    svg.addEventListener("pointerup", end);
    svg.addEventListener("pointerleave", end);
    svg.addEventListener("dblclick", () => {
      this.view = { ...this.full };
      this.place();
    });
  }
}

// What the chart's marks mean; a bar spanning the whole step is explained too, since a lane
// that waits (a _Recv, a queue) looks busy the whole time.
function timelineLegend() {
  const legend = el("div", "dflab-legend dflab-timeline-legend");
  const item = (cls, label) => {
    const it = el("span", "dflab-legend-item");
    it.append(el("span", `dflab-swatch ${cls}`), el("span", null, label));
    legend.appendChild(it);
  };
  item("dflab-swatch-op", "one op execution (hover for its details)");
  item("dflab-swatch-comm", "_Send / _Recv");
  item("dflab-swatch-arrow", "a tensor crossing devices (send \u2192 receive)");
  legend.appendChild(el("span", "dflab-legend-item dflab-legend-note",
    "a bar across the whole step is an op that waited (a receive, a queue) the whole time"
    + " \u00b7 drag to pan, wheel to zoom"));
  return legend;
}

function render({ model, el: host }) {
  const root = widgetRoot(host, "timeline");
  const title = el("div", "dflab-title");
  const summary = el("div", "dflab-status");
  const chart = el("div", "dflab-chart");
  const tip = el("div", "dflab-tip");
  tip.hidden = true;
  chart.appendChild(tip);
  const area = el("div", "dflab-chart-area");
  chart.prepend(area);
  root.append(title, summary, chart, timelineLegend());
  const gantt = new Gantt(area, tip);
  const show = () => {
    title.textContent = model.get("title") || "";
    summary.textContent = model.get("summary") || "";
    gantt.setData(model.get("data"));
  };
  model.on("change:data", show);
  model.on("change:title", show);
  // The width is only known once the output is attached; draw again then.
  requestAnimationFrame(show);
  show();
  return () => host.replaceChildren();
}

export default { render };
