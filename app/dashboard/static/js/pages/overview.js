// Overview: jobs per second (live, from the events stream), queue depths, the DLQ, workers and circuits.
import { api } from "../api.js";
import { lineChart, RateWindow } from "../chart.js";
import { badge, errorLine, every, h, replace, section, table } from "../dom.js";
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
  // late), as finished at a terminal status.
  const onMessage = ({ event, data }) => {
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
      replace(body, draw(await load()));
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

function circuitTable(circuits) {
  const columns = [
    { title: "job type", key: "job_type" },
    { title: "circuit", render: (c) => badge(c.state) },
    { title: "failures / calls", render: (c) => `${c.failures} / ${c.calls}` },
  ];
  return table(columns, circuits);
}

export async function render(view, { who, signal }) {
  view.append(h("h1", {}, "Overview"), throughput(signal));
  view.append(refreshed("Dead-letter queue", () => api("/api/v1/dlq/stats", { signal }), dlqStats, signal));
  if (who.admin) {
    view.append(refreshed("Queues", () => api("/api/v1/queues", { signal }), queueTable, signal));
    view.append(refreshed("Workers", () => api("/api/v1/workers", { signal }), workerTable, signal));
  }
  view.append(refreshed("Circuits", () => api("/api/v1/circuits", { signal }), circuitTable, signal));
}
