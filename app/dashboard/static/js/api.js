// The JSON API with the signed-in key as the bearer header; failures carry the API's own sentence.
const KEY = "taskq.apiKey";

export const session = {
  key: () => sessionStorage.getItem(KEY),
  save: (key) => sessionStorage.setItem(KEY, key),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, detail, code, errors = []) {
    super(detail);
    this.status = status;
    this.code = code;
    this.errors = errors;
  }
}

export function authHeaders(extra = {}) {
  return { Authorization: `Bearer ${session.key()}`, ...extra };
}

export async function failure(response) {
  let detail = `The service answered ${response.status} ${response.statusText}.`;
  let code;
  let errors;
  try {
    const body = await response.json();
    if (typeof body.detail === "string") detail = body.detail;
    code = body.code;
    if (Array.isArray(body.errors)) errors = body.errors;
  } catch {
    // not JSON: keep the status sentence
  }
  return new ApiError(response.status, detail, code, errors);
}

export async function api(path, { method = "GET", body, signal } = {}) {
  const headers = authHeaders(body === undefined ? {} : { "Content-Type": "application/json" });
  const response = await fetch(path, {
    method,
    headers,
    signal,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
  });
  if (!response.ok) throw await failure(response);
  return response.status === 204 ? null : response.json();
}

export async function download(path) {
  const response = await fetch(path, { headers: authHeaders(), credentials: "omit", cache: "no-store" });
  if (!response.ok) throw await failure(response);
  return response.blob();
}

// The job types, as the circuits list names them (any key may read it).
export async function jobTypes(signal) {
  return (await api("/api/v1/circuits", { signal })).map((circuit) => circuit.job_type);
}

export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(name, value);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}
