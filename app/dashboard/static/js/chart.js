// A small live line chart in SVG: one polyline per series over the last N seconds.
import { svg } from "./dom.js";

const WIDTH = 600;
const HEIGHT = 160;
const PAD = 28;

// `seconds` points per series, one a second unless `step` says how many seconds a point spans (60: a minute).
export function lineChart(series, { seconds, step = 1 }) {
  const unit = step === 60 ? "/min" : "/s";
  const span = step === 60 ? `-${seconds} min` : `-${seconds * step}s`;
  const top = Math.max(1, ...series.flatMap((s) => s.values));
  const x = (i) => PAD + (i * (WIDTH - 2 * PAD)) / Math.max(1, seconds - 1);
  const y = (v) => HEIGHT - PAD - (v * (HEIGHT - 2 * PAD)) / top;
  const root = svg("svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: "chart", role: "img" });
  root.append(svg("title", {}, series.map((s) => `${s.name}: ${s.values.at(-1) ?? 0}${unit}`).join(", ")));
  root.append(svg("line", { x1: PAD, y1: y(0), x2: WIDTH - PAD, y2: y(0), class: "axis" }));
  root.append(svg("line", { x1: PAD, y1: y(top), x2: WIDTH - PAD, y2: y(top), class: "grid" }));
  root.append(svg("text", { x: 2, y: y(top) + 4, class: "label" }, String(top)));
  root.append(svg("text", { x: 2, y: y(0) + 4, class: "label" }, "0"));
  root.append(svg("text", { x: WIDTH - PAD, y: HEIGHT - 6, class: "label end" }, "now"));
  root.append(svg("text", { x: PAD, y: HEIGHT - 6, class: "label" }, span));
  series.forEach((s, index) => {
    const points = s.values.map((v, i) => `${x(i + seconds - s.values.length)},${y(v)}`).join(" ");
    root.append(svg("polyline", { points, class: `series series-${index}` }));
  });
  return root;
}

// Counts per second over a sliding window of `seconds`.
export class RateWindow {
  constructor(seconds) {
    this.seconds = seconds;
    this.buckets = new Map();
  }

  add(at = Date.now()) {
    const second = Math.floor(at / 1000);
    this.buckets.set(second, (this.buckets.get(second) || 0) + 1);
  }

  values(now = Date.now()) {
    const last = Math.floor(now / 1000);
    for (const second of this.buckets.keys()) if (second <= last - this.seconds) this.buckets.delete(second);
    return Array.from({ length: this.seconds }, (_, i) => this.buckets.get(last - this.seconds + 1 + i) || 0);
  }
}
