// A word-sized trend in SVG: one polyline over the values, oldest first, the last one marked.
import { svg } from "./dom.js";

const WIDTH = 120;
const HEIGHT = 28;

export function sparkline(values, label) {
  const top = Math.max(1, ...values);
  const x = (i) => 1 + (i * (WIDTH - 2)) / Math.max(1, values.length - 1);
  const y = (v) => HEIGHT - 2 - (v * (HEIGHT - 4)) / top;
  const root = svg("svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: "sparkline", role: "img" });
  root.append(svg("title", {}, label));
  root.append(svg("polyline", { points: values.map((v, i) => `${x(i)},${y(v)}`).join(" "), class: "trend" }));
  if (values.length) root.append(svg("circle", { cx: x(values.length - 1), cy: y(values.at(-1)), r: 2.5 }));
  return root;
}
