// Health and sync badges. A status is always told by its text and an icon,
// never by colour alone.
import {h, icon} from './dom.js';

/** The health codes, best first (the order of the counts). */
export const HEALTH = ['Healthy', 'Progressing', 'Degraded', 'Suspended', 'Missing', 'Unknown'];
/** The sync codes. */
export const SYNC = ['Synced', 'OutOfSync', 'Unknown'];

const healthIcons = {Healthy: 'check', Progressing: 'progress', Degraded: 'cross', Suspended: 'pause', Missing: 'warn', Unknown: 'question'};
const syncIcons = {Synced: 'check', OutOfSync: 'diverge', Unknown: 'question'};

/** tone is the CSS class suffix of a status (an unknown word: neutral). */
export function tone(status) {
  return /^[A-Za-z]+$/.test(status || '') ? status.toLowerCase() : 'unknown';
}

/** healthBadge: icon and text of a health status. */
export function healthBadge(status, extra) {
  const s = status || 'Unknown';
  return h('span', {class: `badge health tone-${tone(s)}`, dataset: {health: s}, ...extra},
    icon(healthIcons[s] || 'question', s === 'Progressing' ? 'spin' : ''), h('span', {class: 'badge-text'}, s));
}

/** syncBadge: icon and text of a sync status. */
export function syncBadge(status, extra) {
  const s = status || 'Unknown';
  return h('span', {class: `badge sync tone-${tone(s)}`, dataset: {sync: s}, ...extra},
    icon(syncIcons[s] || 'question'), h('span', {class: 'badge-text'}, s));
}

/** healthIcon is the icon name of a health status (for chips). */
export function healthIcon(s) { return healthIcons[s] || 'question'; }
/** syncIcon is the icon name of a sync status (for chips). */
export function syncIcon(s) { return syncIcons[s] || 'question'; }
