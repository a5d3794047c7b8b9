// Inserting Graphviz SVG safely. Graphviz escapes the text it writes, but the SVG still passes
// through DOMParser + importNode (never innerHTML), and anything that could run code is removed
// defensively: script and foreignObject elements, on* attributes, and javascript: links.

const FORBIDDEN = new Set(["script", "foreignobject", "iframe", "object", "embed", "use"]);

function scrub(node) {
  const walker = node.ownerDocument.createTreeWalker(node, 1 /* elements */);
  const doomed = [];
  for (let cur = walker.currentNode; cur; cur = walker.nextNode()) {
    if (FORBIDDEN.has(cur.localName.toLowerCase())) {
      doomed.push(cur);
      continue;
    }
    for (const attr of Array.from(cur.attributes)) {
      const name = attr.name.toLowerCase();
      const value = attr.value.replace(/\s+/g, "").toLowerCase();
      if (name.startsWith("on")) cur.removeAttribute(attr.name);
      else if ((name === "href" || name.endsWith(":href")) && value.startsWith("javascript:")) {
        cur.removeAttribute(attr.name);
      }
    }
  }
  for (const d of doomed) d.remove();
}

// Parses `text` and returns an <svg> element owned by `doc`, or null when it is not an SVG.
export function importSvg(text, doc = document) {
  if (!text) return null;
  const parsed = new DOMParser().parseFromString(text, "image/svg+xml");
  const root = parsed.documentElement;
  if (!root || root.localName !== "svg" || parsed.getElementsByTagName("parsererror").length) {
    return null;
  }
  scrub(root);
  const svg = doc.importNode(root, true);
  // Graphviz writes a fixed size in points; the widget sizes the drawing itself.
  svg.removeAttribute("width");
  svg.removeAttribute("height");
  svg.setAttribute("preserveAspectRatio", "xMidYMid meet");
  return svg;
}
