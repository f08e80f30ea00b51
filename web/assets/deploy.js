// Deploy a version to a group (or one device) with a staged-rollout policy.

import * as api from './api.js';
import { h, replace, field, errorBox, facts, route } from './dom.js';
import { confirmAction } from './dialog.js';

/** The rollout the form starts with: 5 % of the group, then 25 %, then everyone. */
const DEFAULT_BATCHES = '5, 25, 100';
const DEFAULT_SUCCESS = 90;
const DEFAULT_FAILURE = 20;

/** Known groups and (unrevoked) device ids, for the target field's suggestions. */
async function fleetNames() {
  const [groups, devices] = await Promise.all([api.get('/groups'), api.get('/devices')]);
  return {
    groups: groups.map((g) => g.group),
    devices: devices.filter((d) => !d.revoked_at).map((d) => d.id),
  };
}

/** `"5, 25, 100"` → `[5, 25, 100]`, or an error message. */
export function parseBatches(text) {
  const parts = text
    .split(/[\s,→>]+/)
    .filter(Boolean)
    .map(Number);
  if (parts.length === 0) return { error: 'give at least one batch, e.g. 100' };
  if (parts.some((p) => !Number.isFinite(p) || p <= 0 || p > 100)) return { error: 'each batch is a percentage in 1..100' };
  for (let i = 1; i < parts.length; i += 1) {
    if (parts[i] <= parts[i - 1]) return { error: 'batches must grow: each is the share of the group reached so far' };
  }
  if (parts[parts.length - 1] !== 100) return { error: 'the last batch must be 100 (the whole group)' };
  return { batches: parts };
}

export async function renderDeploy(main, _args, ctx) {
  const [models, names] = await Promise.all([api.get('/models'), fleetNames()]);
  if (!ctx.current()) return;
  const wantModel = ctx.params.get('model');
  const wantVersion = ctx.params.get('version');
  const model = h(
    'select',
    { name: 'model', required: true },
    models.map((m) => h('option', { value: m.name, selected: m.name === wantModel }, m.name)),
  );
  const version = h('select', { name: 'version', required: true });
  const loadVersions = async () => {
    replace(version);
    if (!model.value) return;
    const list = await api.get(api.path('models', model.value, 'versions'));
    for (const v of [...list].reverse()) {
      version.append(h('option', { value: v.version, selected: v.version === wantVersion }, `${v.version} (${v.accelerator})`));
    }
  };
  model.addEventListener('change', () => loadVersions().catch((e) => replace(status, errorBox(e))));

  const targetKind = h('select', { name: 'target-kind' }, h('option', { value: 'group' }, 'a group'), h('option', { value: 'device' }, 'one device'));
  const groupList = h('datalist', { id: 'group-names' }, names.groups.map((g) => h('option', { value: g })));
  const deviceList = h('datalist', { id: 'device-ids' }, names.devices.map((d) => h('option', { value: d })));
  const target = h('input', { name: 'target', required: true, list: 'group-names', autocomplete: 'off', value: ctx.params.get('group') ?? '' });
  const targetField = field('Group', target, names.groups.length ? `Known groups: ${names.groups.join(', ')}` : 'No devices are registered yet; register them under Fleet.');
  targetKind.addEventListener('change', () => {
    const isGroup = targetKind.value === 'group';
    target.setAttribute('list', isGroup ? 'group-names' : 'device-ids');
    targetField.querySelector('label').textContent = isGroup ? 'Group' : 'Device id';
  });

  const staged = h('input', { type: 'checkbox', name: 'staged', checked: true });
  const batches = h('input', { name: 'batches', value: DEFAULT_BATCHES, autocomplete: 'off', inputmode: 'numeric' });
  const success = h('input', { type: 'number', name: 'success', min: '1', max: '100', step: '1', value: String(DEFAULT_SUCCESS) });
  const failure = h('input', { type: 'number', name: 'failure', min: '1', max: '100', step: '1', value: String(DEFAULT_FAILURE) });
  const rolloutFields = h(
    'div',
    { class: 'row' },
    field('Batches (% of the group reached)', batches, 'e.g. 5, 25, 100: each batch opens when the previous one succeeds'),
    field('Next batch at success rate (%)', success),
    field('Auto-abort above failure rate (%)', failure),
  );
  staged.addEventListener('change', () => {
    rolloutFields.hidden = !staged.checked;
  });
  const status = h('div', { 'aria-live': 'polite' });

  const form = h(
    'form',
    { class: 'card', 'aria-labelledby': 'deploy-title' },
    h('h2', { id: 'deploy-title' }, 'What and where'),
    h('div', { class: 'row' }, field('Model', model), field('Version', version)),
    h('div', { class: 'row' }, field('Deploy to', targetKind), targetField),
    groupList,
    deviceList,
    h('h2', {}, 'Rollout'),
    h('div', { class: 'field checkbox' }, h('label', {}, staged, ' Staged rollout (otherwise every device at once)')),
    rolloutFields,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Deploy…')),
    status,
  );

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = { model: model.value, version: version.value };
    body[targetKind.value] = target.value.trim();
    if (!body[targetKind.value]) {
      replace(status, errorBox({ code: 'invalid_request', detail: `Name the ${targetKind.value}.` }));
      return;
    }
    if (staged.checked) {
      const parsed = parseBatches(batches.value);
      if (parsed.error) {
        replace(status, errorBox({ code: 'invalid_request', detail: `Batches: ${parsed.error}` }));
        batches.focus();
        return;
      }
      body.rollout = {
        batches: parsed.batches,
        success_threshold: Number(success.value) / 100,
        failure_threshold: Number(failure.value) / 100,
      };
    } else {
      body.rollout = { batches: [100], success_threshold: Number(success.value) / 100, failure_threshold: Number(failure.value) / 100 };
    }
    const ok = await confirmAction({
      title: `Deploy ${body.model} ${body.version}?`,
      body: facts([
        ['To', `${targetKind.value} ${body[targetKind.value]}`],
        ['Rollout', staged.checked ? `${body.rollout.batches.join(' → ')} %` : 'every device at once'],
        ['Auto-abort', `above ${failure.value} % failures`],
      ]),
      confirm: 'Deploy',
    });
    if (!ok) return;
    try {
      const d = await api.post('/deployments', body);
      location.hash = route('deployments', d.id);
    } catch (err) {
      replace(status, errorBox(err));
    }
  });

  replace(
    main,
    h('h1', {}, 'Deploy a version'),
    models.length ? form : h('p', { class: 'empty' }, 'Upload a model version first.'),
  );
  await loadVersions();
}
