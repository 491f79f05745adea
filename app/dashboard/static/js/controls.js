// Controls several pages share: a choice list, a filter form that lives in the #/path?query, a cursor pager.
import { query } from "./api.js";
import { h, replace } from "./dom.js";

export function choice(name, label, values, selected) {
  const options = values.map((v) => h("option", { value: v, selected: v === selected }, v));
  return h("label", {}, label, h("select", { name }, h("option", { value: "" }, "any"), options));
}

// A form whose fields become the page's query, so a filtered view can be bookmarked and reloaded.
export function filterForm(route, ...fields) {
  const form = h("form", { class: "filters" }, fields, h("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    window.location.hash = `#${route}${query(Object.fromEntries(new FormData(form)))}`;
  });
  return form;
}

// Newer/older buttons over the API's opaque cursors: `cursors` is the stack of pages seen, its last the current.
export function pager(holder, cursors, next, load) {
  const go = (change) => () => {
    change();
    load();
  };
  replace(
    holder,
    cursors.length > 1 ? h("button", { type: "button", onclick: go(() => cursors.pop()) }, "Newer") : null,
    next ? h("button", { type: "button", onclick: go(() => cursors.push(next)) }, "Older") : null,
  );
}
