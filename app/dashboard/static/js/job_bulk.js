// The jobs list's selection and its bulk actions: one call cancels or retries every selected job, and a notice
// sums up what became of them.
import { api } from "./api.js";
import { h, notify } from "./dom.js";
import { update } from "./job_rows.js";

const SAID = {
  cancel: { cancelled: "cancelled", cancel_requested: "stopping", conflict: "already finished" },
  retry: { replayed: "replayed", conflict: "not dead-lettered" },
};

// "3 cancelled, 1 already finished": each outcome counted, in the order first met.
export function summary(action, items) {
  const counts = new Map();
  for (const { outcome } of items) {
    const said = SAID[action][outcome] || outcome.replace("_", " ");
    counts.set(said, (counts.get(said) || 0) + 1);
  }
  return [...counts].map(([said, n]) => `${n} ${said}`).join(", ") + ".";
}

// The bar over the table: select all, the count, Cancel and Retry. `outcomes(items, since)` gets what became of
// each job acted on, and when the action was sent; `picked()` is told when the selection changed here.
function bulkBar(selection, visibleIds, { outcomes, picked }) {
  const count = h("span", { id: "selected-count", class: "hint" });
  const all = h("input", { type: "checkbox", id: "select-all" });
  const buttons = [];
  const act = (action, label, kind) => {
    const button = h("button", { type: "button", id: `bulk-${action}`, class: kind, text: label });
    button.addEventListener("click", async () => {
      const ids = [...selection];
      if (!ids.length || !window.confirm(`${label} ${ids.length} job(s)?`)) return;
      button.disabled = true;
      const since = performance.now();
      try {
        const { items } = await api("/api/v1/jobs/bulk", { method: "POST", body: { action, job_ids: ids } });
        selection.clear();
        picked();
        outcomes(items, since);
        notify(summary(action, items));
      } catch (error) {
        notify(error.message, "bad");
      } finally {
        refresh();
      }
    });
    buttons.push(button);
    return button;
  };
  const refresh = () => {
    const ids = visibleIds();
    count.textContent = `${selection.size} selected`;
    all.checked = ids.length > 0 && ids.every((id) => selection.has(id));
    for (const button of buttons) button.disabled = selection.size === 0;
  };
  all.addEventListener("change", () => {
    for (const id of visibleIds()) all.checked ? selection.add(id) : selection.delete(id);
    picked();
    refresh();
  });
  const bar = h("div", { class: "actions bulk", id: "bulk" }, h("label", { class: "check" }, all, "Select all"), count);
  bar.append(act("cancel", "Cancel", "danger"), act("retry", "Retry", ""));
  refresh();
  return { bar, refresh };
}

// The selection of the list whose rows `rows()` gives (a Map of job id -> {row, job}): each row's checkbox
// (`pick(job)`, for the table's first column) and the bulk bar; the selection outlives every redraw.
export function bulkSelection(rows) {
  const selection = new Set();
  const picked = () => {
    for (const [id, { row }] of rows()) row.querySelector("input.pick").checked = selection.has(id);
  };
  // An outcome's status, unless a live event has told of the job since the action was sent (it is newer).
  const outcomes = (items, since) => {
    for (const { job_id, status } of items) {
      const entry = rows().get(job_id);
      if (status && entry && !(entry.touched > since)) update(entry, { status });
    }
  };
  const { bar, refresh } = bulkBar(selection, () => [...rows().keys()], { outcomes, picked });
  const pick = (job) =>
    h("input", {
      type: "checkbox",
      class: "pick",
      checked: selection.has(job.id),
      "aria-label": `Select job ${job.id}`,
      onchange: (event) => {
        event.target.checked ? selection.add(job.id) : selection.delete(job.id);
        refresh();
      },
    });
  return { bar, refresh, pick };
}
