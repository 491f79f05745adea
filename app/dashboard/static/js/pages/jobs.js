// Jobs: newest first, filtered by status and type, paged by the API's cursor, statuses updated live.
import { api, query } from "../api.js";
import { badge, errorLine, h, replace, short, table, when } from "../dom.js";
import { follow } from "../sse.js";

export const STATUSES = ["pending", "queued", "running", "retrying", "succeeded", "dead_lettered", "cancelled"];
const LIMIT = 25;
const RELOAD_MS = 1000;

export async function jobTypes(signal) {
  return (await api("/api/v1/circuits", { signal })).map((circuit) => circuit.job_type);
}

export function choice(name, label, values, selected) {
  const options = [h("option", { value: "" }, "any"), values.map((v) => h("option", { value: v, selected: v === selected }, v))];
  return h("label", {}, label, h("select", { name }, options));
}

function filters(params, types) {
  const form = h(
    "form",
    { class: "filters", id: "job-filters" },
    choice("status", "Status", STATUSES, params.get("status")),
    choice("job_type", "Type", types, params.get("job_type")),
    h("button", { type: "submit" }, "Filter"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    window.location.hash = `#/jobs${query({ status: data.get("status"), job_type: data.get("job_type") })}`;
  });
  return form;
}

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
  const pager = h("div", { class: "pager" });
  const live = h("p", { class: "hint", id: "live-state" }, "Live updates: connecting…");
  view.append(h("h1", {}, "Jobs"), filters(params, types), live, holder, pager);
  const cursors = [null];
  let rows = new Map();
  const load = async () => {
    const at = cursors.at(-1);
    const page = await api(`/api/v1/jobs${query({ status: params.get("status"), job_type: params.get("job_type"), limit: LIMIT, cursor: at })}`, { signal });
    rows = draw(holder, who, page);
    const back = cursors.length > 1 ? h("button", { type: "button", onclick: () => (cursors.pop(), load().catch(shown)) }, "Newer") : null;
    const next = page.next_cursor ? h("button", { type: "button", onclick: () => (cursors.push(page.next_cursor), load().catch(shown)) }, "Older") : null;
    replace(pager, back, next);
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
  // A job on this page changes in place; a job not on it shows up by reloading the newest page.
  const onMessage = ({ data }) => {
    const job = data.data.job;
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
