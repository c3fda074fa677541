// The GitOps engine's panel, for SuperAdmins: its state (from
// GET /v1/deploy/gitops: enabled, stale or suspended, the leader replica), a
// "Reconcile" button that first runs a dry run and shows what would change,
// then reconciles once confirmed, and Suspend / Resume. With several
// clusters each runs its own engine: a select picks the one the panel
// shows and acts on (?cluster= on every request).
import {h, icon, replace, timeEl} from './dom.js';
import {api, ApiError} from './api.js';
import {toast, confirmAction} from './ui.js';

// The panel refreshes its state this often, to show interval and webhook
// runs as they finish.
const REFRESH_MS = 30000;

/** isCommit tells a git commit SHA from an image tag. */
export function isCommit(rev) {
  return /^([0-9a-f]{40}|[0-9a-f]{64})$/.test(rev || '');
}

/** shortRev is a commit's first seven hex digits; other revisions as they are. */
export function shortRev(rev) {
  return isCommit(rev) ? rev.slice(0, 7) : rev;
}

function code(text, attrs) {
  return h('code', attrs || null, text);
}

function commit(rev, id) {
  if (!rev) return h('span', {class: 'muted', id}, 'none yet');
  return h('code', {id, title: rev, dataset: {revision: rev}}, shortRev(rev));
}

// A result changes something unless the engine found it unchanged.
function changes(r) {
  return !(r.status === 'Synced' && r.message.replace(/^dry run:\s*/, '') === 'unchanged');
}

function counts(rep) {
  return `${rep.declared} declared · ${rep.synced} synced · ${rep.failed} failed · ${rep.pruned} pruned`;
}

function resultsTable(results, id) {
  return h('div', {class: 'table-scroll engine-results'},
    h('table', {class: 'results', id},
      h('thead', null, h('tr', null,
        h('th', {scope: 'col'}, 'Resource'), h('th', {scope: 'col'}, 'Status'), h('th', {scope: 'col'}, 'Message'))),
      h('tbody', null, results.map((r) => h('tr', {dataset: {resource: r.resource, status: r.status}},
        h('td', null, code(r.resource)),
        h('td', null, h('span', {class: 'result result-' + r.status.toLowerCase()}, r.status)),
        h('td', {class: 'msg'}, r.message))))));
}

export class EnginePanel {
  constructor(root) {
    this.root = root;
    this.busy = false;
    this.report = null;    // the last report this page asked for
    this.destroyed = false;
    this.engines = [];     // every cluster's engine, with several clusters
    this.cluster = '';     // the cluster whose engine is shown ('' the first)
    this.el = h('section', {class: 'card engine', id: 'engine-panel', 'aria-labelledby': 'engine-title'});
    replace(root, this.el);
    this.refresh();
    this.timer = setInterval(() => this.refresh(), REFRESH_MS);
  }

  destroy() {
    this.destroyed = true;
    clearInterval(this.timer);
  }

  /** query is the cluster's query string for the engine's routes. */
  query(more) {
    const q = new URLSearchParams(more || '');
    if (this.cluster) q.set('cluster', this.cluster);
    const s = q.toString();
    return s ? '?' + s : '';
  }

  async refresh() {
    try {
      const ans = await api('/v1/deploy/gitops' + this.query());
      if (this.destroyed) return;
      this.engines = (ans && ans.engines) || [];
      this.status = (ans && ans.engine) || {enabled: false, source: {}};
      this.error = null;
    } catch (err) {
      if (this.destroyed) return;
      this.error = err;
    }
    this.render();
  }

  render() {
    const st = this.status || {enabled: false, source: {}};
    const src = st.source || {};
    const run = st.lastRun;
    const title = h('h2', {id: 'engine-title', class: 'engine-title'}, 'GitOps engine');
    if (this.error) {
      replace(this.el, h('div', {class: 'engine-head'}, title),
        h('p', {class: 'stat-msg error-text'}, 'The engine\'s state could not be read: ' + this.error.message));
      return;
    }
    this.el.dataset.enabled = String(!!st.enabled);
    this.el.dataset.state = st.enabled ? (st.state || 'ok') : 'disabled';
    const badge = (tone, glyph, text) => h('span', {class: 'badge tone-' + tone, id: 'engine-state'}, icon(glyph), h('span', {class: 'badge-text'}, text));
    let state = badge('none', 'pause', 'Disabled');
    if (st.enabled && st.suspended) state = badge('suspended', 'pause', 'Suspended');
    else if (st.enabled && st.stale) state = badge('outofsync', 'warn', 'Stale');
    else if (st.enabled) state = badge('healthy', 'check', 'Enabled');
    const suspended = !!(st.enabled && st.suspended);
    const button = st.enabled && !suspended ? h('button', {
      type: 'button', class: 'btn btn-primary', id: 'engine-reconcile', disabled: this.busy,
      'aria-busy': this.busy ? 'true' : null, onclick: () => this.reconcile(),
    }, icon('sync', this.busy ? 'spin' : ''), this.busy ? 'Reconciling…' : 'Reconcile') : null;
    const toggle = st.enabled ? h('button', {
      type: 'button', class: 'btn', id: suspended ? 'engine-resume' : 'engine-suspend', disabled: this.busy,
      onclick: () => this.setSuspended(!suspended),
    }, icon(suspended ? 'sync' : 'pause'), suspended ? 'Resume' : 'Suspend') : null;
    const notices = [];
    if (suspended) {
      notices.push(h('p', {class: 'banner banner-warn', id: 'engine-suspended'}, 'Suspended by ', st.suspended.by, ' ',
        timeEl(st.suspended.at), ': interval and webhook runs are skipped, and a reconcile is refused until it is resumed.'));
    }
    if (st.enabled && st.stale) {
      notices.push(h('p', {class: 'banner banner-warn', id: 'engine-stale'}, 'The repository cannot be fetched; the first failure was ',
        timeEl(st.stale.since), ' (', st.stale.error, '). Runs heal from the last good commit meanwhile.'));
    }
    const pick = this.engines.length > 1 ? h('label', {class: 'engine-cluster'}, 'Cluster ',
      h('select', {id: 'engine-cluster', disabled: this.busy, onchange: (e) => this.pick(e.target.value)},
        this.engines.map((e) => h('option', {value: e.cluster, selected: e.cluster === (st.cluster || this.engines[0].cluster)},
          e.cluster + (e.enabled ? '' : ' (no engine)'))))) : null;
    this.el.dataset.cluster = st.cluster || '';
    replace(this.el,
      h('div', {class: 'engine-head'}, title, pick, state, h('span', {class: 'engine-actions'}, toggle, button)),
      notices,
      h('dl', {class: 'engine-facts'},
        h('div', null, h('dt', null, 'Source'), h('dd', {id: 'engine-source'},
          src.repo ? [code(src.repo.replace(/^https?:\/\//, ''), {title: src.repo}), src.path ? [' ', code(src.path)] : null,
            src.ref ? [' @ ', code(src.ref)] : null] : h('span', {class: 'muted'}, 'not configured'))),
        h('div', null, h('dt', null, 'Revision'), h('dd', null, commit(st.revision, 'engine-revision'))),
        h('div', null, h('dt', null, 'Last run'), h('dd', {id: 'engine-last-run'}, run
          ? [code(run.id), ' · ', run.trigger, ' · ', timeEl(run.finishedAt), ' · ',
            run.error ? h('span', {class: 'error-text'}, run.error) : counts(run)]
          : h('span', {class: 'muted'}, st.enabled ? 'none yet' : '—'))),
        h('div', null, h('dt', null, 'Next run'), h('dd', {id: 'engine-next-run'},
          st.nextRunAt ? timeEl(st.nextRunAt) : h('span', {class: 'muted'}, st.enabled ? 'on demand' : '—'))),
        st.leader ? h('div', null, h('dt', null, 'Leader'), h('dd', {id: 'engine-leader'},
          code(st.leader.identity), ' since ', timeEl(st.leader.since))) : null),
      st.enabled ? null : h('p', {class: 'stat-msg'}, st.cluster && this.engines.length && st.cluster !== this.engines[0].cluster
        ? 'Give this cluster\'s entry in DEPLOY_CLUSTERS_FILE an engine to reconcile it from git.'
        : 'Set DEPLOY_ENGINE_ENABLED=true to reconcile the fleet from git.'),
      this.report && (this.report.cluster || '') === (st.cluster || '') ? this.renderReport(this.report) : null);
  }

  /** pick shows (and acts on) another cluster's engine. */
  pick(cluster) {
    if (this.busy) return;
    this.cluster = cluster;
    const known = this.engines.find((e) => e.cluster === cluster);
    if (known) this.status = known;
    this.render();
    this.refresh();
  }

  renderReport(rep) {
    const failed = rep.results.filter((r) => r.status === 'SyncFailed' || r.status === 'PruneSkipped');
    return h('div', {class: 'engine-report', id: 'engine-report', dataset: {revision: rep.revision}},
      h('p', {class: 'stat-msg'}, 'Last reconcile from this page: revision ', commit(rep.revision), ' · ', counts(rep)),
      failed.length ? resultsTable(failed, 'engine-failures') : null);
  }

  setBusy(busy) {
    this.busy = busy;
    if (!this.destroyed) this.render();
  }

  // setSuspended suspends the engine (after a confirmation) or resumes it.
  async setSuspended(suspend) {
    if (this.busy) return;
    if (suspend) {
      const ok = await confirmAction({
        title: 'Suspend the engine?',
        body: [h('p', null, 'Interval and webhook runs are skipped and reconciles are refused, on every replica, until it is resumed. Nothing already applied changes.')],
        confirm: 'Suspend',
      });
      if (!ok) return;
    }
    this.setBusy(true);
    try {
      const st = await api((suspend ? '/v1/deploy/gitops/suspend' : '/v1/deploy/gitops/resume') + this.query(), {method: 'POST'});
      this.status = st;
      toast(suspend ? 'The engine is suspended.' : 'The engine is resumed; a run is queued.', 'success');
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 401)) toast((suspend ? 'Suspend' : 'Resume') + ' failed: ' + err.message, 'error');
    }
    this.setBusy(false);
    this.refresh();
  }

  async reconcile() {
    if (this.busy) return;
    this.setBusy(true);
    let preview;
    try {
      preview = await api('/v1/deploy/reconcile' + this.query('dryRun=true'), {method: 'POST'});
    } catch (err) {
      this.setBusy(false);
      if (!(err instanceof ApiError && err.status === 401)) toast('The dry run failed: ' + err.message, 'error');
      return;
    }
    const changed = preview.results.filter(changes);
    const unchanged = preview.results.length - changed.length;
    const ok = await confirmAction({
      title: `Reconcile revision ${shortRev(preview.revision)}${preview.cluster ? ' in ' + preview.cluster : ''}?`,
      body: [
        h('p', {id: 'engine-preview-summary'}, 'A dry run of ', code(`${preview.source.repo} ${preview.source.path} @ ${preview.source.ref}`),
          ' at ', commit(preview.revision), ': ',
          changed.length ? `${changed.length} of ${preview.results.length} resources would change` : 'nothing would change',
          unchanged ? ` (${unchanged} unchanged)` : '', '.'),
        changed.length ? resultsTable(changed, 'engine-preview') : null,
        preview.failed ? h('p', {class: 'banner banner-warn'},
          `${preview.failed} ${preview.failed === 1 ? 'resource' : 'resources'} would fail; the others still apply.`) : null,
      ],
      confirm: 'Reconcile now',
    });
    if (!ok) {
      this.setBusy(false);
      return;
    }
    try {
      const rep = await api('/v1/deploy/reconcile' + this.query(), {method: 'POST'});
      this.report = rep;
      toast(`Reconciled revision ${shortRev(rep.revision)}: ${counts(rep)}.`, rep.failed ? 'error' : 'success');
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 401)) toast('The reconcile failed: ' + err.message, 'error');
    }
    this.setBusy(false);
    this.refresh();
  }
}
