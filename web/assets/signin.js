// Sign in with an operator API token (`npub_op_…`), checked against the API before it is kept.

import * as api from './api.js';
import { h, replace, field, errorBox } from './dom.js';

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
      const shown =
        err.status === 401
          ? { code: 'unauthorized', detail: `The server did not accept this token: ${err.detail}` }
          : err;
      replace(status, errorBox(shown));
      input.focus();
      input.select();
    } finally {
      button.disabled = false;
    }
  });
  replace(main, form);
  input.focus();
}
