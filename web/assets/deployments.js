// Deployments: the list, and one deployment's live progress (per device state and per batch)
// with pause / resume / abort. Both views poll the API while they are shown and the tab is
// visible.

import * as api from './api.js';
import { h, replace, table, link, facts, errorBox, toast, field } from './dom.js';
import { time, percent, plural } from './format.js';
import { deploymentDevices } from './deployment_devices.js';
import { confirmAction } from './dialog.js';
import { timelineChart } from './charts.js';

/** How often a shown deployment is refreshed. */
export const POLL_MS = 1500;

/** Device states in the order a device moves through them (issue 6 / docs/device-api.md). */
export const STATES = ['pending', 'downloading', 'verified', 'installed', 'bound', 'failed', 'rolled_back', 'cancelled'];

/** Left to right in a stacked bar: done, on the way, gone wrong, not started. */
const BAR_ORDER = ['bound', 'installed', 'verified', 'downloading', 'rolled_back', 'failed', 'pending', 'cancelled'];

const STATE_LABELS = {
  pending: 'pending',
  downloading: 'downloading',
  verified: 'verified',
  installed: 'installed',
  bound: 'bound',
  failed: 'failed',
  rolled_back: 'rolled back',
  cancelled: 'cancelled',
};

/**
 * Calls `fn` now and then every `ms` while the view is current; skips ticks while the tab is
 * hidden; stops when the view is left. One request at a time: the next tick is scheduled after
 * the previous answer.
 */
export function poll(ctx, ms, fn) {
  let timer = null;
  let stopped = false;
  const tick = async () => {
    if (stopped || !ctx.current()) return;
    if (!document.hidden) {
      try {
        await fn();
      } catch (e) {
        if (e.status === 401) return;
      }
    }
    if (!stopped && ctx.current()) timer = setTimeout(tick, ms);
  };
  ctx.onCleanup(() => {
    stopped = true;
    clearTimeout(timer);
  });
  return tick();
}

/** `{installed: 3, failed: 1}` from whatever shape the API gives: an object or `[{state, count}]`. */
export function countsOf(value) {
  if (!value) return {};
  if (Array.isArray(value)) {
    return Object.fromEntries(value.map((c) => [c.state, c.count ?? c.devices ?? 0]));
  }
  return value;
}

function total(counts) {
  return Object.values(counts).reduce((a, b) => a + (Number(b) || 0), 0);
}

/** The target, for people: `group kitchen` or `device dev-1`. */
export function targetText(d) {
  const t = d.target ?? {};
  if (t.group) return `group ${t.group}`;
  if (t.device) return `device ${t.device}`;
  return '—';
}

/** Deployment states the list can be filtered by (`completed` is a phase: see [`phaseOf`]). */
const DEPLOYMENT_STATES = ['active', 'paused', 'completed', 'aborted'];

/**
 * Every target reported `installed` or `bound`, and it was not aborted: nothing is left to pause,
 * resume or abort. The API's `phase` says so once every batch is open; the counts say it too
 * when a deployment was paused before its last (empty) batches opened.
 */
function isCompleted(d) {
  if (d.state === 'aborted') return false;
  if (d.phase === 'completed') return true;
  const p = d.progress ?? {};
  const targets = Number(p.targets ?? 0);
  const c = countsOf(p.counts);
  return targets > 0 && Number(c.installed ?? 0) + Number(c.bound ?? 0) === targets;
}

/** What the deployment is doing, for display: its state, or `completed`. */
function phaseOf(d) {
  return isCompleted(d) ? 'completed' : (d.phase ?? d.state);
}

export function stateBadge(state) {
  return badge(state ?? '—', state ?? '');
}

function badge(text, kind) {
  return h('span', { class: `badge ${kind}` }, text);
}

/** A stacked bar of device states, labelled for screen readers with the numbers. */
export function stackedBar(counts, devices) {
  const n = devices ?? total(counts);
  const label = STATES.filter((s) => counts[s]).map((s) => `${counts[s]} ${STATE_LABELS[s]}`).join(', ');
  const bar = h('div', {
    class: 'stack',
    role: 'img',
    'aria-label': n ? `${label || 'no reports'} of ${plural(n, 'device')}` : 'no devices',
  });
  for (const s of BAR_ORDER) {
    const c = Number(counts[s] ?? 0);
    if (!c || !n) continue;
    const part = h('span', { class: `state-${s}`, title: `${STATE_LABELS[s]}: ${c}`, dataset: { state: s } });
    part.style.width = `${(100 * c) / n}%`;
    bar.append(part);
  }
  return bar;
}

/** The colours of the bars, which are device states (not deployment states), and says so. */
function legend() {
  return h(
    'div',
    { class: 'legend-box', 'aria-hidden': 'true' },
    h('span', { class: 'legend-title' }, 'Bars: devices per state'),
    h(
      'ul',
      { class: 'legend' },
      STATES.map((s) => h('li', {}, h('span', { class: `swatch state-${s}` }), STATE_LABELS[s])),
    ),
  );
}

/** One plain bar per state, with its count: the numbers a person reads first. With `onPick`,
 * a state with devices is a button that lists them. */
function stateCounts(counts, devices, onPick) {
  const n = devices ?? total(counts);
  return h(
    'div',
    { class: 'counts', role: 'list', 'aria-label': 'Devices per state' },
    STATES.map((s) => {
      const c = Number(counts[s] ?? 0);
      const fill = h('span', { class: `state-${s}` });
      fill.style.width = n ? `${(100 * c) / n}%` : '0%';
      return h(
        'div',
        { role: 'listitem', class: 'count-row', dataset: { state: s }, 'aria-label': `${STATE_LABELS[s]}: ${c}` },
        onPick && c
          ? h('button', { type: 'button', class: 'link', onclick: () => onPick(s), 'aria-label': `Show the ${plural(c, 'device')} ${STATE_LABELS[s]}` }, STATE_LABELS[s])
          : h('span', {}, STATE_LABELS[s]),
        h('div', { class: 'bar' }, fill),
        h('span', { class: 'n', dataset: { count: String(c) } }, String(c)),
      );
    }),
  );
}

export async function renderDeployments(main, _args, ctx) {
  const list = h('div', { 'aria-live': 'off' });
  // Deployment states only: how far each device got is the Progress column's business.
  // `completed` is a phase of an active deployment, so the filter works on the phase.
  const filter = h(
    'select',
    { name: 'state' },
    h('option', { value: '' }, 'any'),
    DEPLOYMENT_STATES.map((s) => h('option', { value: s }, s)),
  );
  let last = [];
  const show = () => {
    const rows = filter.value ? last.filter((d) => phaseOf(d) === filter.value) : last;
    replace(
      list,
      table(
        [
          { label: 'Deployment', cell: (d) => link(`#${d.id}`, ['deployments', d.id]) },
          { label: 'Sequence', cell: (d) => String(d.sequence ?? '—'), class: 'num' },
          { label: 'Version', cell: (d) => link(`${d.model} ${d.version}`, ['models', d.model, 'versions', d.version]) },
          { label: 'Target', cell: (d) => targetText(d) },
          { label: 'State', cell: (d) => [stateBadge(phaseOf(d)), d.kind === 'rollback' ? ' (rollback)' : ''] },
          {
            label: 'Progress',
            cell: (d) => {
              const p = d.progress ?? {};
              const counts = countsOf(p.counts);
              const done = Number(counts.installed ?? 0) + Number(counts.bound ?? 0);
              return [stackedBar(counts, p.targets), h('small', {}, `${done} of ${p.targets ?? 0} installed`)];
            },
            class: 'progress-cell',
          },
          { label: 'Created', cell: (d) => time(d.created_at) },
        ],
        rows,
        { caption: plural(rows.length, 'deployment'), empty: 'No deployments yet.', className: 'deployments' },
      ),
    );
  };
  filter.addEventListener('change', show);
  replace(
    main,
    h('h1', {}, 'Deployments'),
    h('div', { class: 'actions left' }, h('a', { class: 'button primary', href: '#/deploy' }, 'New deployment')),
    h(
      'form',
      { class: 'filters', role: 'search', 'aria-label': 'Filter deployments', onsubmit: (e) => e.preventDefault() },
      field('Deployment state', filter),
    ),
    list,
    legend(),
  );
  let lastJson = '';
  await poll(ctx, POLL_MS * 2, async () => {
    const data = await api.get('/deployments');
    const json = JSON.stringify(data);
    if (!ctx.current() || json === lastJson) return;
    lastJson = json;
    last = data;
    show();
  });
}

export async function renderDeployment(main, [id], ctx) {
  const heading = h('h1', {}, `Deployment #${id}`);
  const body = h('div', {});
  const status = h('div', { 'aria-live': 'polite' });
  const live = h('p', { class: 'muted live', 'aria-live': 'off' });
  const devicesOf = deploymentDevices(id, ctx.params.get('state') ?? '', { states: STATES, stateBadge });
  replace(main, h('p', { class: 'crumbs' }, link('Deployments', ['deployments']), ' / '), heading, status, body, devicesOf.node, live);

  const act = async (verb, d) => {
    if (verb === 'abort') {
      const ok = await confirmAction({
        title: `Abort deployment #${d.id}?`,
        body: [
          h('p', {}, `Devices stop being offered ${d.model} ${d.version}. Devices that installed it keep it.`),
          h('p', {}, 'To move them back, roll the group back to an earlier version.'),
        ],
        confirm: 'Abort deployment',
        danger: true,
      });
      if (!ok) return;
    }
    if (verb === 'retry-failed') {
      const ok = await confirmAction({
        title: `Retry the failed devices of #${d.id}?`,
        body: [
          h('p', {}, `A new deployment of ${d.model} ${d.version}, with a higher sequence, is made for the ${plural(failedOf(d), 'device')} that failed; the others are not touched.`),
        ],
        confirm: 'Retry failed devices',
      });
      if (!ok) return;
      try {
        const made = await api.post(api.path('deployments', d.id, 'retry-failed'));
        toast(`Deployment #${made.id} retries the failed devices of #${d.id}.`);
        location.hash = `#/deployments/${made.id}`;
      } catch (err) {
        replace(status, errorBox(err));
      }
      return;
    }
    try {
      await api.post(api.path('deployments', d.id, verb));
      toast(`Deployment #${d.id}: ${verb} requested.`);
      await refresh();
    } catch (err) {
      replace(status, errorBox(err));
    }
  };

  // Rebuilt on every poll: keep keyboard focus on the same button across the rebuild.
  const chart = h('div', { class: 'timeline-box' });
  let opened = {};
  const render = (d) => {
    const focused = body.contains(document.activeElement) ? document.activeElement.dataset.action : null;
    const p = d.progress ?? {};
    const counts = countsOf(p.counts);
    const devices = p.targets ?? total(counts);
    const done = Number(counts.installed ?? 0) + Number(counts.bound ?? 0);
    const phase = phaseOf(d);
    const buttons = [];
    // A completed or aborted deployment has nothing left to pause, resume or abort.
    if (phase === 'active') {
      buttons.push(h('button', { type: 'button', dataset: { action: 'pause' }, onclick: () => act('pause', d) }, 'Pause'));
    }
    if (phase === 'paused') {
      buttons.push(h('button', { type: 'button', class: 'primary', dataset: { action: 'resume' }, onclick: () => act('resume', d) }, 'Resume'));
    }
    if (phase === 'active' || phase === 'paused') {
      buttons.push(h('button', { type: 'button', class: 'danger', dataset: { action: 'abort' }, onclick: () => act('abort', d) }, 'Abort…'));
    }
    if (failedOf(d) > 0) {
      buttons.push(h('button', { type: 'button', dataset: { action: 'retry-failed' }, onclick: () => act('retry-failed', d) }, `Retry ${plural(failedOf(d), 'failed device')}…`));
    }
    const group = d.target?.group;
    if (group) {
      buttons.push(
        h('a', { class: 'button', dataset: { action: 'rollback' }, href: `#/fleet?group=${encodeURIComponent(group)}&rollback=1` }, 'Roll this group back…'),
      );
    }
    const keys = [...new Set((d.manifests ?? []).map((m) => m.key_id))];
    replace(
      body,
      facts([
        ['Version', link(`${d.model} ${d.version}`, ['models', d.model, 'versions', d.version])],
        ['Target', targetText(d)],
        ['State', [stateBadge(phase), d.abort_reason ? ` — ${d.abort_reason}` : '', d.pause_reason ? ` — ${d.pause_reason}` : '']],
        d.retry_of ? ['Retries', ['the failed devices of ', link(`#${d.retry_of}`, ['deployments', d.retry_of])]] : null,
        ['Sequence', h('span', { class: 'sequence' }, String(d.sequence))],
        ['Kind', d.kind],
        ['Rollout', rolloutText(d.rollout ?? {})],
        ['Batches', batchesText(phase, d.open_batches, (d.rollout?.batches ?? []).length)],
        ['Signed with', keys.length ? keys.map((k, i) => [i ? ', ' : '', h('code', {}, k)]) : '—'],
        ['Pack SHA-256', h('code', { class: 'digest' }, d.sha256)],
        ['Created', [time(d.created_at), d.created_by ? ` by ${d.created_by}` : '']],
      ]),
      h('div', { class: 'actions left' }, buttons),
      h('h2', {}, 'Progress'),
      h('p', { class: 'summary', dataset: { done: String(done), devices: String(devices) } }, `${done} of ${plural(devices, 'device')} installed`),
      stackedBar(counts, devices),
      legend(),
      stateCounts(counts, devices, devicesOf.pick),
      h(
        'p',
        { class: 'muted' },
        `Offered to ${plural(p.offered ?? 0, 'device')}: ${percent(p.success_rate ?? 0)} succeeded, ${percent(p.failure_rate ?? 0)} failed` +
          (p.incompatible ? `; ${plural(p.incompatible, 'device')} of the group skipped (other accelerator)` : '') +
          '.',
      ),
      h('section', { 'aria-labelledby': 'timeline-title' }, h('h2', { id: 'timeline-title' }, 'Over time'), chart),
      batchesTable(p.batches ?? [], phase, opened),
    );
    if (focused) body.querySelector(`[data-action="${focused}"]`)?.focus();
  };

  // Re-rendered only when something changed, so that a poll never replaces the button under
  // a pointer or a keyboard user's focus without reason.
  let lastJson = '';
  async function refresh() {
    const d = await api.get(api.path('deployments', id));
    const t = await api.get(api.path('deployments', id, 'timeline'));
    if (!ctx.current()) return;
    await devicesOf.refresh();
    opened = Object.fromEntries((t.batches ?? []).map((b) => [b.index, b.opened_at]));
    replace(chart, timelineChart(t), chartKey());
    live.textContent = `Updated ${new Date().toLocaleTimeString('en-GB')}; refreshes every ${POLL_MS / 1000} s while shown.`;
    const json = JSON.stringify(d);
    if (json === lastJson) return;
    lastJson = json;
    heading.textContent = `Deployment #${d.id}: ${d.model} ${d.version}`;
    render(d);
  }
  await poll(ctx, POLL_MS, refresh);
}

/** Devices that reported `failed` or `rolled_back`. */
function failedOf(d) {
  const c = d.progress?.counts ?? {};
  return Number(c.failed ?? 0) + Number(c.rolled_back ?? 0);
}

function chartKey() {
  return h(
    'ul',
    { class: 'legend', 'aria-hidden': 'true' },
    h('li', {}, h('span', { class: 'swatch state-installed' }), 'installed'),
    h('li', {}, h('span', { class: 'swatch state-failed' }), 'failed'),
    h('li', {}, h('span', { class: 'swatch limit' }), 'failure threshold'),
    h('li', {}, h('span', { class: 'swatch batch' }), 'batch opened'),
    h('li', {}, h('span', { class: 'swatch hold' }), 'paused, resumed or aborted'),
    h('li', {}, h('span', { class: 'swatch completed' }), 'completed'),
  );
}

function rolloutText(r) {
  const batches = r.batches ?? [];
  const parts = [];
  parts.push(batches.length ? `batches ${batches.join(' → ')} %` : 'all at once');
  if (r.success_threshold !== undefined) parts.push(`next batch at ${percent(r.success_threshold)} success`);
  if (r.failure_threshold !== undefined) {
    parts.push(`${r.on_failure === 'pause' ? 'auto-pause' : 'auto-abort'} above ${percent(r.failure_threshold)} failures`);
  }
  return parts.join('; ');
}

/** `2 of 3 open` while it runs; `all 3 done`; `aborted with 1 of 3 open`. */
function batchesText(phase, open, n) {
  if (phase === 'completed') return n === 1 ? 'done' : `all ${n} done`;
  if (phase === 'aborted') return `aborted with ${open} of ${n} open; none is offered now`;
  return `${open} of ${n} open`;
}

/** A batch: `open` / `waiting` while the deployment runs, `done` once it completed, `closed` or `never opened` once aborted. */
function batchState(b, phase) {
  if (phase === 'completed') return badge('done', 'done');
  if (phase === 'aborted') return b.open ? badge('closed', 'aborted') : badge('never opened', '');
  return stateBadge(b.open ? 'open' : 'waiting');
}

function batchesTable(batches, phase, opened = {}) {
  if (!batches.length) return null;
  return h(
    'section',
    { 'aria-labelledby': 'batches-title' },
    h('h2', { id: 'batches-title' }, 'Batches'),
    table(
      [
        { label: 'Batch', cell: (b) => String(b.index + 1), class: 'num' },
        { label: 'Reaches', cell: (b) => `${b.percent} %`, class: 'num' },
        { label: 'Devices', cell: (b) => String(b.devices), class: 'num' },
        { label: 'Offered', cell: (b) => batchState(b, phase) },
        { label: 'Opened', cell: (b) => (opened[b.index] ? time(opened[b.index]) : '—') },
        {
          label: 'Progress',
          cell: (b) => {
            const c = countsOf(b.counts);
            return [stackedBar(c, b.devices), h('small', {}, STATES.filter((s) => c[s]).map((s) => `${c[s]} ${STATE_LABELS[s]}`).join(', ') || 'no devices')];
          },
          class: 'progress-cell',
        },
      ],
      batches,
      { className: 'batches' },
    ),
  );
}

