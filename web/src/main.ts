// The portal's shell: sign-in with a token, navigation by hash routes (#/queue, #/jobs/17, ...), the
// error banner, and polling (every 2 s) of the current view without reloading the page.
import './style.css';
import { ApiError, get, setToken, setUnauthenticatedHandler, token, type Me } from './api';
import { h, replace } from './dom';
import { canSubmit, loadQueues, session } from './session';
import type { View } from './view';
import { banner, clearError } from './notice';
import { queueView } from './views/queue';
import { jobView } from './views/job';
import { submitView } from './views/submit';
import { clusterView } from './views/cluster';
import { queuesView } from './views/queues';
import { utilisationView } from './views/utilisation';
import { chargebackView } from './views/chargeback';

const POLL_MS = 2000;
const app = document.getElementById('app')!;
let current: View | null = null;
let timer: number | undefined;
let polling: View | null = null;  // the view whose refresh is in flight

interface Route { path: string; label: string; show: () => boolean; make: (arg: string) => View }
const routes: Route[] = [
  { path: 'queue', label: 'Queue', show: () => true, make: (arg) => queueView(arg) },
  { path: 'submit', label: 'Submit', show: () => canSubmit(), make: () => submitView() },
  { path: 'cluster', label: 'Cluster map', show: () => true, make: () => clusterView() },
  { path: 'queues', label: 'Queues', show: () => true, make: () => queuesView() },
  { path: 'utilisation', label: 'Utilisation', show: () => true, make: () => utilisationView() },
  { path: 'chargeback', label: 'Chargeback', show: () => true, make: () => chargebackView() },
  { path: 'jobs', label: 'Job', show: () => false, make: (arg) => jobView(arg) },
];

// ---- sign in --------------------------------------------------------------------------------------
function signInPage(message = ''): void {
  stop();
  const input = h('input', { id: 'token', type: 'password', placeholder: 'tsr_…', autocomplete: 'off', size: 48 });
  const err = h('div', { class: 'error', id: 'signin-error' }, message);
  const form = h('form', { class: 'signin card', onsubmit: async (ev: Event) => {
    ev.preventDefault();
    const t = input.value.trim();
    if (!t) return;
    try {
      const me = await (await fetch('/api/v1/whoami', { headers: { Authorization: `Bearer ${t}` } })).json();
      if (me.error) throw new ApiError(401, me.error.code, me.error.message);
      setToken(t);
      await start(me as Me);
    } catch (e) {
      replace(err, e instanceof ApiError ? e.describe() : String(e));
    }
  } },
    h('h1', {}, 'Tessera'),
    h('p', {}, 'Sign in with your API token (an admin creates one with ', h('code', {}, 'POST /api/v1/tokens'), '; the first admin token is in ', h('code', {}, 'DATA_DIR/admin.token'), ').'),
    h('label', {}, 'Token ', input), ' ', h('button', { type: 'submit', id: 'signin' }, 'Sign in'), err);
  replace(app, form);
  input.focus();
}

function signOut(message = ''): void {
  setToken(null);
  session.me = null;
  signInPage(message);
}

// ---- the shell --------------------------------------------------------------------------------------
const nav = h('nav', { class: 'nav' });
const main = h('main', { id: 'view' });
const status = h('span', { id: 'poll-status', class: 'muted' });

function renderShell(): void {
  const me = session.me!;
  replace(nav, h('span', { class: 'brand' }, 'Tessera'),
    routes.filter((r) => r.show()).map((r) => h('a', { href: `#/${r.path}`, 'data-route': r.path }, r.label)),
    h('span', { class: 'spacer' }),
    status,
    h('span', { id: 'whoami', class: 'who' }, `${me.user} · ${me.role}${me.queue ? ` · ${me.queue}` : ''}`),
    h('button', { id: 'signout', class: 'link', onclick: () => signOut() }, 'Sign out'));
  replace(app, h('header', {}, nav), banner, main);
}

function stop(): void {
  if (timer !== undefined) window.clearInterval(timer);
  timer = undefined;
  current?.dispose?.();
  current = null;
}

async function poll(): Promise<void> {
  if (!current?.refresh || polling === current || document.hidden) return;  // no polling in a hidden tab
  const view = current;
  polling = view;
  try {
    await view.refresh!();
    if (view === current) replace(status, `updated ${new Date().toLocaleTimeString()}`);
  } catch (e) {
    if (view === current) replace(status, h('span', { class: 'error' }, e instanceof ApiError ? e.describe() : String(e)));
  } finally {
    if (polling === view) polling = null;
  }
}

function route(): void {
  if (!session.me) return;
  stop();
  clearError();
  const [, path = 'queue', arg = ''] = location.hash.split('/');
  const r = routes.find((x) => x.path === path && (x.show() || x.path === 'jobs')) ?? routes[0];
  for (const a of nav.querySelectorAll('a')) a.classList.toggle('active', a.getAttribute('data-route') === r.path);
  current = r.make(decodeURIComponent(arg));
  replace(main, current.el);
  replace(status, '');
  void poll();
  if (current.refresh) timer = window.setInterval(() => void poll(), current.pollMs ?? POLL_MS);
}

async function start(me: Me): Promise<void> {
  session.me = me;
  await loadQueues();
  renderShell();
  if (!location.hash) location.hash = '#/queue';
  else route();
}

window.addEventListener('hashchange', route);
document.addEventListener('visibilitychange', () => void poll());
setUnauthenticatedHandler(() => signOut('Your token is no longer valid; sign in again.'));

// A path the server fell back on (/jobs/17) becomes the hash route (#/jobs/17).
if (location.pathname !== '/' && !location.hash) history.replaceState(null, '', `/#${location.pathname}`);

(async () => {
  if (!token()) return signInPage();
  try {
    await start(await get<Me>('/api/v1/whoami'));
  } catch (e) {
    signOut(e instanceof ApiError ? e.describe() : String(e));
  }
})();
