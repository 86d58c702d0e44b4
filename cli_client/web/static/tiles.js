// Domino tiles as SVG, each labelled with its numbers ("3-5") for screen readers.
const SVG = "http://www.w3.org/2000/svg";
const PIPS = {
  0: [],
  1: [[1, 1]],
  2: [[0, 0], [2, 2]],
  3: [[0, 0], [1, 1], [2, 2]],
  4: [[0, 0], [0, 2], [2, 0], [2, 2]],
  5: [[0, 0], [0, 2], [1, 1], [2, 0], [2, 2]],
  6: [[0, 0], [0, 1], [0, 2], [2, 0], [2, 1], [2, 2]],
};

function el(name, attrs) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

// A tile showing `a` then `b` (left to right, or top to bottom when vertical).
export function tile(a, b, { vertical = false, label = `${a}-${b}` } = {}) {
  const w = vertical ? 30 : 60;
  const h = vertical ? 60 : 30;
  const svg = el("svg", {
    viewBox: `0 0 ${w} ${h}`, width: w, height: h, role: "img", "aria-label": label,
    class: "tile",
  });
  const title = el("title", {});
  title.textContent = label;
  svg.append(title);
  svg.append(el("rect", { x: 1, y: 1, width: w - 2, height: h - 2, rx: 4, class: "face" }));
  svg.append(vertical
    ? el("line", { x1: 4, y1: 30, x2: 26, y2: 30, class: "bar" })
    : el("line", { x1: 30, y1: 4, x2: 30, y2: 26, class: "bar" }));
  [a, b].forEach((n, half) => {
    for (const [r, c] of PIPS[n] || []) {
      const ox = vertical ? 0 : half * 30;
      const oy = vertical ? half * 30 : 0;
      svg.append(el("circle", { cx: ox + 7 + c * 8, cy: oy + 7 + r * 8, r: 2.6, class: "pip" }));
    }
  });
  return svg;
}

// The line, left to right, doubles across it; an ordered list for assistive technology.
export function line(tiles) {
  const list = document.createElement("ol");
  list.className = "line";
  list.setAttribute("aria-label", tiles.length ? `the line: ${tiles.length} tiles` : "the line is empty");
  for (const t of tiles) {
    const item = document.createElement("li");
    item.append(tile(t.left, t.right, { vertical: t.left === t.right }));
    list.append(item);
  }
  return list;
}
