// The dashboard: the fleet at a glance, from `GET /api/v1/fleet/summary` (every number counted by
// the server): devices by status, the versions each model runs, offline devices, the top failure
// reasons and the rollouts in progress. Refreshed while shown.

import * as api from './api.js';
import { h, replace, table, link, field, errorBox, toast } from './dom.js';
import { plural, time } from './format.js';
import { barList } from './charts.js';
import { poll, stackedBar, countsOf, targetText, stateBadge } from './deployments.js';

/** How often the dashboard is refreshed while shown. */
const REFRESH_MS = 5000;

/** A figure with its label; `data-figure` names it for tests and `data-count` holds the number. */
function figure(name, label, value, href) {
  const n = h('span', { class: 'n', dataset: { figure: name, count: String(value) } }, String(value));
  return h('div', { class: 'figure' }, href ? h('a', { href }, n) : n, h('span', { class: 'label' }, label));
}

function statusKind(status) {
  if (status === 'new') return 'pending';
  if (status === 'revoked') return 'cancelled';
  return status;
}

function render(body, s) {
  const failed = s.by_status.filter((b) => b.status === 'failed' || b.status === 'rolled_back').reduce((a, b) => a + b.devices, 0);
  const offlineHref = `#/fleet?not_seen_minutes=${s.offline.minutes}`;
  replace(
    body,
    h(
      'div',
      { class: 'figures' },
      figure('devices', 'devices', s.devices, '#/fleet'),
      figure('offline', `not seen for over ${plural(s.offline.minutes, 'minute')}`, s.offline.devices, offlineHref),
      figure('failing', 'last reported a failure', failed, '#/fleet?status=failed'),
      figure('rollouts', 'rollouts in progress', s.rollouts.length, '#/deployments'),
    ),
    h(
      'div',
      { class: 'panels' },
      h(
        'section',
        { class: 'panel', 'aria-labelledby': 'by-status' },
        h('h2', { id: 'by-status' }, 'Devices by status'),
        barList(
          s.by_status.map((b) => ({ label: b.status.replace('_', ' '), value: b.devices, kind: statusKind(b.status) })),
          { title: 'Devices by status' },
        ),
      ),
      h(
        'section',
        { class: 'panel', 'aria-labelledby': 'by-version' },
        h('h2', { id: 'by-version' }, 'Versions in the fleet'),
        s.versions.length
          ? s.versions.map((m) =>
              h(
                'div',
                { class: 'model-versions', dataset: { model: m.model } },
                h('h3', {}, link(m.model, ['models', m.model])),
                barList(
                  m.versions.map((v) => ({ label: v.version, value: v.devices, kind: 'installed' })),
                  { title: `Devices per version of ${m.model}` },
                ),
              ),
            )
          : h('p', { class: 'muted' }, 'No device has installed a model yet.'),
        s.no_version ? h('p', { class: 'muted' }, `${plural(s.no_version, 'device')} with no model installed.`) : null,
      ),
      h(
        'section',
        { class: 'panel', 'aria-labelledby': 'reasons' },
        h('h2', { id: 'reasons' }, 'Top failure reasons'),
        table(
          [
            { label: 'Reason', cell: (r) => r.reason ?? '(none given)' },
            { label: 'Devices', cell: (r) => h('span', { dataset: { count: String(r.devices) } }, String(r.devices)), class: 'num' },
          ],
          s.failure_reasons,
          { empty: 'No device reports a failure.', className: 'reasons' },
        ),
      ),
    ),
    h(
      'section',
      { 'aria-labelledby': 'rollouts' },
      h('h2', { id: 'rollouts' }, 'Rollouts in progress'),
      table(
        [
          { label: 'Deployment', cell: (d) => link(`#${d.id}`, ['deployments', d.id]) },
          { label: 'Version', cell: (d) => `${d.model} ${d.version}` },
          { label: 'Target', cell: (d) => targetText(d) },
          { label: 'State', cell: (d) => stateBadge(d.phase) },
          {
            label: 'Progress',
            cell: (d) => {
              const c = countsOf(d.progress.counts);
              const done = Number(c.installed ?? 0) + Number(c.bound ?? 0);
              return [
                stackedBar(c, d.progress.targets),
                h('small', { dataset: { done: String(done), failed: String(d.progress.counts.failed + d.progress.counts.rolled_back) } },
                  `${done} of ${d.progress.targets} installed, ${d.progress.counts.failed + d.progress.counts.rolled_back} failed; ${d.open_batches} of ${d.rollout.batches.length} batches open`),
              ];
            },
            class: 'progress-cell',
          },
          { label: 'Created', cell: (d) => time(d.created_at) },
        ],
        s.rollouts,
        { empty: 'No rollout in progress.', className: 'rollouts' },
      ),
    ),
  );
}

/**
 * Maintenance windows per group: each group's window, and a form to set or remove one. Drawn
 * once (not on every refresh, which would clear what is being typed) and after each change.
 */
async function windows(box, ctx) {
  const groups = await api.get('/groups');
  if (!ctx.current()) return;
  const status = h('div', { 'aria-live': 'polite' });
  const group = h('select', { name: 'window-group' }, groups.map((g) => h('option', { value: g.group }, g.group)));
  const start = h('input', { name: 'window-start', value: '02:00', size: 5, pattern: '\\d\\d:\\d\\d', autocomplete: 'off' });
  const end = h('input', { name: 'window-end', value: '04:00', size: 5, pattern: '\\d\\d:\\d\\d', autocomplete: 'off' });
  const zone = h('input', { name: 'window-zone', value: Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC', autocomplete: 'off' });
  const dayNames = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];
  const dayBoxes = dayNames.map((d) => h('input', { type: 'checkbox', name: `window-day-${d}`, value: d }));
  const days = h(
    'fieldset',
    { class: 'days' },
    h('legend', {}, 'Opens on (none: every day)'),
    dayBoxes.map((box, i) => h('label', {}, box, ` ${dayNames[i][0].toUpperCase()}${dayNames[i].slice(1)}`)),
  );
  const spanOf = (w) => `${w.start}–${w.end} ${w.time_zone}${w.days && w.days.length ? ` (${w.days.join(', ')})` : ''}`;
  const change = async (method, g, body) => {
    try {
      if (method === 'PUT') await api.request('PUT', api.path('groups', g, 'window'), body);
      else await api.del(api.path('groups', g, 'window'));
      toast(method === 'PUT' ? `Group ${g}: updates only ${spanOf(body)}.` : `Group ${g}: updates at any time.`);
      await windows(box, ctx);
    } catch (err) {
      replace(status, errorBox(err));
    }
  };
  const form = h(
    'form',
    {
      class: 'row',
      'aria-label': 'Set a maintenance window',
      onsubmit: (e) => {
        e.preventDefault();
        if (!group.value) return;
        const chosen = dayBoxes.filter((b) => b.checked).map((b) => b.value);
        change('PUT', group.value, { start: start.value, end: end.value, time_zone: zone.value, days: chosen });
      },
    },
    field('Group', group),
    field('Opens', start, 'HH:MM'),
    field('Closes', end, 'before it opens: over midnight'),
    field('Time zone', zone, 'IANA name, e.g. Europe/Berlin'),
    days,
    h('div', { class: 'actions' }, h('button', { type: 'submit', disabled: !groups.length }, 'Set window')),
  );
  replace(
    box,
    h('h2', { id: 'windows' }, 'Maintenance windows'),
    h('p', { class: 'muted' }, 'A group with a window is offered updates only inside it, in its time zone, every day or on the days it opens; a device already downloading may finish.'),
    table(
      [
        { label: 'Group', cell: (g) => g.group },
        { label: 'Window', cell: (g) => (g.window ? spanOf(g.window) : 'any time') },
        {
          label: '',
          cell: (g) => (g.window
            ? h('button', { type: 'button', class: 'link', onclick: () => change('DELETE', g.group), 'aria-label': `Remove the window of ${g.group}` }, 'Remove')
            : ''),
        },
      ],
      groups,
      { empty: 'No groups yet.', className: 'windows' },
    ),
    form,
    status,
  );
}

export async function renderDashboard(main, _args, ctx) {
  const body = h('div', { class: 'dashboard' });
  const live = h('p', { class: 'muted live', 'aria-live': 'off' });
  const windowsBox = h('section', { class: 'panel', 'aria-labelledby': 'windows' });
  replace(main, h('h1', {}, 'Dashboard'), body, live, windowsBox);
  await windows(windowsBox, ctx);
  let lastJson = '';
  await poll(ctx, REFRESH_MS, async () => {
    const s = await api.get('/fleet/summary');
    if (!ctx.current()) return;
    live.textContent = `Counted by the server at ${new Date(s.generated_at).toLocaleTimeString('en-GB')}; refreshes every ${REFRESH_MS / 1000} s while shown.`;
    const { generated_at: _at, ...numbers } = s;
    const json = JSON.stringify(numbers);
    if (json === lastJson) return;
    lastJson = json;
    render(body, s);
  });
}
