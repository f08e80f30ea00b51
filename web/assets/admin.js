// Operator tokens (admin only: create, shown once; revoke) and manifest signing keys (list, trust
// files, the root key; rotate, revoke and import: admin only).

import * as api from './api.js';
import { h, append, replace, field, table, facts, errorBox, toast, secretField } from './dom.js';
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

/**
 * Why a key action failed, for the person at the keyboard: the API's `detail` is written for
 * someone calling it with curl (it names routes and JSON fields), so it is not shown here.
 * `what` completes "could not …" ("rotate the signing key").
 */
export function keyProblem(err, what) {
  if (err.status === 0) return `The server did not answer, so it could not ${what}. Check that it is running, then try again.`;
  if (err.status === 401) return `Your token is no longer accepted, so the server could not ${what}. Sign in again.`;
  if (err.status === 403) return `Only an admin token can ${what}. Sign in with one.`;
  if (err.status === 404) return `The server does not know this key any more, so it could not ${what}.`;
  if (err.status === 409) return `The server could not ${what}: the key is the active one or already revoked (the list shows its state now).`;
  if (err.status === 429 || err.status >= 500) {
    return `The server could not ${what} just now (HTTP ${err.status}). Reload the page to see whether it took effect, then try again.`;
  }
  return `The server could not ${what} (HTTP ${err.status}).`;
}

/** An alert in words (see `keyProblem`). */
function problemBox(err, what) {
  return h('div', { class: 'error', role: 'alert' }, keyProblem(err, what));
}

/**
 * A button that saves a trust file through `download()` and says so in a toast (`saved`);
 * errors go to `status`.
 */
function downloadButton({ label, ariaLabel, attrs, download, saved, status }) {
  const b = h('button', { type: 'button', class: 'small', ...attrs }, label);
  b.setAttribute('aria-label', ariaLabel);
  b.addEventListener('click', async () => {
    try {
      await download();
      toast(saved);
    } catch (err) {
      replace(status, problemBox(err, 'send the trust file'));
    }
  });
  return b;
}

/** A button that downloads `keyId`'s trust file for devices; errors go to `status`. */
function trustButton(keyId, status, label = 'Download trust file') {
  return downloadButton({
    label,
    ariaLabel: `Download the device trust file of key ${keyId}`,
    attrs: { 'data-trust': keyId },
    download: () => api.downloadTrust(keyId),
    saved: `Saved ${keyId}.key.pub: give it to device-agent --trust.`,
    status,
  });
}

/** A button that downloads the root key's public file; errors go to `status`. */
function rootTrustButton(rootKeyId, status) {
  return downloadButton({
    label: 'Root trust file',
    ariaLabel: `Download the root trust file of root key ${rootKeyId}`,
    attrs: { 'data-root-trust': rootKeyId },
    download: () => api.downloadRootTrust(rootKeyId),
    saved: `Saved root-${rootKeyId}.key.pub: build it into device firmware, or give it to device-agent --root.`,
    status,
  });
}

/** A key's state as a badge: active, revoked (for good) or retired (still trusted by devices). */
function keyState(k) {
  if (k.active) return h('span', { class: 'badge active' }, 'active');
  if (k.revoked_at) return [h('span', { class: 'badge revoked' }, 'revoked'), ' ', time(k.revoked_at)];
  return [h('span', { class: 'badge' }, 'retired'), ' ', time(k.retired_at)];
}

/** What a keyring update does, in words. */
function keyringChange(u) {
  const id = (k) => h('code', {}, k);
  if (u.action === 'add') return ['trust ', id(u.adds)];
  if (u.action === 'revoke') return ['revoke ', id(u.revokes)];
  if (u.action === 'replace') return ['trust ', id(u.adds), ', revoke ', id(u.revokes)];
  return u.action;
}

async function renderKeys(section, ctx, after) {
  const title = h('h2', { id: 'keys-title' }, 'Manifest signing keys');
  const data = await api.get('/keys');
  if (!ctx.current()) return;
  const status = h('div', { 'aria-live': 'polite' });
  if (after) append(status, after);
  const admin = ctx.role === 'admin';
  const reload = (notice) => renderKeys(section, ctx, notice);
  const columns = [
    { label: 'Key id', cell: (k) => h('code', {}, k.key_id) },
    { label: 'Public key', cell: (k) => digest(k.public_key), class: 'wrap' },
    { label: 'Source', cell: (k) => k.source },
    { label: 'State', cell: keyState },
    { label: 'Created', cell: (k) => time(k.created_at) },
    { label: 'Trust file', cell: (k) => trustButton(k.key_id, status, 'Download') },
  ];
  if (admin) columns.push({ label: 'Actions', cell: (k) => revokeCell(k, data.active.key_id, status, reload) });
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
      ['Root key', h('code', { class: 'root-key-id' }, data.root.key_id)],
      ['Root public key', digest(data.root.public_key)],
      [
        'Root trust file',
        [
          rootTrustButton(data.root.key_id, status),
          h('span', { class: 'hint' }, ' what devices are built with (device-agent --root): it signs keyring updates, never a manifest'),
        ],
      ],
    ]),
  ];
  if (admin) parts.push(rotateCard(data, status, reload));
  parts.push(status, table(columns, data.keys, { caption: 'Every key this server has signed with, newest first' }));
  if (data.keyring_updates.length) {
    parts.push(
      table(
        [
          { label: 'Sequence', cell: (u) => String(u.sequence), class: 'num' },
          { label: 'Change', cell: keyringChange },
          { label: 'Root key', cell: (u) => h('code', {}, u.root_key_id) },
          { label: 'Made', cell: (u) => time(u.created_at) },
        ],
        data.keyring_updates,
        { caption: 'Keyring updates devices apply, in order' },
      ),
    );
  }
  if (admin) parts.push(importKeyForm(section, ctx));
  replace(section, parts);
}

/** The rotate button and what it does, for admins. */
function rotateCard(data, status, reload) {
  const button = h('button', { type: 'button', class: 'primary', 'data-action': 'rotate' }, 'Rotate signing key…');
  button.addEventListener('click', async () => {
    const revoke = h('input', { type: 'checkbox', name: 'revoke_previous' });
    const ok = await confirmAction({
      title: 'Rotate the signing key?',
      body: [
        h('p', {}, 'A new signing key is generated. It signs every deployment made from now on; the manifests of earlier deployments stay signed by ', h('code', {}, data.active.key_id), '.'),
        h('p', {}, 'Devices learn the new key at their next poll: they fetch a keyring update signed by the root key ', h('code', {}, data.root.key_id), ' and apply it before they verify a manifest.'),
        h('div', { class: 'field checkbox' }, h('label', {}, revoke, ` Also revoke ${data.active.key_id} at once`)),
        h('p', { class: 'hint' }, 'Devices then refuse every manifest it signed, for good, including deployments still rolling out with it. Leave this off to revoke it later, once those have finished.'),
      ],
      confirm: 'Rotate signing key',
    });
    if (!ok) return;
    button.disabled = true;
    try {
      const change = await api.rotateKey(revoke.checked);
      toast(`Key ${change.key.key_id} is now active; devices learn it at their next poll.`);
      await reload();
    } catch (err) {
      button.disabled = false;
      replace(status, problemBox(err, 'rotate the signing key'));
    }
  });
  return h(
    'section',
    { class: 'card', 'aria-label': 'Rotate the signing key' },
    h('h3', {}, 'Rotate the signing key'),
    h('p', {}, 'Generate a new signing key and tell devices to trust it, signed by this server’s root key. Rotate on a schedule, or at once when a signing key may have leaked (then revoke the old one).'),
    h('div', { class: 'actions' }, button),
  );
}

/** A key's Revoke button (admins; retired, unrevoked keys only: the active key has none). */
function revokeCell(k, activeId, status, reload) {
  if (k.active) return h('span', { class: 'muted' }, 'signs new deployments');
  if (k.revoked_at) return '—';
  const b = h('button', { type: 'button', class: 'danger small', 'data-revoke': k.key_id }, 'Revoke…');
  b.setAttribute('aria-label', `Revoke key ${k.key_id}`);
  b.addEventListener('click', async () => {
    const ok = await confirmAction({
      title: `Revoke key ${k.key_id}?`,
      body: [
        h('p', {}, 'Devices refuse every manifest key ', h('code', {}, k.key_id), ' signed, for good, from their next poll on. A revoked key is never trusted again.'),
        h('p', {}, 'A device still offered a deployment signed by it holds that install until you deploy again (signed by the active key ', h('code', {}, activeId), ').'),
      ],
      confirm: 'Revoke key',
      danger: true,
    });
    if (!ok) return;
    try {
      await api.revokeKey(k.key_id);
      toast(`Key ${k.key_id} revoked; devices refuse its manifests from their next poll.`);
      await reload();
    } catch (err) {
      const problem = problemBox(err, `revoke key ${k.key_id}`);
      if (err.status === 409 || err.status === 404) await reload(problem);
      else replace(status, problem);
    }
  });
  return b;
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
