// Uploading a version: drag and drop or the file picker, a progress bar from the upload's own
// progress events, and the server's verdict (its validation message when it refuses).

import * as api from './api.js';
import { h, replace, field, errorBox, link, toast } from './dom.js';
import { bytes } from './format.js';

/** What the server accepts (it recognises the format by content; this only catches mistakes). */
const ACCEPTED = /(\.npub|\.tflite|\.npz)$/i;

/** Suggests the next version after the latest: `1.2.0` → `1.2.1`; otherwise empty. */
function nextVersion(latest) {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(latest ?? '');
  return m ? `${m[1]}.${m[2]}.${Number(m[3]) + 1}` : latest ? '' : '1.0.0';
}

export function uploadPanel(model, onUploaded) {
  let file = null;
  let io = null;
  let release = null;
  const titleId = 'upload-title';
  const version = h('input', {
    name: 'version',
    required: true,
    maxlength: '32',
    pattern: '[A-Za-z0-9][A-Za-z0-9._+\\-]*',
    autocomplete: 'off',
    value: nextVersion(model.latest_version),
  });
  const picker = h('input', { type: 'file', name: 'pack', id: 'pack-file', accept: '.npub,.tflite,.npz' });
  const chosen = h('span', { class: 'chosen' }, 'No file chosen');
  const zone = h(
    'div',
    { class: 'dropzone' },
    h('p', {}, 'Drop a ', h('code', {}, '.npub'), ', ', h('code', {}, '*_vela.tflite'), ' or ', h('code', {}, '.npz'), ' here, or choose one:'),
    field('Pack file', picker),
    h('p', { 'aria-live': 'polite' }, chosen),
  );
  const ioPicker = h('input', { type: 'file', name: 'io', accept: '.json,application/json' });
  const ioField = field('IO bindings (optional, .npub only)', ioPicker, 'The OUT.io.json that npub pack writes beside a pack; a Vela model carries its own.');
  ioField.hidden = true;
  const releasePicker = h('input', { type: 'file', name: 'release', accept: '.release,application/octet-stream' });
  const releaseField = field(
    'Release signatures (optional)',
    releasePicker,
    'The PACK.release that npub release sign writes for this pack and version; stored with it.',
  );
  const progress = h('progress', { max: '100', value: '0', 'aria-label': 'Upload progress' });
  const progressText = h('span', { class: 'progress-text' }, '');
  const progressRow = h('div', { class: 'progress-row', hidden: true }, progress, progressText);
  const status = h('div', { class: 'upload-status', 'aria-live': 'polite' });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Upload');
  const cancel = h('button', { type: 'button', hidden: true }, 'Cancel upload');
  let inFlight = null;

  /** Forgets the chosen files, so that a stored upload is not one click away from a second one. */
  function clearChoice() {
    file = null;
    io = null;
    release = null;
    picker.value = '';
    ioPicker.value = '';
    releasePicker.value = '';
    chosen.textContent = 'No file chosen';
    ioField.hidden = true;
  }

  function choose(f) {
    if (!f) return;
    if (!ACCEPTED.test(f.name)) {
      clearChoice();
      replace(status, errorBox({ code: 'not_a_pack', detail: `${f.name}: choose a .npub, *_vela.tflite or .npz file` }));
      return;
    }
    file = f;
    chosen.textContent = `${f.name} — ${bytes(f.size)}`;
    ioField.hidden = !/\.npub$/i.test(f.name);
    replace(status);
  }

  picker.addEventListener('change', () => choose(picker.files[0]));
  ioPicker.addEventListener('change', () => {
    io = ioPicker.files[0] ?? null;
  });
  releasePicker.addEventListener('change', () => {
    release = releasePicker.files[0] ?? null;
  });
  for (const type of ['dragenter', 'dragover']) {
    zone.addEventListener(type, (e) => {
      e.preventDefault();
      zone.classList.add('over');
    });
  }
  for (const type of ['dragleave', 'drop']) {
    zone.addEventListener(type, () => zone.classList.remove('over'));
  }
  zone.addEventListener('drop', (e) => {
    e.preventDefault();
    const files = e.dataTransfer?.files;
    if (!files?.length) return;
    // Show the dropped file in the picker too, so the two never disagree.
    try {
      picker.files = files;
    } catch {
      picker.value = '';
    }
    choose(files[0]);
  });
  cancel.addEventListener('click', () => inFlight?.abort());

  const form = h(
    'form',
    { class: 'card upload', 'aria-labelledby': titleId },
    h('h2', { id: titleId }, 'Upload a version'),
    field('Version', version, 'e.g. 1.2.0 — letters, digits, . _ - +'),
    zone,
    ioField,
    releaseField,
    progressRow,
    h('div', { class: 'actions' }, cancel, submit),
    status,
  );

  // Retrying the same file as the same version after a lost answer gets the stored version's
  // answer back, not a 409 for the version the first attempt stored.
  const uploading = api.submission();
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (!file) {
      replace(status, errorBox({ code: 'no_file', detail: 'Choose a file to upload first.' }));
      return;
    }
    const v = version.value.trim();
    submit.disabled = true;
    cancel.hidden = false;
    progressRow.hidden = false;
    progress.value = 0;
    progressText.textContent = '0%';
    replace(status, h('p', {}, `Uploading ${file.name}…`));
    const ioFile = ioField.hidden ? null : io;
    const what = [model.name, v, file.name, file.size, file.lastModified, ioFile?.name, ioFile?.size, release?.name, release?.size];
    inFlight = api.upload(
      model.name,
      v,
      file,
      ioFile,
      (loaded, total) => {
        const pct = total ? Math.round((loaded / total) * 100) : 0;
        progress.value = pct;
        progressText.textContent = `${pct}%`;
      },
      uploading.key(what),
      release,
    );
    try {
      const detail = await inFlight.promise;
      progress.value = 100;
      progressText.textContent = '100%';
      replace(
        status,
        h(
          'p',
          { class: 'ok' },
          'Stored ',
          link(`${detail.model} ${detail.version}`, ['models', detail.model, 'versions', detail.version]),
          ` (${detail.source}, ${bytes(detail.size)}, sha256 ${detail.sha256.slice(0, 12)}…).`,
        ),
        detail.identical_to?.length
          ? h(
              'p',
              { class: 'notice identical' },
              `This pack is byte-identical to ${detail.identical_to.map((x) => `${detail.model} ${x}`).join(', ')}: same SHA-256, nothing in it changed. Deploying it to devices that run that version changes nothing.`,
            )
          : null,
        detail.warnings?.length
          ? h('div', { class: 'notice warnings' }, h('p', {}, 'Stored, with warnings from the Vela import:'), h('ul', {}, detail.warnings.map((w) => h('li', {}, w))))
          : null,
      );
      toast(`Uploaded ${detail.model} ${detail.version}${detail.identical_to?.length ? ` (identical to ${detail.identical_to.join(', ')})` : ''}.`);
      uploading.done();
      model.latest_version = detail.version;
      version.value = nextVersion(detail.version);
      clearChoice();
      await onUploaded();
    } catch (err) {
      progressRow.hidden = true;
      replace(
        status,
        h('p', {}, err.status === 422 ? 'The server refused this file:' : 'The upload failed:'),
        errorBox(err),
      );
      status.scrollIntoView({ block: 'nearest' });
    } finally {
      inFlight = null;
      submit.disabled = false;
      cancel.hidden = true;
    }
  });
  return form;
}
