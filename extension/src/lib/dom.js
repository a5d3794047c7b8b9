// Small DOM helpers. Every piece of text that may come from a graph (op names, attributes,
// values) goes through textContent, never innerHTML, so it can never become markup.

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

export function svgEl(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

export function button(action, label, title) {
  const b = el("button", "dflab-button", label);
  b.type = "button";
  if (action) b.dataset.action = action;
  if (title) b.title = title;
  return b;
}

// A root element with the classes the DOM contract promises: dflab-widget plus one per kind.
export function widgetRoot(el_, kind) {
  const root = el("div", `dflab-widget dflab-${kind}`);
  el_.appendChild(root);
  return root;
}

// Runs `fn` at most once per animation frame, with the latest arguments: model change events
// may arrive in bursts, and the DOM only needs the last state.
export function perFrame(fn) {
  let pending = null;
  return (...args) => {
    const first = pending === null;
    pending = args;
    if (!first) return;
    requestAnimationFrame(() => {
      const a = pending;
      pending = null;
      fn(...a);
    });
  };
}
