// Fleet holds the applications the signed-in user may see: one list
// request, then the live stream from that list's resourceVersion. Rows are
// compact records of what the list shows; changes are applied as they
// arrive and handed to views once per frame (with the keys that changed),
// so a burst of thousands of events costs one render.
import {api, seg} from './api.js';
import {LiveStream} from './stream.js';

const LABEL_ENV = 'hanzo.ai/env';
const LABEL_ORG = 'hanzo.ai/org';

// The list asks only for what the rows show.
const LIST_FIELDS = [
  'metadata.resourceVersion',
  'items.metadata.name', 'items.metadata.namespace', 'items.metadata.labels',
  'items.spec.project', 'items.spec.destination.name', 'items.status.sync', 'items.status.health', 'items.status.operationState',
].join(',');

/** appKey is "<namespace>/<name>". */
export function appKey(namespace, name) {
  return namespace + '/' + name;
}

/**
 * clusterOf is the name of the cluster an Application runs in: its
 * spec.destination.name, which the server sets only when it reads several
 * clusters ("" with one).
 */
export function clusterOf(app) {
  const spec = app.spec || {};
  return (spec.destination && spec.destination.name) || '';
}

/** toRow turns an Application (or a part of one) into a list row. */
export function toRow(app) {
  const md = app.metadata || {};
  const labels = md.labels || {};
  const st = app.status || {};
  return {
    key: appKey(md.namespace || '', md.name || ''),
    name: md.name || '',
    namespace: md.namespace || '',
    cluster: clusterOf(app),
    env: labels[LABEL_ENV] || '',
    org: labels[LABEL_ORG] || '',
    project: (app.spec && app.spec.project) || 'default',
    health: (st.health && st.health.status) || 'Unknown',
    healthMessage: (st.health && st.health.message) || '',
    sync: (st.sync && st.sync.status) || 'Unknown',
    revision: (st.sync && st.sync.revision) || '',
    operation: (st.operationState && st.operationState.phase) || '',
  };
}

function compareKeys(rows) {
  return (a, b) => {
    const x = rows.get(a), y = rows.get(b);
    if (x.namespace !== y.namespace) return x.namespace < y.namespace ? -1 : 1;
    return x.name < y.name ? -1 : x.name > y.name ? 1 : 0;
  };
}

export class Fleet {
  constructor() {
    this.rows = new Map();
    this.keys = [];          // sorted by namespace, name
    this.revision = '';      // the list's resourceVersion
    this.lastId = '';        // the newest event id seen
    this.loaded = false;
    this.error = null;
    this.views = new Set();  // fn({dirty:Set, structural:bool})
    this.watchers = new Map(); // key → Set of fn(type, app)
    this.dirty = new Set();
    this.structural = false;
    this.unsorted = false;
    this.removed = false;
    this.scheduled = false;
    this.stream = null;
  }

  /** load reads the list once, then follows the stream. */
  async load() {
    try {
      const list = await api('/v1/deploy/applications?fields=' + encodeURIComponent(LIST_FIELDS));
      if (this.closed) return;
      this.rows.clear();
      for (const item of list.items || []) {
        const r = toRow(item);
        this.rows.set(r.key, r);
      }
      this.keys = [...this.rows.keys()].sort(compareKeys(this.rows));
      this.revision = (list.metadata && list.metadata.resourceVersion) || '';
      this.loaded = true;
      this.error = null;
    } catch (err) {
      if (this.closed) return;
      this.error = err;
      this.structural = true;
      this.schedule();
      if (err.status === 503 || err.status === 0) {
        // Starting up (the cluster not read yet) or unreachable: try again.
        this.retryDelay = Math.min((this.retryDelay || 1000) * 2, 30000);
        this.retryTimer = setTimeout(() => this.load().catch(() => {}), this.retryDelay);
      }
      throw err;
    }
    this.structural = true;
    this.schedule();
    this.stream = new LiveStream('applications', () => this.streamURL(), {
      message: (ev) => this.onEvent(ev),
      reset: () => this.onReset(),
    });
    this.stream.start();
  }

  streamURL() {
    const from = this.lastId || this.revision;
    return '/v1/deploy/stream/applications' + (from ? '?resourceVersion=' + seg(from) : '');
  }

  close() {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.loaded = false;
    if (this.stream) this.stream.close();
    this.stream = null;
    this.views.clear();
    this.watchers.clear();
  }

  /** subscribe registers a view called after each batch of changes. */
  subscribe(fn) {
    this.views.add(fn);
    return () => this.views.delete(fn);
  }

  /** watch registers fn(type, application) for every event of one app. */
  watch(key, fn) {
    if (!this.watchers.has(key)) this.watchers.set(key, new Set());
    this.watchers.get(key).add(fn);
    return () => {
      const set = this.watchers.get(key);
      if (set) set.delete(fn);
    };
  }

  onReset() {
    // The server could not resume from our position: a full ADDED burst
    // follows and replaces everything held.
    this.rows.clear();
    this.keys = [];
    this.dirty.clear();
    this.structural = true;
    this.schedule();
  }

  onEvent(ev) {
    if (ev.lastEventId) this.lastId = ev.lastEventId;
    let result;
    try {
      result = JSON.parse(ev.data).result;
    } catch {
      return;
    }
    if (!result || !result.application) return;
    const app = result.application;
    const r = toRow(app);
    if (result.type === 'DELETED') {
      if (this.rows.delete(r.key)) {
        this.removed = true;
        this.structural = true;
      }
    } else {
      if (!this.rows.has(r.key)) {
        this.keys.push(r.key);
        this.unsorted = true;
        this.structural = true;
      }
      this.rows.set(r.key, r);
    }
    this.dirty.add(r.key);
    const fns = this.watchers.get(r.key);
    if (fns) for (const fn of [...fns]) fn(result.type, app);
    this.schedule();
  }

  schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    const run = () => this.flush();
    if (document.hidden) setTimeout(run, 250);
    else requestAnimationFrame(run);
  }

  flush() {
    this.scheduled = false;
    if (this.removed) this.keys = this.keys.filter((k) => this.rows.has(k));
    if (this.unsorted) {
      this.keys = [...new Set(this.keys)].filter((k) => this.rows.has(k));
      this.keys.sort(compareKeys(this.rows));
    }
    const change = {dirty: this.dirty, structural: this.structural};
    this.dirty = new Set();
    this.structural = this.unsorted = this.removed = false;
    for (const fn of [...this.views]) fn(change);
  }
}
