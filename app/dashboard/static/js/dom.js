// Building the page from data: elements, tables, times, JSON, and the one toast.

export function h(tag, props = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") element.textContent = value;
    else if (name === "class") element.className = value;
    else if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name in element && typeof value !== "string" && typeof value !== "boolean") element[name] = value;
    else element.setAttribute(name, value === true ? "" : value);
  }
  append(element, children);
  return element;
}

const SVG = "http://www.w3.org/2000/svg";

// An SVG element: attributes as given, an optional text.
export function svg(tag, attributes = {}, text) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  if (text !== undefined) element.textContent = text;
  return element;
}

export function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

export function replace(element, ...children) {
  element.replaceChildren();
  return append(element, children);
}

const pad = (n, width = 2) => String(n).padStart(width, "0");

// A time as `2026-12-05 07:22:19.123` in the browser's time zone: to the millisecond, so the rows of an audit
// trail written within one second still tell their order.
export function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const day = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  return `${day} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

// `when` as a <time> element whose title holds the full ISO time the API sent.
export function stamp(iso) {
  return iso ? h("time", { datetime: iso, title: iso }, when(iso)) : "—";
}

export function pretty(value) {
  return h("pre", { class: "json" }, value === null || value === undefined ? "null" : JSON.stringify(value, null, 2));
}

export function badge(status) {
  return h("span", { class: `badge status-${status}`, "data-status": status }, status);
}

export function table(columns, rows, rowProps = () => ({})) {
  const head = h("tr", {}, columns.map((column) => h("th", { scope: "col" }, column.title)));
  const body = rows.map((row) => h("tr", rowProps(row), columns.map((column) => cell(column, row))));
  return h("div", { class: "scroll" }, h("table", {}, h("thead", {}, head), h("tbody", {}, body)));
}

function cell(column, row) {
  const value = column.render ? column.render(row) : row[column.key];
  return h("td", { "data-label": column.title, class: column.class }, value ?? "—");
}

export function section(title, ...children) {
  return h("section", { class: "panel" }, h("h2", {}, title), children);
}

// The API's sentence and, under it, what is wrong with each field a 422 names (its `errors`), a line each.
export function errorLine(error) {
  const fields = (error.errors || []).map((e) => h("span", { class: "field" }, `${e.loc.join(".")}: ${e.msg}`));
  return h("p", { class: "error", role: "alert" }, error.message || String(error), fields);
}

export function field(label, input) {
  return h("label", {}, label, input);
}

export function short(id) {
  return id ? id.slice(0, 8) : "—";
}

let toastTimer;

// A notice belongs to the page it was raised on (a navigation raised with it belongs to the page it leads to).
export function notify(message, kind = "ok") {
  const toast = document.getElementById("toast");
  toast.textContent = message;
  toast.className = `toast shown ${kind}`;
  toast.dataset.page = pagePath();
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => (toast.className = "toast"), 6000);
}

// Hide the notice when the page it belongs to is left.
export function noticeLeft() {
  const toast = document.getElementById("toast");
  if (toast.dataset.page === pagePath()) return;
  toast.className = "toast";
  toast.textContent = "";
}

function pagePath() {
  return window.location.hash.replace(/^#/, "").split("?")[0] || "/";
}

// Run an action from a button: confirm it when asked, show the API's sentence when it fails.
export function action(label, run, { confirm: question, kind = "", done, disabled = false } = {}) {
  return h("button", {
    type: "button",
    class: kind,
    disabled,
    text: label,
    onclick: async (event) => {
      if (question && !window.confirm(question)) return;
      const button = event.currentTarget;
      button.disabled = true;
      try {
        const result = await run();
        if (done) notify(typeof done === "function" ? done(result) : done);
      } catch (error) {
        notify(error.message, "bad");
      } finally {
        button.disabled = false;
      }
    },
  });
}

// Handle a form's submit in place: `run` gets the form; a failure shows the API's sentence, in `problems` (an
// element beside the form, emptied at each submit) when given, else in the toast.
export function onSubmit(form, run, { confirm: question, problems } = {}) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (question && !window.confirm(question)) return;
    if (problems) replace(problems);
    try {
      await run(form);
    } catch (error) {
      if (problems) replace(problems, errorLine(error));
      else notify(error.message, "bad");
    }
  });
  return form;
}

// Repeat `task` every `ms` (after the first wait) until `signal` aborts.
export function every(ms, task, signal) {
  const timer = setInterval(task, ms);
  signal.addEventListener("abort", () => clearInterval(timer));
}
