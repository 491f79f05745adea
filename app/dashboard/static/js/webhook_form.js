// The fields of a webhook endpoint, for creating one and for editing one.
import { h } from "./dom.js";

export const EVENTS = ["job.succeeded", "job.dead_lettered", "job.retrying", "job.cancelled"];

export function webhookFields(hook = {}, { creating = false, types = [] } = {}) {
  const chosen = new Set(hook.events || EVENTS);
  return [
    h("label", {}, "URL", h("input", { name: "url", type: "url", required: true, value: hook.url || "", placeholder: "https://example.com/hooks" })),
    h(
      "fieldset",
      {},
      h("legend", {}, "Events"),
      EVENTS.map((event) => h("label", { class: "check" }, h("input", { type: "checkbox", name: "events", value: event, checked: chosen.has(event) }), event)),
    ),
    creating
      ? h("label", {}, "Only job type", h("select", { name: "job_type" }, h("option", { value: "" }, "any"), types.map((t) => h("option", { value: t }, t))))
      : null,
    creating ? h("label", {}, "Only job id", h("input", { name: "job_id", maxlength: "36" })) : null,
    h("label", {}, "Description", h("input", { name: "description", maxlength: "500", value: hook.description || "" })),
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
