// Webhook deliveries with every attempt, each with a button to send it again.
import { api } from "./api.js";
import { action, badge, h, short, table, when } from "./dom.js";

const ATTEMPT_COLUMNS = [
  { title: "attempt", key: "attempt", class: "num" },
  { title: "status code", render: (a) => (a.status_code === null ? "—" : String(a.status_code)), class: "num" },
  { title: "duration", render: (a) => `${a.duration_ms.toFixed(1)} ms`, class: "num" },
  { title: "error", render: (a) => a.error || "—" },
  { title: "response body", render: (a) => (a.response_body ? h("pre", { class: "body" }, a.response_body) : "—") },
  { title: "at", render: (a) => when(a.created_at) },
  { title: "next attempt", render: (a) => when(a.next_attempt_at) },
];

export function deliveryCard(delivery, onChange) {
  const send = () => api(`/api/v1/deliveries/${delivery.id}/redeliver`, { method: "POST" }).then(onChange);
  const redeliver = action("Redeliver", send, {
    confirm: "Send this delivery to its endpoint again?",
    done: "Delivery queued again.",
  });
  const job = delivery.job_id
    ? h("a", { href: `#/jobs/${delivery.job_id}`, class: "mono" }, short(delivery.job_id))
    : null;
  const attempts = delivery.attempts.length
    ? table(ATTEMPT_COLUMNS, delivery.attempts, () => ({ class: "attempt" }))
    : h("p", { class: "empty" }, "No attempt yet.");
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
      redeliver,
    ),
    attempts,
  );
}

export function deliveryList(deliveries, onChange) {
  if (!deliveries.length) return h("p", { class: "empty" }, "No deliveries.");
  return h("div", { class: "deliveries" }, deliveries.map((d) => deliveryCard(d, onChange)));
}
