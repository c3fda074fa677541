// One application: its status, resource tree (live), the chosen
// resource's manifest and diff, its history with rollback, its logs, and —
// for a user the server says may write — sync, rollback and restart.
import {h, icon, replace, timeEl} from './dom.js';
import {api, seg, ApiError} from './api.js';
import {healthBadge, syncBadge} from './status.js';
import {LiveStream} from './stream.js';
import {renderTree, nodeRef} from './tree.js';
import {ResourcePanel} from './resource.js';
import {LogsPanel} from './logs.js';
import {appKey, clusterOf} from './fleet.js';
import {toast, confirmAction, errorBanner} from './ui.js';
import {replaceQuery} from './router.js';
import {isCommit, shortRev} from './engine.js';

function code(text) {
  return h('code', null, text);
}

function runningTag(tree, name) {
  for (const n of (tree && tree.nodes) || []) {
    if ((n.kind === 'Deployment' || n.kind === 'StatefulSet') && n.name === name) {
      const info = (n.info || []).find((i) => i.name === 'Image Tag');
      if (info) return info.value;
    }
  }
  return '';
}

// declaredTag is the version the App declares: status.sync.revision, but
// for an App the engine applied, whose sync revision is its git commit, the
// App node's image tag.
function declaredTag(app, root) {
  const rev = ((app && app.status) || {}).sync ? app.status.sync.revision || '' : '';
  if (!isCommit(rev)) return rev;
  const info = ((root && root.info) || []).find((i) => i.name === 'Image Tag');
  return info ? info.value : '';
}

export class DetailView {
  rootNode() {
    return ((this.tree && this.tree.nodes) || []).find((n) => n.kind === 'App' && n.name === this.name);
  }

  constructor(root, fleet, ref, query, backURL) {
    this.root = root;
    this.fleet = fleet;
    this.ns = ref.namespace;
    this.name = ref.name;
    this.key = appKey(this.ns, this.name);
    this.backURL = backURL;
    this.app = null;
    this.tree = null;
    this.canWrite = false;
    this.deleted = false;
    this.busy = new Set();
    this.destroyed = false;
    this.selected = query.get('node') || '';
    this.selectedVersion = '';
    document.title = `${this.name} · ${this.ns} · deployd`;
    this.build();
    this.unwatch = fleet.watch(this.key, (type, app) => this.onAppEvent(type, app));
    this.load();
  }

  build() {
    this.titleEl = h('h1', {id: 'app-title', tabindex: '-1'}, this.name);
    this.metaEl = h('p', {class: 'meta', id: 'app-meta'}, this.ns);
    this.actionsEl = h('div', {class: 'actions', id: 'app-actions'});
    this.statusEl = h('div', {class: 'status-cards', id: 'app-status'});
    this.alertEl = h('div', {id: 'app-alert'});
    this.treeEl = h('div', {class: 'tree-wrap', id: 'tree'}, h('p', {class: 'muted'}, 'Loading resources…'));
    this.resEl = h('div', {class: 'res', id: 'resource'});
    this.historyEl = h('div', {id: 'history'}, h('p', {class: 'muted'}, 'Loading history…'));
    this.logsEl = h('div', {id: 'logs'});
    replace(this.root, h('section', {class: 'view detail-view', 'aria-labelledby': 'app-title'},
      h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'},
        h('a', {href: this.backURL, class: 'crumb-back'}, icon('back'), 'Applications'),
        h('span', {class: 'crumb-sep', 'aria-hidden': 'true'}, '/'),
        h('span', null, this.ns),
        h('span', {class: 'crumb-sep', 'aria-hidden': 'true'}, '/'),
        h('span', {'aria-current': 'page'}, this.name)),
      h('div', {class: 'detail-head'}, h('div', {class: 'title-block'}, this.titleEl, this.metaEl), this.actionsEl),
      this.alertEl,
      this.statusEl,
      h('div', {class: 'detail-grid'},
        h('section', {class: 'card panel', 'aria-labelledby': 'tree-title'},
          h('div', {class: 'panel-head'}, h('h2', {id: 'tree-title'}, 'Resources'), h('span', {class: 'panel-note', id: 'tree-count'})),
          this.treeEl),
        h('section', {class: 'card panel res-panel', 'aria-labelledby': 'res-panel-title'},
          h('div', {class: 'panel-head'}, h('h2', {id: 'res-panel-title'}, 'Resource')),
          this.resEl)),
      h('div', {class: 'detail-grid detail-grid-2'},
        h('section', {class: 'card panel', 'aria-labelledby': 'history-title'},
          h('div', {class: 'panel-head'}, h('h2', {id: 'history-title'}, 'History')), this.historyEl),
        h('section', {class: 'card panel', 'aria-labelledby': 'logs-title'},
          h('div', {class: 'panel-head'}, h('h2', {id: 'logs-title'}, 'Logs')), this.logsEl))));
    this.resource = new ResourcePanel(this.resEl, {namespace: this.ns, name: this.name});
  }

  async load() {
    const q = '?appNamespace=' + seg(this.ns);
    try {
      this.app = await api(`/v1/deploy/applications/${seg(this.name)}${q}`);
    } catch (err) {
      if (this.destroyed) return;
      this.fail(err);
      return;
    }
    if (this.destroyed) return;
    this.renderHead();
    this.renderHistory();
    this.logs = new LogsPanel(this.logsEl, {namespace: this.ns, name: this.name});
    this.loadTree(q);
    this.checkWrites();
  }

  fail(err) {
    const missing = err instanceof ApiError && err.status === 404;
    replace(this.root, h('section', {class: 'view detail-view'},
      h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'}, h('a', {href: this.backURL, class: 'crumb-back'}, icon('back'), 'Applications')),
      h('div', {class: 'card empty-state'},
        h('h1', {id: 'app-title', tabindex: '-1'}, missing ? 'Application not found' : 'This application cannot be shown'),
        h('p', null, missing ? `There is no application ${this.ns}/${this.name} that you may see.` : err.message))));
  }

  async loadTree(q) {
    try {
      const tree = await api(`/v1/deploy/applications/${seg(this.name)}/resource-tree${q}`);
      if (this.destroyed) return;
      this.onTree(tree);
    } catch (err) {
      if (this.destroyed) return;
      replace(this.treeEl, errorBanner('The resource tree cannot be read.', err));
    }
    if (this.destroyed) return;
    this.treeStream = new LiveStream('tree', () => `/v1/deploy/stream/applications/${seg(this.name)}/resource-tree${q}`, {
      message: (ev) => {
        try {
          this.onTree(JSON.parse(ev.data).result);
        } catch {
          // a frame that does not parse is skipped; the next carries the whole tree
        }
      },
    });
    this.treeStream.start();
  }

  async checkWrites() {
    const project = (this.app.spec && this.app.spec.project) || 'default';
    try {
      const ans = await api(`/v1/deploy/account/can-i/applications/sync/${seg(project)}/${seg(this.ns)}/${seg(this.name)}`);
      if (this.destroyed) return;
      this.canWrite = !!ans && ans.value === 'yes';
    } catch {
      this.canWrite = false;
    }
    if (this.destroyed) return;
    this.actionsEl.dataset.canWrite = this.canWrite ? 'yes' : 'no';
    this.renderActions();
    this.renderHistory();
  }

  onAppEvent(type, app) {
    if (this.destroyed) return;
    if (type === 'DELETED') {
      this.deleted = true;
      replace(this.alertEl, h('div', {class: 'banner banner-warn', role: 'alert'},
        'This application was deleted, or is no longer visible to you.'));
      this.renderActions();
      return;
    }
    if (this.deleted) {
      this.deleted = false;
      this.alertEl.replaceChildren();
    }
    this.app = app;
    this.renderHead();
    this.renderHistory();
  }

  onTree(tree) {
    if (!tree) return;
    const sig = JSON.stringify(tree.nodes || []);
    if (sig === this.treeSig) return; // the stream's first frame repeats the GET
    this.treeSig = sig;
    this.tree = tree;
    const nodes = tree.nodes || [];
    document.getElementById('tree-count').textContent = `${nodes.length} resource${nodes.length === 1 ? '' : 's'}`;
    const focused = this.treeEl.contains(document.activeElement) ? document.activeElement.dataset.ref : '';
    replace(this.treeEl, renderTree(tree, this.selected, (n) => this.select(n)));
    if (focused) {
      const again = [...this.treeEl.querySelectorAll('.node')].find((b) => b.dataset.ref === focused);
      if (again) again.focus({preventScroll: true});
    }
    if (this.app) {
      this.renderHead();
      this.renderActions();
      // An App the engine applied declares the tag its tree node carries.
      if (isCommit(((this.app.status || {}).sync || {}).revision)) this.renderHistory();
    }
    if (this.logs) this.logs.podsChanged(nodes.filter((n) => n.kind === 'Pod').map((n) => n.name));
    if (this.selected) {
      const n = nodes.find((x) => nodeRef(x) === this.selected);
      const version = n ? n.resourceVersion || '' : 'gone';
      if (!this.resource.ref) this.resource.show(this.selected);
      else if (version !== this.selectedVersion) this.resource.show(this.selected, true);
      this.selectedVersion = version;
    }
  }

  select(n) {
    const ref = nodeRef(n);
    this.selected = ref;
    this.selectedVersion = n.resourceVersion || '';
    for (const b of this.treeEl.querySelectorAll('.node')) b.setAttribute('aria-pressed', String(b.dataset.ref === ref));
    const q = new URLSearchParams(location.search);
    q.set('node', ref);
    replaceQuery(q);
    this.resource.show(ref);
    if (window.matchMedia('(max-width: 1100px)').matches) this.resEl.scrollIntoView({block: 'nearest'});
  }

  renderHead() {
    const a = this.app;
    const md = a.metadata || {};
    const labels = md.labels || {};
    const st = a.status || {};
    const health = (st.health && st.health.status) || 'Unknown';
    const sync = (st.sync && st.sync.status) || 'Unknown';
    const running = runningTag(this.tree, this.name);
    // The application's message, else its App's own (e.g. "Running: 2/2 ready").
    const root = ((this.tree && this.tree.nodes) || []).find((n) => n.kind === 'App' && n.name === this.name);
    const gitRevision = st.sync && isCommit(st.sync.revision) ? st.sync.revision : '';
    const declared = declaredTag(a, root);
    const healthMessage = (st.health && st.health.message) || (root && root.health && root.health.message) || '';
    const src = (a.spec && a.spec.source) || {};
    // With several clusters the destination names the App's cluster; the
    // namespace shown is then the cluster's own ("hanzo" of "hanzo.staging").
    const cluster = clusterOf(a);
    const ns = md.namespace || this.ns;
    replace(this.metaEl,
      cluster ? h('span', {id: 'app-cluster'}, 'Cluster ', code(cluster)) : null,
      h('span', null, 'Namespace ', code(cluster ? ns.split('.')[0] : ns)),
      labels['hanzo.ai/env'] ? h('span', null, 'Env ', code(labels['hanzo.ai/env'])) : null,
      labels['hanzo.ai/org'] ? h('span', null, 'Org ', code(labels['hanzo.ai/org'])) : null,
      h('span', null, 'Project ', code((a.spec && a.spec.project) || 'default')));
    const op = st.operationState && st.operationState.phase;
    replace(this.statusEl,
      h('div', {class: 'stat card'},
        h('span', {class: 'stat-label'}, 'Health'),
        healthBadge(health, {id: 'app-health'}),
        healthMessage ? h('p', {class: 'stat-msg', id: 'app-health-msg'}, healthMessage) : null),
      h('div', {class: 'stat card'},
        h('span', {class: 'stat-label'}, 'Sync'),
        h('span', {class: 'stat-row'}, syncBadge(sync, {id: 'app-sync'}),
          op === 'Running' ? h('span', {class: 'pill pill-op'}, 'sync in progress') : null),
        h('p', {class: 'stat-msg'},
          'Declared ', declared ? h('code', {id: 'app-declared'}, declared) : '—',
          running ? [' · running ', h('code', {id: 'app-running'}, running)] : null)),
      h('div', {class: 'stat card'},
        h('span', {class: 'stat-label'}, 'Source'),
        h('p', {class: 'stat-msg source'},
          src.repoURL ? h('span', {class: 'source-repo', title: src.repoURL}, src.repoURL.replace(/^https?:\/\//, '')) : '—',
          src.path ? h('span', {class: 'source-path', title: src.path}, src.path) : null,
          src.targetRevision ? h('span', null, '@ ', code(src.targetRevision)) : null,
          gitRevision ? h('span', null, 'commit ', h('code', {id: 'app-git-revision', title: gitRevision}, shortRev(gitRevision))) : null)));
  }

  renderActions() {
    const a = this.app;
    if (!a || !this.canWrite || this.deleted) {
      this.actionsEl.replaceChildren();
      return;
    }
    const env = ((a.metadata || {}).labels || {})['hanzo.ai/env'] || '';
    const hasDeployment = ((this.tree && this.tree.nodes) || []).some((n) => n.kind === 'Deployment' && n.name === this.name);
    const btn = (id, label, ic, fn, cls) => h('button', {
      type: 'button', class: 'btn ' + (cls || ''), id: 'action-' + id, dataset: {write: id},
      disabled: this.busy.has(id), 'aria-busy': this.busy.has(id) ? 'true' : null, onclick: fn,
    }, icon(ic), label);
    replace(this.actionsEl,
      btn('sync', 'Sync', 'sync', () => this.sync(), 'btn-primary'),
      env && hasDeployment ? btn('restart', 'Rolling restart', 'restart', () => this.restart(env)) : null);
  }

  async write(id, fn) {
    this.busy.add(id);
    this.renderActions();
    this.renderHistory();
    try {
      await fn();
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 401)) toast(err.message, 'error');
    } finally {
      this.busy.delete(id);
      if (!this.destroyed) {
        this.renderActions();
        this.renderHistory();
      }
    }
  }

  sync() {
    return this.write('sync', async () => {
      await api(`/v1/deploy/applications/${seg(this.name)}/sync?appNamespace=${seg(this.ns)}`, {method: 'POST', body: {}});
      toast(`Sync of ${this.name} requested; the operator reconciles it now.`, 'success');
    });
  }

  async restart(env) {
    const ok = await confirmAction({
      title: `Restart ${this.name}?`,
      body: [h('p', null, 'Every pod of ', code(`${this.ns}/${this.name}`), ' in env ', code(env),
        ' is replaced, one at a time. The version does not change.')],
      confirm: 'Rolling restart',
      danger: true,
    });
    if (!ok) return;
    return this.write('restart', async () => {
      await api(`/v1/paas/apps/${seg(this.name)}/deploy?env=${seg(env)}&namespace=${seg(this.ns)}`, {method: 'POST'});
      toast(`Rolling restart of ${this.name} started.`, 'success');
    });
  }

  async rollback(entry) {
    const declared = declaredTag(this.app, this.rootNode());
    const ok = await confirmAction({
      title: `Roll back ${this.name} to ${entry.revision}?`,
      body: [h('p', null, code(`${this.ns}/${this.name}`), ' will declare ', code(entry.revision),
        declared ? [' in place of ', code(declared)] : null,
        '. The operator rolls it out; this page follows the rollout live.')],
      confirm: `Roll back to ${entry.revision}`,
      danger: true,
    });
    if (!ok) return;
    return this.write('rollback', async () => {
      const body = entry.id ? {id: entry.id} : {tag: entry.revision};
      await api(`/v1/deploy/applications/${seg(this.name)}/rollback?appNamespace=${seg(this.ns)}`, {method: 'POST', body});
      toast(`Rollback of ${this.name} to ${entry.revision} requested.`, 'success');
    });
  }

  renderHistory() {
    if (!this.app) return;
    const st = this.app.status || {};
    const declared = declaredTag(this.app, this.rootNode());
    // Newest deployment first: by id (the Deployment's revision, which a
    // rollback bumps), entries without one (id 0) by time.
    const history = (st.history || []).map((e, i) => ({e, i})).sort((x, y) => {
      if (x.e.id && y.e.id) return y.e.id - x.e.id;
      const t = (y.e.deployedAt || '').localeCompare(x.e.deployedAt || '');
      return t || y.i - x.i;
    }).map((x) => x.e);
    if (!history.length) {
      replace(this.historyEl, h('p', {class: 'muted'}, 'No deployments recorded.'));
      return;
    }
    const currentIndex = history.findIndex((e) => e.revision === declared);
    const rows = history.map((e, i) => {
      const current = i === currentIndex;
      let action = null;
      if (this.canWrite && !this.deleted && e.revision && e.revision !== declared) {
        action = h('button', {
          type: 'button', class: 'btn btn-small', dataset: {write: 'rollback', revision: e.revision},
          disabled: this.busy.has('rollback'), onclick: () => this.rollback(e),
          'aria-label': `Roll back to ${e.revision}`,
        }, icon('undo'), 'Roll back');
      }
      return h('tr', {dataset: {revision: e.revision, id: String(e.id)}, class: current ? 'is-current' : null},
        h('td', null, code(e.revision || '—'), current ? h('span', {class: 'pill pill-current'}, 'declared') : null),
        h('td', null, timeEl(e.deployedAt)),
        h('td', {class: 'num'}, e.id ? String(e.id) : h('span', {class: 'muted', title: 'from the App\'s upgrade history'}, '—')),
        this.canWrite ? h('td', {class: 'c-action'}, action) : null);
    });
    replace(this.historyEl, h('table', {class: 'history', id: 'history-table'},
      h('caption', {class: 'sr-only'}, 'Deployments, newest first'),
      h('thead', null, h('tr', null, h('th', {scope: 'col'}, 'Revision'), h('th', {scope: 'col'}, 'Deployed'),
        h('th', {scope: 'col', class: 'num'}, 'ID'), this.canWrite ? h('th', {scope: 'col'}, h('span', {class: 'sr-only'}, 'Actions')) : null)),
      h('tbody', null, rows)));
  }

  destroy() {
    this.destroyed = true;
    this.unwatch();
    if (this.treeStream) this.treeStream.close();
    if (this.logs) this.logs.destroy();
    this.resource.destroy();
  }
}
