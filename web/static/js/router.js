// The page's own URLs: "/" (the fleet, its filters in the query string),
// "/?app=<namespace>/<name>" (one application; another cluster's namespace
// is "<namespace>.<cluster>") and "/?board=1" (the drift
// board). Navigation uses the
// History API, so moving between views never reloads the page.

const listeners = new Set();
let lastList = '/';

// remember keeps the newest location of the list (with its filters), the
// place "Applications" leads back to.
function remember() {
  const q = new URLSearchParams(location.search);
  if (!q.has('app') && !q.has('board')) lastList = location.pathname + location.search;
}

remember();

/** listLocation is the list's URL as last seen, filters included. */
export function listLocation() {
  return lastList;
}

/** onRoute registers fn(location) for every navigation. */
export function onRoute(fn) {
  listeners.add(fn);
}

function emit() {
  remember();
  for (const fn of listeners) fn(location);
}

window.addEventListener('popstate', emit);

/** navigate goes to a URL of this page without reloading it. */
export function navigate(url) {
  if (url !== location.pathname + location.search + location.hash) history.pushState(null, '', url);
  emit();
}

/** replaceQuery rewrites the query string in place (filters as one types). */
export function replaceQuery(params) {
  const q = params.toString();
  const url = location.pathname + (q ? '?' + q : '') + location.hash;
  if (url !== location.pathname + location.search + location.hash) history.replaceState(null, '', url);
  remember();
}

/** current reads the route: {app: {namespace, name}}, {board: true} or {list: URLSearchParams}. */
export function current() {
  const q = new URLSearchParams(location.search);
  if (q.has('board')) return {board: true, query: q};
  const app = q.get('app');
  if (app) {
    // A namespace is a DNS label; another cluster's is "<namespace>.<cluster>".
    const m = /^([a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)?)\/([a-z0-9](?:[-a-z0-9]*[a-z0-9])?)$/.exec(app);
    if (m) return {app: {namespace: m[1], name: m[2]}, query: q};
  }
  return {list: q};
}

/** appURL is the URL of one application's page. */
export function appURL(namespace, name) {
  return '/?app=' + encodeURIComponent(namespace) + '/' + encodeURIComponent(name);
}

/**
 * linkHandler makes a click on a same-page link navigate in place (a click
 * with a modifier key still opens a new tab as usual).
 */
export function followLink(ev) {
  const a = ev.target.closest && ev.target.closest('a[href]');
  if (!a || a.target || a.hasAttribute('download')) return;
  if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname !== '/') return;
  ev.preventDefault();
  navigate(url.pathname + url.search + url.hash);
}
