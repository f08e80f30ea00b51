// Sign in with an operator API token (`npub_op_…`), checked against the API before it is kept.

import * as api from './api.js';
import { h, replace, field } from './dom.js';

/** Prefixes of the server's token kinds (OPERATOR_TOKEN_PREFIX, DEVICE_TOKEN_PREFIX in npub-server). */
const OPERATOR_PREFIX = 'npub_op_';
const DEVICE_PREFIX = 'npub_dev_';

/**
 * Why a sign-in failed, for the person at the keyboard. The API's own `detail` is written for
 * someone calling it with curl (it names the `Authorization` header), so it is not shown here.
 */
export function signInProblem(err, secret) {
  if (err.status === 401) {
    if (secret.startsWith(DEVICE_PREFIX)) {
      return `This is a device token. Sign in with an operator token (${OPERATOR_PREFIX}…).`;
    }
    if (!secret.startsWith(OPERATOR_PREFIX)) {
      return `This is not an npub operator token: those start with ${OPERATOR_PREFIX}.`;
    }
    return 'This token was not accepted: it is unknown or has been revoked. Check that you pasted all of it.';
  }
  if (err.status === 0) return 'The server did not answer. Check that it is running, then try again.';
  if (err.status === 429 || err.status >= 500) {
    return `The server could not check the token just now (HTTP ${err.status}). Try again in a moment.`;
  }
  return `The server could not check the token (HTTP ${err.status}).`;
}

export function renderSignIn(main, { onSignedIn, message }) {
  document.title = 'Sign in · npub';
  const input = h('input', {
    type: 'password',
    name: 'token',
    autocomplete: 'off',
    spellcheck: 'false',
    required: true,
    placeholder: 'npub_op_…',
  });
  const status = h('div', { class: 'status', 'aria-live': 'polite' });
  const button = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const form = h(
    'form',
    { class: 'card signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title', tabindex: '-1' }, 'Sign in'),
    h(
      'p',
      {},
      'Use an operator API token. The server prints the first admin token when it starts; ' +
        'an admin creates more under Tokens & keys.',
    ),
    field('API token', input, 'Kept in this tab only (session storage) and sent only to this server.'),
    h('div', { class: 'actions' }, button),
    status,
  );
  if (message) status.append(h('p', { class: 'notice' }, message));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const secret = input.value.trim();
    if (!secret) return;
    button.disabled = true;
    replace(status, h('p', {}, 'Checking the token…'));
    try {
      await api.get('/models', { token: secret });
      api.setToken(secret);
      const role = await api.role();
      onSignedIn(role);
    } catch (err) {
      api.clearToken();
      replace(status, h('div', { class: 'error', role: 'alert' }, signInProblem(err, secret)));
      input.focus();
      input.select();
    } finally {
      button.disabled = false;
    }
  });
  replace(main, form);
  input.focus();
}
