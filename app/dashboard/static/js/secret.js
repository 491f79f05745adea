// A signing secret, shown once with a copy button; it lives only in this element and is gone when it closes.
import { h, notify } from "./dom.js";

export function secretOnce(secret, title) {
  const box = h(
    "div",
    { class: "secret-once", id: "secret-once", role: "alert" },
    h("h3", {}, title),
    h("p", {}, "Copy it now: it is shown this once and never again."),
    h("code", { class: "secret" }, secret),
  );
  const copy = h("button", { type: "button" }, "Copy");
  copy.addEventListener("click", () =>
    navigator.clipboard.writeText(secret).then(
      () => notify("Secret copied."),
      () => notify("The browser refused the clipboard; select the secret and copy it by hand.", "bad"),
    ),
  );
  const dismiss = h("button", { type: "button", class: "quiet" }, "I have saved it");
  dismiss.addEventListener("click", () => box.remove());
  box.append(h("div", { class: "actions" }, copy, dismiss));
  return box;
}
