// The connection indicator: one line in the top bar (an aria-live status)
// summing up every open stream — live, connecting, or reconnecting.

const states = new Map();
let el = null;

function render() {
  if (!el) el = document.getElementById('conn');
  if (!el) return;
  let state = '';
  if (states.size) {
    const all = [...states.values()];
    state = all.includes('reconnecting') ? 'reconnecting' : all.includes('connecting') ? 'connecting' : 'live';
  }
  if (el.dataset.state === state) return;
  el.dataset.state = state;
  el.className = 'conn' + (state ? ' conn-' + state : '');
  el.replaceChildren();
  if (!state) return;
  const dot = document.createElement('span');
  dot.className = 'conn-dot';
  dot.setAttribute('aria-hidden', 'true');
  const text = {live: 'Live', connecting: 'Connecting…', reconnecting: 'Reconnecting…'}[state];
  el.append(dot, text);
  el.title = {
    live: 'Updates arrive as they happen',
    connecting: 'Opening the live updates',
    reconnecting: 'The live connection dropped; reconnecting and catching up on what was missed',
  }[state];
}

/** setStream records the state of a named stream: connecting, live or reconnecting. */
export function setStream(name, state) {
  states.set(name, state);
  render();
}

/** dropStream forgets a stream that was closed on purpose. */
export function dropStream(name) {
  states.delete(name);
  render();
}
