// Calls to deployd's public routes. Every call is same-origin with the
// session cookie; a 401 sends the browser to sign in and come back here;
// an error answer ({"error","message","code"}) becomes an ApiError whose
// message is the server's.

/** ApiError is a failed call: the server's message and the HTTP status (0: no answer). */
export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
  }
}

/** here is the current location, the place to come back to after signing in. */
export function here() {
  return location.pathname + location.search + location.hash;
}

/** loginURL is the sign-in route with the current location to return to. */
export function loginURL(base = '/v1/deploy/login') {
  const u = new URL(base, location.origin);
  u.searchParams.set('returnTo', here());
  return u.pathname + u.search;
}

let leaving = false;

/** goLogin navigates to sign in, once. */
export function goLogin() {
  if (leaving) return;
  leaving = true;
  location.assign(loginURL());
}

/** seg escapes a path segment (":" is kept: resource refs use it). */
export function seg(s) {
  return encodeURIComponent(s).replace(/%3A/gi, ':');
}

/**
 * api calls a route and answers its decoded JSON (null for an empty body).
 * options: method, body (sent as JSON), signal.
 */
export async function api(path, {method = 'GET', body, signal} = {}) {
  const init = {method, headers: {Accept: 'application/json'}, credentials: 'same-origin', signal, cache: 'no-store'};
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    if (err && err.name === 'AbortError') throw err;
    throw new ApiError('deployd cannot be reached; check the connection and try again.', 0);
  }
  if (res.status === 401) {
    goLogin();
    throw new ApiError('Your session has ended; signing in again…', 401);
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!res.ok) {
    const msg = (data && (data.message || data.error)) || `deployd answered ${res.status} ${res.statusText}`.trim();
    throw new ApiError(msg, res.status);
  }
  return data;
}
