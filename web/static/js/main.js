// The dashboard's entry point: sign-in state, then the fleet (one list and
// one live stream for the whole visit) and the view the URL names.
import {h, replace} from './dom.js';
import {api, loginURL} from './api.js';
import {Fleet} from './fleet.js';
import {ListView} from './list.js';
import {DetailView} from './detail.js';
import {BoardView} from './board.js';
import {current, onRoute, followLink, listLocation} from './router.js';
import {errorBanner} from './ui.js';
import {EnginePanel} from './engine.js';

const main = document.getElementById('main');
const account = document.getElementById('account');

let fleet = null;
let me = null;         // the signed-in user
let engine = null;     // the engine's panel on the list (SuperAdmins)
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
    me.superAdmin || me.orgAdmin ? h('a', {class: 'btn btn-on-dark', id: 'board-link', href: '/?board=1'}, 'Drift board') : null,
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
  me = null;
  renderSignedOut(ans && ans.loginUrl, true);
}

function unmount() {
  if (engine) engine.destroy();
  engine = null;
  if (view && view.destroy) view.destroy();
  view = null;
  viewKind = '';
}

function route() {
  if (!fleet) return;
  const r = current();
  if (r.board) {
    if (viewKind === 'board') return;
    unmount();
    view = new BoardView(main);
    viewKind = 'board';
  } else if (r.app) {
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
    const slot = document.getElementById('engine-slot');
    if (me && me.superAdmin && slot) engine = new EnginePanel(slot);
  }
  if (routed) {
    const title = document.getElementById('list-title') || document.getElementById('app-title') || document.getElementById('board-title');
    if (title) title.focus({preventScroll: true});
    window.scrollTo(0, 0);
  }
  routed = true;
}

// blank takes down what the page shows about the signed-in user.
function blank() {
  unmount();
  if (fleet) fleet.close();
  fleet = null;
  me = null;
  account.replaceChildren();
  document.title = 'deployd';
  replace(main, h('p', {class: 'boot'}, 'Loading…'));
}

// The back/forward cache keeps a page as it was and Back shows it again —
// after a sign-out, the signed-out user's name and apps. So the page blanks
// itself as it goes into the cache, and when it comes back it asks who is
// signed in before it shows anything again.
window.addEventListener('pagehide', (ev) => {
  if (ev.persisted) blank();
});
window.addEventListener('pageshow', (ev) => {
  if (!ev.persisted) return;
  blank();
  start();
});

// start asks who is signed in and shows the fleet, or the sign-in page.
async function start() {
  let who;
  try {
    who = await api('/v1/deploy/session/userinfo');
  } catch (err) {
    replace(main, errorBanner('deployd cannot tell who you are.', err));
    return;
  }
  if (fleet) return; // started meanwhile
  if (!who || !who.loggedIn) {
    renderSignedOut(who && who.loginUrl);
    return;
  }
  me = who;
  renderAccount(me);
  const f = new Fleet();
  fleet = f;
  route();
  try {
    await f.load();
  } catch {
    // the list view shows the error
  }
}

function boot() {
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
  onRoute(route);
  start();
}

boot();
