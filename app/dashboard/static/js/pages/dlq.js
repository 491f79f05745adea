// The dead-letter queue: stats, dead jobs with reason and last error, replay of a selection or of a type.
import { api, query } from "../api.js";
import { action, errorLine, h, replace, section, short, table, when } from "../dom.js";
import { choice, jobTypes } from "./jobs.js";

const LIMIT = 50;

function stats(s) {
  const rows = [["dead-lettered", s.dead_lettered], ...Object.entries(s.by_job_type), ...Object.entries(s.by_reason).map(([r, n]) => [`reason ${r}`, n])];
  if (s.broker_depth !== undefined) rows.push(["in the broker's DLQ", s.broker_depth]);
  return h("dl", { class: "facts", id: "dlq-stats" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))]));
}

function lastError(job) {
  if (!job.error) return "—";
  return typeof job.error === "object" ? [job.error.type, job.error.message].filter(Boolean).join(": ") : String(job.error);
}

function deadTable(items) {
  const columns = [
    { title: "", render: (j) => h("input", { type: "checkbox", name: "job", value: j.id, "aria-label": `select ${j.id}` }) },
    { title: "job", render: (j) => h("a", { href: `#/jobs/${j.id}`, class: "mono" }, short(j.id)) },
    { title: "type", key: "job_type" },
    { title: "reason", key: "reason" },
    { title: "attempts", key: "attempts", class: "num" },
    { title: "last error", render: lastError },
    { title: "died", render: (j) => when(j.finished_at || j.updated_at) },
  ];
  return items.length ? table(columns, items, (j) => ({ "data-job-id": j.id })) : h("p", { class: "empty" }, "The dead-letter queue is empty.");
}

export async function render(view, { params, signal }) {
  const types = await jobTypes(signal);
  const statsBox = h("div");
  const list = h("div", { id: "dlq-table" });
  const pager = h("div", { class: "pager" });
  const cursors = [null];
  const shown = (error) => replace(list, errorLine(error));
  const reload = async () => {
    const [figures, page] = await Promise.all([
      api("/api/v1/dlq/stats", { signal }),
      api(`/api/v1/dlq${query({ job_type: params.get("job_type"), limit: LIMIT, cursor: cursors.at(-1) })}`, { signal }),
    ]);
    replace(statsBox, stats(figures));
    replace(list, deadTable(page.items));
    const newer = cursors.length > 1 ? h("button", { type: "button", onclick: () => (cursors.pop(), reload().catch(shown)) }, "Newer") : null;
    const older = page.next_cursor ? h("button", { type: "button", onclick: () => (cursors.push(page.next_cursor), reload().catch(shown)) }, "Older") : null;
    replace(pager, newer, older);
  };
  const filter = h("form", { class: "filters" }, choice("job_type", "Type", types, params.get("job_type")), h("button", { type: "submit" }, "Filter"));
  filter.addEventListener("submit", (event) => {
    event.preventDefault();
    window.location.hash = `#/dlq${query({ job_type: new FormData(filter).get("job_type") })}`;
  });
  const replay = (body) => api("/api/v1/dlq/replay", { method: "POST", body }).then(async (answer) => (await reload(), answer));
  const selected = () => [...list.querySelectorAll("input[name=job]:checked")].map((box) => box.value);
  const replaySelected = action("Replay selected", () => {
    const ids = selected();
    if (!ids.length) throw new Error("Select at least one job first.");
    return replay({ job_ids: ids });
  }, { confirm: "Send the selected jobs back to work?", done: (a) => `Replayed ${a.replayed} job(s).` });
  const typeChoice = choice("replay_type", "Replay every job of type", types, "");
  const replayType = action("Replay type", () => {
    const jobType = typeChoice.querySelector("select").value;
    if (!jobType) throw new Error("Pick a job type to replay.");
    return replay({ job_type: jobType, limit: 1000 });
  }, { confirm: "Send every dead job of that type (up to 1000) back to work?", done: (a) => `Replayed ${a.replayed} job(s).` });
  view.append(
    h("h1", {}, "Dead-letter queue"),
    section("Stats", statsBox),
    section("Dead jobs", filter, h("div", { class: "actions" }, replaySelected, h("span", { class: "inline" }, typeChoice, replayType)), list, pager),
  );
  await reload();
}
