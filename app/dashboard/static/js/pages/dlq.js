// The dead-letter queue: stats, dead jobs with reason and last error, replay of a selection or of a type.
import { api, jobTypes, query } from "../api.js";
import { choice, filterForm, pager } from "../controls.js";
import { action, errorLine, h, replace, section, short, table, when } from "../dom.js";

const LIMIT = 50;

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

function deadTable(items) {
  const columns = [
    { title: "", render: (j) => h("input", { type: "checkbox", name: "job", value: j.id, "aria-label": j.id }) },
    { title: "job", render: (j) => h("a", { href: `#/jobs/${j.id}`, class: "mono" }, short(j.id)) },
    { title: "type", key: "job_type" },
    { title: "reason", key: "reason" },
    { title: "attempts", key: "attempts", class: "num" },
    { title: "last error", render: lastError },
    { title: "died", render: (j) => when(j.finished_at || j.updated_at) },
  ];
  if (!items.length) return h("p", { class: "empty" }, "The dead-letter queue is empty.");
  return table(columns, items, (j) => ({ "data-job-id": j.id }));
}

export async function render(view, { params, signal }) {
  const types = await jobTypes(signal);
  const statsBox = h("div");
  const list = h("div", { id: "dlq-table" });
  const pages = h("div", { class: "pager" });
  const cursors = [null];
  const shown = (error) => replace(list, errorLine(error));
  const reload = async () => {
    const page = query({ job_type: params.get("job_type"), limit: LIMIT, cursor: cursors.at(-1) });
    const [figures, dead] = await Promise.all([
      api("/api/v1/dlq/stats", { signal }),
      api(`/api/v1/dlq${page}`, { signal }),
    ]);
    replace(statsBox, dlqStats(figures));
    replace(list, deadTable(dead.items));
    pager(pages, cursors, dead.next_cursor, () => reload().catch(shown));
  };
  const filter = filterForm("/dlq", choice("job_type", "Type", types, params.get("job_type")));
  const replay = async (body) => {
    const answer = await api("/api/v1/dlq/replay", { method: "POST", body });
    await reload();
    return answer;
  };
  const replayed = (answer) => `Replayed ${answer.replayed} job(s).`;
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
    return replay({ job_type: jobType, limit: 1000 });
  }, { confirm: "Send every dead job of that type (up to 1000) back to work?", done: replayed });
  view.append(
    h("h1", {}, "Dead-letter queue"),
    section("Stats", statsBox),
    section("Dead jobs", filter, h("div", { class: "actions" }, replaySelected, typeChoice, replayType), list, pages),
  );
  await reload();
}
