// Small DOM helpers: element creation, icons, time formatting. Every
// element is built with the DOM API (no HTML strings), so text from the
// server is never parsed as markup.

/**
 * h builds an element: h('a', {href: '/', class: 'x', onclick: fn}, 'text', child).
 * Attributes with null, undefined or false are left out; true sets an empty
 * attribute; "dataset" assigns data-* attributes; "text" sets textContent.
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (v == null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (v === true) el.setAttribute(k, '');
      else el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

/** append adds children (nodes, strings, nested arrays; null skipped). */
export function append(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

/** replace empties el and appends children. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

const SVG = 'http://www.w3.org/2000/svg';

// 16×16 stroked icons. Each is a list of [element, attributes].
const ICONS = {
  check: [['circle', {cx: 8, cy: 8, r: 6.5}], ['path', {d: 'M5.2 8.3l1.9 1.9 3.8-4.2'}]],
  progress: [['path', {d: 'M13.5 8A5.5 5.5 0 1 1 11.9 4.1'}], ['path', {d: 'M12.3 1.9v2.6H9.7'}]],
  cross: [['circle', {cx: 8, cy: 8, r: 6.5}], ['path', {d: 'M5.8 5.8l4.4 4.4M10.2 5.8l-4.4 4.4'}]],
  pause: [['circle', {cx: 8, cy: 8, r: 6.5}], ['path', {d: 'M6.6 5.6v4.8M9.4 5.6v4.8'}]],
  warn: [['path', {d: 'M8 1.8l6.6 11.7H1.4z'}], ['path', {d: 'M8 6.3v3.3'}], ['circle', {cx: 8, cy: 11.6, r: 0.4}]],
  question: [['circle', {cx: 8, cy: 8, r: 6.5}], ['path', {d: 'M6.2 6.3a1.9 1.9 0 1 1 2.6 1.8c-.5.2-.8.6-.8 1.1v.3'}], ['circle', {cx: 8, cy: 11.5, r: 0.4}]],
  diverge: [['circle', {cx: 8, cy: 8, r: 6.5}], ['path', {d: 'M8 11V5.2M5.6 7.5 8 5.1l2.4 2.4'}]],
  dot: [['circle', {cx: 8, cy: 8, r: 3.5}]],
  back: [['path', {d: 'M9.8 3.5 5.3 8l4.5 4.5'}]],
  sync: [['path', {d: 'M2.8 7A5.3 5.3 0 0 1 12.4 4.6M13.2 9a5.3 5.3 0 0 1-9.6 2.4'}], ['path', {d: 'M12.6 2v2.8H9.8M3.4 14v-2.8h2.8'}]],
  undo: [['path', {d: 'M4.5 6.5h5.2a3.3 3.3 0 0 1 0 6.6H6.5'}], ['path', {d: 'M6.8 4.2 4.5 6.5l2.3 2.3'}]],
  restart: [['path', {d: 'M3 8a5 5 0 1 0 1.6-3.7'}], ['path', {d: 'M3.6 1.9v2.7h2.7'}]],
  search: [['circle', {cx: 7, cy: 7, r: 4.5}], ['path', {d: 'M10.4 10.4 14 14'}]],
};

/** icon returns an aria-hidden SVG icon; the text next to it carries the meaning. */
export function icon(name, cls) {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', '0 0 16 16');
  svg.setAttribute('width', '16');
  svg.setAttribute('height', '16');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('focusable', 'false');
  svg.setAttribute('class', 'icon' + (cls ? ' ' + cls : ''));
  for (const [tag, attrs] of ICONS[name] || ICONS.question) {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
    svg.append(el);
  }
  return svg;
}

const rtf = new Intl.RelativeTimeFormat('en', {numeric: 'auto'});
const dtf = new Intl.DateTimeFormat('en', {dateStyle: 'medium', timeStyle: 'short'});

/** relativeTime says how long ago an RFC 3339 time was ("3 days ago"). */
export function relativeTime(iso, now = Date.now()) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  const s = Math.round((t - now) / 1000);
  const abs = Math.abs(s);
  if (abs < 45) return 'just now';
  if (abs < 3600) return rtf.format(Math.round(s / 60), 'minute');
  if (abs < 86400) return rtf.format(Math.round(s / 3600), 'hour');
  if (abs < 86400 * 30) return rtf.format(Math.round(s / 86400), 'day');
  if (abs < 86400 * 365) return rtf.format(Math.round(s / (86400 * 30)), 'month');
  return rtf.format(Math.round(s / (86400 * 365)), 'year');
}

/** absoluteTime is a local, readable form of an RFC 3339 time. */
export function absoluteTime(iso) {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? '' : dtf.format(t);
}

/** timeEl is a <time> showing a relative time with the exact one on hover. */
export function timeEl(iso) {
  if (!iso) return h('span', {class: 'muted'}, '—');
  return h('time', {datetime: iso, title: absoluteTime(iso)}, relativeTime(iso));
}
