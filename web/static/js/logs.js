// The log tail of an application's newest running pod, with a follow
// toggle that streams new lines (SSE: "line" per line, "end"/"note" last).
import {h, replace} from './dom.js';
import {api, seg} from './api.js';
import {setStream, dropStream} from './conn.js';
import {errorBanner} from './ui.js';

const MAX_LINES = 5000;

export class LogsPanel {
  constructor(el, app) {
    this.el = el;
    this.app = app; // {namespace, name}
    this.es = null;
    this.timer = 0;
    this.lines = 0;
    this.tail = h('select', {id: 'log-tail', onchange: () => this.reload()},
      [100, 200, 400, 1000, 5000].map((n) => h('option', {value: String(n), selected: n === 200}, String(n))));
    this.followBtn = h('button', {type: 'button', class: 'btn', id: 'log-follow', 'aria-pressed': 'false', onclick: () => this.toggle()}, 'Follow');
    this.refreshBtn = h('button', {type: 'button', class: 'btn', id: 'log-refresh', onclick: () => this.reload()}, 'Refresh');
    this.meta = h('p', {class: 'log-meta', id: 'log-meta'});
    this.pre = h('pre', {class: 'log', id: 'log', tabindex: '0', 'aria-label': 'Log lines'});
    this.error = h('div');
    this.onPageHide = (ev) => {
      if (ev.persisted) this.stopFollow();
    };
    window.addEventListener('pagehide', this.onPageHide);
    replace(el,
      h('div', {class: 'log-controls'},
        h('label', {for: 'log-tail'}, 'Lines'), this.tail, this.followBtn, this.refreshBtn),
      this.error, this.meta, this.pre);
    this.reload();
  }

  path(follow) {
    return `/v1/deploy/${seg(this.app.name)}/logs?namespace=${seg(this.app.namespace)}&tail=${this.tail.value}` + (follow ? '&follow=true' : '');
  }

  /**
   * podsChanged is told the pods of the tree: when the pod whose tail is
   * shown is gone (a rollout replaced it), the tail of the newest is read.
   */
  podsChanged(pods) {
    if (this.es || this.loading) return;
    const sig = pods.join(',');
    if (this.pod ? pods.includes(this.pod) : sig === this.podsSig) return;
    this.podsSig = sig;
    this.reload();
  }

  describe(ans) {
    this.pod = ans.pod || '';
    const parts = [];
    if (ans.pod) parts.push(h('span', null, 'Pod ', h('code', null, ans.pod) , ans.container ? [' · container ', h('code', null, ans.container)] : null));
    if (ans.note) parts.push(h('span', {class: 'log-note'}, ans.note));
    if (ans.truncated) parts.push(h('span', {class: 'log-note'}, 'truncated'));
    replace(this.meta, parts);
  }

  async reload() {
    if (this.es) {
      this.startFollow();
      return;
    }
    this.error.replaceChildren();
    this.loading = true;
    try {
      const ans = await api(this.path(false));
      this.describe(ans);
      this.pre.textContent = ans.log || '';
      this.lines = (ans.log || '').split('\n').length;
      if (!ans.log && !ans.note) this.pre.textContent = '';
      this.pre.classList.toggle('is-empty', !ans.log);
      this.pre.scrollTop = this.pre.scrollHeight;
    } catch (err) {
      replace(this.error, errorBanner('The log cannot be read.', err));
    } finally {
      this.loading = false;
    }
  }

  toggle() {
    if (this.es) this.stopFollow();
    else this.startFollow();
  }

  startFollow() {
    this.stopFollow(true);
    this.followBtn.setAttribute('aria-pressed', 'true');
    this.followBtn.textContent = 'Following';
    this.pre.textContent = '';
    this.lines = 0;
    this.pre.classList.remove('is-empty');
    setStream('logs', 'connecting');
    const es = new EventSource(this.path(true), {withCredentials: true});
    this.es = es;
    es.onopen = () => setStream('logs', 'live');
    es.addEventListener('line', (ev) => {
      if (this.es !== es) return;
      const stick = this.pre.scrollTop + this.pre.clientHeight >= this.pre.scrollHeight - 8;
      this.pre.append(ev.data + '\n');
      if (++this.lines > MAX_LINES && this.pre.firstChild) this.pre.firstChild.remove();
      if (stick) this.pre.scrollTop = this.pre.scrollHeight;
    });
    const finish = (ev) => {
      if (this.es !== es) return;
      try {
        this.describe(JSON.parse(ev.data));
      } catch {
        // keep the previous description
      }
      this.stopFollow();
    };
    es.addEventListener('end', finish);
    es.addEventListener('note', finish);
    es.onerror = () => {
      if (this.es !== es) return;
      // The browser would resume by asking for the tail again, repeating
      // lines; start over cleanly after a pause instead.
      es.close();
      setStream('logs', 'reconnecting');
      clearTimeout(this.timer);
      this.timer = setTimeout(() => {
        if (this.es === es) this.startFollow();
      }, 3000);
    };
  }

  stopFollow(keepState) {
    clearTimeout(this.timer);
    if (this.es) this.es.close();
    this.es = null;
    dropStream('logs');
    if (!keepState) {
      this.followBtn.setAttribute('aria-pressed', 'false');
      this.followBtn.textContent = 'Follow';
    }
  }

  destroy() {
    window.removeEventListener('pagehide', this.onPageHide);
    this.stopFollow(true);
  }
}
