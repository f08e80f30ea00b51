// The fleet: devices with their group, current version, last contact and status; filters;
// registering devices (tokens shown once); revoking one; rolling a group back to a chosen version.

import * as api from './api.js';
import { h, replace, field, table, errorBox, toast, link, route, facts, secretField, saveBlob, csv } from './dom.js';
import { ago, refreshAgo, plural } from './format.js';
import { confirmAction, modal } from './dialog.js';
import { poll, stateBadge } from './deployments.js';
import { ACCELERATORS } from './models.js';
import { previewFacts, parseBatches } from './deploy.js';

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

/** Reasons longer than this are cut in the table (the whole text is one click away). */
const REASON_SHOWN = 80;

/**
 * The status badge, and the last report's reason under it. A long reason is cut so that it
 * cannot squeeze the other columns; the whole of it opens in place (a `<details>`) and is the
 * element's title.
 */
function statusCell(d) {
  const reason = d.last_reason;
  if (!reason) return stateBadge(d.status);
  if (reason.length <= REASON_SHOWN) return [stateBadge(d.status), h('span', { class: 'reason' }, reason)];
  return [
    stateBadge(d.status),
    h(
      'details',
      { class: 'reason', title: reason },
      h('summary', {}, `${reason.slice(0, REASON_SHOWN).trimEnd()}…`),
      h('p', { class: 'reason-full' }, reason),
    ),
  ];
}

/**
 * When the device was last heard from. `last_seen` is written in batches, so a report can be
 * newer than it (or the only sign of life yet): then the report's time is shown, and says so.
 */
function lastContact(d) {
  const seen = d.last_seen ? Date.parse(d.last_seen) : Number.NaN;
  const reported = d.last_status_at ? Date.parse(d.last_status_at) : Number.NaN;
  if (!Number.isNaN(reported) && !(seen >= reported)) return ['reported ', ago(d.last_status_at)];
  return ago(d.last_seen);
}

/** "Not seen for more than …": the choices, in minutes. */
const NOT_SEEN = [
  ['', 'any time'],
  ['15', 'over 15 minutes'],
  ['60', 'over an hour'],
  ['1440', 'over a day'],
  ['10080', 'over a week'],
];

/** Devices per page of the table. */
const PAGE = 100;

export async function renderFleet(main, _args, ctx) {
  const params = ctx.params;
  const select = (name, first, options) =>
    h(
      'select',
      { name },
      h('option', { value: '' }, first),
      options.map(([value, label]) => h('option', { value, selected: params.get(name) === value }, label)),
    );
  const group = h('select', { name: 'group' }, h('option', { value: '' }, 'all groups'));
  const state = select('status', 'any status', STATUSES.map((s) => [s, s]));
  const accel = select('accelerator', 'any NPU', ACCELERATORS.map((a) => [a, a]));
  // A threshold from a link (the dashboard's "offline": a few poll intervals) is offered too.
  const linked = params.get('not_seen_minutes');
  const notSeen = select(
    'not_seen_minutes',
    'any time',
    linked && /^\d+$/.test(linked) && !NOT_SEEN.some(([v]) => v === linked)
      ? [...NOT_SEEN.slice(1), [linked, `over ${linked} minutes`]]
      : NOT_SEEN.slice(1),
  );
  const version = h('input', { name: 'version', autocomplete: 'off', placeholder: 'e.g. 1.2.0', size: 10, value: params.get('version') ?? '' });
  const search = h('input', { type: 'search', name: 'q', autocomplete: 'off', placeholder: 'id or name', value: params.get('q') ?? '' });
  const list = h('div', {});
  const pager = h('nav', { class: 'pager', 'aria-label': 'Device pages' });
  const status = h('div', { 'aria-live': 'polite' });
  const rollbackBox = h('section', { 'aria-labelledby': 'rollback-title' });
  let page = { items: [] };
  let groups = [];
  // The cursors of the pages before this one (the first page has none): Back pops one.
  const before = [];
  let cursor = params.get('cursor') || '';
  // Batch edit: the ids ticked in the table survive its periodic rebuilds.
  const selected = new Set();
  const batch = batchEditForm(selected, () => load(), status);
  const tick = (d) => {
    if (d.revoked_at) return '';
    const box = h('input', { type: 'checkbox', name: 'pick', value: d.id, checked: selected.has(d.id), 'aria-label': `Select ${d.id}` });
    box.addEventListener('change', () => {
      if (box.checked) selected.add(d.id);
      else selected.delete(d.id);
      batch.update();
    });
    return box;
  };

  /** The filters as the API's query (and the view's URL): only those that are set. */
  const filters = () => ({
    group: group.value,
    status: state.value,
    accelerator: accel.value,
    not_seen_minutes: notSeen.value,
    version: version.value.trim(),
    q: search.value.trim(),
  });
  const filtered = () => Object.values(filters()).some(Boolean);

  const show = () => {
    const rows = page.items;
    const first = before.length * PAGE + 1;
    const last = first + rows.length - 1;
    const matching = filtered() ? ' matching the filters' : '';
    // One page: how many; several: which ones, and the total once the last page is reached.
    const caption =
      before.length === 0 && !page.next_cursor
        ? `${plural(rows.length, 'device')}${matching}`
        : `devices ${first}–${last}${page.next_cursor ? '' : ` of ${last}`}${matching}`;
    replace(
      list,
      table(
        [
          { label: 'Select', cell: tick },
          { label: 'Device', cell: (d) => [link(h('code', {}, d.id), ['fleet', d.id], { 'aria-label': `Device ${d.id}` }), d.name !== d.id ? ` ${d.name}` : ''] },
          { label: 'Group', cell: (d) => d.group },
          { label: 'Hardware', cell: (d) => `class ${d.hw_class} · ${d.accelerator}` },
          { label: 'Current version', cell: current },
          { label: 'Last seen', cell: lastContact, class: 'last-seen' },
          { label: 'Status', cell: statusCell, class: 'status' },
          { label: 'Tags', cell: (d) => (d.tags.length ? d.tags.join(', ') : '—') },
          { label: 'Actions', cell: (d) => revokeButton(d) },
        ],
        rows,
        { caption, empty: filtered() || before.length ? 'No device matches.' : 'No devices registered yet.', className: 'devices' },
      ),
    );
    const back = h('button', { type: 'button', disabled: before.length === 0 }, '← Previous page');
    back.addEventListener('click', () => {
      cursor = before.pop() ?? '';
      reload();
    });
    const next = h('button', { type: 'button', disabled: !page.next_cursor }, 'Next page →');
    next.addEventListener('click', () => {
      before.push(cursor);
      cursor = page.next_cursor;
      reload();
    });
    replace(pager, back, next);
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
    const query = { ...filters(), limit: PAGE, cursor };
    const data = await api.get(`/devices${api.query(query)}`);
    const json = JSON.stringify(data);
    if (!ctx.current()) return;
    // The view's URL carries its filters and page, so that it can be shared or reloaded.
    const shown = api.query({ ...filters(), cursor });
    history.replaceState(null, '', `#/fleet${shown}`);
    refreshAgo(list);
    if (json === lastJson) return;
    lastJson = json;
    page = data;
    show();
  }
  const reload = () => {
    lastJson = '';
    load().catch((e) => replace(status, errorBox(e)));
  };
  // A change of filter starts again from the first page.
  const refilter = () => {
    before.length = 0;
    cursor = '';
    reload();
  };

  async function loadGroups() {
    groups = (await api.get('/groups')).map((g) => g.group);
    const selected = group.value || params.get('group') || '';
    replace(group, h('option', { value: '' }, 'all groups'), groups.map((g) => h('option', { value: g, selected: g === selected }, g)));
  }

  for (const control of [group, state, accel, notSeen]) control.addEventListener('change', refilter);
  // Typing asks the server once the typing pauses.
  let typing;
  for (const control of [search, version]) {
    control.addEventListener('input', () => {
      clearTimeout(typing);
      typing = setTimeout(refilter, 300);
    });
  }

  await loadGroups();
  if (!ctx.current()) return;
  const reloadAll = async () => {
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
      field('NPU', accel),
      field('Not seen', notSeen),
      field('Version', version),
      field('Search', search),
    ),
    status,
    list,
    pager,
    batch.form,
    rollbackBox,
    registerForm(reloadAll),
  );
  await renderRollback(rollbackBox, groups, params.get('group'), params.get('rollback') === '1');
  await poll(ctx, REFRESH_MS, load);
}

/**
 * Edit the ticked devices at once: move them to a group and/or replace their tags, after a
 * confirmation naming them; one PATCH per device, each audited.
 */
function batchEditForm(selected, reload, status) {
  const group = h('input', { name: 'batch-group', autocomplete: 'off', pattern: '[A-Za-z0-9._:\\-]+', placeholder: 'unchanged' });
  const tags = h('input', { name: 'batch-tags', autocomplete: 'off', placeholder: 'unchanged' });
  const count = h('p', { class: 'muted', 'aria-live': 'polite' });
  const apply = h('button', { type: 'submit', class: 'primary' }, 'Apply to selected…');
  const form = h(
    'form',
    { class: 'card', 'aria-label': 'Edit selected devices' },
    h('h2', {}, 'Edit selected devices'),
    count,
    h('div', { class: 'row' }, field('Move to group', group), field('Replace tags with', tags, 'Comma-separated; leave empty to keep each device’s tags')),
    h('div', { class: 'actions' }, apply),
  );
  const update = () => {
    count.textContent = selected.size ? `${plural(selected.size, 'device')} selected: ${[...selected].join(', ')}` : 'Tick devices in the table to edit them together.';
    apply.disabled = selected.size === 0;
  };
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = {};
    if (group.value.trim()) body.group = group.value.trim();
    if (tags.value.trim()) body.tags = tags.value.split(',').map((t) => t.trim()).filter(Boolean);
    if (!Object.keys(body).length) {
      replace(status, errorBox({ code: 'invalid_request', detail: 'Give a group to move them to, or tags to set.' }));
      return;
    }
    const ids = [...selected].sort();
    const ok = await confirmAction({
      title: `Edit ${plural(ids.length, 'device')}?`,
      body: facts([
        ['Devices', ids.join(', ')],
        body.group ? ['Move to group', `${body.group} (what they are offered changes at their next poll)`] : null,
        body.tags ? ['Tags', body.tags.join(', ') || 'none'] : null,
      ]),
      confirm: `Edit ${plural(ids.length, 'device')}`,
    });
    if (!ok) return;
    const failed = [];
    for (const id of ids) {
      try {
        await api.patch(api.path('devices', id), body);
        selected.delete(id);
      } catch (err) {
        failed.push(`${id}: ${err.detail ?? err.message}`);
      }
    }
    update();
    if (failed.length) replace(status, errorBox({ code: 'invalid_request', detail: failed.join('; ') }));
    else toast(`${plural(ids.length, 'device')} edited.`);
    await reload();
  });
  update();
  return { form, update };
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
  // A rollback is a deployment: it can be staged like one (100: everyone at once).
  const batches = h('input', { name: 'rollback-batches', value: '100', autocomplete: 'off', inputmode: 'numeric' });
  const status = h('div', { 'aria-live': 'polite' });
  const loadVersions = async () => {
    const list = model.value ? await api.all(api.path('models', model.value, 'versions')) : [];
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
    field('Batches (% of the group reached)', batches, '100: every device at once; e.g. 10, 100 to try it on a tenth of the group first'),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'danger' }, 'Roll back…')),
    status,
  );
  // A second click or a retry after a lost answer must not roll back twice.
  const rollingBack = api.submission();
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const parsed = parseBatches(batches.value);
    if (parsed.error) {
      replace(status, errorBox(new Error(`Batches: ${parsed.error}`)));
      batches.focus();
      return;
    }
    const body = { model: model.value, version: version.value };
    if (parsed.batches.length > 1) body.rollout = { batches: parsed.batches };
    // The server resolves "previous" (per accelerator configuration) and says what each rollback
    // would reach; the dialog names the concrete versions and packs before anything is made.
    let preview;
    try {
      preview = await api.post(`${api.path('groups', group.value, 'rollback')}?dry_run=true`, body);
    } catch (err) {
      replace(status, errorBox(err));
      return;
    }
    replace(status);
    const versions = preview.rollbacks.map((r) => `${r.model} ${r.version}`).join(' and ');
    const ok = await confirmAction({
      title: `Roll group ${group.value} back?`,
      body: [
        facts([
          ['Group', group.value],
          ['To', versions],
        ]),
        preview.rollbacks.map((r) => previewFacts(r)),
        h('p', {}, `Creates ${plural(preview.rollbacks.length, 'new deployment')} with a higher sequence; each device listed is offered it at once, replacing what it runs now.`),
      ],
      confirm: 'Roll back',
      danger: true,
    });
    if (!ok) return;
    try {
      const d = await api.post(api.path('groups', group.value, 'rollback'), body, {
        idempotencyKey: rollingBack.key([group.value, body]),
      });
      rollingBack.done();
      toast(`Rollback of ${group.value} started as deployment #${d.id} (sequence ${d.sequence})${d.deployments.length > 1 ? ` and ${plural(d.deployments.length - 1, 'more')}` : ''}.`);
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
  // A retry after a lost answer gets the devices (and tokens) of the first attempt back.
  const registering = api.submission();
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
      const created = await api.post('/devices', { devices }, { idempotencyKey: registering.key(devices) });
      registering.done();
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

/** The one time device tokens are shown: one read-only field with Copy per device, and all of them as CSV. */
async function showTokens(created) {
  const rows = created.map((d) =>
    h(
      'li',
      {},
      h('code', { class: 'device-id' }, d.id),
      secretField(d.token, `token of ${d.id}`, { class: 'device-token', dataset: { device: d.id } }),
    ),
  );
  const download = h('button', { type: 'button', class: 'download-tokens' }, 'Download tokens (CSV)');
  download.addEventListener('click', () => {
    const text = csv([['id', 'token'], ...created.map((d) => [d.id, d.token])]);
    saveBlob(new Blob([text], { type: 'text/csv' }), 'npub-device-tokens.csv');
    download.textContent = 'Downloaded npub-device-tokens.csv';
  });
  await modal({
    title: `${plural(created.length, 'device')} registered`,
    body: [
      h('p', {}, 'Each device’s token is shown only now. Provision it onto the device (device-agent --token) before closing this.'),
      h('ul', { class: 'device-tokens' }, rows),
      h('div', { class: 'actions left' }, download),
    ],
    confirm: 'I have stored them',
    cancel: 'Close',
    initial: '.secret',
  });
}
