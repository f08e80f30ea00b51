// Operator tokens (admin only: create, shown once; revoke) and manifest signing keys (list;
// import, admin only).

import * as api from './api.js';
import { h, replace, field, table, facts, errorBox, toast, secretField } from './dom.js';
import { time, digest, plural } from './format.js';
import { confirmAction, modal } from './dialog.js';

export async function renderAdmin(main, _args, ctx) {
  const tokens = h('section', { 'aria-labelledby': 'tokens-title' });
  const keys = h('section', { 'aria-labelledby': 'keys-title' });
  replace(main, h('h1', {}, 'Tokens and keys'), tokens, keys);
  await Promise.all([renderTokens(tokens, ctx), renderKeys(keys, ctx)]);
}

async function renderTokens(section, ctx) {
  const title = h('h2', { id: 'tokens-title' }, 'API tokens');
  if (ctx.role !== 'admin') {
    replace(section, title, h('p', { class: 'notice' }, 'Only an admin token can list, create and revoke tokens.'));
    return;
  }
  const list = await api.get('/tokens');
  if (!ctx.current()) return;
  const status = h('div', { 'aria-live': 'polite' });
  const columns = [
    { label: 'Id', cell: (t) => String(t.id), class: 'num' },
    { label: 'Name', cell: (t) => t.name },
    { label: 'Role', cell: (t) => t.role },
    { label: 'Created', cell: (t) => [time(t.created_at), t.created_by ? ` by ${t.created_by}` : ''] },
    { label: 'State', cell: (t) => (t.revoked_at ? ['revoked ', time(t.revoked_at)] : 'valid') },
    {
      label: 'Actions',
      cell: (t) => {
        if (t.revoked_at) return '—';
        const b = h('button', { type: 'button', class: 'danger small' }, 'Revoke…');
        b.setAttribute('aria-label', `Revoke token ${t.name}`);
        b.addEventListener('click', async () => {
          const ok = await confirmAction({
            title: `Revoke token “${t.name}”?`,
            body: h('p', {}, 'Requests with it are refused from the next one on. This cannot be undone.'),
            confirm: 'Revoke token',
            danger: true,
          });
          if (!ok) return;
          try {
            await api.del(api.path('tokens', t.id));
            toast(`Token ${t.name} revoked.`);
            await renderTokens(section, ctx);
          } catch (err) {
            replace(status, errorBox(err));
          }
        });
        return b;
      },
    },
  ];
  const name = h('input', { name: 'name', required: true, maxlength: '64', autocomplete: 'off' });
  const role = h('select', { name: 'role' }, h('option', { value: 'operator' }, 'operator'), h('option', { value: 'admin' }, 'admin'));
  const form = h(
    'form',
    { class: 'card', 'aria-label': 'New token' },
    h('h3', {}, 'New token'),
    h('div', { class: 'row' }, field('Name', name, 'A label people recognise, e.g. “CI uploader”'), field('Role', role)),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create token')),
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      const created = await api.post('/tokens', { name: name.value.trim(), role: role.value });
      await showSecret(created);
      await renderTokens(section, ctx);
    } catch (err) {
      replace(status, errorBox(err));
    }
  });
  replace(section, title, table(columns, list, { caption: plural(list.length, 'token') }), status, form);
}

/** The one time a secret is shown: in a dialog, selected, with a copy button. */
async function showSecret(created) {
  await modal({
    title: `Token “${created.name}” created`,
    body: [
      h('p', {}, 'This is the only time the secret is shown. Store it now.'),
      secretField(created.token, `token ${created.name}`),
    ],
    confirm: 'I have stored it',
    cancel: 'Close',
    initial: '.secret',
  });
}

/** A button that downloads `keyId`'s trust file for devices; errors go to `status`. */
function trustButton(keyId, status, label = 'Download trust file') {
  const b = h('button', { type: 'button', class: 'small', 'data-trust': keyId }, label);
  b.setAttribute('aria-label', `Download the device trust file of key ${keyId}`);
  b.addEventListener('click', async () => {
    try {
      await api.downloadTrust(keyId);
      toast(`Saved ${keyId}.key.pub: give it to device-agent --trust.`);
    } catch (err) {
      replace(status, errorBox(err));
    }
  });
  return b;
}

async function renderKeys(section, ctx) {
  const title = h('h2', { id: 'keys-title' }, 'Manifest signing keys');
  const data = await api.get('/keys');
  if (!ctx.current()) return;
  const status = h('div', { 'aria-live': 'polite' });
  const columns = [
    { label: 'Key id', cell: (k) => h('code', {}, k.key_id) },
    { label: 'Public key', cell: (k) => digest(k.public_key), class: 'wrap' },
    { label: 'Source', cell: (k) => k.source },
    { label: 'State', cell: (k) => (k.active ? 'active' : ['retired ', time(k.retired_at)]) },
    { label: 'Created', cell: (k) => time(k.created_at) },
    { label: 'Trust file', cell: (k) => trustButton(k.key_id, status, 'Download') },
  ];
  const parts = [
    title,
    facts([
      ['Active key', h('code', { class: 'key-id' }, data.active.key_id)],
      ['Public key', digest(data.active.public_key)],
      [
        'Device trust file',
        [
          trustButton(data.active.key_id, status),
          h('span', { class: 'hint' }, ' the file device-agent --trust reads (npub-ed25519-public-v1 …)'),
        ],
      ],
    ]),
    status,
    table(columns, data.keys, { caption: 'Every key this server has signed with, newest first' }),
  ];
  if (data.keyring_updates.length) {
    parts.push(
      table(
        [
          { label: 'Sequence', cell: (u) => String(u.sequence), class: 'num' },
          { label: 'Root key', cell: (u) => h('code', {}, u.root_key_id) },
          { label: 'Imported', cell: (u) => time(u.created_at) },
        ],
        data.keyring_updates,
        { caption: 'Keyring updates' },
      ),
    );
  }
  if (ctx.role === 'admin') parts.push(importKeyForm(section, ctx));
  replace(section, parts);
}

function importKeyForm(section, ctx) {
  const secret = h('textarea', { name: 'secret_key', rows: '2', required: true, autocomplete: 'off', spellcheck: 'false' });
  const update = h('textarea', { name: 'keyring_update', rows: '3', autocomplete: 'off', spellcheck: 'false' });
  const status = h('div', { 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'card', 'aria-label': 'Import a signing key' },
    h('h3', {}, 'Import a signing key'),
    h('p', {}, 'The imported key signs every manifest from now on; the current key is retired. Devices trust it only through a root-signed keyring update.'),
    field('Secret key', secret, 'The key file’s content (npub-ed25519-secret-v1 …) or its 64 hex digits'),
    field('Keyring update (optional)', update, 'The root-signed NPK1 record that adds this key, as hex'),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Import key')),
    status,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const ok = await confirmAction({
      title: 'Switch the signing key?',
      body: h('p', {}, 'Manifests signed from now on use the imported key. Devices that do not trust it yet will refuse them.'),
      confirm: 'Import and activate',
      danger: true,
    });
    if (!ok) return;
    const body = { secret_key: secret.value };
    if (update.value.trim()) body.keyring_update = update.value.trim();
    try {
      const key = await api.post('/keys', body);
      toast(`Key ${key.key_id} is now active.`);
      await renderKeys(section, ctx);
    } catch (err) {
      replace(status, errorBox(err));
    }
  });
  return form;
}
