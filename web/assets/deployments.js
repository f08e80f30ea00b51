// Deployments: the list, and one deployment's live progress (per device state and per batch)
// with pause / resume / abort. Both views poll the API while they are shown and the tab is
// visible.

import * as api from './api.js';
import { h, replace, table, link, facts, errorBox, toast, field } from './dom.js';
import { time, percent } from './format.js';
import { confirmAction } from './dialog.js';

/** How often a shown deployment is refreshed. */
export const POLL_MS = 1500;

/** Device states in the order a device moves through them (issue 6 / docs/device-api.md). */
export const STATES = ['pending', 'downloading', 'verified', 'installed', 'bound', 'failed', 'rolled_back'];

/** Left to right in a stacked bar: done, on the way, gone wrong, not started. */
const BAR_ORDER = ['bound', 'installed', 'verified', 'downloading', 'rolled_back', 'failed', 'pending'];

const STATE_LABELS = {
  pending: 'pending',
  downloading: 'downloading',
  verified: 'verified',
  installed: 'installed',
  bound: 'bound',
  failed: 'failed',
  rolled_back: 'rolled back',
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

/** What the deployment is doing, for display: `completed` once every target succeeded. */
function phaseOf(d) {
  return d.phase ?? d.state;
}

export function stateBadge(state) {
  return h('span', { class: `badge ${state ?? ''}` }, state ?? '—');
}

/** A stacked bar of device states, labelled for screen readers with the numbers. */
export function stackedBar(counts, devices) {
  const n = devices ?? total(counts);
  const label = STATES.filter((s) => counts[s]).map((s) => `${counts[s]} ${STATE_LABELS[s]}`).join(', ');
  const bar = h('div', {
    class: 'stack',
    role: 'img',
    'aria-label': n ? `${label || 'no reports'} of ${n} devices` : 'no devices',
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

function legend() {
  return h(
    'ul',
    { class: 'legend', 'aria-hidden': 'true' },
    STATES.map((s) => h('li', {}, h('span', { class: `swatch state-${s}` }), STATE_LABELS[s])),
  );
}

/** One plain bar per state, with its count: the numbers a person reads first. */
function stateCounts(counts, devices) {
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
        h('span', {}, STATE_LABELS[s]),
        h('div', { class: 'bar' }, fill),
        h('span', { class: 'n', dataset: { count: String(c) } }, String(c)),
      );
    }),
  );
}

export async function renderDeployments(main, _args, ctx) {
  const list = h('div', { 'aria-live': 'off' });
  const filter = h('select', { name: 'state' });
  for (const [value, text] of [
    ['', 'all deployments'],
    ['active', 'active'],
    ['paused', 'paused'],
    ['completed', 'completed'],
    ['aborted', 'aborted'],
  ]) {
    // `completed` is a phase of an active deployment, so the filter works on the phase.
    filter.append(h('option', { value }, text));
  }
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
        { caption: `${rows.length} deployment${rows.length === 1 ? '' : 's'}`, empty: 'No deployments yet.', className: 'deployments' },
      ),
    );
  };
  filter.addEventListener('change', show);
  replace(
    main,
    h('h1', {}, 'Deployments'),
    h('div', { class: 'actions left' }, h('a', { class: 'button primary', href: '#/deploy' }, 'New deployment')),
    h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter deployments', onsubmit: (e) => e.preventDefault() }, field('Show', filter)),
    legend(),
    list,
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
  replace(main, h('p', { class: 'crumbs' }, link('Deployments', ['deployments']), ' / '), heading, status, body, live);

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
    try {
      await api.post(api.path('deployments', d.id, verb));
      toast(`Deployment #${d.id}: ${verb} requested.`);
      await refresh();
    } catch (err) {
      replace(status, errorBox(err));
    }
  };

  // Rebuilt on every poll: keep keyboard focus on the same button across the rebuild.
  const render = (d) => {
    const focused = body.contains(document.activeElement) ? document.activeElement.dataset.action : null;
    const p = d.progress ?? {};
    const counts = countsOf(p.counts);
    const devices = p.targets ?? total(counts);
    const done = Number(counts.installed ?? 0) + Number(counts.bound ?? 0);
    const buttons = [];
    if (d.state === 'active') {
      buttons.push(h('button', { type: 'button', dataset: { action: 'pause' }, onclick: () => act('pause', d) }, 'Pause'));
    }
    if (d.state === 'paused') {
      buttons.push(h('button', { type: 'button', class: 'primary', dataset: { action: 'resume' }, onclick: () => act('resume', d) }, 'Resume'));
    }
    if (d.state === 'active' || d.state === 'paused') {
      buttons.push(h('button', { type: 'button', class: 'danger', dataset: { action: 'abort' }, onclick: () => act('abort', d) }, 'Abort…'));
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
        ['State', [stateBadge(phaseOf(d)), d.abort_reason ? ` — ${d.abort_reason}` : '']],
        ['Sequence', h('span', { class: 'sequence' }, String(d.sequence))],
        ['Kind', d.kind],
        ['Rollout', rolloutText(d.rollout ?? {})],
        ['Batches open', `${d.open_batches} of ${(d.rollout?.batches ?? []).length}`],
        ['Signed with', keys.length ? keys.map((k, i) => [i ? ', ' : '', h('code', {}, k)]) : '—'],
        ['Pack SHA-256', h('code', { class: 'digest' }, d.sha256)],
        ['Created', [time(d.created_at), d.created_by ? ` by ${d.created_by}` : '']],
      ]),
      h('div', { class: 'actions left' }, buttons),
      h('h2', {}, 'Progress'),
      h('p', { class: 'summary', dataset: { done: String(done), devices: String(devices) } }, `${done} of ${devices} devices installed`),
      stackedBar(counts, devices),
      legend(),
      stateCounts(counts, devices),
      h(
        'p',
        { class: 'muted' },
        `Offered to ${p.offered ?? 0} devices: ${percent(p.success_rate ?? 0)} succeeded, ${percent(p.failure_rate ?? 0)} failed` +
          (p.incompatible ? `; ${p.incompatible} device(s) of the group skipped (other accelerator)` : '') +
          '.',
      ),
      batchesTable(p.batches ?? []),
    );
    if (focused) body.querySelector(`[data-action="${focused}"]`)?.focus();
  };

  // Re-rendered only when something changed, so that a poll never replaces the button under
  // a pointer or a keyboard user's focus without reason.
  let lastJson = '';
  async function refresh() {
    const d = await api.get(api.path('deployments', id));
    if (!ctx.current()) return;
    live.textContent = `Updated ${new Date().toLocaleTimeString('en-GB')}; refreshes every ${POLL_MS / 1000} s while shown.`;
    const json = JSON.stringify(d);
    if (json === lastJson) return;
    lastJson = json;
    heading.textContent = `Deployment #${d.id}: ${d.model} ${d.version}`;
    render(d);
  }
  await poll(ctx, POLL_MS, refresh);
}

function rolloutText(r) {
  const batches = r.batches ?? [];
  const parts = [];
  parts.push(batches.length ? `batches ${batches.join(' → ')} %` : 'all at once');
  if (r.success_threshold !== undefined) parts.push(`next batch at ${percent(r.success_threshold)} success`);
  if (r.failure_threshold !== undefined) parts.push(`auto-abort above ${percent(r.failure_threshold)} failures`);
  return parts.join('; ');
}

function batchesTable(batches) {
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
        { label: 'Offered', cell: (b) => stateBadge(b.open ? 'open' : 'waiting') },
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

