// One webhook endpoint: edit, disable or enable, rotate its secret, test, delete; its deliveries and recovery.
import { api, query } from "../api.js";
import { choice, filterForm } from "../controls.js";
import { deliveryList } from "../deliveries.js";
import { action, badge, errorLine, every, h, notify, onSubmit, replace, section, when } from "../dom.js";
import { secretOnce } from "../secret.js";
import { webhookBody, webhookFields } from "../webhook_form.js";

const DELIVERY_STATUSES = ["pending", "succeeded", "failed"];
const REFRESH_MS = 3000;

function editForm(hook, reload) {
  const save = h("button", { type: "submit" }, "Save changes");
  const form = h("form", { class: "stacked", id: "webhook-edit" }, webhookFields(hook), save);
  return onSubmit(form, async () => {
    await api(`/api/v1/webhooks/${hook.id}`, { method: "PATCH", body: webhookBody(form, false) });
    notify("Endpoint saved.");
    await reload();
  });
}

function recoverForm(hook, reload) {
  const since = h("input", { type: "datetime-local", name: "since", required: true });
  const form = h(
    "form",
    { class: "filters" },
    h("label", {}, "Send again every failed delivery since", since),
    h("button", { type: "submit" }, "Recover"),
  );
  const recover = async () => {
    const body = { since: new Date(since.value).toISOString() };
    const answer = await api(`/api/v1/webhooks/${hook.id}/recover`, { method: "POST", body });
    notify(`${answer.recovered} deliveries sent again.`);
    await reload();
  };
  return onSubmit(form, recover, { confirm: "Send every failed delivery since then again?" });
}

function controls(hook, reload, secretBox) {
  const path = `/api/v1/webhooks/${hook.id}`;
  const active = (on) => api(path, { method: "PATCH", body: { active: on } }).then(reload);
  const rotate = async () => {
    const { secret } = await api(`${path}/rotate-secret`, { method: "POST" });
    replace(secretBox, secretOnce(secret, "New signing secret (the old one keeps signing for 24 h)"));
  };
  const test = async () => {
    const answer = await api(`${path}/test`, { method: "POST" });
    await reload();
    return answer;
  };
  const remove = async () => {
    await api(path, { method: "DELETE" });
    window.location.hash = "#/webhooks";
  };
  return h(
    "div",
    { class: "actions" },
    hook.active
      ? action("Disable", () => active(false), {
          confirm: "Disable this endpoint? Nothing is sent to it until it is enabled again.",
          done: "Endpoint disabled.",
        })
      : action("Enable", () => active(true), { done: "Endpoint enabled." }),
    action("Send test event", test, { done: (answer) => `Test event queued (${answer.delivery_id}).` }),
    action("Rotate secret", rotate, {
      confirm: "Rotate the signing secret? The old one keeps signing alongside the new one for 24 hours.",
    }),
    action("Delete", remove, {
      kind: "danger",
      confirm: "Delete this endpoint? Nothing more is sent to it; this cannot be undone.",
      done: "Endpoint deleted.",
    }),
  );
}

function heading(hook) {
  return [
    h("h1", {}, "Endpoint ", badge(hook.active ? "active" : "disabled")),
    h("p", { class: "url" }, hook.url),
    hook.disabled_reason ? h("p", { class: "error" }, `Disabled: ${hook.disabled_reason}`) : null,
    h("p", { class: "hint" }, `Created ${when(hook.created_at)}; its secret is never shown after it was made.`),
  ];
}

export async function render(view, { ids: [id], params, signal }) {
  const head = h("div");
  const secretBox = h("div");
  const forms = h("div");
  const deliveries = h("div", { id: "webhook-deliveries" });
  const reload = async () => {
    const [hook, sent] = await Promise.all([
      api(`/api/v1/webhooks/${id}`, { signal }),
      api(`/api/v1/webhooks/${id}/deliveries${query({ status: params.get("status") })}`, { signal }),
    ]);
    replace(head, heading(hook), controls(hook, reload, secretBox));
    if (!forms.firstChild) {
      replace(forms, section("Edit", editForm(hook, reload)), section("Recover", recoverForm(hook, reload)));
    }
    replace(deliveries, deliveryList(sent.slice().reverse(), reload));
  };
  const filter = filterForm(`/webhooks/${id}`, choice("status", "Status", DELIVERY_STATUSES, params.get("status")));
  await reload();
  view.append(head, secretBox, section("Deliveries (newest first)", filter, deliveries), forms);
  every(REFRESH_MS, () => reload().catch((error) => signal.aborted || replace(deliveries, errorLine(error))), signal);
}
