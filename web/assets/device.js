// One device: what it is and runs, editing it (name, group, tags, accelerator), a new token, and
// its history as a timeline (every deployment it was offered, every report it sent, newest first).

import * as api from './api.js';
import { h, replace, field, facts, errorBox, toast, link, secretField } from './dom.js';
import { time, ago, percent } from './format.js';
import { confirmAction, modal } from './dialog.js';
import { stateBadge } from './deployments.js';
import { ACCELERATORS } from './models.js';

const PAGE = 25;

export async function renderDevice(main, [id], ctx) {
  const d = await api.get(`${api.path('devices', id)}${api.query({ limit: PAGE })}`);
  if (!ctx.current()) return;
  const status = h('div', { 'aria-live': 'polite' });
  const timeline = h('ol', { class: 'timeline', 'aria-label': 'History, newest first' });
  const more = h('div', { class: 'actions' });
  appendEvents(timeline, d.history.events);
  showMore(more, timeline, id, d.history.next_before, status);
  replace(
    main,
    h('h1', {}, `Device ${d.id}`, d.name !== d.id ? h('span', { class: 'subtitle' }, ` ${d.name}`) : ''),
    h('p', {}, link('← Fleet', ['fleet'])),
    facts(summary(d)),
    status,
    h('section', { 'aria-labelledby': 'history-title' }, h('h2', { id: 'history-title' }, 'History'), d.history.events.length ? timeline : h('p', { class: 'empty' }, 'Nothing offered or reported yet.'), more),
    d.revoked_at ? h('p', { class: 'notice' }, 'This device is revoked: its token is refused.') : [editForm(d, status), tokenCard(d, status)],
  );
}

function summary(d) {
  const runs = d.current_model
    ? [link(`${d.current_model} ${d.current_version}`, ['models', d.current_model, 'versions', d.current_version]), ` (sequence ${d.current_sequence})`]
    : 'nothing installed through npub yet';
  // last_seen is written in batches; a device that reported later is known to have been seen then.
  const seenAt = d.last_seen ? Date.parse(d.last_seen) : Number.NaN;
  const reportedAt = d.last_status_at ? Date.parse(d.last_status_at) : Number.NaN;
  const seen =
    !Number.isNaN(reportedAt) && !(seenAt >= reportedAt)
      ? ['reported ', time(d.last_status_at)]
      : d.last_seen
        ? [ago(d.last_seen), ' (', time(d.last_seen), ')']
        : 'never';
  return [
    ['Id', h('code', {}, d.id)],
    ['Name', d.name],
    ['Group', link(d.group, ['fleet'], { href: `#/fleet?group=${encodeURIComponent(d.group)}` })],
    ['Tags', d.tags.length ? d.tags.join(', ') : '—'],
    ['Accelerator', d.accelerator],
    ['Hardware class', String(d.hw_class)],
    ['Status', [stateBadge(d.status), d.last_reason ? h('span', { class: 'reason' }, ` ${d.last_reason}`) : '']],
    ['Runs', runs],
    ['Last seen', seen],
    ['Registered', time(d.created_at)],
  ];
}

/** The device's own last events, as it sent them with a report (oldest first). */
function agentLog(events) {
  return h(
    'details',
    { class: 'agent-log', open: true },
    h('summary', {}, `Device log (${events.length} ${events.length === 1 ? 'line' : 'lines'}, oldest first)`),
    h('ol', {}, events.map((line) => h('li', {}, h('code', {}, line)))),
  );
}

/** One timeline entry per event: an offer, or a report with its state, progress and reason. */
function appendEvents(list, events) {
  for (const e of events) {
    const what = link(`#${e.deployment_id}`, ['deployments', e.deployment_id]);
    const pack = `${e.model} ${e.version}${e.deployment_kind === 'rollback' ? ' (rollback)' : ''}`;
    const body =
      e.kind === 'offered'
        ? ['Offered deployment ', what, ` (sequence ${e.sequence}): ${pack}`]
        : [
            'Reported ',
            stateBadge(e.state),
            e.progress !== null && e.progress !== undefined ? ` ${percent(e.progress)}` : '',
            ' for deployment ',
            what,
            ` (sequence ${e.sequence}, ${pack})`,
            e.reason ? h('div', { class: 'reason' }, e.reason) : '',
            e.events?.length ? agentLog(e.events) : '',
          ];
    list.append(h('li', { 'data-kind': e.kind, 'data-state': e.state ?? '' }, h('span', { class: 'when' }, time(e.at)), h('div', { class: 'what' }, body)));
  }
}

function showMore(box, list, id, before, status) {
  if (!before) {
    replace(box);
    return;
  }
  const b = h('button', { type: 'button' }, 'Show older');
  b.addEventListener('click', async () => {
    try {
      const page = await api.get(`${api.path('devices', id)}${api.query({ limit: PAGE, before })}`);
      appendEvents(list, page.history.events);
      showMore(box, list, id, page.history.next_before, status);
    } catch (err) {
      replace(status, errorBox(err));
    }
  });
  replace(box, b);
}

function editForm(d, status) {
  const name = h('input', { name: 'name', value: d.name, required: true, maxlength: '128', autocomplete: 'off' });
  const group = h('input', { name: 'group', value: d.group, required: true, maxlength: '128', autocomplete: 'off', pattern: '[A-Za-z0-9._:\\-]+' });
  const tags = h('input', { name: 'tags', value: d.tags.join(', '), autocomplete: 'off' });
  const accel = h('select', { name: 'accelerator' }, ACCELERATORS.map((a) => h('option', { value: a, selected: a === d.accelerator }, a)));
  const form = h(
    'form',
    { class: 'card', 'aria-label': 'Edit device' },
    h('h2', {}, 'Edit'),
    h('div', { class: 'row' }, field('Name', name), field('Group', group, 'Moving it changes what it is offered at its next poll'), field('Tags', tags, 'Comma-separated')),
    field('Accelerator', accel, 'Only to correct a registration: packs are offered for this NPU'),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Save')),
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = {};
    if (name.value.trim() !== d.name) body.name = name.value.trim();
    if (group.value.trim() !== d.group) body.group = group.value.trim();
    const newTags = tags.value.split(',').map((t) => t.trim()).filter(Boolean);
    if (newTags.join(',') !== d.tags.join(',')) body.tags = newTags;
    if (accel.value !== d.accelerator) body.accelerator = accel.value;
    if (Object.keys(body).length === 0) {
      toast('Nothing changed.');
      return;
    }
    if (body.group) {
      const ok = await confirmAction({
        title: `Move ${d.id} to group ${body.group}?`,
        body: h('p', {}, `From its next poll it is offered group ${body.group}’s deployment instead of group ${d.group}’s.`),
        confirm: 'Move device',
      });
      if (!ok) return;
    }
    try {
      await api.patch(api.path('devices', d.id), body);
      toast(`Device ${d.id} saved.`);
      window.dispatchEvent(new HashChangeEvent('hashchange'));
    } catch (err) {
      replace(status, errorBox(err));
    }
  });
  return form;
}

function tokenCard(d, status) {
  const b = h('button', { type: 'button', class: 'danger' }, 'Issue a new token…');
  b.addEventListener('click', async () => {
    const ok = await confirmAction({
      title: `Issue a new token for ${d.id}?`,
      body: h('p', {}, 'The current token stops working at once: the device cannot poll or report until it has the new one.'),
      confirm: 'Issue new token',
      danger: true,
    });
    if (!ok) return;
    try {
      const created = await api.post(api.path('devices', d.id, 'token'));
      await showOnce(created);
    } catch (err) {
      replace(status, errorBox(err));
    }
  });
  return h('section', { class: 'card', 'aria-label': 'Credentials' }, h('h2', {}, 'Credentials'), h('p', {}, 'The device agent’s --token. A lost or leaked token is replaced here; the old one is refused from then on.'), b);
}

/** The one time a device token is shown: selected, with a copy button. */
async function showOnce(created) {
  await modal({
    title: `New token for ${created.id}`,
    body: [h('p', {}, 'This is the only time it is shown. Put it on the device (its --token) now; the old one is refused already.'), secretField(created.token, `token of ${created.id}`)],
    confirm: 'I have stored it',
    cancel: 'Close',
    initial: '.secret',
  });
}
