// Deploy a version to a group (or one device) with a staged-rollout policy.

import * as api from './api.js';
import { h, replace, field, errorBox, facts, route } from './dom.js';
import { confirmAction } from './dialog.js';
import { plural, size } from './format.js';

/** The rollout the form starts with: 5 % of the group, then 25 %, then everyone. */
const DEFAULT_BATCHES = '5, 25, 100';
const DEFAULT_SUCCESS = 90;
const DEFAULT_FAILURE = 20;

/**
 * Known groups (with their device counts) and unrevoked devices, for the target pickers: the
 * first 1,000 devices in id order (a larger fleet deploys to groups; `more` says so).
 */
async function fleetNames() {
  const [groups, page] = await Promise.all([api.get('/groups'), api.get(`/devices${api.query({ limit: 1000 })}`)]);
  return {
    groups: groups.filter((g) => g.devices > 0),
    devices: page.items.filter((d) => !d.revoked_at),
    more: Boolean(page.next_cursor),
  };
}

/**
 * What a preview (`?dry_run=true`) says, for a confirmation dialog: the reach, the skipped
 * devices and why, and each batch's devices. Shared with the rollback dialog.
 */
export function previewFacts(p, { shown = 6 } = {}) {
  const ids = (list) => (list.length > shown ? `${list.slice(0, shown).join(', ')} and ${list.length - shown} more` : list.join(', ') || 'nobody');
  const rows = [
    ['Pack', `${p.model} ${p.version} · ${p.accelerator} · ${size(p.size)} · sha256 ${p.sha256.slice(0, 12)}…`],
    ['Reaches', plural(p.targets, 'device')],
  ];
  if (p.already_running) rows.push(['Already running it', `${plural(p.already_running, 'device')} (they take the new sequence without downloading)`]);
  if (p.skipped.length) {
    rows.push(['Skipped', h('ul', { class: 'skipped' }, p.skipped.map((s) => h('li', {}, h('code', {}, s.device_id), `: ${s.reason}`)))]);
  }
  p.batches.forEach((b, i) => {
    if (p.batches.length > 1 || b.devices.length) rows.push([`Batch ${i + 1} (${b.percent} %)`, ids(b.devices)]);
  });
  return facts(rows, 'facts preview');
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
    const list = await api.all(api.path('models', model.value, 'versions'));
    for (const v of [...list].reverse()) {
      version.append(h('option', { value: v.version, selected: v.version === wantVersion }, `${v.version} (${v.accelerator})`));
    }
  };
  model.addEventListener('change', () => loadVersions().catch((e) => replace(status, errorBox(e))));

  const targetKind = h('select', { name: 'target-kind' }, h('option', { value: 'group' }, 'a group'), h('option', { value: 'device' }, 'one device'));
  const wantGroup = ctx.params.get('group') ?? '';
  const target = h('select', { name: 'target', required: true });
  const fillTargets = () => {
    const isGroup = targetKind.value === 'group';
    replace(
      target,
      isGroup
        ? names.groups.map((g) => h('option', { value: g.group, selected: g.group === wantGroup }, `${g.group} (${plural(g.devices, 'device')})`))
        : names.devices.map((d) => h('option', { value: d.id }, `${d.id}${d.name !== d.id ? ` — ${d.name}` : ''} (${d.accelerator}, ${d.group})`)),
    );
    targetField.querySelector('label').textContent = isGroup ? 'Group' : 'Device';
  };
  const targetField = field('Group', target, names.devices.length ? `Only groups with devices are listed${names.more ? '; the first 1,000 devices are listed' : ''}; the preview says who is reached` : 'No devices are registered yet; register them under Fleet.');
  targetKind.addEventListener('change', fillTargets);
  fillTargets();

  const staged = h('input', { type: 'checkbox', name: 'staged', checked: true });
  const batches = h('input', { name: 'batches', value: DEFAULT_BATCHES, autocomplete: 'off', inputmode: 'numeric' });
  const success = h('input', { type: 'number', name: 'success', min: '1', max: '100', step: '1', value: String(DEFAULT_SUCCESS) });
  const failure = h('input', { type: 'number', name: 'failure', min: '1', max: '100', step: '1', value: String(DEFAULT_FAILURE) });
  const rolloutFields = h(
    'div',
    { class: 'row' },
    field('Batches (% of the group reached)', batches, 'e.g. 5, 25, 100: each batch opens when the previous one succeeds'),
    field('Next batch at success rate (%)', success),
    field('Stop above failure rate (%)', failure),
  );
  const pauseOnFailure = h('input', { type: 'checkbox', name: 'on_failure_pause' });
  const onFailureField = h(
    'div',
    { class: 'field checkbox' },
    h('label', {}, pauseOnFailure, ' Pause instead of abort when the failure rate is exceeded (resume or retry the failed devices afterwards)'),
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
    h('h2', {}, 'Rollout'),
    h('div', { class: 'field checkbox' }, h('label', {}, staged, ' Staged rollout (otherwise every device at once)')),
    rolloutFields,
    onFailureField,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Deploy…')),
    status,
  );

  // A second click or a retry after a lost answer must not make a second deployment.
  const submitting = api.submission();
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = { model: model.value, version: version.value };
    body[targetKind.value] = target.value;
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
    body.rollout.on_failure = pauseOnFailure.checked ? 'pause' : 'abort';
    // Ask the server what it would do first: a deployment that reaches nobody is refused here,
    // before anything is made, and the dialog names who gets what.
    let preview;
    try {
      preview = await api.post('/deployments?dry_run=true', body);
    } catch (err) {
      replace(status, errorBox(err));
      return;
    }
    replace(status);
    const ok = await confirmAction({
      title: `Deploy ${body.model} ${body.version}?`,
      body: [
        previewFacts(preview),
        facts([
          ['To', `${targetKind.value} ${body[targetKind.value]}`],
          ['Rollout', staged.checked ? `${body.rollout.batches.join(' → ')} %` : 'every device at once'],
          [pauseOnFailure.checked ? 'Auto-pause' : 'Auto-abort', `above ${failure.value} % failures`],
        ]),
      ],
      confirm: `Deploy to ${plural(preview.targets, 'device')}`,
    });
    if (!ok) return;
    try {
      const d = await api.post('/deployments', body, { idempotencyKey: submitting.key(body) });
      submitting.done();
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
