// The dashboard's entry point: sign-in state, then the fleet (one list and
// one live stream for the whole visit) and the view the URL names.
import {h, replace} from './dom.js';
import {api, loginURL} from './api.js';
import {Fleet} from './fleet.js';
import {ListView} from './list.js';
import {DetailView} from './detail.js';
import {current, onRoute, followLink, listLocation} from './router.js';
import {errorBanner} from './ui.js';

const main = document.getElementById('main');
const account = document.getElementById('account');

let fleet = null;
let view = null;       // the mounted view
let viewKind = '';     // 'list' or the app key
let routed = false;    // a view was shown before (focus moves on later ones)

function roleOf(me) {
  if (me.superAdmin) return 'SuperAdmin';
  if (me.orgAdmin) return 'Org admin' + (me.org ? ' · ' + me.org : '');
  return me.org ? 'Member · ' + me.org : 'Signed in';
}

function renderAccount(me) {
  replace(account,
    h('span', {class: 'who'}, h('span', {class: 'who-name', id: 'username'}, me.username || 'signed in'),
      h('span', {class: 'who-role', id: 'user-role'}, roleOf(me))),
    h('button', {type: 'button', class: 'btn btn-on-dark', id: 'logout', onclick: logout}, 'Log out'));
}

function renderSignedOut(loginBase, justLeft) {
  account.replaceChildren();
  document.title = 'Sign in · deployd';
  replace(main, h('section', {class: 'view signin'},
    h('div', {class: 'card signin-card'},
      h('img', {src: '/favicon.svg', alt: '', width: '40', height: '40'}),
      h('h1', {tabindex: '-1'}, justLeft ? 'You are signed out' : 'Sign in to deployd'),
      h('p', null, 'See the applications of your organization — their health, sync status and resources — updated live.'),
      h('a', {class: 'btn btn-primary btn-large', id: 'login', href: loginURL(loginBase || '/v1/deploy/login')}, 'Log in'))));
}

async function logout() {
  const btn = document.getElementById('logout');
  if (btn) btn.disabled = true;
  let ans = null;
  try {
    ans = await api('/v1/deploy/logout', {method: 'POST'});
  } catch (err) {
    if (btn) btn.disabled = false;
    replace(main, errorBanner('Signing out failed.', err), ...main.childNodes);
    return;
  }
  unmount();
  if (fleet) fleet.close();
  fleet = null;
  renderSignedOut(ans && ans.loginUrl, true);
}

function unmount() {
  if (view && view.destroy) view.destroy();
  view = null;
  viewKind = '';
}

function route() {
  if (!fleet) return;
  const r = current();
  if (r.app) {
    const key = r.app.namespace + '/' + r.app.name;
    if (viewKind === key) return;
    unmount();
    view = new DetailView(main, fleet, r.app, r.query, listLocation());
    viewKind = key;
  } else {
    document.title = 'Applications · deployd';
    if (viewKind === 'list') {
      view.restore(r.list);
      return;
    }
    unmount();
    view = new ListView(main, fleet, r.list);
    viewKind = 'list';
  }
  if (routed) {
    const title = document.getElementById('list-title') || document.getElementById('app-title');
    if (title) title.focus({preventScroll: true});
    window.scrollTo(0, 0);
  }
  routed = true;
}

async function boot() {
  document.addEventListener('click', followLink);
  document.addEventListener('keydown', (e) => {
    if (e.key === '/' && !e.ctrlKey && !e.metaKey && !/^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName)) {
      const q = document.getElementById('f-q');
      if (q) {
        e.preventDefault();
        q.focus();
      }
    }
  });
  let me;
  try {
    me = await api('/v1/deploy/session/userinfo');
  } catch (err) {
    replace(main, errorBanner('deployd cannot tell who you are.', err));
    return;
  }
  if (!me || !me.loggedIn) {
    renderSignedOut(me && me.loginUrl);
    return;
  }
  renderAccount(me);
  fleet = new Fleet();
  onRoute(route);
  route();
  try {
    await fleet.load();
  } catch {
    // the list view shows the error
  }
}

boot();
