// The fleet list: filters kept in the query string, counts per health and
// sync status, a paginated table whose rows are updated in place when
// their application changes. When the applications the user sees run in
// more than one cluster, a Cluster column and a cluster filter appear; with
// one cluster the list shows neither.
import {h, icon, replace} from './dom.js';
import {HEALTH, SYNC, healthBadge, syncBadge, healthIcon, syncIcon, tone} from './status.js';
import {appURL, replaceQuery} from './router.js';
import {isCommit, shortRev} from './engine.js';

const PAGE_SIZE = 100;
const FILTER_KEYS = ['q', 'cluster', 'env', 'org', 'project', 'health', 'sync'];

/** readFilters reads the filters from a query string. */
export function readFilters(q) {
  const f = {};
  for (const k of FILTER_KEYS) f[k] = (q.get(k) || '').trim();
  f.page = Math.max(1, parseInt(q.get('page') || '1', 10) || 1);
  return f;
}

function writeFilters(f) {
  const q = new URLSearchParams();
  for (const k of FILTER_KEYS) if (f[k]) q.set(k, f[k]);
  if (f.page > 1) q.set('page', String(f.page));
  return q;
}

/** matches applies every filter but the one named in except. */
function matches(r, f, except) {
  if (except !== 'cluster' && f.cluster && r.cluster !== f.cluster) return false;
  if (f.env && r.env !== f.env) return false;
  if (f.org && (f.org === '-' ? r.org !== '' : r.org !== f.org)) return false;
  if (f.project && r.project !== f.project) return false;
  if (except !== 'health' && f.health && r.health !== f.health) return false;
  if (except !== 'sync' && f.sync && r.sync !== f.sync) return false;
  if (f.q) {
    const q = f.q.toLowerCase();
    if (!r.name.includes(q) && !(r.namespace + '/' + r.name).includes(q)) return false;
  }
  return true;
}

export class ListView {
  constructor(root, fleet, query) {
    this.root = root;
    this.fleet = fleet;
    this.f = readFilters(query);
    this.trs = new Map();      // key → <tr> currently rendered
    this.shown = [];           // keys on the page, in order
    this.optionSig = '';
    this.clusterSig = '';
    this.multi = false;        // the fleet spans more than one cluster
    this.build();
    this.unsubscribe = fleet.subscribe((c) => this.update(c));
    this.update({dirty: new Set(), structural: true});
  }

  destroy() {
    this.unsubscribe();
    this.trs.clear();
  }

  build() {
    const f = this.f;
    this.summary = h('p', {class: 'page-sub', id: 'fleet-summary'});
    this.search = h('input', {
      id: 'f-q', type: 'search', placeholder: 'Filter by name', autocomplete: 'off', spellcheck: 'false',
      oninput: () => this.set({q: this.search.value.trim()}),
    });
    this.search.value = f.q;
    this.selCluster = this.select('f-cluster', 'All clusters', (v) => this.set({cluster: v}));
    this.clusterField = this.field('f-cluster', 'Cluster', this.selCluster);
    this.clusterField.hidden = true;
    this.selEnv = this.select('f-env', 'All environments', (v) => this.set({env: v}));
    this.selOrg = this.select('f-org', 'All organizations', (v) => this.set({org: v}));
    this.selProject = this.select('f-project', 'All projects', (v) => this.set({project: v}));
    this.clearBtn = h('button', {type: 'button', class: 'btn btn-quiet', id: 'f-clear', onclick: () => this.clear()}, 'Clear filters');
    this.healthChips = h('div', {class: 'chips', role: 'group', 'aria-labelledby': 'facet-health'});
    this.syncChips = h('div', {class: 'chips', role: 'group', 'aria-labelledby': 'facet-sync'});
    this.tbody = h('tbody', {id: 'app-rows'});
    this.empty = h('div', {class: 'empty', hidden: true});
    this.pager = h('nav', {class: 'pager', 'aria-label': 'Pages of applications'});
    this.caption = h('caption', {class: 'sr-only'});
    this.thead = h('thead');
    this.renderHead();
    this.table = h('table', {class: 'apps', id: 'apps'}, this.caption, this.thead, this.tbody);
    replace(this.root, h('section', {class: 'view list-view', 'aria-labelledby': 'list-title'},
      h('div', {class: 'page-head'},
        h('div', null, h('h1', {id: 'list-title', tabindex: '-1'}, 'Applications'), this.summary)),
      h('div', {id: 'engine-slot'}),
      h('form', {class: 'filters', role: 'search', 'aria-label': 'Filter applications', onsubmit: (e) => e.preventDefault()},
        h('div', {class: 'field field-search'},
          h('label', {for: 'f-q'}, 'Name'),
          h('div', {class: 'input-icon'}, icon('search'), this.search)),
        this.clusterField,
        this.field('f-env', 'Environment', this.selEnv),
        this.field('f-org', 'Organization', this.selOrg),
        this.field('f-project', 'Project', this.selProject),
        h('div', {class: 'field field-end'}, this.clearBtn)),
      h('div', {class: 'facets'},
        h('div', {class: 'facet'}, h('span', {class: 'facet-label', id: 'facet-health'}, 'Health'), this.healthChips),
        h('div', {class: 'facet'}, h('span', {class: 'facet-label', id: 'facet-sync'}, 'Sync'), this.syncChips)),
      h('div', {class: 'card table-card'}, h('div', {class: 'table-scroll'}, this.table), this.empty),
      this.pager));
  }

  // renderHead writes the table's caption and header row, with a Cluster
  // column when the fleet spans several clusters.
  renderHead() {
    this.caption.textContent = this.multi
      ? 'Applications, with their cluster, health and sync status'
      : 'Applications, with their health and sync status';
    replace(this.thead, h('tr', null,
      h('th', {scope: 'col'}, 'Application'),
      this.multi ? h('th', {scope: 'col', id: 'col-cluster'}, 'Cluster') : null,
      h('th', {scope: 'col'}, 'Health'),
      h('th', {scope: 'col'}, 'Sync'),
      h('th', {scope: 'col'}, 'Revision'),
      h('th', {scope: 'col'}, 'Env'),
      h('th', {scope: 'col'}, 'Org'),
      h('th', {scope: 'col'}, 'Project')));
  }

  field(id, label, control) {
    return h('div', {class: 'field'}, h('label', {for: id}, label), control);
  }

  select(id, allLabel, onchange) {
    const s = h('select', {id, onchange: () => onchange(s.value)});
    s.dataset.all = allLabel;
    return s;
  }

  set(change) {
    Object.assign(this.f, change);
    if (!('page' in change)) this.f.page = 1;
    replaceQuery(writeFilters(this.f));
    this.update({dirty: new Set(), structural: true});
  }

  clear() {
    this.search.value = '';
    this.set({q: '', cluster: '', env: '', org: '', project: '', health: '', sync: ''});
    this.search.focus();
  }

  /** restore applies filters from the URL (back/forward). */
  restore(query) {
    this.f = readFilters(query);
    this.search.value = this.f.q;
    this.update({dirty: new Set(), structural: true});
  }

  update(change) {
    const fleet = this.fleet;
    const f = this.f;
    if (!fleet.loaded) {
      this.summary.textContent = fleet.error ? '' : 'Loading applications…';
      if (fleet.error) this.showEmpty(fleet.error.message, false, true);
      return;
    }
    // One pass over the fleet: the filtered keys, the counts (each facet
    // counted under the other filters), the values the selects offer.
    const healthCount = new Map(), syncCount = new Map(), clusterCount = new Map();
    const envs = new Set(), orgs = new Set(), projects = new Set(), clusters = new Set();
    const keys = [];
    for (const k of fleet.keys) {
      const r = fleet.rows.get(k);
      envs.add(r.env);
      orgs.add(r.org);
      projects.add(r.project);
      clusters.add(r.cluster);
      if (matches(r, f, 'health')) healthCount.set(r.health, (healthCount.get(r.health) || 0) + 1);
      if (matches(r, f, 'sync')) syncCount.set(r.sync, (syncCount.get(r.sync) || 0) + 1);
      if (matches(r, f, 'cluster')) clusterCount.set(r.cluster, (clusterCount.get(r.cluster) || 0) + 1);
      if (matches(r, f)) keys.push(k);
    }
    // The cluster column and filter are there when the applications this
    // user sees run in more than one cluster; the filter also while the
    // URL names a cluster, so a filter in force is never hidden.
    clusters.delete('');
    const multi = clusters.size > 1;
    if (multi !== this.multi) {
      this.multi = multi;
      this.renderHead();
      this.trs.clear(); // every row gains or loses its cluster cell
      this.shown = [];
    }
    this.clusterField.hidden = !multi && !f.cluster;
    this.renderClusterOptions(clusters, clusterCount);
    this.renderOptions(envs, orgs, projects);
    this.renderChips(this.healthChips, 'health', HEALTH, healthCount, healthIcon);
    this.renderChips(this.syncChips, 'sync', SYNC, syncCount, syncIcon);
    const filtered = FILTER_KEYS.some((k) => f[k]);
    this.clearBtn.disabled = !filtered;
    const total = fleet.rows.size;
    this.summary.textContent = filtered
      ? `${keys.length} of ${total} application${total === 1 ? '' : 's'} match`
      : `${total} application${total === 1 ? '' : 's'}` + (multi ? ` in ${clusters.size} clusters` : '');

    const pages = Math.max(1, Math.ceil(keys.length / PAGE_SIZE));
    if (f.page > pages) f.page = pages;
    const page = keys.slice((f.page - 1) * PAGE_SIZE, f.page * PAGE_SIZE);
    this.renderRows(page, change.dirty);
    this.renderPager(keys.length, pages);
    if (!keys.length) {
      this.showEmpty(total ? 'No application matches these filters.' : 'No applications are visible to you yet.', filtered && total > 0);
    } else {
      this.empty.hidden = true;
      this.table.hidden = false;
    }
  }

  showEmpty(text, offerClear, isError) {
    this.table.hidden = true;
    this.empty.hidden = false;
    replace(this.empty,
      h('p', {class: isError ? 'error-text' : '', role: isError ? 'alert' : null}, text),
      offerClear ? h('button', {type: 'button', class: 'btn', onclick: () => this.clear()}, 'Clear filters') : null);
  }

  renderRows(page, dirty) {
    const fleet = this.fleet;
    const same = page.length === this.shown.length && page.every((k, i) => k === this.shown[i]);
    if (same) {
      // Only the rows whose application changed are touched.
      for (const k of page) if (dirty.has(k)) this.fillRow(this.trs.get(k), fleet.rows.get(k), true);
      return;
    }
    const next = new Map();
    const trs = page.map((k) => {
      let tr = this.trs.get(k);
      if (!tr) {
        tr = h('tr');
        this.fillRow(tr, fleet.rows.get(k), false);
      } else if (dirty.has(k)) {
        this.fillRow(tr, fleet.rows.get(k), true);
      }
      next.set(k, tr);
      return tr;
    });
    this.tbody.replaceChildren(...trs);
    this.trs = next;
    this.shown = page;
  }

  fillRow(tr, r, changed) {
    tr.dataset.key = r.key;
    tr.dataset.namespace = r.namespace;
    tr.dataset.name = r.name;
    tr.dataset.cluster = r.cluster;
    tr.dataset.org = r.org;
    tr.dataset.health = r.health;
    tr.dataset.sync = r.sync;
    const op = r.operation === 'Running' ? h('span', {class: 'pill pill-op'}, 'syncing') : null;
    replace(tr,
      h('td', {class: 'c-name'},
        h('a', {class: 'app-link', href: appURL(r.namespace, r.name)}, r.name),
        h('span', {class: 'sub'}, r.namespace)),
      this.multi ? h('td', {class: 'c-cluster'}, r.cluster || h('span', {class: 'muted'}, '—')) : null,
      h('td', {class: 'c-health'}, healthBadge(r.health),
        r.healthMessage && r.health !== 'Healthy' ? h('span', {class: 'msg', title: r.healthMessage}, r.healthMessage) : null),
      h('td', {class: 'c-sync'}, syncBadge(r.sync), op),
      h('td', {class: 'c-rev'}, r.revision ? h('code', {title: isCommit(r.revision) ? 'git commit ' + r.revision : null}, shortRev(r.revision)) : h('span', {class: 'muted'}, '—')),
      h('td', null, r.env || h('span', {class: 'muted'}, '—')),
      h('td', null, r.org || h('span', {class: 'muted'}, '—')),
      h('td', null, r.project));
    if (changed) {
      tr.classList.remove('changed');
      void tr.offsetWidth; // restart the highlight
      tr.classList.add('changed');
    }
  }

  renderOptions(envs, orgs, projects) {
    const sig = [...envs].sort().join(',') + '|' + [...orgs].sort().join(',') + '|' + [...projects].sort().join(',');
    if (sig === this.optionSig && this.selEnv.value === this.f.env && this.selOrg.value === this.f.org && this.selProject.value === this.f.project) return;
    this.optionSig = sig;
    const fill = (sel, values, chosen, noneLabel) => {
      const opts = [h('option', {value: ''}, sel.dataset.all)];
      const list = [...values].filter((v) => v !== '').sort();
      if (chosen && chosen !== '-' && !list.includes(chosen)) list.push(chosen);
      for (const v of list) opts.push(h('option', {value: v}, v));
      if (noneLabel && (values.has('') || chosen === '-')) opts.push(h('option', {value: '-'}, noneLabel));
      sel.replaceChildren(...opts);
      sel.value = chosen;
    };
    fill(this.selEnv, envs, this.f.env);
    fill(this.selOrg, orgs, this.f.org, 'No organization (platform)');
    fill(this.selProject, projects, this.f.project);
  }

  // renderClusterOptions fills the cluster select: every cluster the fleet
  // spans, each with its count under the other filters.
  renderClusterOptions(clusters, counts) {
    const chosen = this.f.cluster;
    const list = [...clusters].sort();
    if (chosen && !list.includes(chosen)) list.push(chosen);
    const sig = list.map((c) => c + ':' + (counts.get(c) || 0)).join(',');
    if (sig === this.clusterSig && this.selCluster.value === chosen) return;
    this.clusterSig = sig;
    const opts = [h('option', {value: ''}, this.selCluster.dataset.all)];
    for (const c of list) {
      const n = counts.get(c) || 0;
      opts.push(h('option', {value: c, 'aria-label': `${c}: ${n} application${n === 1 ? '' : 's'}`}, `${c} (${n})`));
    }
    this.selCluster.replaceChildren(...opts);
    this.selCluster.value = chosen;
  }

  renderChips(box, facet, codes, counts, iconOf) {
    const chosen = this.f[facet];
    const all = [...codes];
    for (const k of counts.keys()) if (!all.includes(k)) all.push(k);
    if (chosen && !all.includes(chosen)) all.push(chosen);
    const existing = new Map([...box.children].map((b) => [b.dataset.value, b]));
    const buttons = all.map((code) => {
      const n = counts.get(code) || 0;
      let b = existing.get(code);
      if (!b) {
        b = h('button', {type: 'button', class: `chip tone-${tone(code)}`, dataset: {facet, value: code},
          onclick: () => this.set({[facet]: this.f[facet] === code ? '' : code})},
        icon(iconOf(code)), h('span', {class: 'chip-label'}, code), h('span', {class: 'chip-count'}));
      }
      b.querySelector('.chip-count').textContent = String(n);
      b.setAttribute('aria-pressed', String(chosen === code));
      b.setAttribute('aria-label', `${code}: ${n} application${n === 1 ? '' : 's'}${chosen === code ? ' (filter on)' : ''}`);
      b.classList.toggle('is-zero', n === 0 && chosen !== code);
      return b;
    });
    if (buttons.length !== box.children.length || buttons.some((b, i) => box.children[i] !== b)) box.replaceChildren(...buttons);
  }

  renderPager(count, pages) {
    const f = this.f;
    if (pages <= 1) {
      this.pager.hidden = true;
      this.pager.replaceChildren();
      return;
    }
    this.pager.hidden = false;
    const focused = this.pager.contains(document.activeElement) ? document.activeElement.dataset.go : '';
    const from = (f.page - 1) * PAGE_SIZE + 1, to = Math.min(count, f.page * PAGE_SIZE);
    replace(this.pager,
      h('button', {type: 'button', class: 'btn', dataset: {go: 'prev'}, disabled: f.page <= 1, onclick: () => this.set({page: f.page - 1})}, 'Previous'),
      h('span', {class: 'pager-text'}, `${from}–${to} of ${count} · page ${f.page} of ${pages}`),
      h('button', {type: 'button', class: 'btn', dataset: {go: 'next'}, disabled: f.page >= pages, onclick: () => this.set({page: f.page + 1})}, 'Next'));
    if (focused) {
      // Keep the keyboard where it was; at the first or last page, on the other button.
      const same = this.pager.querySelector(`[data-go="${focused}"]`);
      (same && !same.disabled ? same : this.pager.querySelector('button:not(:disabled)'))?.focus();
    }
  }
}
