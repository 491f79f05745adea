// The dead-letter queue: dead jobs grouped by failure (each group replayed whole, or listed), stats, the dead jobs
// with reason and last error (of one group, or all), replay of a selection or of a type, and a dead job's payload
// edited and replayed in one step (docs/dlq.md).
import { api, jobTypes, query } from "../api.js";
import { choice, filterForm, pager } from "../controls.js";
import { action, errorLine, h, notify, onSubmit, replace, section, short, table, when } from "../dom.js";

const LIMIT = 50;
const GROUPS = 20;
const REPLAY_AT_MOST = 1000; // the replay route's `limit` ceiling; more is the redrives' work

export function dlqStats(s) {
  const rows = [
    ["dead-lettered", s.dead_lettered],
    ...Object.entries(s.by_job_type).map(([type, n]) => [`type ${type}`, n]),
    ...Object.entries(s.by_reason).map(([reason, n]) => [`reason ${reason}`, n]),
  ];
  if (s.broker_depth !== undefined) rows.push(["messages in the broker's DLQ", s.broker_depth]);
  return h("dl", { class: "facts", id: "dlq-stats" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))]));
}

function lastError(job) {
  if (!job.error) return "—";
  if (typeof job.error !== "object") return String(job.error);
  return [job.error.type, job.error.message].filter(Boolean).join(": ");
}

const replayed = (answer) => `Replayed ${answer.replayed} job(s).`;

// A group's jobs: the plain list filtered by its id (a group without one, dead before groups were kept: its type).
function groupLink(g) {
  const target = g.id ? `#/dlq${query({ group: g.id })}` : `#/dlq${query({ job_type: g.job_type })}`;
  return h("a", { href: target, class: "group-jobs" }, `${g.count} job(s)`);
}

function exampleLink(g) {
  return h("a", { href: `#/jobs/${g.example.job_id}`, class: "mono" }, short(g.example.job_id));
}

function groupsTable(items, replay) {
  const replayGroup = (g) =>
    action("Replay group", () => replay({ group: g.id, limit: REPLAY_AT_MOST }), {
      confirm: `Send the ${g.count} dead ${g.job_type} job(s) of this group back to work (up to ${REPLAY_AT_MOST})?`,
      done: replayed,
    });
  const columns = [
    { title: "count", key: "count", class: "num" },
    { title: "type", key: "job_type" },
    { title: "error", key: "error_class" },
    { title: "message", render: (g) => h("span", { class: "mono message" }, g.message || "—") },
    { title: "first seen", render: (g) => when(g.first_seen) },
    { title: "last seen", render: (g) => when(g.last_seen) },
    { title: "example", render: exampleLink },
    { title: "", render: (g) => h("div", { class: "inline" }, groupLink(g), g.id ? replayGroup(g) : null) },
  ];
  if (!items.length) return h("p", { class: "empty" }, "No failures: the dead-letter queue is empty.");
  return table(columns, items, (g) => ({ "data-group-id": g.id ?? `none-${g.job_type}` }));
}

// A dead job's payload as JSON in a text box; sent with its replay, it is checked by the job type's model and a
// refusal's fields show under it. A `***` left where a credential stood keeps the credential.
function payloadEditor(job, width, done) {
  const text = h("textarea", { name: "payload", rows: 8, spellcheck: "false" });
  text.value = JSON.stringify(job.payload, null, 2);
  const problems = h("div", { class: "problems" });
  const close = () => row.remove();
  const form = h(
    "form",
    { class: "stacked payload-editor" },
    h("label", {}, `Payload of job ${short(job.id)} (${job.job_type}), as JSON`, text),
    h("p", { class: "hint" }, "Credentials show as ***: leave them so to keep them, or type new ones."),
    problems,
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit" }, "Replay with this payload"),
      h("button", { type: "button", class: "quiet", onclick: close }, "Cancel"),
    ),
  );
  onSubmit(
    form,
    async () => {
      let payload;
      try {
        payload = JSON.parse(text.value);
      } catch (error) {
        throw new Error(`The payload is not valid JSON: ${error.message}`);
      }
      await api(`/api/v1/dlq/${job.id}/replay`, { method: "POST", body: { payload } });
      notify(`Job ${short(job.id)} replayed with its new payload.`);
      await done();
    },
    { problems },
  );
  const row = h("tr", { class: "editor", "data-editor-for": job.id }, h("td", { colspan: String(width) }, form));
  return row;
}

function deadTable(items, reload) {
  const columns = [
    { title: "", render: (j) => h("input", { type: "checkbox", name: "job", value: j.id, "aria-label": j.id }) },
    { title: "job", render: (j) => h("a", { href: `#/jobs/${j.id}`, class: "mono" }, short(j.id)) },
    { title: "type", key: "job_type" },
    { title: "reason", key: "reason" },
    { title: "attempts", key: "attempts", class: "num" },
    { title: "last error", render: lastError },
    { title: "died", render: (j) => when(j.finished_at || j.updated_at) },
  ];
  const edit = (j) => (event) => {
    const row = event.currentTarget.closest("tr");
    const open = row.nextElementSibling?.dataset.editorFor === j.id;
    for (const editor of row.closest("tbody").querySelectorAll("tr.editor")) editor.remove();
    if (!open) row.after(payloadEditor(j, columns.length, reload));
  };
  const editButton = (j) => h("button", { type: "button", class: "quiet", onclick: edit(j) }, "Edit & replay");
  columns.push({ title: "", render: editButton });
  if (!items.length) return h("p", { class: "empty" }, "The dead-letter queue is empty.");
  return table(columns, items, (j) => ({ "data-job-id": j.id }));
}

// Which dead jobs the list shows: one group's (with a way back to all), or all of them.
function listHeading(group) {
  if (!group) return null;
  return h(
    "p",
    { class: "hint", id: "dlq-group-filter" },
    "Only failure group ",
    h("code", {}, group),
    ". ",
    h("a", { href: "#/dlq" }, "Show every dead job"),
  );
}

export async function render(view, { params, signal }) {
  const types = await jobTypes(signal);
  const group = params.get("group");
  const statsBox = h("div");
  const groupsBox = h("div", { id: "dlq-groups" });
  const groupPages = h("div", { class: "pager" });
  const list = h("div", { id: "dlq-table" });
  const pages = h("div", { class: "pager" });
  const cursors = [null];
  const groupCursors = [null];
  const shown = (error) => replace(list, errorLine(error));
  const loadGroups = async () => {
    const page = query({ job_type: params.get("job_type"), limit: GROUPS, cursor: groupCursors.at(-1) });
    const groups = await api(`/api/v1/dlq/groups${page}`, { signal });
    replace(groupsBox, groupsTable(groups.items, replay));
    const next = () => loadGroups().catch((error) => replace(groupsBox, errorLine(error)));
    pager(groupPages, groupCursors, groups.next_cursor, next);
  };
  const reload = async () => {
    const page = query({ job_type: params.get("job_type"), group, limit: LIMIT, cursor: cursors.at(-1) });
    const [figures, dead] = await Promise.all([
      api("/api/v1/dlq/stats", { signal }),
      api(`/api/v1/dlq${page}`, { signal }),
      loadGroups(),
    ]);
    replace(statsBox, dlqStats(figures));
    replace(list, deadTable(dead.items, reload));
    pager(pages, cursors, dead.next_cursor, () => reload().catch(shown));
  };
  const replay = async (body) => {
    const answer = await api("/api/v1/dlq/replay", { method: "POST", body });
    await reload();
    return answer;
  };
  const kept = group ? h("input", { type: "hidden", name: "group", value: group }) : null;
  const filter = filterForm("/dlq", choice("job_type", "Type", types, params.get("job_type")), kept);
  const selected = () => [...list.querySelectorAll("input[name=job]:checked")].map((box) => box.value);
  const replaySelected = action("Replay selected", () => {
    const ids = selected();
    if (!ids.length) throw new Error("Select at least one job first.");
    return replay({ job_ids: ids });
  }, { confirm: "Send the selected jobs back to work?", done: replayed });
  const typeChoice = choice("replay_type", "Replay every job of type", types, "");
  const replayType = action("Replay type", () => {
    const jobType = typeChoice.querySelector("select").value;
    if (!jobType) throw new Error("Pick a job type to replay.");
    return replay({ job_type: jobType, limit: REPLAY_AT_MOST });
  }, { confirm: `Send every dead job of that type (up to ${REPLAY_AT_MOST}) back to work?`, done: replayed });
  const redrives = h("a", { href: "#/dlq/redrives", id: "redrives-link" }, "Redrives");
  const head = h("div", { class: "row dlq-head" }, h("h1", {}, "Dead-letter queue"), redrives);
  const about = "Dead jobs by job type, error and message (its numbers, ids and quoted values masked), biggest first.";
  view.append(
    head,
    section("Failure groups", h("p", { class: "hint" }, about), groupsBox, groupPages),
    section("Stats", statsBox),
    section(
      "Dead jobs",
      listHeading(group),
      filter,
      h("div", { class: "actions" }, replaySelected, typeChoice, replayType),
      list,
      pages,
    ),
  );
  await reload();
}
