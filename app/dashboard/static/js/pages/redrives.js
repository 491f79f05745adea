// Throttled redrives: start one (dead jobs by failure group or type, or failed deliveries by endpoint or event
// type; N at most R a second), and follow each one's progress, status and history; pause, resume or cancel it, or
// change its pace.
import { api, jobTypes, query } from "../api.js";
import { choice, filterForm, pager } from "../controls.js";
import { action, badge, errorLine, every, field, h, notify, onSubmit, replace, section, short, when } from "../dom.js";

const LIMIT = 50;
const POLL_MS = 1000;
const STATUSES = ["running", "paused", "finished", "cancelled"];
const ACTIONS = { running: ["pause", "cancel"], paused: ["resume", "cancel"], finished: [], cancelled: [] };
const LABELS = { pause: "Pause", resume: "Resume", cancel: "Cancel" };
const DONE = { pause: "Redrive paused.", resume: "Redrive resumed.", cancel: "Redrive cancelled." };

function selectionText(redrive) {
  const parts = Object.entries(redrive.selection).map(([name, value]) =>
    Array.isArray(value) ? `${name}: ${value.length} id(s)` : `${name}: ${value}`,
  );
  return `${redrive.kind} — ${parts.join(", ")}`;
}

function progress(redrive) {
  const reached = redrive.replayed + redrive.skipped;
  const label = `${redrive.replayed} replayed, ${redrive.skipped} skipped of ${redrive.total}`;
  return h(
    "div",
    { class: "redrive-progress" },
    h("progress", { max: Math.max(redrive.total, 1), value: redrive.total ? reached : 1, "aria-label": label }),
    h("span", { class: "redrive-counts" }, label),
  );
}

function history(redrive) {
  const rows = redrive.history.map((change) =>
    h("li", { "data-event": change.event }, `${change.event} — ${change.by ?? "runner"}, ${when(change.at)}`),
  );
  return h("details", { class: "redrive-history" }, h("summary", {}, `History (${rows.length})`), h("ol", {}, rows));
}

function buttons(redrive, changed) {
  const path = (name) => `/api/v1/dlq/redrives/${redrive.id}/${name}`;
  const act = (name) => async () => changed(await api(path(name), { method: "POST" }));
  const options = (name) => ({
    done: DONE[name],
    kind: name === "cancel" ? "danger" : "",
    confirm: name === "cancel" ? "Cancel this redrive? What it sent stays sent; the rest is left dead." : undefined,
  });
  const shown = ACTIONS[redrive.status].map((name) => action(LABELS[name], act(name), options(name)));
  if (ACTIONS[redrive.status].length) shown.splice(1, 0, paceButton(redrive, changed));
  return h("div", { class: "actions" }, shown);
}

// A running or paused redrive's pace, asked in a prompt (the card is drawn again each second while it runs, so
// a field inside it would lose what is being typed); in force within a second.
function paceButton(redrive, changed) {
  const retime = async () => {
    const question = `New pace for redrive ${short(redrive.id)}: at most how many items a second (up to 1000)?`;
    const asked = window.prompt(question, String(redrive.per_second));
    if (asked === null || asked.trim() === "") return null;
    const body = { per_second: Number(asked) };
    const retimed = await api(`/api/v1/dlq/redrives/${redrive.id}`, { method: "PATCH", body });
    await changed();
    return retimed;
  };
  const done = (retimed) => (retimed ? `Pace set to at most ${retimed.per_second}/s.` : "Pace unchanged.");
  return action("Change pace", retime, { done });
}

function card(redrive, changed) {
  return h(
    "article",
    { class: "redrive", "data-redrive-id": redrive.id, "data-status": redrive.status },
    h("h3", {}, h("span", { class: "mono" }, short(redrive.id)), " ", badge(redrive.status)),
    h("p", { class: "redrive-selection" }, selectionText(redrive)),
    progress(redrive),
    h(
      "p",
      { class: "muted" },
      `at most ${redrive.per_second}/s · by ${redrive.created_by} · started ${when(redrive.created_at)}`,
      redrive.finished_at ? ` · ended ${when(redrive.finished_at)}` : "",
    ),
    buttons(redrive, changed),
    history(redrive),
  );
}

function startFields(types) {
  const option = (value, text) => h("option", { value }, text);
  const kind = h("select", { name: "kind" }, option("jobs", "dead jobs"), option("deliveries", "failed deliveries"));
  const typeChoice = h("select", { name: "job_type" }, option("", "any"), types.map((t) => option(t, t)));
  const group = h("input", { name: "group", maxlength: "16", class: "mono", placeholder: "16 hex digits" });
  const limit = h("input", { name: "limit", type: "number", min: "1", max: "100000", value: "100", required: true });
  const rate = { name: "per_second", type: "number", min: "0.01", max: "1000", step: "any", value: "5" };
  const jobFields = h(
    "fieldset",
    { class: "redrive-jobs" },
    h("legend", {}, "Which dead jobs (a group, a type, or both)"),
    field("Failure group id", group),
    field("Job type", typeChoice),
  );
  const deliveryFields = h(
    "fieldset",
    { class: "redrive-deliveries", hidden: true, disabled: true },
    h("legend", {}, "Which failed deliveries (an endpoint, an event type, or both)"),
    field("Webhook id", h("input", { name: "webhook_id", maxlength: "36", class: "mono" })),
    field("Event type", h("input", { name: "event_type", maxlength: "64", placeholder: "job.succeeded" })),
  );
  kind.addEventListener("change", () => {
    const jobs = kind.value === "jobs";
    Object.assign(jobFields, { hidden: !jobs, disabled: !jobs });
    Object.assign(deliveryFields, { hidden: jobs, disabled: jobs });
  });
  return [
    field("Send again", kind),
    jobFields,
    deliveryFields,
    field("How many at most (N)", limit),
    field("At most per second (R)", h("input", { ...rate, required: true })),
  ];
}

function startBody(form) {
  const body = {};
  for (const [name, value] of new FormData(form)) {
    if (value === "") continue;
    body[name] = name === "limit" || name === "per_second" ? Number(value) : value;
  }
  return body;
}

export async function render(view, { params, signal }) {
  const types = await jobTypes(signal);
  const listBox = h("div", { id: "redrive-list", "aria-live": "polite" });
  const pages = h("div", { class: "pager" });
  const cursors = [null];
  const cards = new Map(); // id -> [the JSON it was drawn from, its element]: only what changed is drawn again
  let live = false;
  const draw = (items) => {
    if (!items.length) return replace(listBox, h("p", { class: "empty" }, "No redrives yet."));
    const drawn = items.map((redrive) => {
      const text = JSON.stringify(redrive);
      const known = cards.get(redrive.id);
      if (known && known[0] === text) return known[1];
      const element = card(redrive, changed);
      if (known) element.querySelector("details").open = known[1].querySelector("details").open;
      cards.set(redrive.id, [text, element]);
      return element;
    });
    if (drawn.some((element, i) => listBox.children[i] !== element) || listBox.children.length !== drawn.length) {
      replace(listBox, drawn);
    }
  };
  const reload = async () => {
    const page = await api(
      `/api/v1/dlq/redrives${query({ status: params.get("status"), limit: LIMIT, cursor: cursors.at(-1) })}`,
      { signal },
    );
    draw(page.items);
    live = page.items.some((redrive) => redrive.status === "running");
    pager(pages, cursors, page.next_cursor, () => reload().catch(shown));
  };
  const shown = (error) => replace(listBox, errorLine(error));
  const changed = () => reload();
  every(POLL_MS, () => live && !signal.aborted && reload().catch(shown), signal);
  const problems = h("div", { id: "redrive-problems" });
  const submit = h("button", { type: "submit" }, "Start redrive");
  const form = h("form", { class: "stacked", id: "redrive-start" }, startFields(types), submit, problems);
  onSubmit(
    form,
    async () => {
      const started = await api("/api/v1/dlq/redrives", { method: "POST", body: startBody(form) });
      notify(`Redrive ${short(started.id)} started: ${started.total} item(s) at most ${started.per_second}/s.`);
      await reload();
    },
    { problems },
  );
  const filter = filterForm("/dlq/redrives", choice("status", "Status", STATUSES, params.get("status")));
  view.append(
    h("h1", {}, "Redrives"),
    h("p", {}, "Dead jobs or failed deliveries sent again at a pace you set. ", h("a", { href: "#/dlq" }, "Dead jobs")),
    section("Start a redrive", form),
    section("Redrives (newest first)", filter, listBox, pages),
  );
  await reload();
}
