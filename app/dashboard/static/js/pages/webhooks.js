// Webhook endpoints (never their secret) with each one's success rate and circuit now, and a form to create one,
// whose secret shows once, with the event catalogue to pick its events from.
import { api, jobTypes } from "../api.js";
import { badge, h, onSubmit, replace, section, table, when } from "../dom.js";
import { secretOnce } from "../secret.js";
import { eventCatalogue, webhookBody, webhookFields } from "../webhook_form.js";
import { percent } from "../webhook_stats.js";

const COLUMNS = [
  { title: "endpoint", render: (w) => h("a", { href: `#/webhooks/${w.id}` }, w.url) },
  { title: "events", render: (w) => w.events.join(", ") },
  { title: "narrowed to", render: (w) => w.job_type || w.job_id || "—" },
  { title: "description", key: "description" },
  { title: "state", render: (w) => badge(w.active ? "active" : "disabled") },
  { title: "success (1 h)", render: (w) => h("span", { "data-field": "success_rate" }, percent(w.stats?.success_rate)), class: "num" },
  { title: "circuit", render: (w) => (w.stats ? badge(w.stats.circuit) : "—") },
  { title: "created", render: (w) => when(w.created_at) },
];

function list(hooks) {
  if (!hooks.length) return h("p", { class: "empty" }, "No endpoints yet.");
  return table(COLUMNS, hooks, (w) => ({ "data-webhook-id": w.id }));
}

// Each endpoint with its last hour's stats (one call each: a list holds tens); an endpoint whose stats cannot be
// read shows dashes.
async function withStats(hooks, signal) {
  const stats = await Promise.all(
    hooks.map((w) => api(`/api/v1/webhooks/${w.id}/stats?window=1h`, { signal }).catch(() => null)),
  );
  return hooks.map((w, i) => ({ ...w, stats: stats[i] }));
}

export async function render(view, { signal }) {
  const [types, catalogue] = await Promise.all([jobTypes(signal), eventCatalogue(signal)]);
  const listBox = h("div", { id: "webhook-list" });
  const secretBox = h("div");
  const reload = async () => replace(listBox, list(await withStats(await api("/api/v1/webhooks", { signal }), signal)));
  const fields = webhookFields({}, { creating: true, types, catalogue });
  const create = h("button", { type: "submit" }, "Create endpoint");
  const form = h("form", { class: "stacked", id: "webhook-create" }, fields, create);
  onSubmit(form, async () => {
    const created = await api("/api/v1/webhooks", { method: "POST", body: webhookBody(form, true) });
    form.reset();
    replace(secretBox, secretOnce(created.secret, `Signing secret of ${created.url}`));
    await reload();
  });
  view.append(h("h1", {}, "Webhooks"), secretBox, section("Endpoints", listBox), section("New endpoint", form));
  await reload();
}
