// One job: its progress (a live bar), its fields, payload and result, its flow control (a concurrency key's running and waiting counts), the
// audit trail, its deliveries, its artifact; cancel and retry.
import { api, download } from "../api.js";
import { action, badge, errorLine, every, h, notify, pretty, replace, section, stamp } from "../dom.js";
import { deliveryEntry, deliveryList } from "../deliveries.js";
import { follow } from "../sse.js";

const REFRESH_MS = 3000;
// A running job's cancel stops its handler (it ends cancelled unless it finishes first).
const CANCELLABLE = new Set(["waiting", "pending", "scheduled", "queued", "retrying", "running"]);
const FIELDS = [
  "id",
  "client_id",
  "job_type",
  "priority",
  "attempts",
  "max_retries",
  "idempotency_key",
  "callback_url",
  "request_id",
];
const TIMES = ["created_at", "updated_at", "started_at", "finished_at"];

function facts(job) {
  const rows = [
    ["status", badge(job.status)],
    ...FIELDS.map((f) => [f, job[f] ?? "—"]),
    ...TIMES.map((f) => [f, stamp(job[f])]),
  ];
  return h("dl", { class: "facts" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", { "data-field": k }, v)]));
}

// A job's concurrency key and rate limit as submitted; with a key, how many of its jobs run and wait now.
function flowFacts(job, key) {
  const rows = [
    ["concurrency", job.concurrency ? `${job.concurrency.key} (limit ${job.concurrency.limit})` : "—"],
    ["rate_limit", job.rate_limit ? `${job.rate_limit.key}: ${job.rate_limit.limit} per ${job.rate_limit.period_seconds} s` : "—"],
    ...(key ? [["key running", String(key.running)], ["key waiting", String(key.waiting)]] : []),
  ];
  return h("dl", { class: "facts", id: "flow" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", { "data-field": k }, v)]));
}

// A workflow's job: a link to its workflow, its ref, and a link to each job it depends on with that job's status.
function workflowFacts(job, workflow, dependencies) {
  const needs = dependencies.map((d) =>
    h("span", { class: "dependency", "data-job-id": d.id }, h("a", { href: `#/jobs/${d.id}` }, d.ref), badge(d.status)),
  );
  const rows = [
    ["workflow", h("a", { href: `#/workflows/${job.workflow_id}` }, workflow.name)],
    ["ref", job.ref ?? "—"],
    ["depends_on", needs.length ? needs : "—"],
  ];
  const items = rows.map(([k, v]) => [h("dt", {}, k), h("dd", { "data-field": k }, v)]);
  return h("dl", { class: "facts", id: "workflow-links" }, items);
}

const MOVE = new Set(["from", "to", "attempt"]);
const MAY_BE_HELD = new Set(["pending", "queued", "retrying"]);

// A job held back in the database says why it waits: its type paused, or no job worker that took it has its type
// (docs/plugins.md). Its latest `held` event says so until it runs (a release leaves no event; the run does).
function heldNotice(job, events) {
  const at = events.findLastIndex((e) => e.event === "held");
  if (!MAY_BE_HELD.has(job.status) || at < 0 || events.slice(at).some((e) => e.event === "running")) return null;
  const { reason, note } = events[at].detail || {};
  return h(
    "p",
    { class: "held", id: "held", "data-reason": reason },
    h("strong", {}, `Waiting, held: ${reason}`),
    note ? ` (${note})` : "",
  );
}

// Each event as one line (from → to, attempt), with anything else it carries (an error, a delivery) beneath.
function trailItem(e) {
  if (e.event === "delivery") return deliveryEntry(e);
  const detail = e.detail || {};
  const move = "to" in detail ? `${detail.from ?? "—"} → ${detail.to}` : null;
  const rest = Object.fromEntries(Object.entries(detail).filter(([k]) => !MOVE.has(k)));
  return h(
    "li",
    { "data-event": e.event },
    h("span", { class: "event" }, e.event),
    move ? h("span", { class: "move" }, move) : null,
    "attempt" in detail ? h("span", { class: "hint" }, `attempt ${detail.attempt}`) : null,
    e.event === "edited" ? h("span", { class: "hint by" }, `by ${detail.by}${detail.admin ? " (admin)" : ""}`) : null,
    stamp(e.created_at),
    Object.keys(rest).length ? pretty(rest) : null,
  );
}

// The handler's last progress report as a bar with its percentage and message; nothing when it reported none.
function progressBar(progress) {
  if (!progress) return null;
  const percent = `${Math.round(progress.fraction * 100)}%`;
  return section(
    "Progress",
    h(
      "div",
      { id: "job-progress", "data-fraction": String(progress.fraction) },
      h("progress", { max: "1", value: String(progress.fraction), "aria-label": `progress ${percent}` }),
      h("span", { class: "percent" }, percent),
      progress.message ? h("span", { class: "hint" }, progress.message) : null,
    ),
  );
}

function timeline(events) {
  return h("ol", { class: "timeline", id: "audit-trail" }, events.map(trailItem));
}

// The artifact needs the bearer header, so it is fetched here and handed over as a blob: URL of this page.
async function artifactUrl(job) {
  const blob = await download(`/api/v1/jobs/${job.id}/artifact`);
  return { blob, url: URL.createObjectURL(blob) };
}

async function saveArtifact(job) {
  const { blob, url } = await artifactUrl(job);
  const extension = (blob.type.split("/")[1] || "bin").replace("jpeg", "jpg");
  h("a", { href: url, download: `${job.job_type}-${job.id}.${extension}` }).click();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

// An image shows in the page; anything else (a PDF) opens in a new tab, in the browser's own viewer.
async function openArtifact(job, holder) {
  const { blob, url } = await artifactUrl(job);
  if (blob.type.startsWith("image/")) {
    const image = h("img", { src: url, alt: `the artifact of job ${job.id}`, class: "artifact" });
    replace(holder, section("Artifact", image));
  } else {
    window.open(url, "_blank", "noopener");
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }
}

function buttons(job, reload, holder) {
  const post = (verb) => () => api(`/api/v1/jobs/${job.id}/${verb}`, { method: "POST" }).then(reload);
  const running = job.status === "running";
  const cancel = action("Cancel job", post("cancel"), {
    kind: "danger",
    confirm: running
      ? "Cancel this running job? Its handler is stopped unless it finishes first, and this cannot be undone."
      : "Cancel this job? It will not run, and this cannot be undone.",
    done: running ? "Cancel asked: the job stops within seconds." : "Job cancelled.",
  });
  const retry = action("Retry job", post("retry"), {
    confirm: "Run this dead-lettered job again, with a new retry budget?",
    done: "Job sent back to work.",
  });
  const artifact = [
    action("Open artifact", () => openArtifact(job, holder)),
    action("Download artifact", () => saveArtifact(job)),
  ];
  return h(
    "div",
    { class: "actions" },
    CANCELLABLE.has(job.status) ? cancel : null,
    job.status === "dead_lettered" ? retry : null,
    job.result?.artifact_url ? artifact : null,
  );
}

export async function render(view, { ids: [id], signal }) {
  const parts = {
    head: h("div"),
    progress: h("div"),
    artifact: h("div", { id: "artifact" }),
    fields: h("div"),
    workflow: h("div"),
    flow: h("div"),
    data: h("div"),
    trail: h("div"),
    deliveries: h("div"),
  };
  const seen = {};
  let workflow = null; // a job's workflow: its name is all this page shows, read once
  // Redraw only the parts whose data changed, so an open detail or a selection survives a refresh.
  const put = (name, value, draw) => {
    const text = JSON.stringify(value);
    if (seen[name] !== text) replace(parts[name], draw(value));
    seen[name] = text;
  };
  const reload = async () => {
    const [job, events, deliveries] = await Promise.all(
      [``, `/events`, `/logs`].map((tail) => api(`/api/v1/jobs/${id}${tail}`, { signal })),
    );
    put("head", { job, events }, ({ job: j, events: e }) => [
      h("h1", {}, `Job ${j.job_type} `, badge(j.status)),
      heldNotice(j, e),
      buttons(j, reload, parts.artifact),
    ]);
    put("progress", job.progress, progressBar);
    put("fields", job, (j) => section("Fields", facts(j)));
    if (job.workflow_id) {
      workflow ??= await api(`/api/v1/workflows/${job.workflow_id}`, { signal });
      const dependencies = await Promise.all(job.depends_on.map((d) => api(`/api/v1/jobs/${d}`, { signal })));
      put("workflow", dependencies, (d) => section("Workflow", workflowFacts(job, workflow, d)));
    }
    const key = job.concurrency ? await api(`/api/v1/jobs/${id}/concurrency`, { signal }) : null;
    put("flow", { job, key }, ({ job: j, key: k }) => section("Flow control", flowFacts(j, k)));
    put("data", job, (j) =>
      section("Payload, result and error", ["payload", "result", "error"].map((f) => [h("h3", {}, f), pretty(j[f])])),
    );
    put("trail", events, (e) => section("Audit trail", timeline(e)));
    put("deliveries", deliveries, (d) => section("Webhook deliveries", deliveryList(d, reload)));
  };
  await reload();
  view.append(...Object.values(parts));
  const problem = h("div");
  view.append(problem);
  const quietly = () =>
    reload().then(
      () => replace(problem),
      (error) => signal.aborted || replace(problem, errorLine(error)),
    );
  const stream = `/api/v1/jobs/${id}/stream`;
  // A progress event moves the bar alone (up to one a second); any other change reloads the page's parts.
  const changed = (message) =>
    message.event === "job.progress" ? put("progress", message.data.data.job.progress, progressBar) : quietly();
  follow(stream, changed, { signal, reconnect: false, onError: (error) => notify(error.message, "bad") });
  every(REFRESH_MS, quietly, signal);
}
