// Webhook deliveries: as cards with every attempt (a job's page), as one table whose rows open to their attempts
// (an endpoint's page), and as an audit-trail entry; each delivery with a button to send it again.
import { api, authHeaders, failure } from "./api.js";
import { action, badge, h, pretty, short, table, when } from "./dom.js";

const ATTEMPT_COLUMNS = [
  { title: "attempt", key: "attempt", class: "num" },
  { title: "status code", render: (a) => code(a.status_code), class: "num" },
  { title: "duration", render: (a) => ms(a.duration_ms), class: "num" },
  { title: "error", render: (a) => a.error || "—" },
  { title: "response body", render: (a) => (a.response_body ? h("pre", { class: "body" }, a.response_body) : "—") },
  { title: "at", render: (a) => when(a.created_at) },
  { title: "next attempt", render: (a) => when(a.next_attempt_at) },
];

function code(statusCode) {
  return statusCode === null || statusCode === undefined ? "—" : String(statusCode);
}

function ms(value) {
  return value === null || value === undefined ? "—" : `${value.toFixed(1)} ms`;
}

function attemptTable(attempts) {
  if (!attempts.length) return h("p", { class: "empty" }, "No attempt yet.");
  return table(ATTEMPT_COLUMNS, attempts, () => ({ class: "attempt" }));
}

function redeliverButton(delivery, onChange) {
  const send = () => api(`/api/v1/deliveries/${delivery.id}/redeliver`, { method: "POST" }).then(onChange);
  return action("Redeliver", send, { confirm: "Send this delivery to its endpoint again?", done: "Delivery queued again." });
}

export function deliveryCard(delivery, onChange) {
  const job = delivery.job_id
    ? h("a", { href: `#/jobs/${delivery.job_id}`, class: "mono" }, short(delivery.job_id))
    : null;
  return h(
    "article",
    { class: "delivery", "data-delivery-id": delivery.id },
    h(
      "header",
      {},
      badge(delivery.status),
      h("strong", {}, delivery.event_type),
      h("span", { class: "mono" }, delivery.id),
      job,
      h("span", { class: "url" }, delivery.url),
      redeliverButton(delivery, onChange),
    ),
    attemptTable(delivery.attempts),
  );
}

export function deliveryList(deliveries, onChange) {
  if (!deliveries.length) return h("p", { class: "empty" }, "No deliveries.");
  return h("div", { class: "deliveries" }, deliveries.map((d) => deliveryCard(d, onChange)));
}

const TABLE_HEAD = ["time", "event type", "status", "attempts", "last status code", "duration", "actions"];

// One delivery as a body of the table: its row, then its attempts in a row of their own, shown on demand.
// `open` holds the ids of the rows shown open, so a refresh keeps them so.
function deliveryRows(delivery, open, onChange) {
  const last = delivery.attempts.at(-1);
  const detailsId = `attempts-${delivery.id}`;
  const attempts = h(
    "tr",
    { class: "attempts-row", id: detailsId, hidden: !open.has(delivery.id) },
    h("td", { colspan: String(TABLE_HEAD.length), "data-label": "attempts" }, attemptTable(delivery.attempts)),
  );
  const toggle = h("button", {
    type: "button",
    class: "quiet",
    "aria-expanded": String(open.has(delivery.id)),
    "aria-controls": detailsId,
    text: `Attempts (${delivery.attempts.length})`,
    onclick: () => {
      attempts.hidden = !attempts.hidden;
      toggle.setAttribute("aria-expanded", String(!attempts.hidden));
      if (attempts.hidden) open.delete(delivery.id);
      else open.add(delivery.id);
    },
  });
  const job = delivery.job_id ? h("a", { href: `#/jobs/${delivery.job_id}`, class: "mono" }, short(delivery.job_id)) : null;
  const cells = [
    [h("time", { datetime: delivery.created_at }, when(delivery.created_at))],
    [delivery.event_type, job ? [" ", job] : null],
    [badge(delivery.status)],
    [String(delivery.attempts.length)],
    [code(last?.status_code)],
    [ms(last?.duration_ms)],
    [h("div", { class: "row-actions" }, toggle, redeliverButton(delivery, onChange))],
  ];
  const summary = h(
    "tr",
    { class: "summary" },
    cells.map((content, i) => h("td", { "data-label": TABLE_HEAD[i], class: i >= 3 && i <= 5 ? "num" : null }, content)),
  );
  return h("tbody", { class: "delivery", "data-delivery-id": delivery.id }, summary, attempts);
}

export function deliveryTable(deliveries, open, onChange) {
  if (!deliveries.length) return h("p", { class: "empty" }, "No deliveries match.");
  const head = h("thead", {}, h("tr", {}, TABLE_HEAD.map((title) => h("th", { scope: "col" }, title))));
  const rows = deliveries.map((d) => deliveryRows(d, open, onChange));
  return h("div", { class: "scroll" }, h("table", { class: "delivery-table" }, head, rows));
}

// A page of an endpoint's deliveries and the cursor to the next one (from the `Link` header), if any.
export async function deliveryPage(path, signal) {
  const response = await fetch(path, { headers: authHeaders(), signal, credentials: "omit", cache: "no-store" });
  if (!response.ok) throw await failure(response);
  const link = /<([^>]+)>;\s*rel="next"/.exec(response.headers.get("Link") || "");
  const next = link ? new URL(link[1], window.location.origin).searchParams.get("cursor") : null;
  return { items: await response.json(), next };
}

// A job's audit-trail entry for one delivery attempt: what was sent where and what came of it; the raw entry folded.
export function deliveryEntry(e) {
  const d = e.detail || {};
  const facts = [
    ["event type", d.event_type],
    ["endpoint", d.url ? h("span", { class: "url" }, d.url) : null],
    ["attempt", d.attempt === undefined ? null : String(d.attempt)],
    ["status code", d.status_code === undefined ? null : code(d.status_code)],
    ["duration", d.duration_ms === undefined ? null : ms(d.duration_ms)],
    ["error", d.error],
  ].filter(([, value]) => value !== null && value !== undefined);
  return h(
    "li",
    { "data-event": e.event, class: "delivery-entry" },
    h("span", { class: "event" }, e.event),
    d.outcome ? badge(d.outcome) : null,
    h("time", { datetime: e.created_at }, when(e.created_at)),
    h("dl", { class: "entry-facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", { "data-field": k }, v)])),
    h("details", {}, h("summary", {}, "JSON"), pretty(d)),
  );
}
