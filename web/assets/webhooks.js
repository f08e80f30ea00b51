// Webhooks: the registered URLs with their state (a disabled one says why), registering one (its
// signing secret shown once), and each webhook's delivery log with a test delivery, enabling a
// disabled one again and deleting. Changes are admin only.

import * as api from './api.js';
import { h, replace, field, table, facts, errorBox, toast, secretField, link, route } from './dom.js';
import { time, plural } from './format.js';
import { confirmAction, modal } from './dialog.js';
import { poll } from './deployments.js';

/** The kinds a webhook can subscribe to, with what each means to an operator. */
const KINDS = [
  ['deployment.state_changed', 'A deployment is paused, resumed or aborted'],
  ['deployment.completed', 'Every device of a deployment installed it'],
  ['deployment.batch_opened', 'A rollout opens its next batch'],
  ['deployment.threshold_hit', 'A rollout’s failures exceed its threshold'],
  ['device.failed', 'A device reports a failed install or a rollback'],
  ['key.rotated', 'The signing key is rotated'],
];

/** Refresh of the delivery log while it is shown. */
const REFRESH_MS = 3000;

function stateOf(w) {
  if (!w.enabled) return h('span', { class: 'badge failed' }, 'disabled');
  return h('span', { class: 'badge installed' }, 'enabled');
}

export async function renderWebhooks(main, _args, ctx) {
  const list = await api.get('/webhooks');
  if (!ctx.current()) return;
  const status = h('div', { 'aria-live': 'polite' });
  const columns = [
    { label: 'URL', cell: (w) => link(w.url, ['webhooks', w.id], { 'data-webhook': String(w.id) }), class: 'wrap' },
    { label: 'Events', cell: (w) => w.events.join(', '), class: 'wrap' },
    { label: 'State', cell: (w) => [stateOf(w), w.enabled ? '' : ` ${w.disabled_reason ?? ''}`] },
    { label: 'Pending', cell: (w) => String(w.pending), class: 'num' },
    { label: 'Created', cell: (w) => [time(w.created_at), ` by ${w.created_by}`] },
  ];
  const parts = [
    h('h1', {}, 'Webhooks'),
    h(
      'p',
      { class: 'muted' },
      'The server POSTs each event to these URLs, signed as the Standard Webhooks specification says (headers webhook-id, webhook-timestamp, webhook-signature). ',
      'A failed delivery is retried with growing pauses; an endpoint that keeps failing is disabled until it is enabled again.',
    ),
    table(columns, list, { caption: plural(list.length, 'webhook'), empty: 'No webhooks yet.' }),
    status,
  ];
  if (ctx.role === 'admin') parts.push(registerForm(status));
  else parts.push(h('p', { class: 'notice' }, 'Only an admin token can register or change webhooks.'));
  replace(main, ...parts);
}

function registerForm(status) {
  const url = h('input', { name: 'url', type: 'url', required: true, maxlength: '2048', autocomplete: 'off' });
  const description = h('input', { name: 'description', maxlength: '200', autocomplete: 'off' });
  const boxes = KINDS.map(([kind, text]) => {
    const box = h('input', { type: 'checkbox', name: 'events', value: kind });
    return h('label', {}, box, h('code', {}, kind), ` — ${text}`);
  });
  const form = h(
    'form',
    { class: 'card', 'aria-label': 'New webhook' },
    h('h2', {}, 'New webhook'),
    field('URL', url, 'An http or https URL: each delivery is POSTed to it'),
    field('Description', description, 'For people, e.g. “on-call pager”'),
    h('fieldset', {}, h('legend', {}, 'Events'), boxes.map((b) => h('div', { class: 'checkbox' }, b))),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Register webhook')),
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const events = [...form.querySelectorAll('input[name=events]:checked')].map((b) => b.value);
    if (events.length === 0) {
      replace(status, h('div', { class: 'error', role: 'alert' }, 'Choose at least one event.'));
      return;
    }
    try {
      const created = await api.post('/webhooks', { url: url.value.trim(), events, description: description.value.trim() });
      await modal({
        title: 'Webhook registered',
        body: [
          h('p', {}, 'This is the only time its signing secret is shown. Give it to the receiver now: it checks each delivery’s webhook-signature with it.'),
          secretField(created.secret, 'webhook signing secret', { 'data-webhook-secret': '' }),
        ],
        confirm: 'I have stored it',
        cancel: 'Close',
        initial: '.secret',
      });
      location.hash = route('webhooks', created.id);
    } catch (err) {
      replace(status, errorBox(err));
    }
  });
  return form;
}

/** A delivery's state in the badge colours the rest of the console uses. */
const BADGE = { delivered: 'installed', pending: 'paused', failed: 'failed', dropped: 'failed' };

/** The log's columns; a pending delivery of a disabled webhook is held, not about to be tried. */
const deliveryColumns = (enabled) => [
  { label: 'Queued', cell: (d) => time(d.created_at) },
  { label: 'Event', cell: (d) => h('code', {}, d.event) },
  { label: 'State', cell: (d) => h('span', { class: `badge ${BADGE[d.state] ?? ''}`, 'data-delivery-state': d.state }, d.state) },
  { label: 'Attempts', cell: (d) => String(d.attempts), class: 'num' },
  { label: 'Answer', cell: (d) => (d.last_status ? `HTTP ${d.last_status}` : '—') },
  {
    label: 'Detail',
    cell: (d) => {
      if (d.state === 'pending' && !enabled) return [d.last_error ?? '', d.last_error ? ' · ' : '', 'held while the webhook is disabled'];
      if (d.state === 'pending' && d.next_attempt_at) return [d.last_error ?? '', d.last_error ? ' · next try ' : 'sending ', time(d.next_attempt_at)];
      if (d.state === 'delivered') return ['delivered ', time(d.delivered_at)];
      return d.last_error ?? '';
    },
    class: 'wrap',
  },
  { label: 'Message id', cell: (d) => h('code', {}, d.message_id) },
];

export async function renderWebhook(main, [id], ctx) {
  const summary = h('div');
  const buttons = h('div');
  const log = h('section', { 'aria-labelledby': 'deliveries-title' });
  const status = h('div', { 'aria-live': 'polite' });
  const heading = h('h1', {}, `Webhook ${id}`);
  replace(main, h('p', {}, link('← Webhooks', ['webhooks'])), heading, summary, buttons, status, log);
  // Each part is rebuilt only when what it shows changed: a refresh never replaces a button
  // under the pointer, nor the table being read.
  let shown = { w: null, enabled: null, page: null };
  const show = async () => {
    const [w, page] = await Promise.all([api.get(api.path('webhooks', id)), api.get(`${api.path('webhooks', id, 'deliveries')}?limit=50`)]);
    if (!ctx.current()) return;
    const wText = JSON.stringify(w);
    if (wText !== shown.w) {
      shown.w = wText;
      heading.textContent = `Webhook ${w.id}`;
      const disabled = w.enabled
        ? null
        : h(
            'div',
            { class: 'error', role: 'alert', 'data-disabled': '' },
            h('strong', {}, 'Disabled'),
            ' since ',
            time(w.disabled_at),
            ` after ${w.disabled_reason ?? 'failed attempts'}. It gets no deliveries, and sends none of those pending, until it is enabled again.`,
          );
      replace(
        summary,
        disabled,
        facts([
          ['URL', h('code', {}, w.url)],
          ['Events', w.events.join(', ')],
          ['Description', w.description || '—'],
          ['State', stateOf(w)],
          ['Failed attempts in a row', String(w.consecutive_failures)],
          ['Pending deliveries', String(w.pending)],
          ['Registered', [time(w.created_at), ` by ${w.created_by}`]],
        ]),
      );
    }
    if (ctx.role === 'admin' && w.enabled !== shown.enabled) {
      shown.enabled = w.enabled;
      replace(buttons, actions(w, status, show));
    }
    const pageText = JSON.stringify([w.enabled, page.items]);
    if (pageText !== shown.page) {
      shown.page = pageText;
      replace(
        log,
        h('h2', { id: 'deliveries-title' }, 'Deliveries'),
        table(deliveryColumns(w.enabled), page.items, { caption: 'Newest first (the last 50)', empty: 'Nothing delivered yet.', className: 'deliveries' }),
      );
    }
  };
  await poll(ctx, REFRESH_MS, show);
}

function actions(w, status, refresh) {
  const test = h('button', { type: 'button', 'data-test-event': '' }, 'Send a test event');
  test.addEventListener('click', async () => {
    try {
      await api.post(api.path('webhooks', w.id, 'test'));
      toast('Test event queued: it appears in the deliveries below.');
      await refresh();
    } catch (err) {
      replace(status, errorBox(err));
    }
  });
  const enable = h('button', { type: 'button', class: 'primary' }, 'Enable again');
  enable.addEventListener('click', async () => {
    try {
      await api.post(api.path('webhooks', w.id, 'enable'));
      toast('Webhook enabled: its pending deliveries go out now.');
      await refresh();
    } catch (err) {
      replace(status, errorBox(err));
    }
  });
  const remove = h('button', { type: 'button', class: 'danger' }, 'Delete…');
  remove.addEventListener('click', async () => {
    const ok = await confirmAction({
      title: 'Delete this webhook?',
      body: h('p', {}, `Nothing more is sent to ${w.url}; its pending deliveries and its log are deleted.`),
      confirm: 'Delete webhook',
      danger: true,
    });
    if (!ok) return;
    try {
      await api.del(api.path('webhooks', w.id));
      toast('Webhook deleted.');
      location.hash = route('webhooks');
    } catch (err) {
      replace(status, errorBox(err));
    }
  });
  return h('div', { class: 'actions' }, test, w.enabled ? null : enable, remove);
}
