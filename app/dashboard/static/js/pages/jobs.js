// Jobs: searched and filtered from the #/jobs?query, newest first, paged by the API's cursor; each row with its
// queue wait and run time, selectable for a bulk cancel or retry. Live: a row changes in place, and jobs that
// arrive wait behind a "N new jobs — show" button, so nothing moves under the reader.
import { api, jobTypes, query } from "../api.js";
import { choice, pager } from "../controls.js";
import { errorLine, every, h, replace } from "../dom.js";
import { bulkSelection } from "../job_bulk.js";
import { jobTable, tick, update } from "../job_rows.js";
import { follow } from "../sse.js";
import { JOB_STATUSES } from "../statuses.js";

const LIMIT = 25;
const CHECK_MS = 1000;
const SEARCHED = ["q", "status", "job_type"];
const PAYLOAD = "payload.";

// The API's filters in the page's query: the search box, status, type, and `payload.<field>` parameters.
function filters(params) {
  const kept = [...params].filter(([name, value]) => value && (SEARCHED.includes(name) || name.startsWith(PAYLOAD)));
  return Object.fromEntries(kept);
}

function searchForm(params, types) {
  const [field = "", value = ""] = [...params].find(([name]) => name.startsWith(PAYLOAD)) || [];
  const input = (name, label, current, hint) =>
    h("label", {}, label, h("input", { name, value: current, placeholder: hint, type: "search", spellcheck: "false" }));
  const form = h(
    "form",
    { class: "filters", id: "job-search", role: "search" },
    input("q", "Search", params.get("q") || "", "id, request id, idempotency / unique / concurrency key"),
    input("field", "Payload field", field.slice(PAYLOAD.length), "order_id"),
    input("value", "equals", value, "123"),
    choice("status", "Status", JOB_STATUSES, params.get("status")),
    choice("job_type", "Type", types, params.get("job_type")),
    h("button", { type: "submit" }, "Search"),
    h("a", { href: "#/jobs", class: "clear" }, "Clear"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = Object.fromEntries(new FormData(form));
    const asked = { q: data.q.trim(), status: data.status, job_type: data.job_type };
    if (data.field.trim() && data.value !== "") asked[`${PAYLOAD}${data.field.trim()}`] = data.value;
    window.location.hash = `#/jobs${query(asked)}`;
  });
  return form;
}

export async function render(view, { who, params, signal }) {
  const types = await jobTypes(signal);
  const holder = h("div", { id: "jobs-table" });
  const live = h("p", { class: "hint", id: "live-state" }, "Live updates: connecting…");
  const fresh = h("button", { type: "button", id: "new-jobs", class: "quiet", hidden: true });
  const pages = h("div", { class: "pager" });
  const cursors = [null];
  let rows = new Map();
  let newest = null; // the newest job's creation time on the first page (ms), null while the page is empty
  const bulk = bulkSelection(() => rows);
  const show = (page) => {
    const drawn = jobTable(who, page.items, bulk.pick);
    rows = drawn.rows;
    newest = cursors.length === 1 && page.items.length ? Date.parse(page.items[0].created_at) : null;
    replace(holder, page.items.length ? drawn.grid : h("p", { class: "empty" }, "No jobs match."));
    fresh.hidden = true;
    bulk.refresh();
    pager(pages, cursors, page.next_cursor, () => load().catch(shown));
  };
  const firstPage = () => api(`/api/v1/jobs${query({ ...filters(params), limit: LIMIT })}`, { signal });
  const load = async () =>
    show(await api(`/api/v1/jobs${query({ ...filters(params), limit: LIMIT, cursor: cursors.at(-1) })}`, { signal }));
  const shown = (error) => replace(holder, errorLine(error));
  fresh.addEventListener("click", () => load().catch(shown));
  view.append(h("h1", {}, "Jobs"), searchForm(params, types), live, bulk.bar, fresh, holder, pages);
  await load().catch(shown);
  const onFirst = () => cursors.length === 1;
  const arrivals = watchArrivals({ rows: () => rows, newest: () => newest, onFirst, firstPage, show, fresh, signal });
  every(CHECK_MS, () => rows.forEach((entry) => entry.job.status === "running" && tick(entry)), signal);
  // A job on this page changes in place; one newer than the page's newest may be a new match: look, and offer it.
  const onMessage = ({ data }) => {
    const job = data.data.job;
    if (!job) return; // workflow events name no job
    if (rows.has(job.id)) update(rows.get(job.id), job);
    else if (onFirst() && (newest === null || Date.parse(job.created_at) >= newest)) arrivals();
  };
  followJobs(params, live, onMessage, signal);
}

function followJobs(params, live, onMessage, signal) {
  const path = `/api/v1/events/stream${query({ job_type: params.get("job_type") })}`;
  follow(path, onMessage, {
    signal,
    onOpen: () => (live.textContent = "Live updates: on"),
    onError: (error) => (live.textContent = `Live updates interrupted: ${error.message}`),
  });
}

// A look at the first page at most once a CHECK_MS: onto an empty page its jobs go at once (nothing can move);
// otherwise the jobs not shown yet are counted on the "new jobs" button, and the rows shown are brought up to date.
function watchArrivals({ rows, newest, onFirst, firstPage, show, fresh, signal }) {
  let timer = null;
  signal.addEventListener("abort", () => clearTimeout(timer));
  const look = async () => {
    timer = null;
    if (signal.aborted) return;
    const page = await firstPage();
    if (signal.aborted || !onFirst()) return;
    if (newest() === null) return show(page);
    const unseen = page.items.filter((job) => !rows().has(job.id) && Date.parse(job.created_at) >= newest());
    for (const job of page.items) if (rows().has(job.id)) update(rows().get(job.id), job);
    if (!unseen.length) return;
    const many = unseen.length === page.items.length ? `${unseen.length}+` : String(unseen.length);
    fresh.textContent = `${many} new job${unseen.length === 1 ? "" : "s"} — show`;
    fresh.hidden = false;
  };
  return () => {
    timer ??= setTimeout(() => look().catch(() => {}), CHECK_MS);
  };
}
