// The fields of a webhook endpoint, for creating one and for editing one, with the event catalogue: each event
// type an endpoint may subscribe to, what it is sent for, and an example of its body.
import { api } from "./api.js";
import { field, h, pretty } from "./dom.js";

// An endpoint's default events (a job's): what the form ticks when the catalogue cannot be read.
export const EVENTS = ["job.succeeded", "job.dead_lettered", "job.retrying", "job.cancelled"];

// Every event type a receiver can get (GET /api/v1/event-types), its example made by the service's own code.
export function eventCatalogue(signal) {
  return api("/api/v1/event-types", { signal });
}

function eventKind(kind, chosen) {
  const box = kind.subscribable
    ? h("input", { type: "checkbox", name: "events", value: kind.type, checked: chosen.has(kind.type) })
    : null;
  const note = kind.subscribable ? null : h("span", { class: "hint" }, " (sent on request, never subscribed to)");
  return h(
    "li",
    { class: "event-kind", "data-event-type": kind.type },
    h("label", { class: "check" }, box, h("code", {}, kind.type), note),
    h("p", { class: "hint" }, kind.description),
    h("details", {}, h("summary", {}, "Example body"), pretty(kind.example)),
  );
}

function eventChoices(chosen, catalogue) {
  if (!catalogue) {
    const box = (event) => h("input", { type: "checkbox", name: "events", value: event, checked: chosen.has(event) });
    return h("fieldset", {}, h("legend", {}, "Events"), EVENTS.map((e) => h("label", { class: "check" }, box(e), e)));
  }
  return h(
    "fieldset",
    { class: "event-catalogue", id: "event-catalogue" },
    h("legend", {}, "Events (what each body holds: open its example)"),
    h("ul", {}, catalogue.map((kind) => eventKind(kind, chosen))),
  );
}

function defaults(catalogue) {
  return catalogue ? catalogue.filter((kind) => kind.default).map((kind) => kind.type) : EVENTS;
}

export function webhookFields(hook = {}, { creating = false, types = [], catalogue = null } = {}) {
  const placeholder = "https://example.com/hooks";
  const url = h("input", { name: "url", type: "url", required: true, value: hook.url || "", placeholder });
  const typeOptions = [h("option", { value: "" }, "any"), types.map((t) => h("option", { value: t }, t))];
  return [
    field("URL", url),
    eventChoices(new Set(hook.events || defaults(catalogue)), catalogue),
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
