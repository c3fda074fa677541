// Shared pieces of the interface: toasts, the confirmation dialog, error
// banners.
import {h, append} from './dom.js';

/** toast shows a short message; errors stay until dismissed. */
export function toast(message, kind = 'info') {
  const box = document.getElementById('toasts');
  if (!box) return;
  const close = h('button', {type: 'button', class: 'toast-close', 'aria-label': 'Dismiss'}, '×');
  const t = h('div', {class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : 'status'}, h('span', null, message), close);
  close.addEventListener('click', () => t.remove());
  box.append(t);
  if (kind !== 'error') setTimeout(() => t.remove(), 6000);
}

/**
 * confirmAction asks before a write; it answers true when confirmed.
 * body: text or nodes; confirm: the label of the confirming button.
 */
export function confirmAction({title, body, confirm, danger}) {
  const dlg = document.getElementById('confirm-dialog');
  if (dlg.open) return Promise.resolve(false);
  document.getElementById('confirm-title').textContent = title;
  const bodyEl = document.getElementById('confirm-body');
  bodyEl.replaceChildren();
  append(bodyEl, [body]);
  const ok = document.getElementById('confirm-ok');
  ok.textContent = confirm;
  ok.className = 'btn ' + (danger ? 'btn-danger' : 'btn-primary');
  dlg.returnValue = '';
  return new Promise((resolve) => {
    dlg.addEventListener('close', () => resolve(dlg.returnValue === 'confirm'), {once: true});
    dlg.showModal();
    document.getElementById('confirm-cancel').focus();
  });
}

/** errorBanner is an alert naming what failed and the server's message. */
export function errorBanner(what, err) {
  return h('div', {class: 'banner banner-error', role: 'alert'},
    h('strong', null, what), ' ', h('span', {class: 'banner-msg'}, err && err.message ? err.message : String(err)));
}
