// Workers (admin): every worker of every process with its figures; stop and start a worker everywhere.
import { api } from "../api.js";
import { action, badge, errorLine, every, h, replace, when } from "../dom.js";

const REFRESH_MS = 2000;
const FIGURES = [
  { title: "process", key: "process" },
  { title: "kind", key: "kind" },
  { title: "state", render: (w) => badge(w.state), class: "state" },
  { title: "consumers", key: "consumers", class: "num" },
  { title: "in flight", key: "in_flight", class: "num" },
  { title: "processed", key: "processed", class: "num" },
  { title: "failed", key: "failed", class: "num" },
  { title: "per second", render: (w) => w.processing_rate.toFixed(2), class: "num" },
  { title: "error rate", render: (w) => `${(w.error_rate * 100).toFixed(1)}%`, class: "num" },
  { title: "last cycle", render: (w) => milliseconds(w.last_cycle_duration_ms), class: "num" },
  { title: "circuit", key: "circuit_breaker_state" },
  { title: "heartbeat", render: (w) => when(w.last_heartbeat) },
];

function milliseconds(value) {
  return value === null ? "—" : `${value.toFixed(0)} ms`;
}

// One worker name across processes: a group of rows in the one table, led by a row with its name, Stop (while
// any runs) and Start (while any does not).
function group(name, entries, reload) {
  const command = (verb) => () => api(`/api/v1/workers/${name}/${verb}`, { method: "POST" }).then(reload);
  const running = entries.filter((w) => w.state === "running").length;
  const stop = action("Stop", command("stop"), {
    kind: "danger",
    disabled: running === 0,
    confirm: `Stop ${name} in every process? It stays stopped, even across restarts, until started again.`,
    done: `Stopping ${name}…`,
  });
  const start = action("Start", command("start"), { disabled: running === entries.length, done: `Starting ${name}…` });
  const lead = h(
    "tr",
    { class: "group" },
    h("th", { scope: "rowgroup", colspan: String(FIGURES.length) }, h("span", { class: "name" }, name), stop, start),
  );
  const rows = entries.map((w) =>
    h(
      "tr",
      { "data-process": w.process },
      FIGURES.map((f) => h("td", { "data-label": f.title, class: f.class }, f.render ? f.render(w) : w[f.key])),
    ),
  );
  return h("tbody", { class: "worker", "data-worker": name }, lead, rows);
}

function workersTable(byName, reload) {
  const head = h("thead", {}, h("tr", {}, FIGURES.map((f) => h("th", { scope: "col" }, f.title))));
  const groups = [...byName.keys()].sort().map((name) => group(name, byName.get(name), reload));
  return h("div", { class: "scroll" }, h("table", { class: "workers" }, head, groups));
}

export async function render(view, { signal }) {
  const body = h("div", { id: "workers" });
  const hint = h("p", { class: "hint" }, "Every worker of every process that heartbeats.");
  view.append(h("h1", {}, "Workers"), hint, body);
  const draw = (answer) => {
    const byName = Map.groupBy(answer.items, (w) => w.name);
    if (!byName.size) return replace(body, h("p", { class: "empty" }, "No process is heartbeating."));
    replace(body, h("section", { class: "panel" }, workersTable(byName, reload)));
  };
  const reload = async () => draw(await api("/api/v1/workers", { signal }));
  await reload();
  every(REFRESH_MS, () => reload().catch((error) => signal.aborted || replace(body, errorLine(error))), signal);
}
