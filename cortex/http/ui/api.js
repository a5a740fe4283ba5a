// The node's JSON API (/api/v1/): reads by GET, changes by POST with the
// header that tells the node the page itself sent them.

const API = "/api/v1/";
const JSON_HEADERS = { Accept: "application/json" };
const CHANGE_HEADERS = { ...JSON_HEADERS, "Content-Type": "application/json", "X-Cortex-Request": "1" };

export class LoginNeeded extends Error {}

export class ApiError extends Error {
  constructor(status, body) {
    super(body.error || "the node answered " + status);
    this.status = status;
    this.body = body;
  }
}

let readListener = () => {};

// `listen(read)` is told where each answer was read (node and applied index).
export function onRead(listen) {
  readListener = listen;
}

// `params`: an object or URLSearchParams; empty values are left out and an
// array value is sent once per item.
function apiUrl(path, params) {
  const query = new URLSearchParams();
  const entries = params instanceof URLSearchParams ? params.entries() : Object.entries(params || {});
  for (const [name, value] of entries) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item !== null && item !== undefined && item !== "") query.append(name, item);
    }
  }
  const text = query.toString();
  return API + path + (text ? "?" + text : "");
}

async function answered(response) {
  if (response.status === 401) throw new LoginNeeded("log in with the API token");
  let body = {};
  try {
    body = await response.json();
  } catch (err) {
    body = {};
  }
  if (!response.ok) throw new ApiError(response.status, body);
  if (body.read) readListener(body.read);
  return body;
}

export async function api(path, params) {
  const response = await fetch(apiUrl(path, params), { credentials: "same-origin", headers: JSON_HEADERS });
  return answered(response);
}

export async function change(path, params, body) {
  const response = await fetch(apiUrl(path, params), {
    method: "POST",
    credentials: "same-origin",
    headers: CHANGE_HEADERS,
    body: JSON.stringify(body || {}),
  });
  return answered(response);
}
