// Pan and zoom of an <svg> by rewriting its viewBox: wheel zooms around the pointer, dragging
// pans, fit() restores the whole drawing. Only the viewBox attribute changes, so the cost does
// not grow with the number of nodes.

const MIN_SIZE = 8; // user units: closer than this is never useful

export function panZoom(svg, { maxZoomOut = 4 } = {}) {
  const base = svg.viewBox.baseVal;
  const home = { x: base.x, y: base.y, w: base.width || 100, h: base.height || 100 };
  let view = { ...home };
  let drag = null;
  let dragged = false; // the last gesture was a drag (its click must not select a node)

  const apply = () => svg.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`);

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
    view = { x: p.x - k * (p.x - view.x), y: p.y - k * (p.y - view.y), w, h: view.h * k };
    apply();
  };

  const onWheel = (ev) => {
    ev.preventDefault();
    const k = Math.exp(Math.max(-0.5, Math.min(0.5, ev.deltaY / 600)));
    zoomAt(k, toUser(ev.clientX, ev.clientY));
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
    const scale = svg.getScreenCTM()?.a || 1;
    view = { ...drag.view, x: drag.view.x - dx / scale, y: drag.view.y - dy / scale };
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
    fit() {
      view = { ...home };
      apply();
    },
    zoom(k) {
      zoomAt(k, { x: view.x + view.w / 2, y: view.y + view.h / 2 });
    },
    // True right after a drag: the click event that follows a drag must not select a node.
    wasDrag() {
      return dragged;
    },
    view: () => ({ ...view }),
  };
}
