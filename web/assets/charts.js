// Charts drawn as SVG by hand: a horizontal bar list and a step-line chart over time. No library
// and nothing loaded from elsewhere (web/README.md says why). Every chart carries its numbers as
// text too (a title for screen readers, a data-* attribute per mark for tests), and colours come
// from the stylesheet's state variables, so dark mode and forced colours apply.

const SVG = 'http://www.w3.org/2000/svg';

/** An SVG element with attributes; children appended (strings as text). */
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined) continue;
    if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/**
 * Horizontal bars, one per `{label, value, kind}` row (kind: a state name for its colour).
 * `title` is the chart's accessible name.
 */
export function barList(rows, { title, width = 420 } = {}) {
  const rowH = 22;
  const labelW = 130;
  const numW = 56;
  const max = Math.max(1, ...rows.map((r) => Number(r.value) || 0));
  const height = Math.max(rowH, rows.length * rowH);
  const svg = s('svg', {
    class: 'chart bars',
    viewBox: `0 0 ${width} ${height}`,
    width: '100%',
    role: 'img',
    'aria-label': `${title}: ${rows.map((r) => `${r.label} ${r.value}`).join(', ') || 'nothing'}`,
  });
  rows.forEach((r, i) => {
    const y = i * rowH;
    const w = ((width - labelW - numW) * (Number(r.value) || 0)) / max;
    svg.append(
      s('g', { class: 'bar-row', dataset: { label: r.label, value: String(r.value) } },
        s('text', { x: labelW - 6, y: y + rowH * 0.7, 'text-anchor': 'end', class: 'label' }, r.label),
        s('rect', { x: labelW, y: y + 3, width: Math.max(w, r.value ? 1 : 0), height: rowH - 6, class: `fill state-${r.kind ?? 'installed'}` }),
        s('text', { x: labelW + w + 4, y: y + rowH * 0.7, class: 'num' }, String(r.value)),
      ),
    );
  });
  return svg;
}

/** `12:04` or `3 Dec 12:04`, for axis ticks. */
function tick(ms, spanMs) {
  const d = new Date(ms);
  const opts = spanMs > 36 * 3600 * 1000
    ? { month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit' }
    : { hour: '2-digit', minute: '2-digit', second: spanMs < 600 * 1000 ? '2-digit' : undefined };
  return d.toLocaleString('en-GB', opts);
}

/**
 * A rollout over time: step lines of installed and failed devices, the failure limit as a dashed
 * line, each batch opening as a vertical rule, holds and aborts as marks, and the completion as a
 * mark of its own at the deployment's `completed_at` (the audit's `deployment.completed` entry is
 * that moment, so it is not drawn again as a hold). `timeline` is
 * `GET /api/v1/deployments/{id}/timeline`'s body.
 *
 * The time axis runs from the first point to the latest of the points, the marks and the
 * completion: a rollout completed by a resume, or a device leaving its group, completes after its
 * last report, and its mark must still fall on the chart. The axis' ends are on the SVG as
 * `data-from-ms` and `data-to-ms`, the completion's time on its mark as `data-at` (as the API
 * wrote it) and `data-at-ms`.
 */
export function timelineChart(timeline, { width = 640, height = 240 } = {}) {
  const pad = { l: 44, r: 12, t: 12, b: 28 };
  const pts = timeline.points ?? [];
  const completedAt = timeline.deployment?.completed_at ?? null;
  const completedMs = completedAt === null ? NaN : Date.parse(completedAt);
  const events = (timeline.events ?? []).filter((e) => e.action !== 'deployment.completed');
  const t0 = pts.length ? pts[0].at_ms : 0;
  const t1 = Math.max(
    t0 + 1000,
    ...pts.map((p) => p.at_ms),
    ...events.map((e) => e.at_ms),
    ...(timeline.batches ?? []).map((b) => b.opened_at_ms ?? t0),
    Number.isFinite(completedMs) ? completedMs : t0,
  );
  const top = Math.max(1, ...pts.map((p) => Math.max(p.installed, p.failed, p.failure_limit, p.offered)));
  const x = (t) => pad.l + ((width - pad.l - pad.r) * (t - t0)) / (t1 - t0);
  const y = (v) => height - pad.b - ((height - pad.t - pad.b) * v) / top;
  const last = pts[pts.length - 1] ?? { installed: 0, failed: 0, failure_limit: 0 };
  const svg = s('svg', {
    class: 'chart rollout-chart',
    viewBox: `0 0 ${width} ${height}`,
    width: '100%',
    role: 'img',
    'aria-label': `Installed and failed devices over time: now ${last.installed} installed, ${last.failed} failed; the failure threshold allows ${Math.floor(last.failure_limit)}` +
      (Number.isFinite(completedMs) ? `; completed ${completedAt}.` : '.'),
    dataset: { installed: String(last.installed), failed: String(last.failed), fromMs: String(t0), toMs: String(t1) },
  });
  // Axes and a few value ticks.
  svg.append(s('line', { x1: pad.l, y1: y(0), x2: width - pad.r, y2: y(0), class: 'axis' }));
  svg.append(s('line', { x1: pad.l, y1: pad.t, x2: pad.l, y2: y(0), class: 'axis' }));
  const step = Math.max(1, Math.ceil(top / 4));
  for (let v = 0; v <= top; v += step) {
    svg.append(s('text', { x: pad.l - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'tick' }, String(v)));
    if (v) svg.append(s('line', { x1: pad.l, y1: y(v), x2: width - pad.r, y2: y(v), class: 'grid' }));
  }
  svg.append(s('text', { x: pad.l, y: height - 8, class: 'tick' }, tick(t0, t1 - t0)));
  svg.append(s('text', { x: width - pad.r, y: height - 8, 'text-anchor': 'end', class: 'tick' }, tick(t1, t1 - t0)));
  // Batch openings.
  for (const b of timeline.batches ?? []) {
    if (b.opened_at_ms === null || b.opened_at_ms === undefined) continue;
    const bx = x(b.opened_at_ms);
    svg.append(
      s('g', { class: 'batch-mark', dataset: { batch: String(b.index + 1) } },
        s('line', { x1: bx, y1: pad.t, x2: bx, y2: y(0), class: 'batch' }),
        s('text', { x: bx + 3, y: pad.t + 10, class: 'tick' }, `batch ${b.index + 1}`),
        s('title', {}, `Batch ${b.index + 1} (${b.percent} %, ${b.devices} devices) opened ${b.opened_at}`),
      ),
    );
  }
  // Holds, resumes, aborts.
  for (const e of events) {
    const ex = x(e.at_ms);
    svg.append(
      s('g', { class: 'event-mark', dataset: { event: e.action } },
        s('line', { x1: ex, y1: pad.t, x2: ex, y2: y(0), class: `event ${e.action.replace('deployment.', '')}` }),
        s('title', {}, `${e.action} by ${e.actor} at ${e.at}`),
      ),
    );
  }
  // The completion: every target succeeded then.
  if (Number.isFinite(completedMs)) {
    const cx = x(completedMs);
    svg.append(
      s('g', { class: 'completion-mark', dataset: { at: completedAt, atMs: String(completedMs) } },
        s('line', { x1: cx, y1: pad.t, x2: cx, y2: y(0), class: 'completed' }),
        s('text', { x: cx - 3, y: pad.t + 24, 'text-anchor': 'end', class: 'tick' }, 'completed'),
        s('title', {}, `Completed ${completedAt}: every target had installed it`),
      ),
    );
  }
  // Step lines: a count holds until the next point, and the last one to the axis' end.
  const steps = (key) => {
    let d = '';
    pts.forEach((p, i) => {
      const px = x(p.at_ms);
      const py = y(p[key]);
      d += i === 0 ? `M${px},${py}` : `H${px}V${py}`;
    });
    return pts.length ? `${d}H${x(t1)}` : d;
  };
  svg.append(s('path', { d: steps('failure_limit'), class: 'line limit', dataset: { series: 'failure_limit' } }, s('title', {}, 'Failure threshold: more failures than this stops the rollout')));
  svg.append(s('path', { d: steps('installed'), class: 'line installed', dataset: { series: 'installed' } }, s('title', {}, 'Installed')));
  svg.append(s('path', { d: steps('failed'), class: 'line failed', dataset: { series: 'failed' } }, s('title', {}, 'Failed')));
  return svg;
}
