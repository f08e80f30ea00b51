// A deployment's devices, one by one (GET /api/v1/deployments/{id}/devices): its batch, what it
// last reported and why, or why it is skipped; filterable by state, so "1 of 2 devices failed"
// leads to the device and its reason.

import * as api from './api.js';
import { h, replace, field, table, link, errorBox } from './dom.js';
import { time, plural } from './format.js';

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
  let last = '';
  const refresh = async () => {
    try {
      const rows = await api.get(`${api.path('deployments', id, 'devices')}${api.query({ state: filter.value })}`);
      const json = JSON.stringify([filter.value, rows]);
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
            caption: filter.value ? `${plural(rows.length, 'device')} ${filter.value.replace('_', ' ')}` : plural(rows.length, 'device'),
            empty: filter.value ? `No device is ${filter.value.replace('_', ' ')}.` : 'No devices.',
            className: 'device-list',
          },
        ),
      );
      replace(status);
    } catch (err) {
      replace(status, errorBox(err));
    }
  };
  filter.addEventListener('change', refresh);
  const node = h(
    'section',
    { id: 'devices', 'aria-labelledby': 'devices-title' },
    h('h2', { id: 'devices-title' }, 'Devices'),
    h('form', { class: 'filters', onsubmit: (e) => e.preventDefault(), 'aria-label': 'Filter devices' }, field('Show', filter)),
    status,
    list,
  );
  const pick = (state) => {
    filter.value = state;
    refresh();
    node.scrollIntoView({ block: 'start' });
    filter.focus();
  };
  return { node, refresh, pick };
}
