// Workflows: newest first, filtered by status, paged by the API's cursor, redrawn as their jobs move.
import { api, query } from "../api.js";
import { choice, filterForm, pager } from "../controls.js";
import { badge, errorLine, h, replace, table, when } from "../dom.js";
import { follow } from "../sse.js";
import { WORKFLOW_STATUSES } from "../statuses.js";

const LIMIT = 25;
const RELOAD_MS = 1000;

function total(counts) {
  return Object.values(counts).reduce((sum, n) => sum + n, 0);
}

function columns(who) {
  return [
    { title: "workflow", render: (w) => h("a", { href: `#/workflows/${w.id}` }, w.name) },
    { title: "status", render: (w) => badge(w.status), class: "status" },
    { title: "succeeded / jobs", render: (w) => `${w.counts.succeeded ?? 0} / ${total(w.counts)}`, class: "num" },
    { title: "on failure", key: "on_failure" },
    who.admin ? { title: "client", key: "client_id" } : null,
    { title: "created", render: (w) => when(w.created_at) },
    { title: "finished", render: (w) => when(w.finished_at) },
  ].filter(Boolean);
}

function draw(holder, who, page) {
  const grid = table(columns(who), page.items, (w) => ({ "data-workflow-id": w.id }));
  replace(holder, page.items.length ? grid : h("p", { class: "empty" }, "No workflows match."));
  return new Set(page.items.map((w) => w.id));
}

// The workflow an event is about: a workflow event's own, or the workflow of a job event's job (null for none).
export function workflowOf(event) {
  return event.data.workflow?.id ?? event.data.job?.workflow_id ?? null;
}

export async function render(view, { who, params, signal }) {
  const holder = h("div", { id: "workflows-table" });
  const live = h("p", { class: "hint", id: "live-state" }, "Live updates: connecting…");
  const filters = filterForm("/workflows", choice("status", "Status", WORKFLOW_STATUSES, params.get("status")));
  const pages = h("div", { class: "pager" });
  view.append(h("h1", {}, "Workflows"), filters, live, holder, pages);
  const cursors = [null];
  let shown = new Set();
  const problem = (error) => replace(holder, errorLine(error));
  const load = async () => {
    const path = `/api/v1/workflows${query({ status: params.get("status"), limit: LIMIT, cursor: cursors.at(-1) })}`;
    const page = await api(path, { signal });
    shown = draw(holder, who, page);
    pager(pages, cursors, page.next_cursor, () => load().catch(problem));
  };
  await load();
  let reloading = null;
  const reloadSoon = () => {
    reloading ??= setTimeout(() => {
      reloading = null;
      if (!signal.aborted) load().catch(problem);
    }, RELOAD_MS);
  };
  signal.addEventListener("abort", () => clearTimeout(reloading));
  // A workflow on this page is read again when it or one of its jobs moves; a new one shows on the newest page.
  const onMessage = ({ data }) => {
    const id = workflowOf(data);
    if (id && (shown.has(id) || cursors.length === 1)) reloadSoon();
  };
  follow("/api/v1/events/stream", onMessage, {
    signal,
    onOpen: () => (live.textContent = "Live updates: on"),
    onError: (error) => (live.textContent = `Live updates interrupted: ${error.message}`),
  });
}
