// LiveStream wraps an EventSource: it reports its state to the connection
// indicator, lets the browser reconnect by itself (resuming with
// Last-Event-ID), and when the browser gives up (an HTTP error answer)
// checks the sign-in and opens a new one after a pause.
import {api, goLogin} from './api.js';
import {setStream, dropStream} from './conn.js';

// The streams started and not closed, paused while the page sits in the
// back/forward cache so it holds no connection to the server.
const running = new Set();

window.addEventListener('pagehide', (ev) => {
  if (!ev.persisted) return;
  for (const s of running) s.pause();
});
window.addEventListener('pageshow', (ev) => {
  if (!ev.persisted) return;
  for (const s of running) s.start();
});

export class LiveStream {
  /**
   * name: the indicator's key; url(): the URL to open (called at each
   * fresh start); on: {message(ev), <event type>(ev), open()}.
   */
  constructor(name, url, on) {
    this.name = name;
    this.url = url;
    this.on = on;
    this.es = null;
    this.closed = true;
    this.timer = 0;
    this.delay = 1000;
  }

  start() {
    this.closed = false;
    running.add(this);
    clearTimeout(this.timer);
    setStream(this.name, this.es ? 'reconnecting' : 'connecting');
    if (this.es) this.es.close();
    const es = new EventSource(this.url(), {withCredentials: true});
    this.es = es;
    es.onopen = () => {
      if (this.es !== es) return;
      this.delay = 1000;
      setStream(this.name, 'live');
      if (this.on.open) this.on.open();
    };
    es.onerror = () => {
      if (this.closed || this.es !== es) return;
      setStream(this.name, 'reconnecting');
      if (es.readyState === EventSource.CLOSED) this.restartLater();
    };
    for (const [type, fn] of Object.entries(this.on)) {
      if (type === 'open') continue;
      es.addEventListener(type, (ev) => {
        if (this.es === es && !this.closed) fn(ev);
      });
    }
  }

  // restartLater opens a new EventSource after the browser gave up on
  // this one; a signed-out user is sent to sign in instead.
  restartLater() {
    clearTimeout(this.timer);
    const wait = this.delay;
    this.delay = Math.min(this.delay * 2, 30000);
    this.timer = setTimeout(async () => {
      if (this.closed) return;
      try {
        const me = await api('/v1/deploy/session/userinfo');
        if (me && me.loggedIn === false) {
          goLogin();
          return;
        }
      } catch {
        // not reachable yet: try the stream again anyway
      }
      if (!this.closed) this.start();
    }, wait);
  }

  // pause closes the connection; start opens a new one, which resumes
  // from the position url() names.
  pause() {
    clearTimeout(this.timer);
    if (this.es) this.es.close();
    this.es = null;
  }

  close() {
    this.closed = true;
    running.delete(this);
    this.pause();
    dropStream(this.name);
  }
}
