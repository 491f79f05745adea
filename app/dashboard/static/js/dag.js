// A workflow's jobs as a graph in SVG: a column per layer (the longest chain of dependencies into a job), an edge
// from each dependency to its dependent, each node a link to its job, coloured by the job's status.
import { h, svg } from "./dom.js";
import { JOB_STATUSES } from "./statuses.js";

const NODE = { width: 168, height: 46 };
const GAP = { x: 64, y: 16 };
const PAD = 8;
const CHARACTERS = 22; // of a line in a node; longer ones end in "…" (the node's title has them whole)

// Each ref's layer: 0 without dependencies, else one more than the deepest of its dependencies.
export function layers(entries) {
  const byRef = new Map(entries.map((entry) => [entry.ref, entry]));
  const layer = new Map();
  const depth = (ref) => {
    if (!layer.has(ref)) {
      const parents = (byRef.get(ref)?.depends_on ?? []).filter((parent) => byRef.has(parent));
      layer.set(ref, parents.length ? 1 + Math.max(...parents.map(depth)) : 0);
    }
    return layer.get(ref);
  };
  for (const entry of entries) depth(entry.ref);
  return layer;
}

// The slots of each layer: a job's node, or a waypoint of an edge that skips layers, so that the edge passes
// between the nodes of those layers rather than through them.
function slots(entries, layer) {
  const columns = Array.from({ length: Math.max(0, ...layer.values()) + 1 }, () => []);
  const routes = [];
  for (const entry of entries) {
    columns[layer.get(entry.ref)].push({ key: entry.ref, parents: entry.depends_on.filter((ref) => layer.has(ref)) });
    for (const parent of entry.depends_on.filter((ref) => layer.has(ref))) {
      const via = [];
      for (let l = layer.get(parent) + 1; l < layer.get(entry.ref); l++) {
        const key = `${parent}>${entry.ref}@${l}`;
        columns[l].push({ key, parents: [via.at(-1) ?? parent] });
        via.push(key);
      }
      routes.push({ from: parent, to: entry.ref, via });
    }
  }
  return { columns, routes };
}

// Where each slot sits: its layer's column, and in it a row ordered by the mean row of what it follows, which
// keeps most edges from crossing; columns are centred on the tallest.
export function place(entries) {
  const layer = layers(entries);
  const { columns, routes } = slots(entries, layer);
  const row = new Map();
  const mean = (slot) => {
    const rows = slot.parents.filter((key) => row.has(key)).map((key) => row.get(key));
    return rows.length ? rows.reduce((sum, r) => sum + r, 0) / rows.length : 0;
  };
  for (const column of columns) {
    column.sort((a, b) => mean(a) - mean(b)); // stable: the workflow's own order breaks ties
    column.forEach((slot, index) => row.set(slot.key, index));
  }
  const tallest = Math.max(1, ...columns.map((column) => column.length));
  const at = new Map();
  columns.forEach((column, index) => {
    const offset = ((tallest - column.length) * (NODE.height + GAP.y)) / 2;
    for (const slot of column) {
      const y = PAD + offset + row.get(slot.key) * (NODE.height + GAP.y);
      at.set(slot.key, { x: PAD + index * (NODE.width + GAP.x), y, layer: index });
    }
  });
  const width = 2 * PAD + columns.length * NODE.width + (columns.length - 1) * GAP.x;
  const height = 2 * PAD + tallest * NODE.height + (tallest - 1) * GAP.y;
  return { at, routes, width, height };
}

function clip(text) {
  return text.length > CHARACTERS ? `${text.slice(0, CHARACTERS - 1)}…` : text;
}

function arrowhead() {
  const marker = svg("marker", {
    id: "dag-arrow",
    viewBox: "0 0 10 10",
    refX: 10,
    refY: 5,
    markerWidth: 7,
    markerHeight: 7,
    orient: "auto",
  });
  marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow" }));
  const defs = svg("defs");
  defs.append(marker);
  return defs;
}

// A curve across each gap between layers, straight through each layer the edge skips.
function edge(route, at) {
  const middle = (key) => at.get(key).y + NODE.height / 2;
  const bend = GAP.x / 2;
  let [x, y] = [at.get(route.from).x + NODE.width, middle(route.from)];
  let d = `M ${x} ${y}`;
  for (const key of [...route.via, route.to]) {
    const [x2, y2] = [at.get(key).x, middle(key)];
    d += ` C ${x + bend} ${y}, ${x2 - bend} ${y2}, ${x2} ${y2}`;
    [x, y] = [x2 + NODE.width, y2];
    if (key !== route.to) d += ` L ${x} ${y}`;
  }
  const ends = { "data-from": route.from, "data-to": route.to };
  return svg("path", { d, class: "edge", "marker-end": "url(#dag-arrow)", ...ends });
}

function node(entry, { x, y, layer }) {
  const { id } = entry.job;
  const link = svg("a", { href: `#/jobs/${id}`, class: "node", "data-job-id": id, "data-ref": entry.ref });
  link.dataset.layer = layer;
  link.append(
    svg("title"),
    svg("rect", { x, y, width: NODE.width, height: NODE.height, rx: 6 }),
    svg("text", { x: x + 10, y: y + 19, class: "ref" }, clip(entry.ref)),
    svg("text", { x: x + 10, y: y + 36, class: "detail" }),
  );
  return link;
}

// Show `job`'s status on its node, and on the edges out of it whether that dependency is met.
export function paint(graph, job) {
  const link = graph.querySelector(`a.node[data-job-id="${job.id}"]`);
  if (!link) return;
  link.setAttribute("class", `node fill-${job.status}`);
  link.dataset.status = job.status;
  link.querySelector("title").textContent = `${link.dataset.ref}: ${job.job_type}, ${job.status}`;
  link.querySelector("text.detail").textContent = clip(`${job.job_type} · ${job.status}`);
  for (const path of graph.querySelectorAll(`path.edge[data-from="${link.dataset.ref}"]`)) {
    path.classList.toggle("met", job.status === "succeeded");
  }
}

// The graph of a workflow's `jobs` entries ({ref, job, depends_on: [refs]}).
export function dag(entries) {
  const { at, routes, width, height } = place(entries);
  const label = `${entries.length} jobs, each after the jobs it depends on`;
  const graph = svg("svg", { class: "dag", id: "workflow-dag", width, height, role: "img", "aria-label": label });
  graph.append(arrowhead());
  for (const route of routes) graph.append(edge(route, at));
  for (const entry of entries) graph.append(node(entry, at.get(entry.ref)));
  for (const entry of entries) paint(graph, entry.job);
  return graph;
}

export function legend() {
  const keys = JOB_STATUSES.map((status) => h("span", { class: `key fill-${status}`, "data-status": status }, status));
  return h("p", { class: "legend dag-legend", id: "dag-legend" }, keys);
}
