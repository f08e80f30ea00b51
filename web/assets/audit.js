// The audit log: who did what to which object, newest first, a page at a time.

import * as api from './api.js';
import { h, replace, table, field, append } from './dom.js';
import { time, noun } from './format.js';

const PAGE = 50;

/** `{"sha256": "…", "size": 3}` → `sha256=… size=3`, for a one-line summary. */
function detailText(detail) {
  if (detail === null || detail === undefined) return '';
  if (typeof detail !== 'object') return String(detail);
  return Object.entries(detail)
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`)
    .join(' ');
}

const COLUMNS = [
  { label: 'When', cell: (e) => time(e.at) },
  { label: 'Who', cell: (e) => e.actor },
  { label: 'Action', cell: (e) => h('code', {}, e.action) },
  { label: 'Object', cell: (e) => e.object },
  { label: 'Detail', cell: (e) => h('span', { class: 'detail-text' }, detailText(e.detail)), class: 'wrap' },
];

/**
 * What the Action box means to the API: `deployment` or `deployment.` every action under it,
 * `deployment.create` exactly that one.
 */
function actionQuery(text) {
  const a = text.trim();
  if (!a) return '';
  return a.includes('.') ? a : `${a}.`;
}

/** A `<input type=date>` value as the RFC 3339 instant that starts that day (UTC). */
const dayStart = (value) => (value ? `${value}T00:00:00Z` : '');
/** The instant after that day ends, for `until` (exclusive). */
function dayEnd(value) {
  if (!value) return '';
  const t = new Date(`${value}T00:00:00Z`);
  t.setUTCDate(t.getUTCDate() + 1);
  return t.toISOString();
}

export async function renderAudit(main, _args, ctx) {
  const params = ctx.params;
  const action = h('input', { type: 'search', name: 'action', autocomplete: 'off', placeholder: 'e.g. deployment', value: params.get('action') ?? '' });
  const actor = h('input', { type: 'search', name: 'actor', autocomplete: 'off', placeholder: 'token name', value: params.get('actor') ?? '' });
  const object = h('input', { type: 'search', name: 'object', autocomplete: 'off', placeholder: 'e.g. deployments/2', value: params.get('object') ?? '' });
  const since = h('input', { type: 'date', name: 'since', value: params.get('since') ?? '' });
  const until = h('input', { type: 'date', name: 'until', value: params.get('until') ?? '' });
  const list = h('div', { class: 'audit-list' });
  const more = h('button', { type: 'button' }, 'Older entries');
  const status = h('p', { class: 'muted', 'aria-live': 'polite' });
  let entries = [];
  let cursor;
  // Each search is numbered, so that an older answer arriving late is dropped.
  let asked = 0;

  function show() {
    const filtered = action.value.trim() || actor.value.trim() || object.value.trim() || since.value || until.value;
    replace(
      list,
      table(COLUMNS, entries, {
        caption: `${entries.length} of ${cursor ? 'more' : entries.length} ${noun(entries.length, 'entry', 'entries')}${filtered ? ' matching' : ''}`,
        empty: 'No entries match.',
        className: 'audit',
      }),
    );
  }

  const filters = () => ({
    action: actionQuery(action.value),
    actor: actor.value.trim(),
    object: object.value.trim(),
    since: dayStart(since.value),
    until: dayEnd(until.value),
  });

  async function load(fresh) {
    const n = ++asked;
    more.disabled = true;
    const page = await api.get(`/audit${api.query({ ...filters(), limit: PAGE, cursor: fresh ? undefined : cursor })}`);
    if (!ctx.current() || n !== asked) return;
    entries = fresh ? page.items : entries.concat(page.items);
    cursor = page.next_cursor;
    more.hidden = !cursor;
    more.disabled = false;
    status.textContent = cursor ? '' : 'This is the start of the log.';
    history.replaceState(null, '', `#/audit${api.query({ action: action.value.trim(), actor: actor.value.trim(), object: object.value.trim(), since: since.value, until: until.value })}`);
    show();
  }

  const fail = (e) => (status.textContent = e.detail ?? String(e));
  let typing;
  for (const control of [action, actor, object]) {
    control.addEventListener('input', () => {
      clearTimeout(typing);
      typing = setTimeout(() => load(true).catch(fail), 300);
    });
  }
  for (const control of [since, until]) control.addEventListener('change', () => load(true).catch(fail));
  more.addEventListener('click', () => load(false).catch(fail));
  await load(true);
  if (!ctx.current()) return;
  replace(
    main,
    h('h1', {}, 'Audit log'),
    h('p', {}, 'Every change made through the API, with the token that made it. The log is append-only.'),
    h(
      'form',
      { class: 'filters', role: 'search', 'aria-label': 'Filter the audit log', onsubmit: (e) => e.preventDefault() },
      field('Action', action),
      field('Who', actor),
      field('Object', object),
      field('From', since),
      field('To', until),
    ),
    list,
    append(h('div', { class: 'actions left' }), [more]),
    status,
  );
}
