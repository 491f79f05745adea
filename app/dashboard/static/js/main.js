// Sign-in, the navigation, and which page draws the view for the current #/path.
import { api, session } from "./api.js";
import { errorLine, forget, replace } from "./dom.js";
import * as dlq from "./pages/dlq.js";
import * as job from "./pages/job.js";
import * as jobs from "./pages/jobs.js";
import * as overview from "./pages/overview.js";
import * as schedules from "./pages/schedules.js";
import * as webhook from "./pages/webhook.js";
import * as webhooks from "./pages/webhooks.js";
import * as workers from "./pages/workers.js";
import * as workflow from "./pages/workflow.js";
import * as workflows from "./pages/workflows.js";

const ROUTES = [
  [/^\/?$/, overview, "overview"],
  [/^\/jobs$/, jobs, "jobs"],
  [/^\/jobs\/([^/]+)$/, job, "jobs"],
  [/^\/workflows$/, workflows, "workflows"],
  [/^\/workflows\/([^/]+)$/, workflow, "workflows"],
  [/^\/schedules$/, schedules, "schedules"],
  [/^\/dlq$/, dlq, "dlq"],
  [/^\/webhooks$/, webhooks, "webhooks"],
  [/^\/webhooks\/([^/]+)$/, webhook, "webhooks"],
  [/^\/workers$/, workers, "workers"],
];

const view = document.getElementById("view");
let who = null;
let current = null;

function location() {
  const [path, search = ""] = window.location.hash.replace(/^#/, "").split("?");
  return { path: path || "/", params: new URLSearchParams(search) };
}

async function show() {
  current?.abort();
  forget();
  if (!who) return;
  current = new AbortController();
  const { path, params } = location();
  const route = ROUTES.find(([pattern]) => pattern.test(path));
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("current", route !== undefined && link.dataset.page === route[2]);
  }
  if (!route) {
    replace(view, errorLine(new Error("No such page; pick one above.")));
    return;
  }
  const [pattern, page] = route;
  const context = { who, params, ids: path.match(pattern).slice(1), signal: current.signal };
  view.dataset.page = route[2];
  replace(view);
  try {
    await page.render(view, context);
  } catch (error) {
    if (context.signal.aborted) return;
    if (error.status === 401) return signOut(error.message);
    view.append(errorLine(error));
  }
}

function signedIn(me) {
  who = me;
  document.getElementById("sign-in").hidden = true;
  document.getElementById("nav").hidden = false;
  document.getElementById("sign-out").hidden = false;
  document.getElementById("who").textContent = me.admin ? `${me.client_id} (admin)` : me.client_id;
  for (const link of document.querySelectorAll("[data-admin]")) link.hidden = !me.admin;
  show();
}

function signOut(reason = "") {
  current?.abort();
  session.clear();
  who = null;
  replace(view);
  document.getElementById("nav").hidden = true;
  document.getElementById("sign-out").hidden = true;
  document.getElementById("who").textContent = "";
  document.getElementById("sign-in").hidden = false;
  document.getElementById("sign-in-error").textContent = reason;
  document.getElementById("api-key").focus();
}

async function signIn(event) {
  event.preventDefault();
  const input = document.getElementById("api-key");
  session.save(input.value.trim());
  input.value = "";
  try {
    signedIn(await api("/api/v1/me"));
  } catch (error) {
    signOut(error.message);
  }
}

document.getElementById("sign-in-form").addEventListener("submit", signIn);
document.getElementById("sign-out").addEventListener("click", () => signOut());
window.addEventListener("hashchange", show);

if (session.key()) {
  api("/api/v1/me").then(signedIn, (error) => signOut(error.message));
} else {
  signOut();
}
