// One resource of an application: its live manifest and the difference
// between its desired and live state, from GET /v1/deploy/{app}/resource/{ref}.
import {h, replace} from './dom.js';
import {api, seg} from './api.js';
import {healthBadge} from './status.js';
import {toYAML} from './yaml.js';
import {errorBanner} from './ui.js';

function pointer(doc, path) {
  let v = doc;
  for (const raw of path.split('/').slice(1)) {
    const k = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (v === null || typeof v !== 'object' || !(k in v)) return undefined;
    v = v[k];
  }
  return v;
}

function valueText(v) {
  if (v === undefined) return h('span', {class: 'muted'}, '(absent)');
  return h('code', {class: 'val'}, typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v));
}

export class ResourcePanel {
  constructor(el, app) {
    this.el = el;
    this.app = app; // {namespace, name}
    this.ref = '';
    this.tab = 'manifest';
    this.data = null;
    this.ctrl = null;
    this.empty();
  }

  empty() {
    this.ref = '';
    replace(this.el, h('p', {class: 'muted placeholder'}, 'Select a resource in the tree to see its live manifest and how it differs from the desired state.'));
  }

  /** show loads a resource (quietly when it is the one already shown). */
  async show(ref, quiet) {
    if (this.ctrl) this.ctrl.abort();
    const ctrl = new AbortController();
    this.ctrl = ctrl;
    if (ref !== this.ref) {
      this.ref = ref;
      this.data = null;
      if (!quiet) replace(this.el, h('p', {class: 'muted'}, 'Loading ' + ref.split(':').slice(1).join('/') + '…'));
    }
    try {
      const path = `/v1/deploy/${seg(this.app.name)}/resource/${seg(ref)}?namespace=${seg(this.app.namespace)}`;
      const data = await api(path, {signal: ctrl.signal});
      if (ctrl !== this.ctrl) return;
      this.data = data;
      this.render();
    } catch (err) {
      if (err.name === 'AbortError' || ctrl !== this.ctrl) return;
      replace(this.el, this.header(ref, null), errorBanner('This resource cannot be shown.', err));
    }
  }

  header(ref, d) {
    const [, kind, , name] = ref.split(':');
    return h('div', {class: 'res-head'},
      h('div', null, h('span', {class: 'res-kind'}, kind), h('h3', {id: 'res-title'}, name)),
      d && d.health ? healthBadge(d.health) : null,
      d && d.healthMessage ? h('p', {class: 'res-msg'}, d.healthMessage) : null);
  }

  render() {
    const d = this.data;
    const diff = d.diff || {};
    const tabs = [
      ['manifest', 'Live manifest'],
      ['diff', diff.modified ? 'Diff (differs)' : 'Diff'],
    ];
    const tablist = h('div', {class: 'tabs', role: 'tablist', 'aria-label': 'Resource views'},
      tabs.map(([id, label]) => h('button', {
        type: 'button', role: 'tab', id: 'tab-' + id, 'aria-controls': 'tabpanel-res',
        'aria-selected': String(this.tab === id), tabindex: this.tab === id ? '0' : '-1',
        class: 'tab' + (id === 'diff' && diff.modified ? ' tab-alert' : ''),
        onclick: () => { this.tab = id; this.render(); document.getElementById('tab-' + id).focus(); },
        onkeydown: (e) => {
          if (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft') return;
          this.tab = this.tab === 'manifest' ? 'diff' : 'manifest';
          this.render();
          document.getElementById('tab-' + this.tab).focus();
        },
      }, label)));
    const panel = h('div', {class: 'tabpanel', id: 'tabpanel-res', role: 'tabpanel', 'aria-labelledby': 'tab-' + this.tab},
      this.tab === 'manifest' ? this.manifest(d) : this.diff(d));
    replace(this.el, this.header(d.ref || this.ref, d), tablist, panel);
  }

  manifest(d) {
    return h('pre', {class: 'code', id: 'live-manifest', tabindex: '0', 'aria-label': 'Live manifest (YAML)'}, toYAML(d.liveManifest || {}));
  }

  diff(d) {
    const diff = d.diff || {};
    if (d.desiredSource !== 'last-applied') {
      return h('div', {class: 'diff', id: 'diff'},
        h('p', {class: 'note'}, 'No desired state is recorded on this object (it carries no last-applied configuration), so there is nothing to compare the live state with.'));
    }
    if (!diff.modified) {
      return h('div', {class: 'diff', id: 'diff'},
        h('p', {class: 'note note-ok'}, 'The live object matches its desired state (last applied configuration).'),
        this.desired(diff));
    }
    const ops = diff.patch || [];
    return h('div', {class: 'diff', id: 'diff'},
      h('p', {class: 'note note-warn'}, `The live object differs from its desired state in ${ops.length} place${ops.length === 1 ? '' : 's'}.`),
      h('table', {class: 'diff-table'},
        h('thead', null, h('tr', null, h('th', {scope: 'col'}, 'Field'), h('th', {scope: 'col'}, 'Live'), h('th', {scope: 'col'}, 'Desired'))),
        h('tbody', null, ops.map((op) => h('tr', {dataset: {op: op.op}},
          h('td', null, h('code', null, op.path)),
          h('td', null, valueText(pointer(d.liveManifest || {}, op.path))),
          h('td', null, op.op === 'remove' ? h('span', {class: 'muted'}, '(absent)') : valueText(op.value)))))),
      this.desired(diff));
  }

  desired(diff) {
    if (!diff.desiredManifest) return null;
    return h('details', {class: 'desired'}, h('summary', null, 'Desired manifest'),
      h('pre', {class: 'code'}, toYAML(diff.desiredManifest)));
  }

  destroy() {
    if (this.ctrl) this.ctrl.abort();
  }
}
