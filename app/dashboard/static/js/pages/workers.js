// Workers (admin): every worker of every process with its figures; stop and start a worker everywhere.
import { api } from "../api.js";
import { action, badge, errorLine, every, h, replace, table, when } from "../dom.js";

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

// One worker name across processes; Stop while any runs, Start while any does not.
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
  return h(
    "section",
    { class: "panel worker", "data-worker": name },
    h(
      "header",
      { class: "row" },
      h("h2", {}, name),
      stop,
      start,
    ),
    table(FIGURES, entries, (w) => ({ "data-process": w.process })),
  );
}

export async function render(view, { signal }) {
  const body = h("div", { id: "workers" });
  const hint = h("p", { class: "hint" }, "Every worker of every process that heartbeats.");
  view.append(h("h1", {}, "Workers"), hint, body);
  const draw = (answer) => {
    const byName = Map.groupBy(answer.items, (w) => w.name);
    const names = [...byName.keys()].sort();
    if (!names.length) return replace(body, h("p", { class: "empty" }, "No process is heartbeating."));
    replace(body, names.map((name) => group(name, byName.get(name), reload)));
  };
  const reload = async () => draw(await api("/api/v1/workers", { signal }));
  await reload();
  every(REFRESH_MS, () => reload().catch((error) => signal.aborted || replace(body, errorLine(error))), signal);
}
