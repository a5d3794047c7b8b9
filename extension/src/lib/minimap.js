// The overview of a drawing too big to show whole (TensorBoard's minimap): a small copy of the
// whole drawing, without its texts, with a rectangle where the view is. It is shown only while
// part of the drawing is out of view; a click or a drag on it moves the view there.

import { clear, el, svgEl } from "./dom.js";

const WIDTH_PX = 170;
const MAX_HEIGHT_PX = 130;

export class Minimap {
  // onMove(x, y): centre the view on (x, y), in drawing units.
  constructor(parent, { onMove } = {}) {
    this.onMove = onMove;
    this.root = el("div", "dflab-minimap");
    this.root.hidden = true;
    this.root.title = "Where the view is: click or drag to move it";
    parent.appendChild(this.root);
    this.copy = null;
    this.rect = null;
    let dragging = false;
    const move = (ev) => {
      const p = this._toDrawing(ev.clientX, ev.clientY);
      if (p) this.onMove?.(p.x, p.y);
    };
    this.root.addEventListener("pointerdown", (ev) => {
      if (ev.button !== 0) return;
      dragging = true;
      this.root.setPointerCapture?.(ev.pointerId);
      move(ev);
      ev.preventDefault();
      ev.stopPropagation();
    });
    this.root.addEventListener("pointermove", (ev) => {
      if (dragging) move(ev);
    });
    const stop = () => {
      dragging = false;
    };
    this.root.addEventListener("pointerup", stop);
    this.root.addEventListener("pointercancel", stop);
    // A click here is not a click on the drawing below (no node selected, no scope opened).
    this.root.addEventListener("click", (ev) => ev.stopPropagation());
  }

  // A new drawing (`svg`, already scrubbed and inserted) whose whole extent is `home`.
  setDrawing(svg, home) {
    clear(this.root);
    this.copy = null;
    this.rect = null;
    if (!svg || !home || !(home.w > 0 && home.h > 0)) return;
    const copy = svg.cloneNode(true);
    for (const t of copy.querySelectorAll("text, title")) t.remove();
    // A picture only: no ids or classes that would make its nodes the drawing's nodes.
    for (const e of [copy, ...copy.querySelectorAll("[id], [class]")]) {
      e.removeAttribute("id");
      e.removeAttribute("class");
    }
    copy.setAttribute("class", "dflab-minimap-svg");
    copy.setAttribute("viewBox", `${home.x} ${home.y} ${home.w} ${home.h}`);
    copy.setAttribute("preserveAspectRatio", "xMidYMid meet");
    const aspect = home.h / home.w;
    const w = Math.min(WIDTH_PX, MAX_HEIGHT_PX / aspect);
    copy.style.width = `${Math.round(w)}px`;
    copy.style.height = `${Math.round(w * aspect)}px`;
    this.rect = svgEl("rect", { class: "dflab-minimap-view" });
    copy.appendChild(this.rect);
    this.root.appendChild(copy);
    this.copy = copy;
  }

  // The view moved: where it is now; hidden while the whole drawing is in view.
  update(view, showsAll) {
    this.root.hidden = showsAll || !this.copy;
    if (!this.rect || !view) return;
    this.rect.setAttribute("x", view.x);
    this.rect.setAttribute("y", view.y);
    this.rect.setAttribute("width", Math.max(view.w, 1));
    this.rect.setAttribute("height", Math.max(view.h, 1));
  }

  _toDrawing(clientX, clientY) {
    const ctm = this.copy?.getScreenCTM();
    if (!ctm) return null;
    const p = new DOMPoint(clientX, clientY).matrixTransform(ctm.inverse());
    return { x: p.x, y: p.y };
  }
}
