// One webhook endpoint: its health (success rate, latency, last error, circuit, in flight, for 1 h and 24 h); its
// deliveries as one filtered table whose rows open to their attempts; edit, disable or enable, rotate its secret,
// test, delete; recovery.
import { api, query } from "../api.js";
import { choice, filterForm, pager } from "../controls.js";
import { deliveryPage, deliveryTable } from "../deliveries.js";
import { action, badge, errorLine, every, h, notify, onSubmit, replace, section, when } from "../dom.js";
import { secretOnce } from "../secret.js";
import { eventCatalogue, webhookBody, webhookFields } from "../webhook_form.js";
import { summaryCard } from "../webhook_stats.js";

const DELIVERY_STATUSES = ["pending", "succeeded", "failed"];
const REFRESH_MS = 3000;

function editForm(hook, reload, catalogue) {
  const save = h("button", { type: "submit" }, "Save changes");
  const form = h("form", { class: "stacked", id: "webhook-edit" }, webhookFields(hook, { catalogue }), save);
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

const PAGE = 50;
const RANGES = [
  ["", "any time"],
  ["1h", "last hour"],
  ["24h", "last 24 hours"],
  ["7d", "last 7 days"],
];
const RANGE_MS = { "1h": 3600e3, "24h": 86400e3, "7d": 7 * 86400e3 };

function rangeChoice(selected) {
  const options = RANGES.map(([value, label]) => h("option", { value, selected: value === (selected || "") }, label));
  return h("label", {}, "Time", h("select", { name: "range" }, options));
}

// The filters the page's #/webhooks/{id}?status=&event_type=&range= holds, as the deliveries call takes them.
function filtersOf(params) {
  const range = RANGE_MS[params.get("range")];
  return {
    status: params.get("status"),
    event_type: params.get("event_type"),
    since: range ? new Date(Date.now() - range).toISOString() : null,
  };
}

function filters(id, params, catalogue) {
  const types = catalogue.map((kind) => kind.type);
  return filterForm(
    `/webhooks/${id}`,
    choice("status", "Status", DELIVERY_STATUSES, params.get("status")),
    choice("event_type", "Event type", types, params.get("event_type")),
    rangeChoice(params.get("range")),
  );
}

export async function render(view, { ids: [id], params, signal }) {
  const catalogue = await eventCatalogue(signal);
  const parts = { head: h("div"), summary: h("div", { id: "webhook-summary" }), deliveries: h("div", { id: "webhook-deliveries" }) };
  const secretBox = h("div");
  const forms = h("div");
  const pages = h("div", { class: "pager" });
  const open = new Set(); // the deliveries whose attempts are shown
  const cursors = [null]; // the pages seen, the last the one shown
  const seen = {};
  // Redraw only the parts whose data changed, so an open row or a focused button survives a refresh.
  const put = (name, value, draw) => {
    const text = JSON.stringify(value);
    if (seen[name] !== text) replace(parts[name], draw(value));
    seen[name] = text;
  };
  const reload = async () => {
    const path = `/api/v1/webhooks/${id}`;
    const listed = `${path}/deliveries${query({ ...filtersOf(params), limit: PAGE, cursor: cursors.at(-1) })}`;
    const [hook, hour, day, page] = await Promise.all([
      api(path, { signal }),
      api(`${path}/stats?window=1h`, { signal }),
      api(`${path}/stats?window=24h`, { signal }),
      deliveryPage(listed, signal),
    ]);
    put("head", hook, (x) => [heading(x), controls(x, reload, secretBox)]);
    if (!forms.firstChild) {
      replace(forms, section("Edit", editForm(hook, reload, catalogue)), section("Recover", recoverForm(hook, reload)));
    }
    put("summary", [hour, day], ([x, y]) => summaryCard(x, y));
    put("deliveries", page.items, (items) => deliveryTable(items, open, reload));
    pager(pages, cursors, page.next, () => reload().catch((error) => notify(error.message, "bad")));
  };
  await reload();
  view.append(
    parts.head,
    secretBox,
    section("Health", parts.summary),
    section("Deliveries (newest first)", filters(id, params, catalogue), parts.deliveries, pages),
    forms,
  );
  every(REFRESH_MS, () => reload().catch((error) => signal.aborted || replace(parts.deliveries, errorLine(error))), signal);
}
