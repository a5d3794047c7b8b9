// The node detail panel: a node's op, attributes, shapes, dtype, devices with the placement
// reason, creation site and last value. Built from the layout's node info, so the same code
// serves the widgets (with a kernel) and the MIME renderer (without one). Text only.

import { clear, el } from "./dom.js";

const FIELDS = [
  ["op", "op_type"],
  ["ops inside", "n_ops"],
  ["op types", "op_types"],
  ["fused ops", "fused_ops"],
  ["expression", "expression"],
  ["dtypes", "dtypes"],
  ["shapes", "output_shapes"],
  ["requested device", "device"],
  ["assigned device", "assigned_device"],
  ["placement", "placement_reason"],
  ["devices", "devices"],
  ["created at", "site"],
  ["loop frame", "frame"],
  ["state", "state"],
  ["last value", "value"],
  ["time", "time_us"],
  ["output bytes", "output_bytes"],
];

export function asText(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "string") return v;
  if (Array.isArray(v)) return v.map(asText).join(", ");
  if (typeof v === "object") {
    return Object.entries(v).map(([k, x]) => `${k}: ${asText(x)}`).join(", ");
  }
  return String(v);
}

// A fused node's ops read as "mul (Mul), add (AddV2)", in the order they run.
function fusedText(ops) {
  return ops.map((o) => (o && o.name ? `${o.name} (${o.op_type})` : asText(o))).join(", ");
}

function row(list, label, value) {
  if (label === "ops inside" && value === 1) return;
  const text = label === "time" && typeof value === "number" ? `${value} \u00b5s`
    : label === "fused ops" && Array.isArray(value) ? fusedText(value) : asText(value);
  if (!text) return;
  const field = el("div", "dflab-field");
  field.append(el("div", "dflab-field-label", label), el("div", "dflab-field-value", text));
  list.appendChild(field);
}

export function renderDetail(panel, detail, { empty = "Click a node for its details." } = {}) {
  clear(panel);
  if (!detail || !detail.name) {
    panel.appendChild(el("div", "dflab-muted", empty));
    return;
  }
  const title = el("div", "dflab-detail-title", detail.name);
  if (detail.kind === "scope" || detail.kind === "fused") {
    title.appendChild(el("span", "dflab-tag", detail.kind));
  }
  panel.appendChild(title);
  const dl = el("div", "dflab-fields");
  for (const [label, key] of FIELDS) row(dl, label, detail[key]);
  panel.appendChild(dl);
  const attrs = detail.attrs && typeof detail.attrs === "object" ? Object.entries(detail.attrs) : [];
  if (attrs.length) {
    panel.appendChild(el("div", "dflab-subtitle", "attributes"));
    const adl = el("div", "dflab-fields");
    for (const [k, v] of attrs) row(adl, k, v);
    panel.appendChild(adl);
  }
}
