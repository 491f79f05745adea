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
  { title: "last cycle", render: (w) => (w.last_cycle_duration_ms === null ? "—" : `${w.last_cycle_duration_ms.toFixed(0)} ms`), class: "num" },
  { title: "circuit", key: "circuit_breaker_state" },
  { title: "heartbeat", render: (w) => when(w.last_heartbeat) },
];

function group(name, entries, reload) {
  const command = (verb) => () => api(`/api/v1/workers/${name}/${verb}`, { method: "POST" }).then(reload);
  return h(
    "section",
    { class: "panel worker", "data-worker": name },
    h(
      "header",
      { class: "row" },
      h("h2", {}, name),
      action("Stop", command("stop"), { kind: "danger", confirm: `Stop ${name} in every process? It stays stopped, even across restarts, until started again.`, done: `Stopping ${name}…` }),
      action("Start", command("start"), { done: `Starting ${name}…` }),
    ),
    table(FIGURES, entries, (w) => ({ "data-process": w.process })),
  );
}

export async function render(view, { signal }) {
  const body = h("div", { id: "workers" });
  view.append(h("h1", {}, "Workers"), h("p", { class: "hint" }, "Every worker of every process that heartbeats."), body);
  const draw = (answer) => {
    const byName = Map.groupBy(answer.items, (w) => w.name);
    const names = [...byName.keys()].sort();
    replace(body, names.length ? names.map((name) => group(name, byName.get(name), reload)) : h("p", { class: "empty" }, "No process is heartbeating."));
  };
  const reload = async () => draw(await api("/api/v1/workers", { signal }));
  await reload();
  every(REFRESH_MS, () => reload().catch((error) => signal.aborted || replace(body, errorLine(error))), signal);
}
