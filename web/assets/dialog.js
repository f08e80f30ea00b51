// Modal dialogs: a native <dialog> opened with showModal() (the rest of the page becomes inert),
// focus kept inside it (Tab and Shift+Tab wrap), Escape closes it as "cancel", and focus returns
// to whatever opened it.

import { h } from './dom.js';

const FOCUSABLE =
  'a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';

function trapFocus(dialog, event) {
  if (event.key !== 'Tab') return;
  const items = [...dialog.querySelectorAll(FOCUSABLE)].filter((el) => el.offsetParent !== null);
  if (items.length === 0) return;
  const first = items[0];
  const last = items[items.length - 1];
  if (event.shiftKey && document.activeElement === first) {
    event.preventDefault();
    last.focus();
  } else if (!event.shiftKey && document.activeElement === last) {
    event.preventDefault();
    first.focus();
  }
}

/**
 * Opens a modal with `title`, `body` (nodes) and buttons; resolves to the `value` of the button
 * pressed, or `null` on Escape / Cancel. `danger` styles the confirming button.
 */
export function modal({ title, body, confirm = 'Confirm', cancel = 'Cancel', danger = false, initial }) {
  const opener = document.activeElement;
  return new Promise((resolve) => {
    const titleId = `dlg-title-${Date.now()}`;
    const confirmButton = h(
      'button',
      { type: 'submit', value: 'confirm', class: danger ? 'danger' : 'primary' },
      confirm,
    );
    const cancelButton = h('button', { type: 'button', value: 'cancel' }, cancel);
    const form = h(
      'form',
      { method: 'dialog' },
      h('h2', { id: titleId }, title),
      h('div', { class: 'dialog-body' }, body),
      h('div', { class: 'actions' }, cancelButton, confirmButton),
    );
    const dialog = h('dialog', { 'aria-labelledby': titleId }, form);
    let result = null;
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      result = 'confirm';
      dialog.close();
    });
    cancelButton.addEventListener('click', () => dialog.close());
    dialog.addEventListener('keydown', (e) => trapFocus(dialog, e));
    dialog.addEventListener('cancel', () => {
      result = null; // Escape
    });
    dialog.addEventListener('close', () => {
      dialog.remove();
      if (opener && typeof opener.focus === 'function' && opener.isConnected) opener.focus();
      resolve(result);
    });
    document.body.append(dialog);
    dialog.showModal();
    (initial ? dialog.querySelector(initial) : cancelButton)?.focus();
  });
}

/** A yes/no question; resolves to true only when confirmed. */
export async function confirmAction(options) {
  return (await modal(options)) === 'confirm';
}
