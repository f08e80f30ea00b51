// The shell: sign-in state, the hash router, focus on navigation.
//
// Routes are URL fragments (`#/models/kws`), so the server serves one page and every view has a
// link that can be bookmarked, opened in a new tab and reached with the Back button.

import * as api from './api.js';
import { h, replace, errorBox } from './dom.js';
import { renderSignIn } from './signin.js';
import { renderModels, renderModel } from './models.js';
import { renderVersion } from './version.js';
import { renderDeploy } from './deploy.js';
import { renderDeployments, renderDeployment } from './deployments.js';
import { renderFleet } from './fleet.js';
import { renderDevice } from './device.js';
import { renderAudit } from './audit.js';
import { renderAdmin } from './admin.js';
import { renderDashboard } from './dashboard.js';
import { renderWebhooks, renderWebhook } from './webhooks.js';

const ROUTES = [
  [/^dashboard$/, renderDashboard, 'Dashboard'],
  [/^models$/, renderModels, 'Models'],
  [/^models\/([^/]+)$/, renderModel, 'Model'],
  [/^models\/([^/]+)\/versions\/([^/]+)$/, renderVersion, 'Version'],
  [/^deploy$/, renderDeploy, 'Deploy'],
  [/^deployments$/, renderDeployments, 'Deployments'],
  [/^deployments\/([^/]+)$/, renderDeployment, 'Deployment'],
  [/^fleet$/, renderFleet, 'Fleet'],
  [/^fleet\/([^/]+)$/, renderDevice, 'Device'],
  [/^audit$/, renderAudit, 'Audit log'],
  [/^admin$/, renderAdmin, 'Tokens and keys'],
  [/^webhooks$/, renderWebhooks, 'Webhooks'],
  [/^webhooks\/([^/]+)$/, renderWebhook, 'Webhook'],
];

/** What every view gets: who is signed in, and a way to register cleanup (timers). */
const session = { role: null, name: null };
let cleanup = [];
let renderCount = 0;

function stopView() {
  for (const fn of cleanup) fn();
  cleanup = [];
  // A dialog belongs to the view that opened it: leaving the view (a link, Back, a typed
  // address) cancels it rather than leaving it over the next view.
  for (const dialog of document.querySelectorAll('dialog[open]')) dialog.close();
}

function splitHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [pathPart, queryPart = ''] = raw.split('?');
  return { path: pathPart, params: new URLSearchParams(queryPart) };
}

function showChrome(signedIn) {
  document.getElementById('nav').hidden = !signedIn;
  document.getElementById('who').hidden = !signedIn;
  document.getElementById('who-name').textContent = signedIn
    ? `Signed in${session.role ? ` (${session.role})` : ''}`
    : '';
}

function markCurrent(path) {
  for (const a of document.querySelectorAll('#nav a')) {
    const target = a.getAttribute('href').slice(2);
    if (path === target || path.startsWith(`${target}/`)) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

async function render() {
  stopView();
  const main = document.getElementById('main');
  const mine = ++renderCount;
  if (!api.token()) {
    showChrome(false);
    renderSignIn(main, { onSignedIn });
    return;
  }
  if (!session.role) {
    try {
      session.role = await api.role();
    } catch (e) {
      if (e.status === 401) return; // whenUnauthorized has taken over
      session.role = 'operator';
    }
  }
  showChrome(true);
  const { path, params } = splitHash();
  const found = ROUTES.map(([re, view, title]) => [path.match(re), view, title]).find(([m]) => m);
  if (!found) {
    if (path === '') {
      location.replace('#/models');
      return;
    }
    markCurrent(path);
    document.title = 'Not found · npub';
    replace(
      main,
      h('h1', { tabindex: '-1' }, 'Not found'),
      h('p', {}, 'There is no page at ', h('code', {}, `#/${path}`), '. It may have been mistyped, or the link is from another version of npub.'),
      h('p', {}, h('a', { href: '#/models' }, 'Go to the models')),
    );
    focusHeading(main);
    return;
  }
  const [match, view, title] = found;
  markCurrent(path);
  document.title = `${title} · npub`;
  const args = match.slice(1).map(decodeURIComponent);
  const ctx = {
    role: session.role,
    params,
    onCleanup: (fn) => cleanup.push(fn),
    /** True while this view is still the one shown (async work checks before touching the page). */
    current: () => mine === renderCount,
  };
  replace(main, h('p', { class: 'loading' }, 'Loading…'));
  try {
    await view(main, args, ctx);
  } catch (e) {
    if (!ctx.current() || e.status === 401) return;
    replace(main, h('h1', { tabindex: '-1' }, title), errorBox(e));
  }
  if (ctx.current()) focusHeading(main);
}

/** After navigation, keyboard and screen-reader focus goes to the new view's heading. */
let firstRender = true;
function focusHeading(main) {
  if (firstRender) {
    firstRender = false;
    return;
  }
  const heading = main.querySelector('h1');
  if (heading) {
    heading.setAttribute('tabindex', '-1');
    heading.focus({ preventScroll: false });
  }
}

function onSignedIn(role) {
  session.role = role;
  firstRender = false;
  if (!location.hash || location.hash === '#' || location.hash === '#/') location.hash = '#/models';
  else render();
}

function signOut(message) {
  stopView();
  api.clearToken();
  session.role = null;
  showChrome(false);
  renderSignIn(document.getElementById('main'), { onSignedIn, message });
  document.title = 'Sign in · npub';
}

// The API's 401 detail is written for curl users; a person needs to know what happened.
api.whenUnauthorized(() => signOut('Signed out: the server no longer accepts this token (it may have been revoked). Sign in again.'));
document.getElementById('sign-out').addEventListener('click', () => signOut('Signed out.'));
window.addEventListener('hashchange', render);
render();
showExposure();

// Plain HTTP on an address other than loopback: tokens and packs cross the network in clear.
// The server says so in /readyz (unauthenticated); the console repeats it on every page.
async function showExposure() {
  try {
    const r = await fetch('/readyz', { headers: { accept: 'application/json' } });
    const warning = (await r.json())?.checks?.transport?.warning;
    if (!warning) return;
    const box = document.getElementById('exposure');
    box.textContent = `Not encrypted: ${warning}`;
    box.hidden = false;
  } catch {
    // No answer: nothing to say about the transport.
  }
}
