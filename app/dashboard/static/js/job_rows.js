// The jobs list's rows: their columns (with queue wait and run time), and the changes a live event makes in place.
import { badge, h, short, stamp, table } from "./dom.js";

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

// A span of time, as short as it can be read: 87 ms, 1.25 s, 42.5 s, 3 m 07 s, 2 h 05 m.
export function duration(ms) {
  if (ms === null || Number.isNaN(ms)) return "—";
  const span = Math.max(0, ms);
  if (span < SECOND) return `${Math.round(span)} ms`;
  if (span < MINUTE) return `${(span / SECOND).toFixed(span < 10 * SECOND ? 2 : 1)} s`;
  const seconds = Math.round(span / SECOND);
  const pad = (n) => String(n).padStart(2, "0");
  if (span < HOUR) return `${Math.floor(seconds / 60)} m ${pad(seconds % 60)} s`;
  return `${Math.floor(seconds / 3600)} h ${pad(Math.floor((seconds % 3600) / 60))} m`;
}

const ms = (iso) => (iso ? Date.parse(iso) : null);

// From when it could first start (its creation, or its run_at when later) to its first start; null before it.
export function queueWait(job) {
  const started = ms(job.started_at);
  if (started === null) return null;
  return started - Math.max(ms(job.created_at), ms(job.run_at) ?? 0);
}

// From its first start to its end, or to `now` while it runs; null when it never started.
export function runTime(job, now = Date.now()) {
  const started = ms(job.started_at);
  if (started === null) return null;
  const finished = ms(job.finished_at);
  if (finished !== null) return finished - started;
  return job.status === "running" ? now - started : null;
}

export function columns(who, picker) {
  return [
    { title: "select", render: picker, class: "pick" },
    { title: "job", render: (j) => h("a", { href: `#/jobs/${j.id}`, class: "mono" }, short(j.id)) },
    { title: "type", key: "job_type" },
    { title: "status", render: (j) => badge(j.status), class: "status" },
    { title: "attempts", key: "attempts", class: "num attempts" },
    who.admin ? { title: "client", key: "client_id" } : null,
    { title: "created", render: (j) => stamp(j.created_at), class: "created" },
    { title: "queue wait", render: (j) => duration(queueWait(j)), class: "num wait" },
    { title: "run time", render: (j) => duration(runTime(j)), class: "num run" },
  ].filter(Boolean);
}

// The rows of `jobs` as a table, and each row by its job's id.
export function jobTable(who, jobs, picker) {
  const grid = table(columns(who, picker), jobs, (job) => ({ "data-job-id": job.id }));
  const rows = new Map();
  for (const row of grid.querySelectorAll("tr[data-job-id]")) {
    rows.set(row.dataset.jobId, { row, job: jobs.find((job) => job.id === row.dataset.jobId) });
  }
  return { grid, rows };
}

// What a later state of the job changes in its row; the row stays where it is.
export function update(entry, job) {
  entry.job = { ...entry.job, ...job };
  entry.touched = performance.now();
  const { row } = entry;
  row.querySelector("td.status").replaceChildren(badge(entry.job.status));
  row.querySelector("td.attempts").textContent = String(entry.job.attempts);
  tick(entry);
}

export function tick({ row, job }, now = Date.now()) {
  row.querySelector("td.wait").textContent = duration(queueWait(job));
  row.querySelector("td.run").textContent = duration(runTime(job, now));
}
