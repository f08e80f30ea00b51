// One version: what `npub inspect` shows (annotated header, region table, arena, checksum), the
// IO bindings, the command-stream verifier's summary, digests and the signing key.

import * as api from './api.js';
import { h, replace, link, facts, field, wideTable, errorBox, toast, route } from './dom.js';
import { bytes, time, digest, hex32, plural } from './format.js';
import { confirmAction } from './dialog.js';

export async function renderVersion(main, [model, version], ctx) {
  const [v, keys, release, m] = await Promise.all([
    api.get(api.path('models', model, 'versions', version)),
    api.get('/keys').catch(() => null),
    api.releaseInfo(model, version),
    api.get(api.path('models', model)),
  ]);
  if (!ctx.current()) return;
  const report = v.report ?? {};
  const actionsStatus = h('div', { 'aria-live': 'polite' });
  const download = h('button', { type: 'button' }, 'Download .npub');
  download.addEventListener('click', async () => {
    try {
      await api.downloadPack(v.model, v.version);
    } catch (err) {
      replace(actionsStatus, errorBox(err));
    }
  });
  const remove = h('button', { type: 'button', class: 'danger' }, 'Delete version…');
  remove.addEventListener('click', async () => {
    const ok = await confirmAction({
      title: `Delete ${v.model} ${v.version}?`,
      body: h('p', {}, 'The pack is removed from the store unless another version shares it. A version that a deployment uses cannot be deleted.'),
      confirm: 'Delete version',
      danger: true,
    });
    if (!ok) return;
    try {
      await api.del(api.path('models', v.model, 'versions', v.version));
      toast(`Deleted ${v.model} ${v.version}.`);
      location.hash = route('models', v.model);
    } catch (err) {
      replace(actionsStatus, errorBox(err));
    }
  });
  const deployHref = `#/deploy?model=${encodeURIComponent(v.model)}&version=${encodeURIComponent(v.version)}`;

  replace(
    main,
    h('p', { class: 'crumbs' }, link('Models', ['models']), ' / ', link(v.model, ['models', v.model]), ' / '),
    h('h1', {}, `${v.model} ${v.version}`),
    h(
      'div',
      { class: 'actions left' },
      h('a', { class: 'button primary', href: deployHref }, 'Deploy this version'),
      download,
      remove,
    ),
    actionsStatus,
    v.warnings?.length
      ? h('div', { class: 'notice warnings', role: 'note' }, h('p', {}, 'The Vela import warned:'), h('ul', {}, v.warnings.map((w) => h('li', {}, w))))
      : null,
    v.identical_to?.length
      ? h('p', { class: 'notice identical' }, `Byte-identical to ${v.identical_to.map((x) => `${v.model} ${x}`).join(', ')} (same SHA-256).`)
      : null,
    h('section', { 'aria-labelledby': 'summary-title' }, h('h2', { id: 'summary-title' }, 'Summary'), summary(v, keys)),
    h('section', { 'aria-labelledby': 'proof-title', class: 'proof' }, h('h2', { id: 'proof-title' }, 'Proof against the source model'), proofSection(v)),
    h('section', { 'aria-labelledby': 'release-title', class: 'release' }, h('h2', { id: 'release-title' }, 'Release'), releaseSection(v, release, m, ctx)),
    h('section', { 'aria-labelledby': 'header-title' }, h('h2', { id: 'header-title' }, 'Header'), headerTable(report)),
    h('section', { 'aria-labelledby': 'regions-title' }, h('h2', { id: 'regions-title' }, 'Regions'), regionTable(report), inspectFooter(report)),
    h('section', { 'aria-labelledby': 'io-title' }, h('h2', { id: 'io-title' }, 'IO bindings'), ioTable(v)),
    h('section', { 'aria-labelledby': 'stream-title' }, h('h2', { id: 'stream-title' }, 'Command stream'), streamSummary(v.stream, report.regions ?? [])),
  );
}

function summary(v, keys) {
  const active = keys?.active;
  return facts([
    ['Size', bytes(v.size)],
    ['Arena', bytes(v.arena_bytes)],
    ['Accelerator', `${v.accelerator} (accel word ${v.accel_word})`],
    ['Regions', String(v.region_count)],
    ['Checksum', v.checksum],
    ['SHA-256', digest(v.sha256)],
    ['Uploaded', [time(v.created_at), ` by ${v.uploaded_by}`]],
    ['Source', `${v.source}, ${bytes(v.source_size)}`],
    ['Source SHA-256', digest(v.source_sha256)],
    ['IO digest', v.io_digest ? digest(v.io_digest) : 'no IO bindings'],
    [
      'Signing key',
      active
        ? [h('code', { class: 'key-id' }, active.key_id), ' — manifests for deployments of this version are signed with it']
        : 'not visible to this token',
    ],
  ]);
}

/** The badge text of each proof status (`catalog/proof.rs`). */
const PROOF_BADGE = { bit_exact: 'bit-exact', diverged: 'diverged', not_run: 'not run' };

/**
 * The proof that the pack computes what its source model computes: the verdict, one line per
 * output (or why it was not run), where an output diverged, and the golden vector a device's
 * self-test reproduces.
 */
function proofSection(v) {
  const p = v.proof;
  const golden = v.golden
    ? facts([
        ['Golden input', `${bytes(v.golden.input_bytes)}, SHA-256 ${v.golden.input_sha256}`],
        ['Golden output SHA-256', digest(v.golden.output_sha256)],
        ['Self-test record SHA-256', v.golden.selftest_sha256 ? digest(v.golden.selftest_sha256) : 'input too large for a record'],
      ])
    : h('p', { class: 'empty' }, 'No golden vector: the functional model cannot run this pack.');
  if (!p) {
    return h(
      'div',
      {},
      h('p', { class: 'empty no-proof' }, 'Not proven: the upload came without its source model (multipart part source).'),
      golden,
    );
  }
  const diverged = (p.report?.outputs ?? []).filter((o) => o.divergence);
  return h(
    'div',
    {},
    h('p', {}, h('span', { class: `badge proof-${p.status}` }, PROOF_BADGE[p.status] ?? p.status)),
    h('ul', { class: 'proof-summary' }, p.summary.split('\n').map((l) => h('li', {}, l))),
    diverged.length
      ? wideTable(
          ['Output', 'Input set', 'First differing element', 'Reference', 'Pack', 'Largest difference', 'NPU operation'],
          diverged.map((o) => [
            `${o.index} (${o.name})`,
            String(o.divergence.input),
            String(o.divergence.index),
            String(o.divergence.expected),
            String(o.divergence.got),
            String(o.divergence.max_abs_diff),
            o.divergence.operation ? `${o.divergence.operation} at command offset ${o.divergence.command_offset}` : '—',
          ]),
          { caption: 'Where each diverging output first differs', className: 'proof-divergence' },
        )
      : null,
    p.status === 'diverged'
      ? h('p', { class: 'notice warnings', role: 'note' }, 'Deploying or rolling back to this version needs an explicit override (override_proof), which is audited.')
      : null,
    golden,
  );
}

/** The header as `npub inspect` prints it: Bytes | Hex | Field | Decoded. */
function headerTable(report) {
  const rows = (report.header ?? []).map((f) => [f.bytes, h('code', {}, f.hex), f.field, f.decoded]);
  if (rows.length === 0) return h('p', { class: 'empty' }, 'No header report.');
  return wideTable(['Bytes', 'Hex', 'Field', 'Decoded'], rows, { caption: 'NPU1 header (32 bytes, little-endian)', className: 'header-table' });
}

/** Regions as `npub inspect` prints them: # | Role | Flags | Kind | Size | Data offset. */
function regionTable(report) {
  const regions = report.regions ?? [];
  if (regions.length === 0) return h('p', { class: 'empty' }, 'No regions.');
  const rows = regions.map((r) => {
    const baked = (r.flags & 1) === 1;
    return [
      String(r.index),
      r.role,
      h('code', {}, hex32(r.flags)),
      baked ? 'BAKED' : 'RUNTIME',
      h('span', { class: 'num' }, String(r.size)),
      baked ? String(r.data_offset) : '-',
    ];
  });
  return wideTable(['#', 'Role', 'Flags', 'Kind', 'Size', 'Data offset'], rows, {
    caption: 'Region table (index = BASEPn; role is informational)',
    className: 'region-table',
  });
}

function inspectFooter(report) {
  const lines = [];
  if (report.arena_bytes !== undefined) {
    lines.push(
      `Arena: ${report.arena_bytes} bytes for any start address` +
        (report.arena_bytes_aligned !== undefined ? ` (${report.arena_bytes_aligned} if the arena is 16-byte aligned)` : ''),
    );
  }
  if (report.checksum) {
    const c = report.checksum;
    lines.push(`Checksum: stored ${hex32(c.stored)}, computed ${hex32(c.computed)}: ${c.ok ? 'ok' : 'MISMATCH'}`);
  }
  lines.push(report.valid ? 'Verdict: valid NPU1 pack' : `Verdict: invalid${report.error ? ` — ${report.error}` : ''}`);
  return h('ul', { class: 'inspect-footer' }, lines.map((l) => h('li', {}, l)));
}

function ioTable(v) {
  const bindings = v.io_bindings?.bindings ?? [];
  if (bindings.length === 0) return h('p', { class: 'empty' }, 'This version declares no IO bindings.');
  const rows = bindings.map((b) => [
    b.kind,
    String(b.index),
    b.name ?? '—',
    String(b.region),
    String(b.offset),
    String(b.bytes),
    b.dtype,
    `[${(b.shape ?? []).join(', ')}]`,
    b.scale === undefined ? '—' : String(b.scale),
    b.zero_point === undefined ? '—' : String(b.zero_point),
  ]);
  return wideTable(['Kind', 'Index', 'Name', 'Region', 'Offset', 'Bytes', 'Type', 'Shape', 'Scale', 'Zero point'], rows, {
    caption: 'Tensors the application reads and writes in the arena',
  });
}

/** BASEP0..BASEP7 (npub_core::format::MAX_BASE_POINTERS). */
const MAX_BASE_POINTERS = 8;

/**
 * `regions_used` is a bit mask (bit n: the stream touches BASEPn), so `3` means regions 0 and 1:
 * shown as the regions it names, and the pack's other regions as untouched, with their sizes.
 */
function regionsUsedText(mask, regions) {
  const used = [];
  for (let i = 0; i < MAX_BASE_POINTERS; i += 1) if ((Number(mask) >>> i) & 1) used.push(i);
  const names = used.map((i) => `BASEP${i}`).join(', ');
  const idle = regions.filter((r) => !used.includes(r.index)).map((r) => `BASEP${r.index} (${plural(r.size, 'byte')})`);
  return (
    `${regions.length ? `${used.length} of ${plural(regions.length, 'region')}` : plural(used.length, 'region')}` +
    (names ? `: ${names}` : '') +
    (idle.length ? `; not touched: ${idle.join(', ')}` : '')
  );
}

function streamSummary(stream, regions) {
  if (!stream || typeof stream !== 'object') return h('p', { class: 'empty' }, 'No command-stream summary.');
  const ops = Object.entries(stream.ops ?? {})
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  const spans = (stream.spans ?? [])
    .map((s, i) => (s ? [`BASEP${i}`, `[${s.start}, ${s.end})`, String(s.end - s.start)] : null))
    .filter(Boolean);
  return h(
    'div',
    {},
    facts([
      ['Commands', String(stream.commands ?? '—')],
      ['Operations', ops || '—'],
      ['Regions used', stream.regions_used === undefined ? '—' : h('span', { class: 'regions-used' }, regionsUsedText(stream.regions_used, regions))],
      ['SHRAM', stream.shram === null || stream.shram === undefined ? 'not configured by the stream' : JSON.stringify(stream.shram)],
    ]),
    spans.length
      ? wideTable(['Region', 'Accessed span', 'Bytes'], spans, { caption: 'Bytes the stream reads or writes, per region' })
      : null,
  );
}

/**
 * Who released the version (the key ids of its release signatures, k of the model's rule), a
 * form to attach a bundle (`npub release sign`'s PACK.release), and the model's policy.
 */
function releaseSection(v, release, m, ctx) {
  const status = h('div', { 'aria-live': 'polite', class: 'release-status' });
  const rerender = () => {
    if (ctx.current()) location.hash = route('models', v.model, 'versions', v.version) + `?t=${Date.now()}`;
  };
  const who = release
    ? facts([
        [
          'Released by',
          h(
            'ul',
            { class: 'release-keys' },
            release.signatures.map((s) =>
              h(
                'li',
                {},
                h('code', { class: 'key-id' }, s.key_id),
                ' signed ',
                time(s.signed_at),
                s.revoked ? ' — revoked: devices refuse it' : s.known ? '' : ' — key unknown to this server (verified by devices)',
              ),
            ),
          ),
        ],
        [
          'Signatures',
          release.policy_keys.length
            ? `${release.signatures.length}; the model's policy needs ${release.threshold} of its ${plural(release.policy_keys.length, 'key')} (${release.policy_keys.join(', ')})`
            : `${release.signatures.length} (the rule needs ${release.threshold}: ${release.rule})`,
        ],
        ['Meets the rule', release.meets_rule ? 'yes' : `no — ${release.problem}`],
      ])
    : h('p', { class: 'empty unreleased' }, 'Nobody has released this version: no release signatures are stored.');

  const file = h('input', { type: 'file', name: 'release', accept: '.release,application/octet-stream', required: true });
  const attach = h(
    'form',
    { class: 'attach-release' },
    field('Release signatures', file, 'The PACK.release file that npub release sign writes; merged with the ones stored.'),
    h('div', { class: 'actions left' }, h('button', { type: 'submit' }, 'Attach signatures')),
  );
  attach.addEventListener('submit', async (e) => {
    e.preventDefault();
    const chosen = file.files?.[0];
    if (!chosen) return;
    try {
      const info = await api.attachRelease(v.model, v.version, chosen);
      toast(`Stored ${plural(info.signatures.length, 'release signature')} for ${v.model} ${v.version}.`);
      rerender();
    } catch (err) {
      replace(status, errorBox(err));
    }
  });

  const required = h('input', { type: 'checkbox', name: 'release_required', checked: m.release_required });
  required.addEventListener('change', async () => {
    try {
      const r = await api.patch(api.path('models', v.model), { release_required: required.checked });
      replace(
        status,
        r.warning ? h('p', { class: 'notice warnings', role: 'note' }, r.warning) : null,
      );
      toast(r.release_required ? `${v.model} now requires released versions.` : `${v.model} no longer requires released versions.`);
    } catch (err) {
      required.checked = !required.checked;
      replace(status, errorBox(err));
    }
  });
  const policy = h(
    'div',
    { class: 'field checkbox' },
    h('label', {}, required, ` Release required for ${v.model}: a version without enough release signatures cannot be deployed or rolled back to`),
  );
  return h('div', {}, who, attach, policy, status);
}
