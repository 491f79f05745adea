// The fields of a webhook endpoint, for creating one and for editing one.
import { field, h } from "./dom.js";

// An endpoint's default events (a job's), then those it may ask for by name (a workflow's end).
export const EVENTS = ["job.succeeded", "job.dead_lettered", "job.retrying", "job.cancelled"];
const WORKFLOW_EVENTS = ["workflow.succeeded", "workflow.failed", "workflow.cancelled"];

function eventChoices(chosen) {
  const box = (event) => h("input", { type: "checkbox", name: "events", value: event, checked: chosen.has(event) });
  const choices = [...EVENTS, ...WORKFLOW_EVENTS].map((e) => h("label", { class: "check" }, box(e), e));
  return h("fieldset", {}, h("legend", {}, "Events"), choices);
}

export function webhookFields(hook = {}, { creating = false, types = [] } = {}) {
  const placeholder = "https://example.com/hooks";
  const url = h("input", { name: "url", type: "url", required: true, value: hook.url || "", placeholder });
  const typeOptions = [h("option", { value: "" }, "any"), types.map((t) => h("option", { value: t }, t))];
  return [
    field("URL", url),
    eventChoices(new Set(hook.events || EVENTS)),
    creating ? field("Only job type", h("select", { name: "job_type" }, typeOptions)) : null,
    creating ? field("Only job id", h("input", { name: "job_id", maxlength: "36" })) : null,
    field("Description", h("input", { name: "description", maxlength: "500", value: hook.description || "" })),
  ];
}

export function webhookBody(form, creating) {
  const data = new FormData(form);
  const body = { url: data.get("url"), events: data.getAll("events"), description: data.get("description") || null };
  if (creating) {
    body.job_type = data.get("job_type") || null;
    body.job_id = data.get("job_id") || null;
  }
  return body;
}
