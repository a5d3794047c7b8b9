// TrainingMonitor: loss curve (and any other logged scalar), step rate and progress, updated
// by the kernel at most ~30 times a second. Curves arrive already thinned to a bounded number
// of points, so a redraw costs the same at step 100 and at step 100,000.

import { clear, el, svgEl, widgetRoot } from "./lib/dom.js";

const W = 420;
const H = 130;
const PAD = { l: 48, r: 8, t: 8, b: 20 };

export function niceNumber(v) {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(2);
  return String(Number(v.toPrecision(4)));
}

function chart(name, points) {
  const box = el("div", "dflab-curve");
  const finite = points.filter((p) => Number.isFinite(p[1]));
  const last = points.length ? points[points.length - 1][1] : null;
  box.appendChild(el("div", "dflab-curve-title",
    last === null ? name : `${name}: ${niceNumber(last)}`));
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, class: "dflab-curve-svg" });
  box.appendChild(svg);
  if (finite.length === 0) return box;
  const xs = finite.map((p) => p[0]);
  const ys = finite.map((p) => p[1]);
  const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (y0 === y1) [y0, y1] = [y0 - 1, y1 + 1];
  const sx = (x) => PAD.l + ((x - x0) / Math.max(x1 - x0, 1)) * (W - PAD.l - PAD.r);
  const sy = (y) => H - PAD.b - ((y - y0) / (y1 - y0)) * (H - PAD.t - PAD.b);
  svg.appendChild(svgEl("rect", { x: PAD.l, y: PAD.t, width: W - PAD.l - PAD.r,
    height: H - PAD.t - PAD.b, class: "dflab-plot-bg" }));
  for (const [y, anchor] of [[y1, PAD.t + 8], [y0, H - PAD.b]]) {
    const t = svgEl("text", { x: PAD.l - 4, y: anchor, "text-anchor": "end",
      class: "dflab-tick-label" });
    t.textContent = niceNumber(y);
    svg.appendChild(t);
  }
  for (const [x, anchor] of [[x0, "start"], [x1, "end"]]) {
    const t = svgEl("text", { x: sx(x), y: H - 6, "text-anchor": anchor,
      class: "dflab-tick-label" });
    t.textContent = `step ${x}`;
    svg.appendChild(t);
  }
  const d = finite.map((p, i) => `${i ? "L" : "M"}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`);
  svg.appendChild(svgEl("path", { d: d.join(""), class: "dflab-line" }));
  return box;
}

function render({ model, el: host }) {
  const root = widgetRoot(host, "monitor");
  const title = el("div", "dflab-title");
  const progress = el("div", "dflab-progress");
  const fill = el("div", "dflab-progress-fill");
  progress.appendChild(fill);
  const status = el("div", "dflab-status");
  const curves = el("div", "dflab-curves");
  root.append(title, progress, status, curves);
  const show = () => {
    title.textContent = model.get("title") || "";
    status.textContent = model.get("status") || "";
    const total = model.get("total");
    progress.hidden = !total;
    const frac = total ? Math.min(model.get("step") / total, 1) : 0;
    fill.style.width = `${(100 * frac).toFixed(1)}%`;
    progress.title = total ? `${model.get("step")} of ${total}` : "";
    clear(curves);
    for (const [name, points] of Object.entries(model.get("curves") || {})) {
      curves.appendChild(chart(name, points));
    }
  };
  for (const name of ["curves", "status", "step", "total", "title"]) {
    model.on(`change:${name}`, show);
  }
  show();
  return () => host.replaceChildren();
}

export default { render };
