// The REST API, as the UI uses it: the operator token, JSON requests, uploads with progress.
//
// The token lives in sessionStorage: it survives a reload but not closing the tab, and no other
// site can read it. It is sent only as `Authorization: Bearer` to this origin (relative URLs).

import { saveBlob } from './dom.js';

const TOKEN_KEY = 'npub.token';
const API = '/api/v1';

/** An API failure: HTTP status, the server's stable `error` code and its `detail` for people. */
export class ApiError extends Error {
  constructor(status, code, detail) {
    super(detail);
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** Called with the error when any request is answered 401 (the token was revoked or is wrong). */
let onUnauthorized = () => {};
export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

async function errorOf(response) {
  let code = `http_${response.status}`;
  let detail = response.statusText || `HTTP ${response.status}`;
  try {
    const body = await response.json();
    if (body && typeof body.detail === 'string') detail = body.detail;
    if (body && typeof body.error === 'string') code = body.error;
  } catch {
    // Not JSON (a proxy's page): keep the status line.
  }
  return new ApiError(response.status, code, detail);
}

/**
 * `method` `path` (under /api/v1) with an optional JSON `body`; resolves to the parsed JSON (or
 * null for 204), rejects with an ApiError. `opts.token` overrides the stored token (sign-in);
 * `opts.idempotencyKey` is sent as `Idempotency-Key` (see `submission`).
 */
export async function request(method, path, body, opts = {}) {
  const headers = { Accept: 'application/json' };
  const secret = opts.token ?? token();
  if (secret) headers.Authorization = `Bearer ${secret}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (opts.idempotencyKey) headers['Idempotency-Key'] = opts.idempotencyKey;
  let response;
  try {
    response = await fetch(API + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
      signal: opts.signal,
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network', `the server did not answer (${e.message})`);
  }
  if (!response.ok) {
    const err = await errorOf(response);
    if (response.status === 401 && !opts.token) onUnauthorized(err);
    throw err;
  }
  if (response.status === 204) return null;
  const type = response.headers.get('Content-Type') ?? '';
  return type.includes('json') ? response.json() : response.blob();
}

export const get = (path, opts) => request('GET', path, undefined, opts);
export const post = (path, body, opts) => request('POST', path, body, opts);
export const del = (path, opts) => request('DELETE', path, undefined, opts);
export const patch = (path, body, opts) => request('PATCH', path, body, opts);

/** 128 random bits as hex: an Idempotency-Key (crypto.randomUUID needs a secure context). */
function newKey() {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * One submission of a form that creates something (a deployment, a rollback, devices, a
 * version): `key(what)` is the Idempotency-Key to send, the same for every attempt at the same
 * `what` (so a retry after a lost answer, or a second click, is answered with the first result
 * instead of running twice) and a new one when `what` changes or after `done()`.
 */
export function submission() {
  let key = null;
  let sent = null;
  return {
    key(what) {
      const s = JSON.stringify(what ?? null);
      if (key === null || s !== sent) {
        key = newKey();
        sent = s;
      }
      return key;
    },
    done() {
      key = null;
      sent = null;
    },
  };
}

/** `/a/b` from segments, each URI-encoded. */
export function path(...parts) {
  return '/' + parts.map((p) => encodeURIComponent(String(p))).join('/');
}

/** `?k=v&…` from the defined, non-empty entries of `params`. */
/**
 * Every item of a paged listing (`{items, next_cursor}`), following its cursors: for listings
 * that stay short (a model's versions), not for the fleet.
 */
export async function all(path, params = {}) {
  const items = [];
  let cursor;
  do {
    const page = await get(`${path}${query({ ...params, limit: 1000, cursor })}`);
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor);
  return items;
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

/**
 * Uploads `file` as version `version` of `model`, reporting progress as `onProgress(loaded,
 * total)`. The raw file is the body, or, when `io` (an IO-bindings JSON file) or `release` (the
 * release bundle `npub release sign` writes) is given, a multipart form with parts `pack`, `io`
 * and `release`. XMLHttpRequest because fetch cannot report upload
 * progress. `idempotencyKey` is sent as `Idempotency-Key` (see `submission`). Returns
 * `{ promise, abort }`.
 */
export function upload(model, version, file, io, onProgress, idempotencyKey, release = null) {
  const xhr = new XMLHttpRequest();
  const promise = new Promise((resolve, reject) => {
    xhr.open('POST', API + path('models', model, 'versions', version));
    xhr.setRequestHeader('Authorization', `Bearer ${token()}`);
    if (idempotencyKey) xhr.setRequestHeader('Idempotency-Key', idempotencyKey);
    xhr.setRequestHeader('Accept', 'application/json');
    xhr.responseType = 'text';
    xhr.upload.addEventListener('progress', (e) => {
      if (e.lengthComputable) onProgress(e.loaded, e.total);
    });
    xhr.addEventListener('load', () => {
      let body = null;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        body = null;
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        resolve(body);
        return;
      }
      const err = new ApiError(
        xhr.status,
        body?.error ?? `http_${xhr.status}`,
        body?.detail ?? (xhr.statusText || `HTTP ${xhr.status}`),
      );
      if (xhr.status === 401) onUnauthorized(err);
      reject(err);
    });
    xhr.addEventListener('error', () =>
      reject(new ApiError(0, 'network', 'the upload was interrupted (the connection failed)')),
    );
    xhr.addEventListener('abort', () => reject(new ApiError(0, 'aborted', 'the upload was cancelled')));
    if (io || release) {
      const form = new FormData();
      form.append('pack', file, file.name);
      if (io) form.append('io', io, io.name);
      if (release) form.append('release', release, release.name);
      xhr.send(form);
    } else {
      xhr.setRequestHeader('Content-Type', 'application/octet-stream');
      xhr.send(file);
    }
  });
  return { promise, abort: () => xhr.abort() };
}

/**
 * Attaches release signatures (the NPRB bundle `npub release sign` writes, a File or Blob) to a
 * version: merged with the ones stored. Resolves to the stored bundle's JSON view.
 */
export async function attachRelease(model, version, bundle) {
  let response;
  try {
    response = await fetch(API + path('models', model, 'versions', version, 'release-signatures'), {
      method: 'POST',
      headers: {
        Accept: 'application/json',
        Authorization: `Bearer ${token()}`,
        'Content-Type': 'application/octet-stream',
      },
      body: bundle,
      cache: 'no-store',
    });
  } catch (e) {
    throw new ApiError(0, 'network', `the server did not answer (${e.message})`);
  }
  if (!response.ok) {
    const err = await errorOf(response);
    if (response.status === 401) onUnauthorized(err);
    throw err;
  }
  return response.json();
}

/** A version's release signatures as JSON (key ids, k of the model's rule), or null: none. */
export async function releaseInfo(model, version) {
  try {
    return await get(path('models', model, 'versions', version, 'release-signatures'));
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return null;
    throw e;
  }
}

/** Fetches `apiPath` (under /api/v1) with the token and hands it to the browser as `filename`. */
export async function downloadAs(apiPath, filename) {
  saveBlob(await get(apiPath), filename);
}

/** A version's pack, as `<model>-<version>.npub`. */
export function downloadPack(model, version) {
  return downloadAs(path('models', model, 'versions', version, 'npub'), `${model}-${version}.npub`);
}

/** A signing key's trust file, as `<key id>.key.pub`: what `device-agent --trust` reads. */
export function downloadTrust(keyId) {
  return downloadAs(path('keys', keyId, 'trust'), `${keyId}.key.pub`);
}

/** The root key's public file, as `root-<key id>.key.pub`: what `device-agent --root` reads. */
export function downloadRootTrust(rootKeyId) {
  return downloadAs(path('keys', 'root', 'trust'), `root-${rootKeyId}.key.pub`);
}

/** Rotates the signing key; `revokePrevious` revokes the key it replaces in the same record. */
export function rotateKey(revokePrevious) {
  return post('/keys/rotate', { revoke_previous: revokePrevious });
}

/** Revokes a retired signing key: devices refuse the manifests it signed, for good. */
export function revokeKey(keyId) {
  return post(path('keys', keyId, 'revoke'));
}

/**
 * Who the token belongs to, as far as the API tells: `admin` when it may list tokens,
 * `operator` when that is forbidden.
 */
export async function role() {
  try {
    await get('/tokens');
    return 'admin';
  } catch (e) {
    if (e instanceof ApiError && e.status === 403) return 'operator';
    throw e;
  }
}
