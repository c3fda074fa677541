// The resource tree of one application: nodes laid out under their
// parents (parentRefs), each a button showing kind, name, health (icon and
// text), its image tag and message.
import {h} from './dom.js';
import {healthBadge, tone} from './status.js';

// The order of children under a parent.
const KIND_ORDER = ['Deployment', 'StatefulSet', 'ReplicaSet', 'Pod', 'Service', 'Ingress', 'IngressRoute', 'Middleware',
  'HorizontalPodAutoscaler', 'PodDisruptionBudget', 'ConfigMap'];

const KIND_SHORT = {
  App: 'app', Deployment: 'deploy', StatefulSet: 'sts', ReplicaSet: 'rs', Pod: 'pod', Service: 'svc', Ingress: 'ing',
  HorizontalPodAutoscaler: 'hpa', PodDisruptionBudget: 'pdb', ConfigMap: 'cm', IngressRoute: 'route', Middleware: 'mw',
};

/** nodeRef is the resource ref of a node: group:kind:namespace:name. */
export function nodeRef(n) {
  return `${n.group || ''}:${n.kind}:${n.namespace || ''}:${n.name}`;
}

function rank(n) {
  const i = KIND_ORDER.indexOf(n.kind);
  return i < 0 ? KIND_ORDER.length : i;
}

function compare(a, b) {
  const r = rank(a) - rank(b);
  if (r) return r;
  if (a.kind === 'ReplicaSet' || a.kind === 'Pod') {
    // newest first: the current rollout on top
    const t = (b.createdAt || '').localeCompare(a.createdAt || '');
    if (t) return t;
  }
  return a.name.localeCompare(b.name);
}

/** layout groups nodes under their first parent present in the tree. */
export function layout(nodes) {
  const byUID = new Map();
  for (const n of nodes) if (n.uid) byUID.set(n.uid, n);
  const children = new Map();
  const roots = [];
  for (const n of nodes) {
    const parent = (n.parentRefs || []).map((p) => p.uid).find((uid) => uid && uid !== n.uid && byUID.has(uid));
    if (parent) {
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(n);
    } else {
      roots.push(n);
    }
  }
  roots.sort((a, b) => (a.kind === 'App' ? -1 : b.kind === 'App' ? 1 : compare(a, b)));
  // ReplicaSets with pods (the ones serving) come before the idle ones.
  const busy = (n) => (n.kind === 'ReplicaSet' && children.has(n.uid) ? 0 : 1);
  for (const list of children.values()) list.sort((a, b) => (a.kind === 'ReplicaSet' && b.kind === 'ReplicaSet' && busy(a) - busy(b)) || compare(a, b));
  return {roots, children};
}

function imageTag(n) {
  const info = (n.info || []).find((i) => i.name === 'Image Tag');
  return info ? info.value : '';
}

/**
 * renderTree builds the tree; onSelect(node) is called on a click;
 * selected is the ref shown as chosen.
 */
export function renderTree(tree, selected, onSelect) {
  const nodes = (tree && tree.nodes) || [];
  if (!nodes.length) return h('p', {class: 'muted'}, 'No resources yet.');
  const {roots, children} = layout(nodes);
  const seen = new Set();
  const item = (n) => {
    if (seen.has(n.uid || nodeRef(n))) return null;
    seen.add(n.uid || nodeRef(n));
    const ref = nodeRef(n);
    const health = n.health && n.health.status;
    const msg = n.health && n.health.message;
    const tag = imageTag(n);
    const kids = (children.get(n.uid) || []).map(item).filter(Boolean);
    const idle = n.kind === 'ReplicaSet' && health === 'Healthy' && kids.length === 0;
    const btn = h('button', {
      type: 'button',
      class: `node tone-${health ? tone(health) : 'none'}${idle ? ' node-idle' : ''}`,
      'aria-pressed': String(ref === selected),
      dataset: {ref, kind: n.kind, name: n.name, health: health || ''},
      onclick: () => onSelect(n),
    },
    h('span', {class: 'node-top'},
      h('span', {class: 'kind', title: n.kind}, KIND_SHORT[n.kind] || n.kind.toLowerCase()),
      h('span', {class: 'node-name'}, n.name),
      tag ? h('span', {class: 'node-tag'}, tag) : null),
    h('span', {class: 'node-bottom'},
      h('span', {class: 'node-kind'}, n.kind),
      health ? healthBadge(health) : h('span', {class: 'badge tone-none'}, h('span', {class: 'badge-text'}, 'No health check'))),
    msg ? h('span', {class: 'node-msg'}, msg) : null);
    return h('li', null, btn, kids.length ? h('ul', null, kids) : null);
  };
  return h('ul', {class: 'tree', 'aria-label': 'Resources of the application'}, roots.map(item).filter(Boolean));
}
