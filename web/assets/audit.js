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

export async function renderAudit(main, _args, ctx) {
  const filter = h('input', { type: 'search', name: 'action', autocomplete: 'off', placeholder: 'e.g. deployment' });
  const list = h('div', { class: 'audit-list' });
  const more = h('button', { type: 'button' }, 'Older entries');
  const status = h('p', { class: 'muted', 'aria-live': 'polite' });
  let entries = [];

  function show() {
    const q = filter.value.trim().toLowerCase();
    const shown = q
      ? entries.filter((e) => `${e.action} ${e.object} ${e.actor} ${detailText(e.detail)}`.toLowerCase().includes(q))
      : entries;
    replace(list, table(COLUMNS, shown, { caption: `${shown.length} of ${entries.length} loaded ${noun(entries.length, 'entry', 'entries')}`, empty: 'No entries match.', className: 'audit' }));
  }

  async function load() {
    const before = entries.length ? entries[entries.length - 1].id : undefined;
    more.disabled = true;
    const page = await api.get(`/audit${api.query({ limit: PAGE, before })}`);
    if (!ctx.current()) return;
    entries = entries.concat(page);
    more.hidden = page.length < PAGE;
    more.disabled = false;
    status.textContent = page.length < PAGE ? 'This is the start of the log.' : '';
    show();
  }

  filter.addEventListener('input', show);
  more.addEventListener('click', () => load().catch((e) => (status.textContent = e.detail ?? String(e))));
  await load();
  if (!ctx.current()) return;
  replace(
    main,
    h('h1', {}, 'Audit log'),
    h('p', {}, 'Every change made through the API, with the token that made it. The log is append-only.'),
    h('form', { class: 'filters', role: 'search', onsubmit: (e) => e.preventDefault() }, field('Filter loaded entries', filter)),
    list,
    append(h('div', { class: 'actions left' }), [more]),
    status,
  );
}
