// The page's one way to the server: the same JSON endpoints as any client, with the bearer
// token (when the server asks for one) from sessionStorage: never from or into the URL.

const TOKEN_KEY = "vaultsearch.token";

export class ApiError extends Error {
  constructor(status, info) {
    super(info.message || `HTTP ${status}`);
    this.status = status;
    this.info = info; // {reason, message, hint?, evidence?}: the API's error object
  }
}

export function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** Call a tool: GET without a body, POST with one. Rejects with ApiError, or AbortError when cancelled. */
export async function api(name, body, signal) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  const init = { method: "GET", headers, signal, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    init.method = "POST";
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch("/" + name, init);
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const info = data && data.error ? data.error : { reason: "http_" + response.status, message: response.statusText };
    throw new ApiError(response.status, info);
  }
  return data;
}
