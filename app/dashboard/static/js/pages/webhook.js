// One webhook endpoint: edit, disable or enable, rotate its secret, test, delete; its deliveries and recovery.
import { api, query } from "../api.js";
import { action, badge, errorLine, h, notify, replace, section, when } from "../dom.js";
import { deliveryList } from "../deliveries.js";
import { secretOnce } from "../secret.js";
import { webhookBody, webhookFields } from "../webhook_form.js";
import { choice } from "./jobs.js";

function editForm(hook, reload) {
  const form = h("form", { class: "stacked", id: "webhook-edit" }, webhookFields(hook), h("button", { type: "submit" }, "Save changes"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await api(`/api/v1/webhooks/${hook.id}`, { method: "PATCH", body: webhookBody(form, false) });
      notify("Endpoint saved.");
      await reload();
    } catch (error) {
      notify(error.message, "bad");
    }
  });
  return form;
}

function recoverForm(hook, reload) {
  const since = h("input", { type: "datetime-local", name: "since", required: true });
  const form = h("form", { class: "filters" }, h("label", {}, "Send again every failed delivery since", since), h("button", { type: "submit" }, "Recover"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!window.confirm("Send every failed delivery since then again?")) return;
    try {
      const body = { since: new Date(since.value).toISOString() };
      const answer = await api(`/api/v1/webhooks/${hook.id}/recover`, { method: "POST", body });
      notify(`${answer.recovered} deliveries sent again.`);
      await reload();
    } catch (error) {
      notify(error.message, "bad");
    }
  });
  return form;
}

function controls(hook, reload, secretBox) {
  const post = (tail) => api(`/api/v1/webhooks/${hook.id}/${tail}`, { method: "POST" });
  const active = (on) => api(`/api/v1/webhooks/${hook.id}`, { method: "PATCH", body: { active: on } }).then(reload);
  return h(
    "div",
    { class: "actions" },
    hook.active
      ? action("Disable", () => active(false), { confirm: "Disable this endpoint? Nothing is sent to it until it is enabled.", done: "Endpoint disabled." })
      : action("Enable", () => active(true), { done: "Endpoint enabled." }),
    action("Send test event", () => post("test").then(reload), { done: (a) => `Test event queued (${a?.delivery_id ?? "sent"}).` }),
    action("Rotate secret", () => post("rotate-secret").then((a) => replace(secretBox, secretOnce(a.secret, "New signing secret (the old one keeps signing for 24 h)"))), {
      confirm: "Rotate the signing secret? The old one keeps signing alongside the new one for 24 hours.",
    }),
    action("Delete", () => api(`/api/v1/webhooks/${hook.id}`, { method: "DELETE" }).then(() => (window.location.hash = "#/webhooks")), {
      kind: "danger",
      confirm: "Delete this endpoint? Nothing more is sent to it; this cannot be undone.",
      done: "Endpoint deleted.",
    }),
  );
}

export async function render(view, { ids: [id], params, signal }) {
  const head = h("div");
  const secretBox = h("div");
  const edit = h("div");
  const deliveries = h("div", { id: "webhook-deliveries" });
  const reload = async () => {
    const status = params.get("status");
    const [hook, sent] = await Promise.all([
      api(`/api/v1/webhooks/${id}`, { signal }),
      api(`/api/v1/webhooks/${id}/deliveries${query({ status })}`, { signal }),
    ]);
    replace(head, h("h1", {}, "Endpoint ", badge(hook.active ? "active" : "disabled")), h("p", { class: "url" }, hook.url),
      hook.disabled_reason ? h("p", { class: "error" }, `Disabled: ${hook.disabled_reason}`) : null,
      h("p", { class: "hint" }, `Created ${when(hook.created_at)}; the secret is never shown again after creation.`), controls(hook, reload, secretBox));
    if (!edit.firstChild) replace(edit, section("Edit", editForm(hook, reload)), section("Recover", recoverForm(hook, reload)));
    replace(deliveries, deliveryList(sent.slice().reverse(), reload));
  };
  const filter = h("form", { class: "filters" }, choice("status", "Status", ["pending", "succeeded", "failed"], params.get("status")), h("button", { type: "submit" }, "Filter"));
  filter.addEventListener("submit", (event) => {
    event.preventDefault();
    window.location.hash = `#/webhooks/${id}${query({ status: new FormData(filter).get("status") })}`;
  });
  await reload();
  view.append(head, secretBox, section("Deliveries (newest first)", filter, deliveries), edit);
  const refresh = h("button", { type: "button", onclick: () => reload().catch((error) => replace(deliveries, errorLine(error))) }, "Refresh");
  view.append(h("div", { class: "actions" }, refresh));
}
