// Pan and zoom of an <svg> by rewriting its viewBox. The view is kept in the drawing's own
// units together with the size of the box that shows it, so its scale (screen pixels per
// drawing unit) is known: resizing the box keeps the scale and the top-left corner, which is
// what a user expects when dragging the canvas taller. Dragging pans; the wheel pans (and
// hands the scroll back to the page at the drawing's edges); Ctrl/⌘ + wheel or a pinch zooms
// around the pointer. Only the viewBox attribute changes, so the cost does not grow with the
// number of nodes.

const MIN_SIZE = 8; // drawing units: closer than this is never useful

// onChange(touched) is called after every change of the view; `touched` says whether the
// user moved it (a drag, the wheel, the zoom buttons) since it was last set by show().
export function panZoom(svg, { maxZoomOut = 4, onChange } = {}) {
  const base = svg.viewBox.baseVal;
  const home = { x: base.x, y: base.y, w: base.width || 100, h: base.height || 100 };
  let view = { ...home };
  let box = { w: 0, h: 0 }; // pixels of the element showing the view
  let drag = null;
  let dragged = false; // the last gesture was a drag (its click must not select a node)
  let touched = false;

  const apply = () => {
    svg.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`);
    onChange?.(touched);
  };
  // Pixels per drawing unit; with preserveAspectRatio "meet" the tighter axis decides.
  const scale = () => (box.w > 0 ? Math.min(box.w / view.w, box.h / view.h) : 1);

  const toUser = (clientX, clientY) => {
    const ctm = svg.getScreenCTM();
    if (!ctm) return { x: view.x + view.w / 2, y: view.y + view.h / 2 };
    const p = new DOMPoint(clientX, clientY).matrixTransform(ctm.inverse());
    return { x: p.x, y: p.y };
  };

  // Scale the view by k around the user-space point p (which stays under the pointer).
  const zoomAt = (k, p) => {
    const w = Math.min(Math.max(view.w * k, MIN_SIZE), home.w * maxZoomOut);
    k = w / view.w;
    touched = true;
    view = { x: p.x - k * (p.x - view.x), y: p.y - k * (p.y - view.y), w, h: view.h * k };
    apply();
  };

  // Moves the view by (dx, dy) drawing units without leaving the drawing; returns whether it
  // moved (when it cannot, the wheel scrolls the page instead).
  const panWithin = (dx, dy) => {
    const clamp = (v, lo, hi) => (lo > hi ? v : Math.min(Math.max(v, lo), hi));
    const x = clamp(view.x + dx, Math.min(view.x, home.x), Math.max(view.x,
      home.x + home.w - view.w));
    const y = clamp(view.y + dy, Math.min(view.y, home.y), Math.max(view.y,
      home.y + home.h - view.h));
    const moved = Math.abs(x - view.x) > 1e-6 || Math.abs(y - view.y) > 1e-6;
    view = { ...view, x, y };
    if (moved) {
      touched = true;
      apply();
    }
    return moved;
  };

  const onWheel = (ev) => {
    if (ev.ctrlKey || ev.metaKey) {
      ev.preventDefault();
      const k = Math.exp(Math.max(-0.5, Math.min(0.5, ev.deltaY / 300)));
      zoomAt(k, toUser(ev.clientX, ev.clientY));
      return;
    }
    const px = ev.deltaMode === 1 ? 16 : ev.deltaMode === 2 ? box.h : 1; // lines, pages
    const s = scale();
    if (panWithin((ev.deltaX * px) / s, (ev.deltaY * px) / s)) ev.preventDefault();
  };
  const onDown = (ev) => {
    if (ev.button !== 0) return;
    dragged = false;
    drag = { x: ev.clientX, y: ev.clientY, view: { ...view }, moved: false, id: ev.pointerId };
  };
  const onMove = (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x;
    const dy = ev.clientY - drag.y;
    if (!drag.moved && Math.hypot(dx, dy) < 4) return; // a click, not a drag
    if (!drag.moved) svg.setPointerCapture?.(drag.id);
    drag.moved = true;
    touched = true;
    const s = scale();
    view = { ...drag.view, x: drag.view.x - dx / s, y: drag.view.y - dy / s };
    apply();
  };
  const onUp = () => {
    dragged = drag?.moved ?? false;
    drag = null;
  };

  svg.addEventListener("wheel", onWheel, { passive: false });
  svg.addEventListener("pointerdown", onDown);
  svg.addEventListener("pointermove", onMove);
  svg.addEventListener("pointerup", onUp);
  svg.addEventListener("pointercancel", onUp);
  apply();

  return {
    // The whole drawing, however small that makes it.
    fit() {
      touched = true;
      view = { ...home };
      apply();
    },
    // Shows the drawing at `s` pixels per unit in a box of w × h pixels, centred where it
    // fits, else from its top-left corner, where its legend and its inputs are.
    show(s, w, h) {
      box = { w, h };
      const vw = w / s;
      const x = vw >= home.w ? home.x - (vw - home.w) / 2 : home.x;
      const vh = h / s;
      const y = vh >= home.h ? home.y - (vh - home.h) / 2 : home.y;
      view = { x, y, w: vw, h: vh };
      touched = false;
      apply();
    },
    // The box showing the view changed size: same scale, same top-left corner.
    resize(w, h) {
      const s = scale();
      box = { w, h };
      view = { ...view, w: w / s, h: h / s };
      apply();
    },
    zoom(k) {
      zoomAt(k, { x: view.x + view.w / 2, y: view.y + view.h / 2 });
    },
    // Centres the view on (x, y), in drawing units, at the same scale (the minimap).
    centerOn(x, y) {
      touched = true;
      view = { ...view, x: x - view.w / 2, y: y - view.h / 2 };
      apply();
    },
    // True right after a drag: the click event that follows a drag must not select a node.
    wasDrag() {
      return dragged;
    },
    // Whether the whole drawing is inside the view.
    showsAll() {
      const e = 0.5;
      return view.x <= home.x + e && view.y <= home.y + e
        && view.x + view.w >= home.x + home.w - e && view.y + view.h >= home.y + home.h - e;
    },
    scale,
    touched: () => touched,
    size: () => ({ w: home.w, h: home.h }),
    home: () => ({ ...home }),
    view: () => ({ ...view }),
  };
}
