// The drift board (/?board=1): one row per operator App the caller may
// see on /v1/paas/apps (SuperAdmins and org admins), with its declared,
// running and latest tags, the release source's state and every drift
// flag with its message. The board stream keeps it live: a release
// refresh that changes a row's verdict arrives as a MODIFIED. With
// several clusters, a Cluster column and a cluster filter (kept in the
// URL as cluster=) appear.
import {api} from './api.js';
import {h, icon, replace} from './dom.js';
import {LiveStream} from './stream.js';
import {replaceQuery} from './router.js';
import {errorBanner} from './ui.js';

const severityTone = {ok: 'healthy', yellow: 'missing', red: 'degraded'};
const severityIcon = {ok: 'check', yellow: 'warn', red: 'cross'};
const severityText = {ok: 'No drift', yellow: 'Drift', red: 'Drift (red)'};

function rowKey(v) {
  return v.id + '|' + v.namespace;
}

function compareRows(a, b) {
  for (const k of ['org', 'app', 'env', 'namespace']) {
    if (a[k] !== b[k]) return a[k] < b[k] ? -1 : 1;
  }
  return 0;
}

function tag(t) {
  return t ? h('code', null, t) : h('span', {class: 'muted'}, '—');
}

/** sourceCell tells the release source's state; absent when none is configured. */
function sourceCell(v) {
  if (!v.source) return h('span', {class: 'muted', title: 'No release source is configured'}, '—');
  if (v.source === 'ok') return h('span', {class: 'source source-ok'}, 'answered');
  const kind = v.source === 'pending' ? 'pending' : 'error';
  return h('span', {class: 'source source-' + kind, title: 'Release flags are left out until the source answers'}, v.source);
}

function driftCell(d) {
  const sev = (d && d.severity) || 'ok';
  const flags = (d && d.flags) || [];
  return [
    h('span', {class: `badge tone-${severityTone[sev] || 'unknown'}`, dataset: {drift: sev}},
      icon(severityIcon[sev] || 'question'), h('span', {class: 'badge-text'}, severityText[sev] || sev)),
    flags.length ? h('ul', {class: 'flags'}, flags.map((f) =>
      h('li', {class: 'flag flag-' + f.severity, dataset: {kind: f.kind}},
        h('strong', null, f.kind), ' ', h('span', {class: 'flag-msg'}, f.message)))) : null,
  ];
}

export class BoardView {
  constructor(root) {
    this.root = root;
    this.cluster = new URLSearchParams(location.search).get('cluster') || '';
    this.rows = new Map();
    this.changed = new Set();
    this.stream = null;
    this.frame = 0;
    this.build();
    this.load();
  }

  destroy() {
    if (this.stream) this.stream.close();
    cancelAnimationFrame(this.frame);
  }

  build() {
    document.title = 'Drift board · deployd';
    this.summary = h('p', {class: 'page-sub', id: 'board-summary'}, 'Loading the board…');
    this.tbody = h('tbody', {id: 'board-rows'});
    this.thead = h('thead');
    this.head = null; // the columns' signature: rebuilt only when the Cluster column comes or goes
    this.picker = h('span', {class: 'board-cluster'});
    this.body = h('div', {class: 'card table-card'}, h('div', {class: 'table-scroll'},
      h('table', {class: 'apps board', id: 'board'},
        h('caption', {class: 'sr-only'}, 'Applications with their cluster, declared, running and latest tags and drift'),
        this.thead, this.tbody)));
    replace(this.root, h('section', {class: 'view board-view', 'aria-labelledby': 'board-title'},
      h('div', {class: 'page-head'},
        h('div', null, h('h1', {id: 'board-title', tabindex: '-1'}, 'Drift board'), this.summary),
        this.picker,
        h('a', {class: 'btn', href: '/'}, icon('back'), 'Applications')),
      this.body));
  }

  /** pick filters the board to one cluster ('' for all), kept in the URL. */
  pick(cluster) {
    this.cluster = cluster;
    const q = new URLSearchParams(location.search);
    if (cluster) q.set('cluster', cluster); else q.delete('cluster');
    replaceQuery(q);
    this.render();
  }

  /** columns renders the header and the cluster select when they change. */
  columns(clusters, several) {
    const sig = several ? [...clusters].sort().join(',') + '|' + this.cluster : '';
    if (sig === this.head) return;
    this.head = sig;
    const names = ['Application', several ? 'Cluster' : null, 'Env', 'Declared', 'Running', 'Latest', 'Release source', 'Drift'].filter(Boolean);
    replace(this.thead, h('tr', null, names.map((c) => h('th', {scope: 'col'}, c))));
    replace(this.picker, several ? h('label', null, 'Cluster ',
      h('select', {id: 'board-cluster', onchange: (e) => this.pick(e.target.value)},
        h('option', {value: ''}, 'All clusters'),
        [...clusters].sort().map((c) => h('option', {value: c, selected: c === this.cluster}, c)))) : null);
  }

  async load() {
    let list;
    try {
      list = await api('/v1/paas/apps');
    } catch (err) {
      this.summary.textContent = '';
      this.body.replaceWith(errorBanner('The drift board cannot be shown.', err));
      return;
    }
    for (const v of list.apps || []) this.rows.set(rowKey(v), v);
    this.render();
    // The stream starts with every row (ADDED), then sends changes.
    this.stream = new LiveStream('board', () => '/v1/paas/stream/apps', {
      message: (ev) => this.apply(JSON.parse(ev.data).result),
    });
    this.stream.start();
  }

  apply(r) {
    if (!r || !r.app) return;
    const key = rowKey(r.app);
    if (r.type === 'DELETED') {
      this.rows.delete(key);
    } else {
      const old = this.rows.get(key);
      if (r.type === 'MODIFIED' || (old && JSON.stringify(old) !== JSON.stringify(r.app))) this.changed.add(key);
      this.rows.set(key, r.app);
    }
    if (!this.frame) this.frame = requestAnimationFrame(() => this.render());
  }

  render() {
    this.frame = 0;
    const all = [...this.rows.values()];
    const clusters = new Set(all.map((v) => v.cluster));
    const several = clusters.size > 1 || !!this.cluster;
    this.columns(clusters, several);
    const rows = all.filter((v) => !this.cluster || v.cluster === this.cluster).sort(compareRows);
    const count = {ok: 0, yellow: 0, red: 0};
    for (const v of rows) count[v.drift.severity] = (count[v.drift.severity] || 0) + 1;
    this.summary.textContent = `${rows.length} applications` + (several && !this.cluster ? ` in ${clusters.size} clusters` : '') +
      (this.cluster ? ` in ${this.cluster}` : '') + ` · ${count.red} red · ${count.yellow} yellow · ${count.ok} without drift`;
    replace(this.tbody, rows.map((v) => {
      const key = rowKey(v);
      const tr = h('tr', {dataset: {id: v.id, namespace: v.namespace, cluster: v.cluster, severity: v.drift.severity}, class: this.changed.has(key) ? 'changed' : null},
        h('td', {class: 'c-name'}, h('span', {class: 'app-name'}, v.app),
          h('span', {class: 'sub'}, `${v.org} · ${v.namespace}` + (v.repo ? ` · ${v.registry ? v.registry + '/' : ''}${v.repo}` : ''))),
        several ? h('td', {class: 'c-cluster'}, v.cluster) : null,
        h('td', null, v.env),
        h('td', {class: 'c-rev c-declared'}, tag(v.declaredTag)),
        h('td', {class: 'c-rev c-running'}, tag(v.runningTag)),
        h('td', {class: 'c-rev c-latest'}, tag(v.latestTag)),
        h('td', {class: 'c-source'}, sourceCell(v)),
        h('td', {class: 'c-drift'}, driftCell(v.drift)));
      return tr;
    }));
    this.changed.clear();
  }
}
