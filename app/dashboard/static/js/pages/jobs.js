// Jobs: newest first, filtered by status and type, paged by the API's cursor, statuses updated live.
import { api, jobTypes, query } from "../api.js";
import { choice, filterForm, pager } from "../controls.js";
import { badge, errorLine, h, replace, short, table, when } from "../dom.js";
import { follow } from "../sse.js";
import { JOB_STATUSES } from "../statuses.js";

const LIMIT = 25;
const RELOAD_MS = 1000;

function columns(who) {
  return [
    { title: "job", render: (j) => h("a", { href: `#/jobs/${j.id}`, class: "mono" }, short(j.id)) },
    { title: "type", key: "job_type" },
    { title: "status", render: (j) => badge(j.status), class: "status" },
    { title: "attempts", key: "attempts", class: "num attempts" },
    who.admin ? { title: "client", key: "client_id" } : null,
    { title: "created", render: (j) => when(j.created_at) },
  ].filter(Boolean);
}

// Draw one page of jobs; returns the rows by job id so live events can update them in place.
function draw(holder, who, page) {
  const rows = new Map();
  const grid = table(columns(who), page.items, (job) => ({ "data-job-id": job.id }));
  for (const row of grid.querySelectorAll("tr[data-job-id]")) rows.set(row.dataset.jobId, row);
  replace(holder, page.items.length ? grid : h("p", { class: "empty" }, "No jobs match."));
  return rows;
}

function update(row, job) {
  row.querySelector("td.status").replaceChildren(badge(job.status));
  row.querySelector("td.attempts").textContent = String(job.attempts);
}

export async function render(view, { who, params, signal }) {
  const types = await jobTypes(signal);
  const holder = h("div", { id: "jobs-table" });
  const live = h("p", { class: "hint", id: "live-state" }, "Live updates: connecting…");
  const filters = filterForm(
    "/jobs",
    choice("status", "Status", JOB_STATUSES, params.get("status")),
    choice("job_type", "Type", types, params.get("job_type")),
  );
  const pages = h("div", { class: "pager" });
  view.append(h("h1", {}, "Jobs"), filters, live, holder, pages);
  const cursors = [null];
  let rows = new Map();
  const load = async () => {
    const filter = { status: params.get("status"), job_type: params.get("job_type") };
    const page = await api(`/api/v1/jobs${query({ ...filter, limit: LIMIT, cursor: cursors.at(-1) })}`, { signal });
    rows = draw(holder, who, page);
    pager(pages, cursors, page.next_cursor, () => load().catch(shown));
  };
  const shown = (error) => replace(holder, errorLine(error));
  await load();
  let reloading = null;
  const reloadSoon = () => {
    reloading ??= setTimeout(() => {
      reloading = null;
      if (!signal.aborted) load().catch(shown);
    }, RELOAD_MS);
  };
  signal.addEventListener("abort", () => clearTimeout(reloading));
  // A job on this page changes in place; a job not on it shows up by reloading the newest page. The stream also
  // carries workflow events, which name no job.
  const onMessage = ({ data }) => {
    const job = data.data.job;
    if (!job) return;
    const row = rows.get(job.id);
    if (row) update(row, job);
    else if (cursors.length === 1) reloadSoon();
  };
  const path = `/api/v1/events/stream${query({ job_type: params.get("job_type") })}`;
  follow(path, onMessage, {
    signal,
    onOpen: () => (live.textContent = "Live updates: on"),
    onError: (error) => (live.textContent = `Live updates interrupted: ${error.message}`),
  });
}
