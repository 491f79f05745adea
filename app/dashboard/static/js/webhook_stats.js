// An endpoint's health at a glance: its circuit and deliveries in flight now, and for the last hour and day its
// attempts' success rate, p50/p95 latency, deliveries by status and last error (GET /api/v1/webhooks/{id}/stats).
import { badge, h, when } from "./dom.js";

export function percent(rate) {
  return rate === null || rate === undefined ? "—" : `${Number((rate * 100).toFixed(1))}%`;
}

function millis(value) {
  return value === null || value === undefined ? "—" : `${value} ms`;
}

function lastError(error) {
  if (!error) return "none";
  const what = [error.status_code ?? "no answer", error.error].filter(Boolean).join(" · ");
  return [h("span", { class: "error-text" }, what), " ", h("time", { datetime: error.at, class: "hint" }, when(error.at))];
}

function windowCard(title, stats) {
  const rows = [
    ["success_rate", "success rate (attempts)", percent(stats.success_rate)],
    ["p50", "latency p50", millis(stats.latency_ms.p50)],
    ["p95", "latency p95", millis(stats.latency_ms.p95)],
    ["deliveries", "deliveries", `${stats.deliveries}: ${stats.succeeded} ok, ${stats.failed} failed, ${stats.pending} pending`],
    ["last_error", "last error", lastError(stats.last_error)],
  ];
  return h(
    "div",
    { class: "stat-card", "data-window": stats.window },
    h("h3", {}, title),
    h("dl", { class: "facts" }, rows.map(([key, label, value]) => [h("dt", {}, label), h("dd", { "data-field": key }, value)])),
  );
}

export function summaryCard(hour, day) {
  const now = h(
    "p",
    { class: "now" },
    h("span", {}, "Circuit ", h("span", { "data-field": "circuit" }, badge(hour.circuit))),
    h("span", {}, "In flight ", h("strong", { "data-field": "in_flight" }, String(hour.in_flight))),
  );
  return [now, h("div", { class: "stat-cards" }, windowCard("Last hour", hour), windowCard("Last 24 hours", day))];
}
