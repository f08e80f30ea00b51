// A deployment's devices, one by one (GET /api/v1/deployments/{id}/devices): its batch, what it
// last reported and why, or why it is skipped; filterable by state, so "1 of 2 devices failed"
// leads to the device and its reason.

import * as api from './api.js';
import { h, replace, field, table, link, errorBox } from './dom.js';
import { time, plural } from './format.js';

/** Devices per page. */
const PAGE = 100;

const SKIPS = {
  other_accelerator: 'other accelerator',
  batch_not_open: 'batch not open yet',
  not_a_target: 'no longer a target',
};

/**
 * The section, and `refresh()` (called on every poll of the page) and `pick(state)`. The page
 * passes its `states` and `stateBadge` (so this module imports nothing back from it).
 */
export function deploymentDevices(id, initialState, { states, stateBadge }) {
  const filter = h(
    'select',
    { name: 'device-state', 'aria-controls': `devices-of-${id}` },
    h('option', { value: '' }, 'every device'),
    [...states, 'skipped'].map((s) => h('option', { value: s, selected: s === initialState }, s.replace('_', ' '))),
  );
  const list = h('div', { id: `devices-of-${id}`, class: 'deployment-devices' });
  const status = h('div', { 'aria-live': 'polite' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages of devices' });
  // The cursors of the pages before this one; the first page has none.
  const before = [];
  let cursor;
  let last = '';
  const refresh = async () => {
    try {
      const page = await api.get(`${api.path('deployments', id, 'devices')}${api.query({ state: filter.value, limit: PAGE, cursor })}`);
      const rows = page.items;
      const json = JSON.stringify([filter.value, cursor, page]);
      if (json === last) return;
      last = json;
      replace(
        list,
        table(
          [
            { label: 'Device', cell: (d) => [link(h('code', {}, d.device_id), ['fleet', d.device_id]), d.name !== d.device_id ? ` ${d.name}` : ''] },
            { label: 'Batch', cell: (d) => (d.batch === null || d.batch === undefined ? '—' : String(d.batch + 1)), class: 'num' },
            { label: 'State', cell: (d) => [stateBadge(d.state), d.skipped ? h('small', { class: 'skip' }, ` ${SKIPS[d.skipped] ?? d.skipped}`) : ''] },
            { label: 'Reason', cell: (d) => (d.reason ? h('span', { class: 'reason' }, d.reason) : '—'), class: 'wrap' },
            { label: 'Reported', cell: (d) => time(d.updated_at) },
          ],
          rows,
          {
            caption: `${plural(rows.length, 'device')}${filter.value ? ` ${filter.value.replace('_', ' ')}` : ''}${before.length || page.next_cursor ? `, page ${before.length + 1}` : ''}`,
            empty: filter.value ? `No device is ${filter.value.replace('_', ' ')}.` : 'No devices.',
            className: 'device-list',
          },
        ),
      );
      const back = h('button', { type: 'button', disabled: before.length === 0 }, '← Previous page');
      back.addEventListener('click', () => {
        cursor = before.pop();
        refresh();
      });
      const next = h('button', { type: 'button', disabled: !page.next_cursor }, 'Next page →');
      next.addEventListener('click', () => {
        before.push(cursor);
        cursor = page.next_cursor;
        refresh();
      });
      replace(pager, before.length || page.next_cursor ? [back, next] : []);
      replace(status);
    } catch (err) {
      replace(status, errorBox(err));
    }
  };
  // Another state starts again from the first page.
  const restart = () => {
    before.length = 0;
    cursor = undefined;
    return refresh();
  };
  filter.addEventListener('change', restart);
  const node = h(
    'section',
    { id: 'devices', 'aria-labelledby': 'devices-title' },
    h('h2', { id: 'devices-title' }, 'Devices'),
    h('form', { class: 'filters', onsubmit: (e) => e.preventDefault(), 'aria-label': 'Filter devices' }, field('Show', filter)),
    status,
    list,
    pager,
  );
  const pick = (state) => {
    filter.value = state;
    restart();
    node.scrollIntoView({ block: 'start' });
    filter.focus();
  };
  return { node, refresh, pick };
}
