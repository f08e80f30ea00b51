// Models and their versions; creating a model; the upload panel on a model's page.

import * as api from './api.js';
import { h, replace, field, table, link, facts, errorBox, toast, route } from './dom.js';
import { size, time, plural } from './format.js';
import { uploadPanel } from './upload.js';

/** Vela accelerator configurations the API accepts for a model (npub_core::Accel names). */
export const ACCELERATORS = [
  'ethos-u55-32',
  'ethos-u55-64',
  'ethos-u55-128',
  'ethos-u55-256',
  'ethos-u65-256',
  'ethos-u65-512',
];

export async function renderModels(main, _args, ctx) {
  const models = await api.get('/models');
  if (!ctx.current()) return;
  const list = table(
    [
      { label: 'Model', cell: (m) => link(m.name, ['models', m.name]) },
      { label: 'Versions', cell: (m) => String(m.versions), class: 'num' },
      {
        label: 'Latest',
        cell: (m) =>
          m.latest_version ? link(m.latest_version, ['models', m.name, 'versions', m.latest_version]) : '—',
      },
      { label: 'Accelerator', cell: (m) => m.accelerator ?? 'any' },
      { label: 'Description', cell: (m) => m.description || '—' },
      { label: 'Created', cell: (m) => [time(m.created_at), ` by ${m.created_by}`] },
    ],
    models,
    { caption: plural(models.length, 'model'), empty: 'No models yet: create one below.' },
  );
  replace(main, h('h1', {}, 'Models'), h('section', { 'aria-label': 'Model list' }, list), newModelForm());
}

function newModelForm() {
  const name = h('input', {
    name: 'name',
    required: true,
    maxlength: '64',
    pattern: '[A-Za-z0-9][A-Za-z0-9._\\-]*',
    autocomplete: 'off',
  });
  const description = h('input', { name: 'description', maxlength: '4096', autocomplete: 'off' });
  const accel = h(
    'select',
    { name: 'accelerator' },
    h('option', { value: '' }, 'any (not fixed)'),
    ACCELERATORS.map((a) => h('option', { value: a }, a)),
  );
  const status = h('div', { 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'card', 'aria-labelledby': 'new-model-title' },
    h('h2', { id: 'new-model-title' }, 'New model'),
    h(
      'div',
      { class: 'row' },
      field('Name', name, 'Letters, digits, . _ - (starts with a letter or digit)'),
      field('Accelerator', accel, 'Every version must be compiled for it'),
    ),
    field('Description', description),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create model')),
    status,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = { name: name.value.trim(), description: description.value };
    if (accel.value) body.accelerator = accel.value;
    try {
      const model = await api.post('/models', body);
      toast(`Model ${model.name} created.`);
      location.hash = route('models', model.name);
    } catch (err) {
      replace(status, errorBox(err));
    }
  });
  return form;
}

export async function renderModel(main, [name], ctx) {
  const [model, versions] = await Promise.all([
    api.get(api.path('models', name)),
    api.all(api.path('models', name, 'versions')),
  ]);
  if (!ctx.current()) return;
  const about = h('div', { class: 'model-facts' });
  const versionList = h('section', { 'aria-labelledby': 'versions-title' });
  const show = (m, list) => {
    replace(about, modelFacts(m));
    replace(versionList, h('h2', { id: 'versions-title' }, 'Versions'), versionsTable(m.name, list));
  };
  show(model, versions);
  // After an upload the model's facts change too (its version count, its latest version).
  const refresh = async () => {
    const [m, list] = await Promise.all([
      api.get(api.path('models', name)),
      api.all(api.path('models', name, 'versions')),
    ]);
    if (ctx.current()) show(m, list);
  };
  replace(
    main,
    h('p', { class: 'crumbs' }, link('Models', ['models']), ' / '),
    h('h1', {}, model.name),
    about,
    uploadPanel(model, refresh),
    versionList,
  );
}

function modelFacts(model) {
  return facts([
    ['Description', model.description || '—'],
    ['Accelerator', model.accelerator ?? 'any'],
    ['Versions', h('span', { class: 'version-count' }, String(model.versions))],
    ['Created', [time(model.created_at), ` by ${model.created_by}`]],
    [
      'Release required',
      model.release_required
        ? 'yes: versions without enough release signatures cannot be deployed or rolled back to'
        : 'no (it is switched on a version page)',
    ],
  ]);
}

/** Newest first: the listing the operator most often wants at the top. */
export function versionsTable(model, versions) {
  return table(
    [
      { label: 'Version', cell: (v) => link(v.version, ['models', model, 'versions', v.version]) },
      { label: 'Size', cell: (v) => size(v.size), class: 'num' },
      { label: 'Arena', cell: (v) => size(v.arena_bytes), class: 'num' },
      { label: 'Accelerator', cell: (v) => v.accelerator },
      { label: 'Source', cell: (v) => v.source },
      {
        label: 'Released by',
        cell: (v) =>
          v.release_key_ids?.length
            ? v.release_key_ids.map((id, i) => [i ? ', ' : '', h('code', { class: 'key-id' }, id)])
            : '—',
      },
      { label: 'Uploaded by', cell: (v) => v.uploaded_by },
      { label: 'Uploaded', cell: (v) => time(v.created_at) },
    ],
    [...versions].reverse(),
    { caption: plural(versions.length, 'version'), empty: 'No versions yet.', className: 'versions' },
  );
}
