// Webhook endpoints (never their secret) and a form to create one, whose secret shows once.
import { api, jobTypes } from "../api.js";
import { badge, h, onSubmit, replace, section, table, when } from "../dom.js";
import { secretOnce } from "../secret.js";
import { webhookBody, webhookFields } from "../webhook_form.js";

const COLUMNS = [
  { title: "endpoint", render: (w) => h("a", { href: `#/webhooks/${w.id}` }, w.url) },
  { title: "events", render: (w) => w.events.join(", ") },
  { title: "narrowed to", render: (w) => w.job_type || w.job_id || "—" },
  { title: "description", key: "description" },
  { title: "state", render: (w) => badge(w.active ? "active" : "disabled") },
  { title: "created", render: (w) => when(w.created_at) },
];

function list(hooks) {
  if (!hooks.length) return h("p", { class: "empty" }, "No endpoints yet.");
  return table(COLUMNS, hooks, (w) => ({ "data-webhook-id": w.id }));
}

export async function render(view, { signal }) {
  const types = await jobTypes(signal);
  const listBox = h("div", { id: "webhook-list" });
  const secretBox = h("div");
  const reload = async () => replace(listBox, list(await api("/api/v1/webhooks", { signal })));
  const fields = webhookFields({}, { creating: true, types });
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
