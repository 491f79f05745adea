// One workflow: its fields, its jobs by status, the graph of its jobs and a table of them, all kept current by the
// events stream (its jobs' events and its own end); cancel.
import { api } from "../api.js";
import { dag, legend, paint } from "../dag.js";
import { action, badge, errorLine, h, replace, section, short, table, when } from "../dom.js";
import { follow } from "../sse.js";
import { JOB_STATUSES } from "../statuses.js";
import { workflowOf } from "./workflows.js";

const FIELDS = ["id", "name", "client_id", "on_failure"];

function counts(jobs) {
  const by = new Map();
  for (const job of jobs) by.set(job.status, (by.get(job.status) ?? 0) + 1);
  const present = JOB_STATUSES.filter((status) => by.has(status));
  return h(
    "span",
    { id: "workflow-counts", class: "counts" },
    present.map((status) => h("span", { class: "count", "data-count": status }, badge(status), ` ${by.get(status)}`)),
  );
}

function facts(workflow, jobs) {
  const rows = [
    ["status", badge(workflow.status)],
    ...FIELDS.map((f) => [f, workflow[f] ?? "—"]),
    ["jobs", counts(jobs)],
    ["created_at", when(workflow.created_at)],
    ["finished_at", when(workflow.finished_at)],
  ];
  return h("dl", { class: "facts" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", { "data-field": k }, v)]));
}

const COLUMNS = [
  { title: "ref", render: (e) => h("a", { href: `#/jobs/${e.job.id}` }, e.ref) },
  { title: "job", render: (e) => h("span", { class: "mono" }, short(e.job.id)) },
  { title: "type", render: (e) => e.job.job_type },
  { title: "status", render: (e) => badge(e.job.status), class: "status" },
  { title: "depends on", render: (e) => e.depends_on.join(", ") || "—" },
  { title: "attempts", render: (e) => e.job.attempts, class: "num attempts" },
  { title: "finished", render: (e) => when(e.job.finished_at), class: "finished" },
];

function updateRow(row, job) {
  row.querySelector("td.status").replaceChildren(badge(job.status));
  row.querySelector("td.attempts").textContent = String(job.attempts);
  row.querySelector("td.finished").textContent = when(job.finished_at);
}

// Whether `job` is at least as recent as `known`: a reload's answer may be older than an event already shown.
function newer(job, known) {
  return !known || Date.parse(job.updated_at) >= Date.parse(known.updated_at);
}

function cancelButton(workflow, shown) {
  const run = () => api(`/api/v1/workflows/${workflow.id}/cancel`, { method: "POST" }).then(shown);
  return action("Cancel workflow", run, {
    kind: "danger",
    confirm: `Cancel the workflow ${workflow.name}? Its jobs not yet started will not run; this cannot be undone.`,
    done: "Workflow cancelled.",
  });
}

export async function render(view, { ids: [id], signal }) {
  const parts = { head: h("div"), fields: h("div"), graph: h("div"), jobs: h("div"), problem: h("div") };
  const live = h("p", { class: "hint", id: "live-state" }, "Live updates: connecting…");
  const byId = new Map(); // job id -> its entry ({ref, job, depends_on}), each job as last seen
  const rows = new Map();
  let workflow = null;
  let graph = null;
  const drawHead = () => {
    const jobs = [...byId.values()].map((entry) => entry.job);
    const title = h("h1", {}, `Workflow ${workflow.name} `, badge(workflow.status));
    // The cancel's answer is the workflow as the cancel left it; its end may already have come by the stream, so
    // the page reads it once more after showing the answer (an event comes only after its change commits).
    const cancelled = (answer) => {
      shown(answer);
      return quietly();
    };
    const cancel = workflow.status === "running" ? cancelButton(workflow, cancelled) : null;
    const actions = h("div", { class: "actions" }, cancel);
    replace(parts.head, title, actions);
    replace(parts.fields, section("Fields", facts(workflow, jobs)));
  };
  const moved = (job) => {
    const entry = byId.get(job.id);
    if (!entry || !newer(job, entry.job)) return;
    entry.job = job;
    paint(graph, job);
    updateRow(rows.get(job.id), job);
  };
  // A workflow as the API answers it: the first draws the graph and the table; later ones repaint what moved.
  const shown = (answer) => {
    workflow = { ...answer, jobs: [] };
    if (!graph) {
      for (const entry of answer.jobs) byId.set(entry.job.id, entry);
      graph = dag(answer.jobs);
      replace(parts.graph, section("Graph", legend(), h("div", { class: "dag-box" }, graph)));
      const grid = table(COLUMNS, answer.jobs, (e) => ({ "data-job-id": e.job.id }));
      for (const row of grid.querySelectorAll("tr[data-job-id]")) rows.set(row.dataset.jobId, row);
      replace(parts.jobs, h("div", { id: "workflow-jobs" }, section("Jobs", grid)));
    } else {
      for (const entry of answer.jobs) moved(entry.job);
    }
    drawHead();
  };
  const reload = async () => shown(await api(`/api/v1/workflows/${id}`, { signal }));
  await reload();
  view.append(parts.head, live, parts.fields, parts.graph, parts.jobs, parts.problem);
  const quietly = () =>
    reload().then(
      () => replace(parts.problem),
      (error) => signal.aborted || replace(parts.problem, errorLine(error)),
    );
  const apply = ({ data }) => {
    if (workflowOf(data) !== id) return;
    if (data.data.job) moved(data.data.job);
    else workflow = { ...workflow, ...data.data.workflow };
    drawHead();
  };
  // Read once more when the stream opens, since what moved between the first answer and the stream is on neither;
  // events that come meanwhile wait for that answer, which may be older than they are.
  let held = null;
  const onMessage = (message) => (held ? held.push(message) : apply(message));
  const reread = async () => {
    held = [];
    await quietly();
    for (const message of held.splice(0)) apply(message);
    held = null;
  };
  follow("/api/v1/events/stream", onMessage, {
    signal,
    onOpen: () => {
      live.textContent = "Live updates: on";
      reread();
    },
    onError: (error) => (live.textContent = `Live updates interrupted: ${error.message}`),
  });
}
