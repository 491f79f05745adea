// Queues (admin): a row per lane, worker queue and DLQ with its depth, consumers and rate; the retry tiers of each
// folded into one "in retry" figure whose per-tier detail opens on demand, and the tiers added up per topology.
import { h, table } from "../dom.js";

// A retry tier's messages return to its lane; the webhook tiers' to the deliver queue.
const returnsTo = (tier) => (tier.feeds === "webhooks" ? "webhooks.deliver" : tier.feeds);

function rate(value) {
  if (value === null || value === undefined) return "—";
  const shown = value.toFixed(1);
  if (Number(shown) === 0) return "0.0/s"; // not "-0.0/s" for a depth that fell by less than a tenth a second
  return `${value > 0 ? "+" : ""}${shown}/s`;
}

function retryCell(row) {
  if (!row.tiers.length) return "—";
  const total = row.tiers.reduce((sum, t) => sum + t.ready, 0);
  const detail = row.tiers.map((t) => h("li", { "data-tier": t.tier }, `${t.tier}: ${t.ready}`));
  return h("details", { class: "tiers" }, h("summary", {}, String(total)), h("ul", {}, detail));
}

function rates(row) {
  const parts = [rate(row.change_per_second)];
  if (row.publish_per_second !== null) parts.push(`in ${row.publish_per_second.toFixed(1)}/s`);
  if (row.deliver_per_second !== null) parts.push(`out ${row.deliver_per_second.toFixed(1)}/s`);
  return parts.join(" · ");
}

function inRetry(answer) {
  const figures = Object.entries(answer.in_retry).map(([topology, n]) =>
    h("div", { class: "figure", "data-topology": topology }, h("span", { class: "n" }, String(n)), h("span", {}, `${topology} in retry`)),
  );
  return h("div", { class: "figures-grid", id: "in-retry" }, figures);
}

export function queueTable(answer) {
  const rows = new Map();
  for (const item of answer.items) if (item.kind !== "retry") rows.set(item.queue, { ...item, tiers: [] });
  for (const tier of answer.items.filter((i) => i.kind === "retry")) rows.get(returnsTo(tier))?.tiers.push(tier);
  for (const row of rows.values()) row.tiers.sort((a, b) => parseFloat(a.tier) - parseFloat(b.tier));
  const columns = [
    { title: "queue", key: "queue" },
    { title: "ready", key: "ready", class: "num" },
    { title: "consumers", key: "consumers", class: "num" },
    { title: "in retry", render: retryCell, class: "num retry" },
    { title: "rate", render: rates, class: "num" },
  ];
  const note = answer.sampled_over_seconds
    ? `Rate: change of ready messages per second over the last ${Math.round(answer.sampled_over_seconds)} s${
        answer.rates_from === "management" ? "; in/out from the broker's management API" : ""
      }.`
    : "Rate: shown from the next refresh (the change between two reads).";
  return h(
    "div",
    { id: "queue-depths" },
    inRetry(answer),
    table(columns, [...rows.values()], (r) => ({ "data-queue": r.queue })),
    h("p", { class: "hint" }, note),
  );
}
