// Overview: jobs per second (live, from the events stream), queue depths, the DLQ, workers, and the job types with
// their circuits and pauses (an admin pauses and resumes a type here).
import { api } from "../api.js";
import { lineChart, RateWindow } from "../chart.js";
import { action, badge, errorLine, every, h, replace, section, table } from "../dom.js";
import { follow } from "../sse.js";
import { dlqStats } from "./dlq.js";

const SECONDS = 60;
const REFRESH_MS = 3000;
const FINISHED = new Set(["job.succeeded", "job.dead_lettered", "job.cancelled"]);

function throughput(signal) {
  const submitted = new RateWindow(SECONDS);
  const finished = new RateWindow(SECONDS);
  const chart = h("div", { class: "chart-box", id: "throughput" });
  const legend = h("p", { class: "legend" });
  const draw = () => {
    const series = [
      { name: "submitted", values: submitted.values() },
      { name: "finished", values: finished.values() },
    ];
    replace(chart, lineChart(series, { seconds: SECONDS }));
    const total = (values) => values.reduce((sum, v) => sum + v, 0);
    replace(
      legend,
      series.map((s, i) =>
        h("span", { class: `key series-${i}`, "data-series": s.name }, `${s.name} ${total(s.values)} in ${SECONDS} s`),
      ),
    );
  };
  // A job counts as submitted at its first status change (seq 1: queued, or running when the broker's confirm came
  // late, or waiting for a workflow's job), as finished at a terminal status. A workflow's own end is no job's.
  const onMessage = ({ event, data }) => {
    if (!event.startsWith("job.")) return;
    if (data.seq === 1) submitted.add();
    if (FINISHED.has(event)) finished.add();
  };
  const problem = h("div");
  follow("/api/v1/events/stream", onMessage, {
    signal,
    onOpen: () => (chart.dataset.live = "on"),
    onError: (error) => replace(problem, errorLine(error)),
  });
  draw();
  every(1000, draw, signal);
  return section("Jobs per second (since this page opened)", chart, legend, problem);
}

function refreshed(title, load, draw, signal) {
  const body = h("div", { class: "figures" });
  const refresh = async () => {
    try {
      replace(body, draw(await load(), refresh));
    } catch (error) {
      if (!signal.aborted) replace(body, errorLine(error));
    }
  };
  refresh();
  every(REFRESH_MS, refresh, signal);
  return section(title, body);
}

// Lanes and their delay tiers as one grid: a row per lane, a column per tier ("jobs.default.retry.240ms").
function queueTable(answer) {
  const rows = new Map();
  const tiers = new Set();
  for (const { queue, ready, consumers } of answer.items) {
    const [base, tier] = queue.split(".retry.");
    const row = rows.get(base) || { queue: base, ready: null, consumers: null, tiers: {} };
    if (tier) {
      row.tiers[tier] = ready;
      tiers.add(tier);
    } else Object.assign(row, { ready, consumers });
    rows.set(base, row);
  }
  const columns = [
    { title: "queue", render: (r) => (r.consumers === null ? `${r.queue} (retry tiers)` : r.queue) },
    { title: "ready", key: "ready", class: "num" },
    { title: "consumers", key: "consumers", class: "num" },
    ...[...tiers]
      .sort((a, b) => parseFloat(a) - parseFloat(b))
      .map((tier) => ({ title: `retry ${tier}`, render: (r) => r.tiers[tier], class: "num" })),
  ];
  return h("div", { id: "queue-depths" }, table(columns, [...rows.values()], (r) => ({ "data-queue": r.queue })));
}

function workerTable(answer) {
  const columns = [
    { title: "worker", key: "name" },
    { title: "process", key: "process" },
    { title: "state", render: (w) => badge(w.state) },
    { title: "in flight", key: "in_flight", class: "num" },
    { title: "per second", render: (w) => w.processing_rate.toFixed(1), class: "num" },
  ];
  return table(columns, answer.items);
}

async function loadJobTypes(signal) {
  const [circuits, types] = await Promise.all([
    api("/api/v1/circuits", { signal }),
    api("/api/v1/job-types", { signal }),
  ]);
  const byType = new Map(circuits.map((c) => [c.job_type, c]));
  return types.items.map((t) => ({ ...t, circuit: byType.get(t.name) }));
}

// Pause or resume a job type in every process (admin); the table is read again once the API has answered.
function steer(type, reload) {
  const verb = type.paused ? "resume" : "pause";
  const run = () => api(`/api/v1/job-types/${type.name}/${verb}`, { method: "POST" }).then(reload);
  if (type.paused) return action("Resume", run, { done: `Resuming ${type.name}…` });
  return action("Pause", run, {
    kind: "danger",
    confirm: `Pause ${type.name}? No new job of it starts in any process until it is resumed; its jobs wait.`,
    done: `Pausing ${type.name}…`,
  });
}

function jobTypeTable(admin) {
  return (types, reload) => {
    const columns = [
      { title: "job type", key: "name" },
      { title: "state", render: (t) => badge(t.paused ? "paused" : "active"), class: "state" },
      { title: "queued", key: "queued", class: "num" },
      { title: "running", key: "running", class: "num" },
      { title: "circuit", render: (t) => (t.circuit ? badge(t.circuit.state) : "—") },
      { title: "failures / calls", render: (t) => (t.circuit ? `${t.circuit.failures} / ${t.circuit.calls}` : "—") },
    ];
    if (admin) columns.push({ title: "", render: (t) => steer(t, reload) });
    return h("div", { id: "job-types" }, table(columns, types, (t) => ({ "data-job-type": t.name })));
  };
}

export async function render(view, { who, signal }) {
  view.append(h("h1", {}, "Overview"), throughput(signal));
  view.append(refreshed("Dead-letter queue", () => api("/api/v1/dlq/stats", { signal }), dlqStats, signal));
  if (who.admin) {
    view.append(refreshed("Queues", () => api("/api/v1/queues", { signal }), queueTable, signal));
    view.append(refreshed("Workers", () => api("/api/v1/workers", { signal }), workerTable, signal));
  }
  view.append(refreshed("Job types and circuits", () => loadJobTypes(signal), jobTypeTable(who.admin), signal));
}
