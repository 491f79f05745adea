// Recurring schedules: each with its cron, time zone and job; run one now, pause or resume, delete; a form for one.
import { api, query } from "../api.js";
import { pager } from "../controls.js";
import { action, badge, errorLine, field, h, notify, onSubmit, replace, section, short, table, when } from "../dom.js";

const LIMIT = 50;
const ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";

function columns(who, buttons) {
  return [
    { title: "name", key: "name" },
    { title: "cron", render: (s) => h("code", {}, s.cron) },
    { title: "time zone", key: "timezone" },
    { title: "job type", render: (s) => s.job.job_type },
    { title: "state", render: (s) => badge(s.active ? "active" : "paused"), class: "state" },
    { title: "next run", render: (s) => when(s.next_run_at), class: "next-run" },
    who.admin ? { title: "client", key: "client_id" } : null,
    { title: "created", render: (s) => when(s.created_at) },
    { title: "", render: buttons },
  ].filter(Boolean);
}

function list(items, columnList) {
  if (!items.length) return h("p", { class: "empty" }, "No schedules yet.");
  return table(columnList, items, (s) => ({ "data-schedule-id": s.id }));
}

function madeJob(schedule, job) {
  const link = h("a", { href: `#/jobs/${job.id}`, class: "mono" }, short(job.id));
  return h("p", { "data-job-id": job.id }, `Run now of ${schedule.name} submitted job `, link, " ", badge(job.status));
}

function buttons(schedule, reload, ran) {
  const path = `/api/v1/schedules/${schedule.id}`;
  const active = (on) => api(path, { method: "PATCH", body: { active: on } }).then(reload);
  const trigger = async () => ran(schedule, await api(`${path}/trigger`, { method: "POST" }));
  const remove = () => api(path, { method: "DELETE" }).then(reload);
  return h(
    "div",
    { class: "actions" },
    action("Run now", trigger),
    schedule.active
      ? action("Pause", () => active(false), { done: "Schedule paused." })
      : action("Resume", () => active(true), { done: "Schedule resumed." }),
    action("Delete", remove, {
      kind: "danger",
      confirm: `Delete the schedule ${schedule.name}? It fires no more (the jobs it made stay); this cannot be undone.`,
      done: "Schedule deleted.",
    }),
  );
}

// What the payload box offers for a type: its schema's first example, or {} for a type that needs no field.
function examplePayload(type) {
  const example = type?.payload_schema?.examples?.[0];
  return JSON.stringify(example ?? {}, null, 2);
}

// The form starts on a type whose payload may be empty (echo where it exists), with a payload that is valid for it.
function scheduleFields(types) {
  const byName = new Map(types.map((t) => [t.name, t]));
  const first = byName.get("echo") ?? types[0];
  const typeChoice = h(
    "select",
    { name: "job_type", required: true },
    types.map((t) => h("option", { value: t.name, selected: t === first }, t.name)),
  );
  const payload = h("textarea", { name: "payload", rows: "4", class: "mono", spellcheck: "false" });
  payload.defaultValue = examplePayload(first); // what the form's reset goes back to
  typeChoice.addEventListener("change", () => (payload.value = examplePayload(byName.get(typeChoice.value))));
  const cron = h("input", { name: "cron", required: true, maxlength: "255", placeholder: "0 3 * * *" });
  return [
    field("Name", h("input", { name: "name", required: true, maxlength: "200", placeholder: "nightly-report" })),
    field("Cron (minute hour day month weekday, or six fields with seconds last)", cron),
    field("Time zone", h("input", { name: "timezone", required: true, maxlength: "64", value: ZONE })),
    field("Job type", typeChoice),
    field("Payload (JSON; an example for the type, edit it)", payload),
    h("label", { class: "check" }, h("input", { type: "checkbox", name: "active", checked: true }), "Active"),
  ];
}

// Checked here, so a typo in the payload is named before anything is sent.
function payloadOf(text) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`The payload is not valid JSON: ${error.message}`);
  }
}

function scheduleBody(form) {
  const data = new FormData(form);
  return {
    name: data.get("name"),
    cron: data.get("cron"),
    timezone: data.get("timezone"),
    job: { job_type: data.get("job_type"), payload: payloadOf(data.get("payload")) },
    active: data.has("active"),
  };
}

export async function render(view, { who, signal }) {
  const types = (await api("/api/v1/job-types", { signal })).items;
  const listBox = h("div", { id: "schedule-list" });
  const runBox = h("div", { id: "schedule-run", role: "status" });
  const pages = h("div", { class: "pager" });
  const cursors = [null];
  const shown = (error) => replace(listBox, errorLine(error));
  const ran = (schedule, job) => replace(runBox, madeJob(schedule, job));
  const reload = async () => {
    const page = await api(`/api/v1/schedules${query({ limit: LIMIT, cursor: cursors.at(-1) })}`, { signal });
    replace(listBox, list(page.items, columns(who, (s) => buttons(s, reload, ran))));
    pager(pages, cursors, page.next_cursor, () => reload().catch(shown));
  };
  const problems = h("div", { id: "schedule-problems" });
  const create = h("button", { type: "submit" }, "Create schedule");
  const form = h("form", { class: "stacked", id: "schedule-create" }, scheduleFields(types), create, problems);
  onSubmit(
    form,
    async () => {
      const created = await api("/api/v1/schedules", { method: "POST", body: scheduleBody(form) });
      form.reset();
      notify(`Schedule ${created.name} created; next run ${when(created.next_run_at)}.`);
      await reload();
    },
    { problems },
  );
  view.append(
    h("h1", {}, "Schedules"),
    section("Schedules (newest first)", runBox, listBox, pages),
    section("New schedule", form),
  );
  await reload();
}
