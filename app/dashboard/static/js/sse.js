// Server-Sent Events read with fetch: EventSource cannot send the bearer header the API needs.
import { authHeaders, failure } from "./api.js";

const RECONNECT_MS = 2000;

function parse(block) {
  const message = { id: null, event: "message", data: [] };
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (name === "data") message.data.push(value);
    else if (name === "id") message.id = value;
    else if (name === "event") message.event = value;
  }
  return message.data.length ? { ...message, data: JSON.parse(message.data.join("\n")) } : null;
}

async function readOnce(path, lastId, onMessage, signal, onOpen) {
  const headers = authHeaders({ Accept: "text/event-stream", ...(lastId ? { "Last-Event-ID": lastId } : {}) });
  const response = await fetch(path, { headers, signal, credentials: "omit", cache: "no-store" });
  if (!response.ok) throw await failure(response);
  onOpen();
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let carried = ""; // a chunk's last "\r" may be the first half of "\r\n"
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return lastId;
    const text = carried + value;
    carried = text.endsWith("\r") ? "\r" : "";
    buffer += (carried ? text.slice(0, -1) : text).replace(/\r\n?/g, "\n");
    let boundary;
    while ((boundary = buffer.indexOf("\n\n")) >= 0) {
      const message = parse(buffer.slice(0, boundary));
      buffer = buffer.slice(boundary + 2);
      if (message) {
        lastId = message.id || lastId;
        onMessage(message);
      }
    }
  }
}

// Follow `path` until `signal` aborts, reconnecting with Last-Event-ID (unless `reconnect` is false).
export async function follow(path, onMessage, options) {
  const { signal, onOpen = () => {}, onError = () => {}, reconnect = true } = options;
  let lastId = null;
  while (!signal.aborted) {
    try {
      lastId = await readOnce(path, lastId, onMessage, signal, onOpen);
      if (!reconnect) return;
    } catch (error) {
      if (signal.aborted) return;
      onError(error);
      if (error.status && error.status < 500) return;
    }
    await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
  }
}
