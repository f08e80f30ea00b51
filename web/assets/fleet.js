// The fleet: devices with their group, current version, last contact and status; filters;
// registering devices (tokens shown once); revoking one; rolling a group back to a chosen version.

import * as api from './api.js';
import { h, replace, field, table, errorBox, toast, link, route, facts } from './dom.js';
import { ago, refreshAgo } from './format.js';
import { confirmAction, modal } from './dialog.js';
import { poll, stateBadge } from './deployments.js';
import { ACCELERATORS } from './models.js';

const REFRESH_MS = 5000;

/** A device's `status`: `new` (never reported), `revoked`, or the state it last reported. */
const STATUSES = ['new', 'downloading', 'verified', 'installed', 'bound', 'failed', 'rolled_back', 'revoked'];

/** What a device runs now: `kws 1.2.0 (seq 7)`. */
function current(d) {
  if (!d.current_model || !d.current_version) return '—';
  return [
    link(`${d.current_model} ${d.current_version}`, ['models', d.current_model, 'versions', d.current_version]),
    ` (seq ${d.current_sequence})`,
  ];
}

function statusCell(d) {
  return [stateBadge(d.status), d.last_reason ? h('span', { class: 'reason' }, ` ${d.last_reason}`) : ''];
}

export async function renderFleet(main, _args, ctx) {
  const params = ctx.params;
  const group = h('select', { name: 'group' }, h('option', { value: '' }, 'all groups'));
  const state = h(
    'select',
    { name: 'status' },
    h('option', { value: '' }, 'any status'),
    STATUSES.map((s) => h('option', { value: s }, s)),
  );
  const search = h('input', { type: 'search', name: 'q', autocomplete: 'off', placeholder: 'id, name, version, tag…' });
  const list = h('div', {});
  const status = h('div', { 'aria-live': 'polite' });
  const rollbackBox = h('section', { 'aria-labelledby': 'rollback-title' });
  let all = [];
  let groups = [];

  const show = () => {
    const q = search.value.trim().toLowerCase();
    const rows = all.filter((d) => {
      if (!q) return true;
      return [d.id, d.name, d.group, d.current_model, d.current_version, d.accelerator, ...(d.tags ?? [])]
        .filter(Boolean)
        .join(' ')
        .toLowerCase()
        .includes(q);
    });
    replace(
      list,
      table(
        [
          { label: 'Device', cell: (d) => [h('code', {}, d.id), d.name !== d.id ? ` ${d.name}` : ''] },
          { label: 'Group', cell: (d) => d.group },
          { label: 'Hardware', cell: (d) => `class ${d.hw_class} · ${d.accelerator}` },
          { label: 'Current version', cell: current },
          { label: 'Last seen', cell: (d) => ago(d.last_seen) },
          { label: 'Status', cell: statusCell },
          { label: 'Tags', cell: (d) => (d.tags.length ? d.tags.join(', ') : '—') },
          { label: 'Actions', cell: (d) => revokeButton(d) },
        ],
        rows,
        { caption: `${rows.length} of ${all.length} devices`, empty: all.length || group.value || state.value ? 'No device matches.' : 'No devices registered yet.', className: 'devices' },
      ),
    );
  };

  function revokeButton(d) {
    if (d.revoked_at) return '—';
    const b = h('button', { type: 'button', class: 'danger small', 'aria-label': `Revoke device ${d.id}` }, 'Revoke…');
    b.addEventListener('click', async () => {
      const ok = await confirmAction({
        title: `Revoke device ${d.id}?`,
        body: h('p', {}, 'Its token stops working at once: it can no longer poll, download or report.'),
        confirm: 'Revoke device',
        danger: true,
      });
      if (!ok) return;
      try {
        await api.post(api.path('devices', d.id, 'revoke'));
        toast(`Device ${d.id} revoked.`);
        await load();
      } catch (err) {
        replace(status, errorBox(err));
      }
    });
    return b;
  }

  let lastJson = '';
  async function load() {
    const data = await api.get(`/devices${api.query({ group: group.value, status: state.value })}`);
    const json = JSON.stringify(data);
    if (!ctx.current()) return;
    refreshAgo(list);
    if (json === lastJson) return;
    lastJson = json;
    all = data;
    show();
  }

  async function loadGroups() {
    groups = (await api.get('/groups')).map((g) => g.group);
    const selected = group.value || params.get('group') || '';
    replace(group, h('option', { value: '' }, 'all groups'), groups.map((g) => h('option', { value: g, selected: g === selected }, g)));
  }

  group.addEventListener('change', () => load().catch((e) => replace(status, errorBox(e))));
  state.addEventListener('change', () => load().catch((e) => replace(status, errorBox(e))));
  search.addEventListener('input', show);

  await loadGroups();
  if (!ctx.current()) return;
  const reload = async () => {
    await loadGroups();
    await load();
    await renderRollback(rollbackBox, groups, group.value, false);
  };
  replace(
    main,
    h('h1', {}, 'Fleet'),
    h(
      'form',
      { class: 'filters', role: 'search', 'aria-label': 'Filter devices', onsubmit: (e) => e.preventDefault() },
      field('Group', group),
      field('Status', state),
      field('Search', search),
    ),
    status,
    list,
    rollbackBox,
    registerForm(reload),
  );
  await renderRollback(rollbackBox, groups, params.get('group'), params.get('rollback') === '1');
  await poll(ctx, REFRESH_MS, load);
}

/** Roll a group back: a chosen older version (or the previous one), after a confirmation. */
async function renderRollback(section, groups, wantGroup, focus) {
  const title = h('h2', { id: 'rollback-title' }, 'Roll a group back');
  if (groups.length === 0) {
    replace(section, h('div', { class: 'card' }, title, h('p', { class: 'empty' }, 'No groups yet: register devices first.')));
    return;
  }
  const models = await api.get('/models');
  const group = h('select', { name: 'rollback-group', required: true }, groups.map((g) => h('option', { value: g, selected: g === wantGroup }, g)));
  const model = h('select', { name: 'rollback-model', required: true }, models.map((m) => h('option', { value: m.name }, m.name)));
  const version = h('select', { name: 'rollback-version', required: true });
  const status = h('div', { 'aria-live': 'polite' });
  const loadVersions = async () => {
    const list = model.value ? await api.get(api.path('models', model.value, 'versions')) : [];
    replace(
      version,
      h('option', { value: 'previous' }, 'the version deployed before the last one'),
      [...list].reverse().map((v) => h('option', { value: v.version }, v.version)),
    );
  };
  model.addEventListener('change', () => loadVersions().catch((e) => replace(status, errorBox(e))));
  const form = h(
    'form',
    { class: 'card', 'aria-labelledby': 'rollback-title' },
    title,
    h('p', {}, 'Creates a new deployment with a higher sequence that points at the chosen, older pack; the devices get it at their next poll.'),
    h('div', { class: 'row' }, field('Group', group), field('Model', model), field('Version', version)),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'danger' }, 'Roll back…')),
    status,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const target = version.value === 'previous' ? `the ${model.value} version deployed before the last one` : `${model.value} ${version.value}`;
    const ok = await confirmAction({
      title: `Roll group ${group.value} back?`,
      body: [
        facts([
          ['Group', group.value],
          ['To', target],
        ]),
        h('p', {}, 'Every device in the group is offered this version at once, replacing what it runs now.'),
      ],
      confirm: 'Roll back',
      danger: true,
    });
    if (!ok) return;
    try {
      const d = await api.post(api.path('groups', group.value, 'rollback'), { model: model.value, version: version.value });
      toast(`Rollback of ${group.value} started as deployment #${d.id} (sequence ${d.sequence}).`);
      location.hash = route('deployments', d.id);
    } catch (err) {
      replace(status, errorBox(err));
    }
  });
  await loadVersions();
  replace(section, form);
  if (focus) group.focus();
}

/** Register devices: one per line, `id, name, group, tag …`. */
function registerForm(onDone) {
  const lines = h('textarea', {
    name: 'devices',
    rows: '3',
    required: true,
    spellcheck: 'false',
    placeholder: 'sensor-0001, Kitchen sensor, kitchen, floor-1',
  });
  const accel = h('select', { name: 'accelerator' }, ACCELERATORS.map((a) => h('option', { value: a, selected: a === 'ethos-u55-256' }, a)));
  const hwClass = h('input', { type: 'number', name: 'hw_class', min: '1', step: '1', value: '1' });
  const status = h('div', { 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'card', 'aria-labelledby': 'register-title' },
    h('h2', { id: 'register-title' }, 'Register devices'),
    field('Devices', lines, 'One per line: id, name, group, then any tags (letters, digits, - _ . :)'),
    h('div', { class: 'row' }, field('Accelerator', accel), field('Hardware class', hwClass, 'Manifests are signed per class; 1 = RA8P1')),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Register')),
    status,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const devices = lines.value
      .split('\n')
      .map((l) => l.split(',').map((s) => s.trim()))
      .filter((f) => f[0])
      .map(([id, name, group, ...tags]) => ({
        id,
        name: name || undefined,
        group: group || undefined,
        tags: tags.filter(Boolean),
        accelerator: accel.value,
        hw_class: Number(hwClass.value) || 1,
      }));
    try {
      const created = await api.post('/devices', { devices });
      replace(status);
      await showTokens(created);
      lines.value = '';
      await onDone();
    } catch (err) {
      replace(status, errorBox(err));
    }
  });
  return form;
}

async function showTokens(created) {
  const text = created.map((d) => `${d.id} ${d.token}`).join('\n');
  const box = h('textarea', {
    readonly: true,
    rows: String(Math.min(8, created.length + 1)),
    class: 'secret device-tokens',
    'aria-label': 'Device tokens',
    value: text,
  });
  await modal({
    title: `${created.length} device${created.length === 1 ? '' : 's'} registered`,
    body: [h('p', {}, 'Each device’s token (id, then token) is shown only now. Provision it onto the device before closing this.'), box],
    confirm: 'I have stored them',
    cancel: 'Close',
    initial: '.secret',
  });
}
