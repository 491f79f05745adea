// Overview: what an operator reads first, from GET /api/v1/overview (kept server-side, a few seconds old): jobs by
// status as big numbers, the last hour per minute (the events stream adds to the current minute), the DLQ and its
// trend, the endpoints failing now; then, folded on a narrow screen, jobs by type, run time and queue wait, the
// queues (admin), the workers (admin), and the job types with their circuits and pauses (an admin pauses here).
import { api } from "../api.js";
import { lineChart } from "../chart.js";
import { action, badge, errorLine, every, h, replace, section, table, when } from "../dom.js";
import { sparkline } from "../sparkline.js";
import { follow } from "../sse.js";
import { JOB_STATUSES } from "../statuses.js";
import { queueTable } from "./queues.js";

const REFRESH_MS = 3000;
const SUMMARY_MS = 10000;
const MINUTES = 60;
const SERIES = ["submitted", "succeeded", "failed"];
const LIVE = { "job.succeeded": "succeeded", "job.retrying": "failed", "job.dead_lettered": "failed" };

const wide = () => window.matchMedia("(min-width: 641px)").matches;

// A secondary panel: open on a wide screen, folded on a narrow one (its summary is a real, focusable control).
function fold(title, ...children) {
  return h("details", { class: "panel fold", open: wide() }, h("summary", {}, h("h2", {}, title)), children);
}

function seconds(value) {
  if (value === null || value === undefined) return "—";
  if (value < 1) return `${Math.round(value * 1000)} ms`;
  if (value < 120) return `${value.toFixed(1)} s`;
  return `${(value / 60).toFixed(1)} min`;
}

function percent(rate) {
  return rate === null || rate === undefined ? "—" : `${(rate * 100).toFixed(1)} %`;
}

function counts(summary) {
  const figures = JOB_STATUSES.map((status) =>
    h(
      "a",
      { class: `figure status-${status}`, href: `#/jobs?status=${status}`, "data-status": status },
      h("span", { class: "n" }, String(summary.counts[status] ?? 0)),
      h("span", {}, status.replace("_", " ")),
    ),
  );
  return h("div", { class: "figures-grid", id: "status-counts" }, figures);
}

// The last hour per minute from the server; the events stream adds what happens after, to the current minute.
class Minutes {
  constructor() {
    this.base = new Map();
    this.live = new Map();
  }

  load(throughput) {
    this.base = new Map(
      throughput.minutes.map((m) => [
        Math.floor(Date.parse(m.at) / 60000),
        { submitted: m.submitted, succeeded: m.succeeded, failed: m.retrying + m.dead_lettered },
      ]),
    );
    this.live.clear(); // the server's figures now hold what the stream had added
  }

  add(name) {
    const minute = Math.floor(Date.now() / 60000);
    const figures = this.live.get(minute) || { submitted: 0, succeeded: 0, failed: 0 };
    figures[name] += 1;
    this.live.set(minute, figures);
  }

  values(name) {
    const last = Math.floor(Date.now() / 60000);
    return Array.from({ length: MINUTES }, (_, i) => {
      const minute = last - MINUTES + 1 + i;
      return (this.base.get(minute)?.[name] || 0) + (this.live.get(minute)?.[name] || 0);
    });
  }
}

function throughput(minutes, signal) {
  const chart = h("div", { class: "chart-box", id: "throughput", "data-minutes": "0" });
  const rates = h("div", { class: "chart-box small", id: "failure-rate" });
  const legend = h("p", { class: "legend" });
  const draw = () => {
    const series = SERIES.map((name) => ({ name, values: minutes.values(name) }));
    const failure = series[0].values.map((_, i) => {
      const failed = series[2].values[i];
      const ended = failed + series[1].values[i];
      return ended ? Math.round((failed / ended) * 100) : 0;
    });
    replace(chart, lineChart(series, { seconds: MINUTES, step: 60 }));
    replace(rates, lineChart([{ name: "failure %", values: failure }], { seconds: MINUTES, step: 60 }));
    const total = (values) => values.reduce((sum, v) => sum + v, 0);
    chart.dataset.minutes = String(series[0].values.filter((v) => v > 0).length);
    const [submitted, succeeded, failed] = series.map((s) => total(s.values));
    const rate = failed + succeeded ? failed / (failed + succeeded) : null;
    replace(legend, [
      ...series.map((s, i) =>
        h("span", { class: `key series-${i}`, "data-series": s.name }, `${s.name} ${total(s.values)} in the last hour`),
      ),
      h("span", { "data-series": "failure-rate" }, `failure rate ${percent(rate)}`),
    ]);
    chart.dataset.total = String(submitted);
  };
  const onMessage = ({ event, data }) => {
    if (!event.startsWith("job.")) return;
    if (data.seq === 1) minutes.add("submitted");
    if (LIVE[event]) minutes.add(LIVE[event]);
  };
  const problem = h("div");
  follow("/api/v1/events/stream", onMessage, {
    signal,
    onOpen: () => (chart.dataset.live = "on"),
    onError: (error) => replace(problem, errorLine(error)),
  });
  every(1000, draw, signal);
  const panel = section("Last hour, per minute", chart, legend, h("h3", {}, "Failed attempts, % of those ended"), rates);
  panel.append(problem);
  return { panel, draw };
}

function dlq(summary) {
  const { size, last_hour: lastHour, an_hour_ago: before, hourly } = summary.dlq;
  const trend = hourly.map((hour) => hour.dead_lettered);
  return h(
    "div",
    { id: "dlq-stats", class: "dlq-summary" },
    h("a", { href: "#/dlq", class: "figure big" }, h("span", { class: "n" }, String(size)), h("span", {}, "dead-lettered")),
    h(
      "div",
      {},
      h("p", {}, `${lastHour} in the last hour; ${before} an hour ago.`),
      sparkline(trend, `dead-lettered per hour, last 24 h: ${trend.join(", ")}`),
      h("p", { class: "hint" }, "per hour, the last 24 h"),
    ),
  );
}

function failing(summary) {
  const rows = summary.failing_endpoints;
  if (!rows.length) return h("p", { class: "empty", id: "failing-endpoints" }, "No endpoint failing in the last 15 minutes.");
  const columns = [
    { title: "endpoint", render: (e) => h("a", { href: `#/webhooks/${e.id}`, class: "url" }, e.url) },
    { title: "circuit", render: (e) => badge(e.circuit) },
    { title: "failures (15 min)", key: "failures", class: "num" },
    { title: "last error", render: (e) => e.last_error || "—" },
    { title: "last failed", render: (e) => when(e.last_failed_at) },
  ];
  return h("div", { id: "failing-endpoints" }, table(columns, rows, (e) => ({ "data-endpoint-id": e.id })));
}

function byType(summary) {
  const shown = JOB_STATUSES.filter((s) => summary.by_type.some((t) => t.counts[s]));
  const columns = [
    { title: "job type", key: "job_type" },
    ...shown.map((s) => ({ title: s.replace("_", " "), render: (t) => t.counts[s] ?? "—", class: "num" })),
  ];
  return h("div", { id: "by-type" }, table(columns, summary.by_type, (t) => ({ "data-job-type": t.job_type })));
}

function timings(summary) {
  const columns = [
    { title: "job type", key: "job_type" },
    { title: "runs", key: "sample", class: "num" },
    { title: "run p50", render: (t) => seconds(t.run_p50), class: "num" },
    { title: "run p95", render: (t) => seconds(t.run_p95), class: "num" },
    { title: "wait p50", render: (t) => seconds(t.wait_p50), class: "num" },
    { title: "wait p95", render: (t) => seconds(t.wait_p95), class: "num" },
  ];
  const rows = summary.timings.filter((t) => t.sample > 0);
  if (!rows.length) return h("p", { class: "empty", id: "timings" }, "No run finished in the last hour.");
  return h("div", { id: "timings" }, table(columns, rows, (t) => ({ "data-job-type": t.job_type })));
}

function refreshed(load, draw, signal) {
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
  return body;
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
  const byName = new Map(circuits.map((c) => [c.job_type, c]));
  return types.items.map((t) => ({ ...t, circuit: byName.get(t.name) }));
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

// The panels drawn from the summary, each replaced at every read of it.
function summaryPanels(signal, minutes, redraw) {
  const boxes = { counts: h("div"), dlq: h("div"), failing: h("div"), byType: h("div"), timings: h("div") };
  const stamp = h("p", { class: "hint", id: "overview-stamp" });
  const load = async () => {
    try {
      const summary = await api("/api/v1/overview", { signal });
      minutes.load(summary.throughput);
      redraw();
      replace(boxes.counts, counts(summary));
      replace(boxes.dlq, dlq(summary));
      replace(boxes.failing, failing(summary));
      replace(boxes.byType, byType(summary));
      replace(boxes.timings, timings(summary));
      replace(stamp, `Figures read at ${when(summary.generated_at)}; each read is kept ${summary.fresh_for_seconds} s.`);
    } catch (error) {
      if (!signal.aborted) replace(boxes.counts, errorLine(error));
    }
  };
  every(SUMMARY_MS, load, signal);
  return { boxes, stamp, loaded: load() };
}

export async function render(view, { who, signal }) {
  const minutes = new Minutes();
  const { panel, draw } = throughput(minutes, signal);
  const { boxes, stamp, loaded } = summaryPanels(signal, minutes, draw);
  view.append(h("h1", {}, "Overview"), stamp, section("Jobs by status", boxes.counts), panel);
  view.append(h("div", { class: "pair" }, section("Dead-letter queue", boxes.dlq), section("Endpoints failing now", boxes.failing)));
  view.append(fold("Jobs by type", boxes.byType), fold("Run time and queue wait, last hour", boxes.timings));
  if (who.admin) {
    view.append(fold("Queues", refreshed(() => api("/api/v1/queues", { signal }), queueTable, signal)));
    view.append(fold("Workers", refreshed(() => api("/api/v1/workers", { signal }), workerTable, signal)));
  }
  view.append(fold("Job types and circuits", refreshed(() => loadJobTypes(signal), jobTypeTable(who.admin), signal)));
  await loaded;
}
