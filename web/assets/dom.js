// Building the page from data without ever parsing data as HTML.
//
// Every string that reaches the page goes through `h()` as a child (a Text node) or an attribute
// value (setAttribute), so a model name such as `<img onerror=…>` is shown, never run. There is
// no helper that takes markup.

/** Creates an element. `attrs`: `class`, `on<event>` handlers, `dataset`, booleans, strings. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'value') el.value = value;
    else if (value === true) el.setAttribute(key, '');
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

/** Appends children: nodes as they are, anything else as text. */
export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** Empties `el` and fills it with `children`. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** A link inside the app: `parts` are path segments, each URI-encoded. */
export function link(text, parts, attrs = {}) {
  return h('a', { href: route(...parts), ...attrs }, text);
}

/** `#/a/b%2Fc` from `a`, `b/c`. */
export function route(...parts) {
  return '#/' + parts.map((p) => encodeURIComponent(String(p))).join('/');
}

let nextId = 0;
/** A page-unique id for label/aria wiring. */
export function uid(prefix) {
  nextId += 1;
  return `${prefix}-${nextId}`;
}

/** A labelled form field: `<div class=field><label/>control<small hint/></div>`. */
export function field(label, control, hint) {
  const id = control.id || uid('f');
  control.id = id;
  const parts = [h('label', { for: id }, label), control];
  if (hint) {
    const hintId = `${id}-hint`;
    control.setAttribute('aria-describedby', hintId);
    parts.push(h('small', { id: hintId, class: 'hint' }, hint));
  }
  return h('div', { class: 'field' }, parts);
}

/**
 * A table that becomes a list of cards on a phone. `columns`: `[{ label, cell(row) -> node|string,
 * class? }]`. Each cell carries its column label (`data-label`) for the narrow layout.
 */
export function table(columns, rows, { caption, empty = 'Nothing yet.', className = '' } = {}) {
  if (rows.length === 0) return h('p', { class: `empty ${className}` }, empty);
  return h(
    'div',
    { class: `table-wrap ${className}` },
    h(
      'table',
      { class: 'cards' },
      caption ? h('caption', {}, caption) : null,
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col', class: c.class }, c.label)))),
      h(
        'tbody',
        {},
        rows.map((row) =>
          h(
            'tr',
            {},
            // One wrapper per cell: on a phone the cell is a two-column grid (label, value).
            columns.map((c) => h('td', { 'data-label': c.label, class: c.class }, h('div', { class: 'cell' }, c.cell(row)))),
          ),
        ),
      ),
    ),
  );
}

/** A wide table that scrolls sideways inside its own box (hex dumps, region tables). */
export function wideTable(headers, rows, { caption, className = '' } = {}) {
  return h(
    'div',
    { class: `scroll-x ${className}`, tabindex: '0', role: 'region', 'aria-label': caption ?? 'table' },
    h(
      'table',
      { class: 'plain' },
      caption ? h('caption', {}, caption) : null,
      h('thead', {}, h('tr', {}, headers.map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c))))),
    ),
  );
}

/** A definition list from `[term, value]` pairs (values: nodes or text). */
export function facts(pairs, className = 'facts') {
  return h(
    'dl',
    { class: className },
    pairs.filter(Boolean).map(([term, value]) => [h('dt', {}, term), h('dd', {}, value ?? '—')]),
  );
}

/** An alert box for an error, with the server's code and detail when there are any. */
export function errorBox(err) {
  const detail = err?.detail ?? err?.message ?? String(err);
  return h(
    'div',
    { class: 'error', role: 'alert' },
    err?.code ? h('strong', {}, `${err.code}: `) : null,
    h('span', { class: 'detail' }, detail),
  );
}

/** Shows a short message in the polite live region. */
export function toast(message) {
  const box = document.getElementById('toast');
  box.textContent = message;
  box.classList.add('shown');
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => box.classList.remove('shown'), 4000);
}

/**
 * A one-time secret: a read-only input (selected on focus, so Ctrl+C works too) and a Copy
 * button that says whether the clipboard took it. `attrs` go on the input.
 */
export function secretField(value, label, attrs = {}) {
  const input = h('input', { type: 'text', readonly: true, value, spellcheck: 'false', 'aria-label': label, ...attrs });
  input.classList.add('secret');
  input.addEventListener('focus', () => input.select());
  const copy = h('button', { type: 'button', class: 'small copy', 'aria-label': `Copy ${label}` }, 'Copy');
  copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(value);
      copy.textContent = 'Copied';
    } catch {
      // No clipboard access (an insecure origin, a denied permission): leave it selected.
      input.focus();
      input.select();
      copy.textContent = 'Press Ctrl+C';
    }
  });
  return h('div', { class: 'row tight secret-row' }, input, copy);
}

/** Hands `blob` to the browser's download as `filename`. */
export function saveBlob(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** RFC 4180 CSV from rows of strings (CRLF, fields quoted when they need it). */
export function csv(rows) {
  const cell = (v) => {
    const s = String(v ?? '');
    return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
  };
  return rows.map((r) => r.map(cell).join(',')).join('\r\n') + '\r\n';
}
