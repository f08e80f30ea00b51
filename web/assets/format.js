// How numbers, sizes and times are shown.

const UNITS = ['bytes', 'KiB', 'MiB', 'GiB'];

/**
 * A count with its noun: `plural(1, 'device')` → `1 device`, `plural(2, 'entry', 'entries')` →
 * `2 entries`. The one place the UI pluralises, so that no view says "1 tokens" or "device(s)".
 */
export function plural(n, one, many = `${one}s`) {
  const k = Number(n);
  return `${k.toLocaleString('en')} ${noun(k, one, many)}`;
}

/** The noun alone, agreeing with `n`: `1 of ${n} ${noun(n, 'device')}` reads `1 of 1 device`. */
export function noun(n, one, many = `${one}s`) {
  return Number(n) === 1 ? one : many;
}

/** `135824` → `132.6 KiB (135,824 bytes)`; small values stay in bytes. */
export function bytes(n) {
  if (n === null || n === undefined) return '—';
  const exact = plural(n, 'byte');
  if (n < 1024) return exact;
  let v = n;
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u += 1;
  }
  return `${v.toFixed(1)} ${UNITS[u]} (${exact})`;
}

/** A compact size for tables: `132.6 KiB`. */
export function size(n) {
  if (n === null || n === undefined) return '—';
  if (n < 1024) return `${n} B`;
  let v = n;
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u += 1;
  }
  return `${v.toFixed(1)} ${UNITS[u]}`;
}

/** An RFC 3339 time as the reader's local date and time, with the exact value on hover. */
export function time(rfc3339) {
  if (!rfc3339) return '—';
  const d = new Date(rfc3339);
  if (Number.isNaN(d.getTime())) return String(rfc3339);
  const el = document.createElement('time');
  el.dateTime = rfc3339;
  el.title = rfc3339;
  el.textContent = d.toLocaleString('en-GB', {
    year: 'numeric',
    month: 'short',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
  return el;
}

function agoText(rfc3339) {
  const d = new Date(rfc3339);
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  if (Number.isNaN(s)) return String(rfc3339);
  if (s < 5) return 'just now';
  if (s < 90) return `${s} s ago`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min ago`;
  if (s < 36 * 3600) return `${Math.round(s / 3600)} h ago`;
  return d.toLocaleString('en-GB', { year: 'numeric', month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit' });
}

/** "3 min ago" (the exact time on hover); [`refreshAgo`] keeps it current without a re-render. */
export function ago(rfc3339) {
  if (!rfc3339) return 'never';
  const el = document.createElement('time');
  el.dateTime = rfc3339;
  el.title = rfc3339;
  el.dataset.ago = '';
  el.textContent = agoText(rfc3339);
  return el;
}

/** Updates every relative time under `root`. */
export function refreshAgo(root) {
  for (const el of root.querySelectorAll('time[data-ago]')) el.textContent = agoText(el.dateTime);
}

/** A long hex digest, shown whole but breakable. */
export function digest(hex) {
  const el = document.createElement('code');
  el.className = 'digest';
  el.textContent = hex ?? '—';
  return el;
}

/** `0x…` with 8 hex digits. */
export function hex32(n) {
  return `0x${(Number(n) >>> 0).toString(16).padStart(8, '0')}`;
}

/** A percentage with at most one decimal. */
export function percent(fraction) {
  return `${Math.round(fraction * 1000) / 10}%`;
}
