#!/usr/bin/env node
// Browser tests of the web portal (docs/portal.md): real Chromium driven by playwright-core against
// the real `tessera server --agentless` binary on a free port, with a temp data dir and
// tests/web/portal_cluster.yaml. Tokens are created through the API. Screenshots go to --artifacts.
//
//   node tests/web/portal.test.mjs --tessera build/bin/tessera [--source .] [--artifacts DIR]
//
// It proves: the page and its assets are served from the binary (types, cache headers, JSON 404s
// kept); a team lead of team-a signs in, gets the API's validation message and field on a bad
// submit, submits a job through the form that pends on the full cluster, sees it in the queue with a
// position, raises its priority and cancels it; a member of team-b sees no cancel/priority buttons on
// that job and gets 403 when forcing the calls from the page; the cluster map marks exactly the GPUs
// of a running 2-task gang (and the MIG slice of a MIG job); an admin cordons (the API's error first)
// and resumes a node there, and the lead's map shows it; the queue updates by polling without a reload; utilisation and chargeback render (real or fixture data), with
// a CSV download; the logs tail continues at X-Tessera-Next-Offset; user text (commands, names echoed
// in API errors, logs) is shown as text, never markup; a viewer gets no Submit view; a bad token is
// refused at sign-in and signing out forgets the token. Slurm workflows: an array is one row with its
// counts by state that expands to its elements; a dependent job's page draws its dependencies (types,
// states, met / waiting / never) and its dependents; hold, release and requeue by buttons (an admin's
// hold refused to the lead with the API's reason; no buttons for another team); a requeued job's
// attempts timeline (where each ran, how long, why it ended) and events in words and local time;
// chargeback with units, a totals row, sorting, the missing-rates hint and empty reports explained.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []));
const source = path.resolve(args.source ?? path.join(here, '../..'));
const tessera = path.resolve(args.tessera ?? path.join(source, 'build/bin/tessera'));
const artifacts = path.resolve(args.artifacts ?? path.join(source, 'build/test-artifacts/portal'));
const chromiumPath = process.env.TESSERA_CHROMIUM ?? '/usr/bin/chromium';

function fail(msg) {
  console.error(`FAIL: ${msg}`);
  process.exit(1);
}
if (!fs.existsSync(chromiumPath))
  fail(`Chromium is not installed at ${chromiumPath}; run scripts/setup.sh (it installs Debian's chromium), or set TESSERA_CHROMIUM`);
if (!fs.existsSync(tessera)) fail(`no tessera binary at ${tessera}; build it first (cmake --build --preset release)`);
let chromium;
try {
  ({ chromium } = createRequire(path.join(source, 'web/package.json'))('playwright-core'));
} catch (e) {
  fail(`playwright-core is missing from web/node_modules (the build runs npm ci there; run scripts/setup.sh and build): ${e.message}`);
}
fs.mkdirSync(artifacts, { recursive: true });
for (const f of fs.readdirSync(artifacts)) if (f.endsWith('.png')) fs.rmSync(path.join(artifacts, f));

const t0 = Date.now();
const log = (m) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${m}`);
function assert(cond, msg) {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
}

// ---- the server -------------------------------------------------------------------------------------
const data = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-portal-'));
const server = spawn(tessera, ['server', '--agentless', '--data', data, '--listen', '127.0.0.1:0',
                               '--config', path.join(here, 'portal_cluster.yaml')], { stdio: ['ignore', 'pipe', 'pipe'] });
let serverOut = '';
server.stderr.on('data', (d) => (serverOut += d));
const base = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error(`the server did not start in 20 s:\n${serverOut}`)), 20000);
  server.stdout.on('data', (d) => {
    serverOut += d;
    const m = /listening on (http:\/\/[0-9.]+:\d+)/.exec(serverOut);
    if (m) { clearTimeout(timer); resolve(m[1]); }
  });
  server.on('exit', (code) => reject(new Error(`the server exited (${code}):\n${serverOut}`)));
}).catch((e) => fail(e.message));
const admin = fs.readFileSync(path.join(data, 'admin.token'), 'utf8').trim();
log(`server at ${base}`);

async function api(method, p, body, token = admin) {
  const res = await fetch(base + p, { method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
                                      body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, json, text, headers: res.headers };
}
async function token(user, role, queue) {
  const r = await api('POST', '/api/v1/tokens', { user, role, queue });
  assert(r.status === 201, `token for ${user}: ${r.text}`);
  return r.json.token;
}
async function submit(spec, tok = admin) {
  const r = await api('POST', '/api/v1/jobs', spec, tok);
  assert(r.status === 201, `submit ${spec.name}: ${r.status} ${r.text}`);
  return r.json;
}

let browser;
let promptAnswer = '';  // what prompt() dialogs are answered
const pageErrors = [];
const foreignRequests = [];  // the page must need nothing but its server
async function newPage() {
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(10000);
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('request', (r) => { if (!/^(data|blob):/.test(r.url()) && !r.url().startsWith(base)) foreignRequests.push(r.url()); });
  page.on('dialog', (d) => d.accept(d.type() === 'prompt' ? promptAnswer : undefined));
  return page;
}
async function signIn(page, tok, user) {
  await page.goto(base + '/');
  await page.fill('#token', tok);
  await page.click('#signin');
  await page.waitForSelector(`#whoami:has-text("${user}")`);
}
const shot = (page, name) => page.screenshot({ path: path.join(artifacts, `${name}.png`), fullPage: true });

let exitCode = 0;
let lastPage = null;
try {
  // ---- static serving: the embedded files, their headers, and the API's 404s kept ------------------
  {
    const index = await fetch(base + '/');
    const html = await index.text();
    assert(index.status === 200 && index.headers.get('content-type').startsWith('text/html'), 'GET / serves index.html');
    assert(index.headers.get('cache-control') === 'no-cache', 'index.html is revalidated');
    assert(!/https?:\/\//.test(html.replace(/http:\/\/www\.w3\.org[^"]*/g, '')), 'index.html loads nothing from another origin');
    const scripts = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]);
    assert(scripts.some((s) => s.endsWith('.js')) && scripts.some((s) => s.endsWith('.css')), `index.html links its assets: ${scripts}`);
    for (const s of scripts) {
      const r = await fetch(base + s);
      const type = r.headers.get('content-type');
      assert(r.status === 200, `${s} is served`);
      assert(s.endsWith('.js') ? type.startsWith('text/javascript') : type.startsWith('text/css'), `${s} has type ${type}`);
      assert(r.headers.get('cache-control').includes('immutable'), `${s} is cached as immutable`);
    }
    const deep = await fetch(base + '/jobs/1');
    assert(deep.status === 200 && deep.headers.get('content-type').startsWith('text/html'), 'a client route falls back to index.html');
    const missing = await fetch(base + '/api/v1/no-such-thing', { headers: { Authorization: `Bearer ${admin}` } });
    assert(missing.status === 404 && (await missing.json()).error.code === 'not_found', 'unknown API paths keep their JSON 404');
    const health = await fetch(base + '/healthz');
    assert(health.status === 200 && (await health.json()).status === 'ok', '/healthz still answers');
    assert((await fetch(base + '/assets/nope.js')).status === 404, 'an unknown asset is 404');
    log('static serving ok');
  }

  // ---- the cluster: tokens, a running gang filling both 4-GPU nodes, a MIG job ----------------------
  const leadTok = await token('lead-a', 'team-lead', 'team-a');
  const bobTok = await token('bob', 'member', 'team-b');
  const viewerTok = await token('vic', 'viewer', '');
  const gang = await submit({ name: 'gang-b', queue: 'team-b', priority_class: 'production-inference', tasks: 2,
                              resources: { gpus: 4 }, command: ['sleep', '3600'] });
  const migJob = await submit({ name: 'mig-b', queue: 'team-b', resources: { mig: '3g.40gb' }, command: ['sleep', '3600'] });
  let gangDetail;
  for (let i = 0; i < 50; i++) {
    gangDetail = (await api('GET', `/api/v1/jobs/${gang.id}`)).json;
    if (gangDetail.state === 'running' && (await api('GET', `/api/v1/jobs/${migJob.id}`)).json.state === 'running') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert(gangDetail.state === 'running', `the gang runs (state ${gangDetail.state}: ${gangDetail.reason})`);
  const expectedCells = new Set(gangDetail.placement.flatMap((p) => p.gpus.map((g) => `${p.node}/${g}`)));
  assert(expectedCells.size === 8, `the gang holds 8 GPUs: ${[...expectedCells]}`);
  log(`gang ${gang.id} on ${[...expectedCells].join(' ')}`);

  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  log(`chromium ${browser.version()}`);

  // ---- team lead of team-a ------------------------------------------------------------------------
  const lead = await newPage();
  lastPage = lead;
  await signIn(lead, leadTok, 'lead-a');
  assert(await lead.isVisible('a[data-route="submit"]'), 'a team lead has the Submit view');

  // The cluster map marks exactly the gang's GPUs, and the MIG job's slice.
  await lead.goto(base + '/#/cluster');
  await lead.waitForSelector(`.gpu[data-jobs~="${gang.id}"]`);
  const marked = await lead.$$eval('.gpu[data-node][data-gpu]', (cells, id) =>
    cells.filter((c) => c.getAttribute('data-jobs').split(' ').includes(String(id))).map((c) => `${c.dataset.node}/${c.dataset.gpu}`), gang.id);
  assert(marked.length === expectedCells.size && marked.every((c) => expectedCells.has(c)),
    `cluster map marks ${marked.join(' ')}; the placement is ${[...expectedCells].join(' ')}`);
  const migPlacement = (await api('GET', `/api/v1/jobs/${migJob.id}`)).json.placement[0];
  const slice = await lead.$(`.gpu[data-node="${migPlacement.node}"][data-gpu="${migPlacement.mig.gpu}"] .slice[data-job="${migJob.id}"]`);
  assert(slice && (await slice.getAttribute('data-profile')) === '3g.40gb', 'the MIG job shows on its slice');
  assert(!(await lead.$('[data-op]')), 'no node operations for a team lead');

  // An admin cordons a node from the map (the API's error first: a reason is required); it is marked,
  // with its reason, on the lead's map too; then resumed.
  const adm = await newPage();
  lastPage = adm;
  await signIn(adm, admin, 'admin');
  await adm.goto(base + '/#/cluster');
  promptAnswer = '';
  await adm.click('.node[data-node="mig"] [data-op="cordon"]');
  await adm.waitForSelector('#banner:has-text("400 invalid_argument")');
  promptAnswer = 'replacing a DIMM';
  await adm.click('.node[data-node="mig"] [data-op="cordon"]');
  await adm.waitForSelector('.node[data-node="mig"][data-state="cordoned"] [data-op="resume"]');
  await lead.waitForSelector('.node[data-node="mig"][data-state="cordoned"] .flag-cordoned');
  assert((await lead.textContent('.node[data-node="mig"] .node-head')).includes('replacing a DIMM'), 'the cordon reason is shown');
  await shot(lead, 'cluster-map');
  await adm.click('.node[data-node="mig"] [data-op="resume"]');
  await adm.waitForSelector('.node[data-node="mig"][data-state="ready"]');
  assert((await api('GET', '/api/v1/nodes')).json.nodes.find((n) => n.name === 'mig').state === 'ready', 'resumed');
  await adm.context().close();
  lastPage = lead;
  log('cluster map ok (gang cells, MIG slice; admin cordons with a reason and resumes)');

  // Submit through the form: first a bad spec (the API's message and field shown), then a good one.
  await lead.goto(base + '/#/submit');
  await lead.fill('input[name="name"]', 'portal-train');
  await lead.selectOption('select[name="queue"]', 'team-a');
  const classes = await lead.$$eval('select[name="priority_class"] option', (os) => os.map((o) => o.value));
  assert(classes.join(',') === 'research,preemptible', `team-a's classes offered: ${classes}`);
  await lead.selectOption('select[name="priority_class"]', 'preemptible');
  await lead.fill('input[name="gpus"]', '-1');
  await lead.fill('input[name="command"]', 'python3 train.py --epochs "3"');
  await lead.click('#submit-job');
  await lead.waitForSelector('#submit-error-message');
  const errText = await lead.textContent('#submit-error');
  assert(/invalid_argument/.test(errText) && /resources\.gpus/.test(errText), `the API's validation message is shown: ${errText}`);
  assert(await lead.$eval('input[name="gpus"]', (e) => e.classList.contains('invalid')), 'the faulty field is highlighted');
  await shot(lead, 'submit-validation');
  await lead.fill('input[name="gpus"]', '4');
  await lead.click('#submit-job');
  await lead.waitForURL(/#\/jobs\/\d+$/);
  const jobId = Number(/#\/jobs\/(\d+)$/.exec(lead.url())[1]);
  const submitted = (await api('GET', `/api/v1/jobs/${jobId}`)).json;
  assert(submitted.user === 'lead-a' && submitted.queue === 'team-a' && submitted.priority_class === 'preemptible', 'the form submitted the spec');
  assert(JSON.stringify(submitted.spec.command) === JSON.stringify(['python3', 'train.py', '--epochs', '3']), `command split: ${JSON.stringify(submitted.spec.command)}`);
  await lead.waitForSelector('#job-position:has-text("#1")');
  await shot(lead, 'job-pending');
  log(`job ${jobId} submitted through the form, pending at #1`);

  // The queue shows it with its position and pending reason.
  await lead.goto(base + '/#/queue');
  const row = `#jobs tr[data-job="${jobId}"]`;
  await lead.waitForSelector(`${row} .position:has-text("#1")`);
  assert((await lead.textContent(`${row} .badge`)) === 'pending', 'pending in the queue');
  assert((await lead.textContent(`${row} .reason`)).length > 0, 'with a pending reason');
  assert(await lead.isVisible(`${row} [data-action="cancel"]`), 'the lead may cancel it from the queue');
  assert(!(await lead.$(`#jobs tr[data-job="${gang.id}"] [data-action="cancel"]`)), "no cancel button on team-b's gang for team-a's lead");
  await shot(lead, 'queue');

  // Live updates: a job submitted elsewhere appears without a reload.
  await lead.evaluate(() => { window.__noReload = 1; });
  const other = await submit({ name: 'from-the-cli', queue: 'team-a', priority_class: 'preemptible', resources: { gpus: 4 }, command: ['true'] }, leadTok);
  await lead.waitForSelector(`#jobs tr[data-job="${other.id}"]`, { timeout: 6000 });
  assert(await lead.evaluate(() => window.__noReload === 1), 'the page was not reloaded');
  log('queue ok (position, reason, live update)');

  // Raise the priority (preemptible -> research) from the job view.
  await lead.goto(base + `/#/jobs/${jobId}`);
  await lead.waitForSelector('#priority-select');
  await lead.selectOption('#priority-select', 'research');
  await lead.click('#priority-apply');
  await lead.waitForSelector('#job-priority:has-text("research")');
  const raised = (await api('GET', `/api/v1/jobs/${jobId}`)).json;
  assert(raised.priority_class === 'research' && raised.state === 'pending', 'the priority changed and the job still waits (the cluster is full)');
  assert(raised.events.some((e) => e.kind === 'priority_changed' && e.actor === 'lead-a'), 'recorded as priority_changed by lead-a');
  await lead.waitForSelector('#job-events li[data-kind="priority_changed"]');
  await shot(lead, 'job-priority-raised');
  log('priority raised');

  // A MIG slice for team-a (so that its usage is in the chargeback report beside team-b's).
  const smallA = await submit({ name: 'small-a', queue: 'team-a', priority_class: 'research', resources: { mig: '1g.10gb' }, command: ['sleep', '3600'] }, leadTok);

  // A job in a container: its detail shows the image (and user).
  const boxed = await submit({ name: 'boxed', queue: 'team-a', priority_class: 'preemptible', resources: { gpus: 1 },
    container: { image: 'localhost/train:2026-11', user: '1000:1000' }, command: ['python3', '/app/train.py'] }, leadTok);
  await lead.goto(base + `/#/jobs/${boxed.id}`);
  await lead.waitForSelector('#job-container:has-text("localhost/train:2026-11")');
  assert((await lead.textContent('#job-container')).includes('as 1000:1000'), 'the container user is shown');
  await lead.goto(base + `/#/jobs/${jobId}`);
  await lead.waitForSelector('#priority-select');
  log('container shown');

  // ---- a member of team-b: no buttons on team-a's job, 403 when forcing -----------------------------
  const bob = await newPage();
  lastPage = bob;
  await signIn(bob, bobTok, 'bob');
  await bob.goto(base + `/#/jobs/${jobId}`);
  await bob.waitForSelector('#job-actions:has-text("Read only")');
  assert(!(await bob.$('#cancel-job')) && !(await bob.$('#priority-apply')), 'no cancel/priority buttons for a member of team-b');
  await bob.goto(base + '/#/queue');
  await bob.waitForSelector(`#jobs tr[data-job="${jobId}"]`);
  assert(!(await bob.$(`#jobs tr[data-job="${jobId}"] [data-action="cancel"]`)), 'no cancel button in the queue either');
  const forced = await bob.evaluate(async (id) => {
    const tok = sessionStorage.getItem('tessera.token');
    const call = async (p, body) => {
      const r = await fetch(p, { method: 'POST', headers: { Authorization: `Bearer ${tok}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      return { status: r.status, body: await r.json() };
    };
    return { cancel: await call(`/api/v1/jobs/${id}/cancel`, {}), priority: await call(`/api/v1/jobs/${id}/priority`, { priority_class: 'research' }) };
  }, jobId);
  assert(forced.cancel.status === 403 && forced.cancel.body.error.code === 'permission_denied', `forced cancel: ${JSON.stringify(forced.cancel)}`);
  assert(forced.priority.status === 403, `forced priority: ${JSON.stringify(forced.priority)}`);
  assert((await api('GET', `/api/v1/jobs/${jobId}`)).json.state === 'pending', 'the job is untouched');
  await shot(bob, 'member-read-only');
  log(`member: no buttons; forced calls 403 (${forced.cancel.body.error.message})`);

  // ---- the lead cancels it --------------------------------------------------------------------------
  lastPage = lead;
  await lead.click('#cancel-job');
  await lead.waitForSelector('h2 .badge:has-text("cancelled")');
  assert((await api('GET', `/api/v1/jobs/${jobId}`)).json.state === 'cancelled', 'cancelled');
  assert(!(await lead.$('#cancel-job')), 'no cancel button on a finished job');
  await shot(lead, 'job-cancelled');
  log('cancelled');

  // ---- Slurm workflows: arrays, dependencies, hold/release/requeue, attempts, readable events ----------
  // CPU-only jobs (no GPU) so that they run beside the gang. Agentless: task ends are reported as an
  // agent would, through POST /api/v1/agent/heartbeat with the admin token.
  const cpuSpec = (name, extra = {}) => ({ name, queue: 'team-a', priority_class: 'research', resources: { gpus: 0, cpu: 1 }, command: ['true'], ...extra });
  const job = async (ref) => (await api('GET', `/api/v1/jobs/${ref}`)).json;
  async function until(what, f, ms = 8000) {
    const end = Date.now() + ms;
    for (;;) {
      const v = await f();
      if (v) return v;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  // A heartbeat reports every task on its node (one left out would be lost): the others as running.
  async function endTask(ref, state, exitCode = 0) {
    const j = await until(`${ref} running`, async () => { const x = await job(ref); return x.state === 'running' && x; });
    const node = j.placement[0].node;
    const tasks = [];
    for (const o of (await api('GET', '/api/v1/jobs?active=true&limit=1000')).json.jobs) {
      if (o.id === j.id || !o.nodes.includes(node)) continue;
      const d = await job(o.id);
      for (const p of d.placement) if (p.node === node) tasks.push({ job: d.id, attempt: d.attempt, task: p.task, state: 'running' });
    }
    tasks.push({ job: j.id, attempt: j.attempt, task: 0, state, exit_code: exitCode });
    const r = await api('POST', '/api/v1/agent/heartbeat', { node, tasks });
    assert(r.status === 200, `heartbeat: ${r.text}`);
    await until(`${ref} ${state}`, async () => (await job(ref)).state === state);
  }

  await until('small-a running', async () => (await job(smallA.id)).state === 'running');
  // An array of 5 with at most 2 running: element 0 succeeds, so elements 1 and 2 run and 3, 4 wait.
  const arr = await submit(cpuSpec('sweep', { array: '0-4%2' }), leadTok);
  const A = arr.array_job_id;
  assert(A === arr.id && arr.ref === `${A}_0`, `array answer: ${arr.ref} ${A}`);
  await endTask(`${A}_0`, 'succeeded');
  await until('elements 1 and 2 running', async () => (await job(`${A}_1`)).state === 'running' && (await job(`${A}_2`)).state === 'running');
  await lead.goto(base + '/#/queue');
  const arrRow = `#jobs tr.array-row[data-array="${A}"]`;
  await lead.waitForSelector(`${arrRow} [data-count-state="running"]:text-is("2 running")`);
  const counts = await lead.textContent(`${arrRow} .array-counts`);
  assert(/2 running/.test(counts) && /2 pending/.test(counts) && /1 succeeded/.test(counts), `array counts: ${counts}`);
  assert((await lead.textContent(`${arrRow} td.ref`)).trim().endsWith(String(A)), 'the array row is named by its array job id');
  assert(!(await lead.$(`#jobs tr[data-ref^="${A}_"]`)), 'elements are hidden until the array is expanded');
  assert((await lead.$$(`#jobs tr[data-job="${A + 1}"]`)).length === 0, 'no element has a row of its own');
  await lead.click(`${arrRow} [data-action="expand"]`);
  await lead.waitForSelector(`#jobs tr.element[data-ref="${A}_4"]`);
  const els = await lead.$$eval('#jobs tr.element', (rs) => rs.map((r) => `${r.dataset.ref}:${r.querySelector('.badge').textContent}`));
  assert(els.join(' ') === `${A}_0:succeeded ${A}_1:running ${A}_2:running ${A}_3:pending ${A}_4:pending`, `the elements listed: ${els}`);
  assert((await lead.getAttribute(`#jobs tr.element[data-ref="${A}_3"] a`, 'href')) === `#/jobs/${A}_3`, 'an element links to its page');
  await shot(lead, 'queue-array');
  await lead.click(`${arrRow} [data-action="expand"]`);
  await lead.waitForSelector(`#jobs tr.element[data-ref="${A}_0"]`, { state: 'detached' });
  // The array alone (#/queue/ID, every state), and an element's page naming its array and siblings.
  await lead.goto(base + `/#/queue/${A}`);
  await lead.waitForSelector('#array-only');
  await lead.waitForSelector(`#jobs tr.element[data-ref="${A}_4"]`);
  assert((await lead.$$('#jobs tr.element')).length === 5 && (await lead.$$('#jobs tr.array-row')).length === 1, 'only the array, expanded');
  await lead.goto(base + `/#/jobs/${A}_3`);
  await lead.waitForSelector('#job-array:has-text("5 elements")');
  assert((await lead.textContent('h2')).startsWith(`Job ${A}_3: sweep`), `an element is named ID_N: ${await lead.textContent('h2')}`);
  assert(/element 3 of array/.test(await lead.textContent('#job-array')) && /JobArrayTaskLimit/.test(await lead.textContent('#job-reason')), 'its array and why it waits');
  log(`array ${A}: one row (${counts}), expands to its 5 elements`);

  // Dependencies: a job waits on element 0 (afterok, met), element 1 (afternotok, waiting) and the
  // whole array (afterany); another waits on it. Its page draws both sides; a failure updates it.
  const dep = await submit(cpuSpec('after-sweep', { dependency: `afterok:${A}_0,afternotok:${A}_1,afterany:${A}` }), leadTok);
  const child = await submit(cpuSpec('report', { dependency: `afterok:${dep.ref}` }), leadTok);
  await lead.goto(base + `/#/jobs/${dep.ref}`);
  await lead.waitForSelector(`#job-deps-graph g[data-side="down"][data-ref="${child.ref}"]`);
  const node = (side, ref) => `#job-deps-graph g.dep-node[data-side="${side}"][data-ref="${ref}"]`;
  const attrs = (sel) => lead.$eval(sel, (g) => `${g.dataset.type}/${g.dataset.state}/${g.dataset.status}`);
  assert((await lead.$$('#job-deps-graph g[data-side="up"]')).length === 3, 'three jobs it waits for');
  assert((await attrs(node('up', `${A}_0`))) === 'afterok/succeeded/met', `afterok on 0: ${await attrs(node('up', `${A}_0`))}`);
  assert((await attrs(node('up', `${A}_1`))) === 'afternotok/running/waiting', `afternotok on 1: ${await attrs(node('up', `${A}_1`))}`);
  assert((await lead.getAttribute(node('up', String(A)), 'data-type')) === 'afterany', 'afterany on the whole array');
  assert(/array of 5/.test(await lead.textContent(node('up', String(A)))), 'the array stands for its 5 elements');
  assert((await lead.getAttribute(node('down', child.ref), 'data-type')) === 'afterok', 'the dependent job, afterok');
  assert((await lead.$$('#job-deps-graph path.dep-edge')).length === 4, 'an arrow per dependency');
  assert((await lead.textContent('#job-wait')) === 'its dependencies', `waiting for: ${await lead.textContent('#job-wait')}`);
  await shot(lead, 'job-dependencies');
  await endTask(`${A}_1`, 'failed', 3);
  await lead.waitForSelector(`${node('up', `${A}_1`)}[data-status="met"][data-state="failed"]`);
  // afterok on the failed element can never be met: shown as such.
  const doomed = await submit(cpuSpec('doomed', { dependency: `afterok:${A}_1` }), leadTok);
  await lead.goto(base + `/#/jobs/${doomed.ref}`);
  await lead.waitForSelector(`${node('up', `${A}_1`)}[data-status="never"]`);
  await lead.waitForSelector('#job-reason:has-text("DependencyNeverSatisfied")');
  assert((await job(doomed.ref)).wait === 'dependency_never_satisfied', 'the API agrees');
  // singleton: the running job of the same name and user holds the second one back.
  const solo1 = await submit(cpuSpec('solo'), leadTok);
  await until('solo running', async () => (await job(solo1.ref)).state === 'running');
  const solo2 = await submit(cpuSpec('solo', { dependency: 'singleton' }), leadTok);
  await lead.goto(base + `/#/jobs/${solo2.ref}`);
  await lead.waitForSelector(`${node('up', solo1.ref)}[data-type="singleton"][data-state="running"][data-status="waiting"]`);
  log('dependency graph (afterok, afternotok, afterany on an array; a dependent; never satisfied; singleton)');

  // Hold and release through the buttons (a job that waits for its begin time), by the team lead.
  const later = await submit(cpuSpec('later', { begin: Math.floor(Date.now() / 1000) + 3600 }), leadTok);
  await lead.goto(base + `/#/jobs/${later.ref}`);
  await lead.waitForSelector('#hold-job');
  assert(!(await lead.$('#release-job')) && !(await lead.$('#requeue-job')), 'a pending job offers Hold, not Release or Requeue');
  await lead.click('#hold-job');
  await lead.waitForSelector('#release-job');
  assert(!(await lead.$('#hold-job')), 'no Hold on a held job');
  assert((await lead.textContent('#job-held')) === 'yes, by lead-a', `held: ${await lead.textContent('#job-held')}`);
  assert((await job(later.ref)).held === true, 'held in the API');
  await lead.waitForSelector('#job-events li[data-kind="held"]:has-text("Held")');
  await lead.click('#release-job');
  await lead.waitForSelector('#hold-job');
  const released = await job(later.ref);
  assert(released.held === false && released.state === 'pending', 'released (still waiting for its begin time)');
  await lead.waitForSelector('#job-events li[data-kind="released"]:has-text("by lead-a")');
  // An admin's hold: the lead's Release is refused, and the server's reason is shown.
  assert((await api('POST', `/api/v1/jobs/${later.ref}/hold`)).status === 200, 'admin hold');
  await lead.waitForSelector('#release-job');
  await lead.click('#release-job');
  await lead.waitForSelector('#job-action-error:has-text("only an admin can release it")');
  assert(/403 permission_denied/.test(await lead.textContent('#banner')), `the API's refusal in the banner: ${await lead.textContent('#banner')}`);
  assert((await job(later.ref)).held === true, 'still held');
  await shot(lead, 'job-held-refused');
  // A member of another team sees none of these buttons.
  await bob.goto(base + `/#/jobs/${later.ref}`);
  await bob.waitForSelector('#job-actions:has-text("Read only")');
  assert(!(await bob.$('#job-actions [data-action]')), 'no buttons for a member of team-b');
  log('hold and release by buttons; an admin hold refused with the API reason; no buttons for another team');

  // Requeue through the button, then the second attempt succeeds: the attempts timeline shows both,
  // where each ran and why it ended; the finished job shows where it ran, never "Not placed".
  const twice = await submit(cpuSpec('twice'), leadTok);
  const first = await until('twice running', async () => { const x = await job(twice.ref); return x.state === 'running' && x; });
  await lead.goto(base + `/#/jobs/${twice.ref}`);
  await lead.waitForSelector('#requeue-job');
  assert(!(await lead.$('#hold-job')), 'no Hold on a running job');
  await lead.click('#requeue-job');
  await until('attempt 2', async () => { const x = await job(twice.ref); return x.attempt === 2 && x.state === 'running'; });
  await endTask(twice.ref, 'succeeded');
  const done = await job(twice.ref);
  await lead.waitForSelector('#job-attempts tr[data-attempt="2"][data-end="succeeded"]');
  const attemptRows = await lead.$$eval('#job-attempts tbody tr', (rs) => rs.map((r) => ({ n: r.dataset.attempt, end: r.dataset.end,
    where: r.querySelector('.where').textContent, why: r.querySelector('.why').textContent, dur: r.querySelector('.dur').textContent })));
  assert(attemptRows.length === 2, `two attempts: ${JSON.stringify(attemptRows)}`);
  assert(attemptRows[0].end === 'interrupted' && /requeued by lead-a/.test(attemptRows[0].why), `attempt 1 ended by the requeue: ${attemptRows[0].why}`);
  assert(attemptRows[1].end === 'succeeded' && /succeeded/.test(attemptRows[1].why), `attempt 2 succeeded: ${attemptRows[1].why}`);
  assert(attemptRows.every((a, i) => a.where.startsWith([first.placement[0].node, done.last_nodes[0]][i])), `where each ran: ${attemptRows.map((a) => a.where)}`);
  assert(attemptRows.every((a) => /\d+ (s|min)/.test(a.dur)), `how long: ${attemptRows.map((a) => a.dur)}`);
  assert((await lead.$$('#job-attempts .att-bar')).length === 2, 'a bar per attempt');
  const placementText = await lead.textContent('#job-placement');
  assert(!/Not placed/.test(placementText) && placementText.includes(done.last_nodes[0]), `a finished job shows where it ran: ${placementText}`);
  assert((await lead.textContent('#placement-note')).includes('attempt 2 ran here'), 'the placement is the last attempt\'s');
  assert((await lead.textContent('#job-last-nodes')).includes(done.last_nodes[0]), 'ran on its last nodes');
  assert((await lead.textContent('#job-exit')).includes('0:0'), 'ExitCode 0:0');
  // The events read as a timeline: local times, kinds in words, details as text (never JSON).
  const evTexts = await lead.$$eval('#job-events li', (ls) => ls.map((l) => ({ kind: l.dataset.kind, text: l.textContent, time: l.querySelector('time').textContent })));
  const evText = evTexts.map((e) => e.text).join('\n');
  assert(!/[{}"]|\[/.test(evText), `no JSON in the events: ${evText}`);
  const startedEv = done.events.find((e) => e.kind === 'started');
  const localTime = await lead.evaluate((t) => new Date(t * 1000).toLocaleString(), startedEv.time);
  const shownStart = evTexts.filter((e) => e.kind === 'started').pop();
  assert(shownStart.time === localTime, `local time: ${shownStart.time} vs ${localTime}`);
  assert(/Started/.test(shownStart.text) && /attempt 1/.test(shownStart.text) && shownStart.text.includes(first.placement[0].node), `started in words: ${shownStart.text}`);
  const interruptedEv = evTexts.find((e) => e.kind === 'interrupted');
  assert(/Interrupted/.test(interruptedEv.text) && /without a checkpoint/.test(interruptedEv.text) && /requeued by lead-a/.test(interruptedEv.text), `interrupted in words: ${interruptedEv.text}`);
  assert(/Succeeded by the agent on /.test(evTexts.find((e) => e.kind === 'succeeded').text), 'the actor in words');
  await shot(lead, 'job-attempts');
  const gangNow = await job(gang.id);
  assert(gangNow.state === 'running' && gangNow.attempt === 1 && !gangNow.events.some((e) => e.kind === 'lost'), 'the reports left the gang alone');
  log('requeue by button; attempts timeline (where, how long, why it ended); readable events');

  // ---- other views ----------------------------------------------------------------------------------
  await lead.goto(base + '/#/queues');
  await lead.waitForSelector('#queues .qbar[data-queue="team-b"]');
  await shot(lead, 'queues');
  // Utilisation and chargeback come from other route groups: with the real endpoints when the server
  // has them, else the "not available" notice and then a fixture in the documented shape (routed in
  // the browser) so that the rendering is checked either way.
  const now = Math.floor(Date.now() / 1000);
  const hasUtil = (await api('GET', '/api/v1/utilisation?minutes=60')).status !== 404;
  await lead.goto(base + '/#/utilisation');
  if (!hasUtil) {
    await lead.waitForSelector('#util-unavailable');
    await shot(lead, 'utilisation-unavailable');
    await lead.route('**/api/v1/utilisation?*', (r) => r.fulfill({ json: { step_s: 10, series: [
      { model: 'A100-80GB', pool: 'default', total_milli: 10000,
        points: Array.from({ length: 30 }, (_, i) => [now - 300 + i * 10, 8000 + (i % 3) * 200, 4000 + (i % 5) * 600]) }] } }));
    await lead.goto(base + '/#/queue');
    await lead.goto(base + '/#/utilisation');
  }
  if (hasUtil) {  // the real series: a chart per (model, pool) once the server has sampled
    await lead.waitForSelector('#utilisation .chart, #utilisation p.muted', { state: 'attached' });
    if ((await api('GET', '/api/v1/utilisation?minutes=60')).json.series.length)
      await lead.waitForSelector('#utilisation .chart[data-model="A100-80GB"] .uplot canvas', { state: 'attached', timeout: 15000 });
  } else await lead.waitForSelector('#utilisation .chart .uplot canvas', { state: 'attached' });
  await shot(lead, 'utilisation');
  const hasReports = (await api('GET', '/api/v1/reports/chargeback?from=2026-01-01&to=2026-01-31&by=team&format=json')).status !== 404;
  await lead.goto(base + '/#/chargeback');
  let csvExpected = null, realHeader = null;
  if (!hasReports) {
    await lead.waitForSelector('#cb-unavailable');
    const report = { columns: ['team', 'allocated_gpu_hours', 'used_gpu_hours', 'cost'],
                     rows: [{ team: 'team-a', allocated_gpu_hours: 12.5, used_gpu_hours: 10, cost: 25 },
                            { team: 'team-b', allocated_gpu_hours: 7.25, used_gpu_hours: 3.5, cost: 14.5 }],
                     totals: { allocated_gpu_hours: 19.75, used_gpu_hours: 13.5, cost: 39.5 } };
    csvExpected = 'team,allocated_gpu_hours,used_gpu_hours,cost\nteam-a,12.5,10,25\nteam-b,7.25,3.5,14.5\n';
    await lead.route('**/api/v1/reports/chargeback?*', (r) => new URL(r.request().url()).searchParams.get('format') === 'csv'
      ? r.fulfill({ body: csvExpected, contentType: 'text/csv' }) : r.fulfill({ json: report }));
    await lead.click('#cb-load');
    await lead.waitForSelector('#cb-table tbody tr:nth-child(2)');
    const heads = await lead.$$eval('#cb-table thead th', (ths) => ths.map((t) => t.dataset.col));
    assert(heads.join(',') === report.columns.join(','), `chargeback columns from the report: ${heads}`);
    assert((await lead.textContent('#cb-table tfoot')).includes('39.5'), 'chargeback totals shown');
  } else {
    await lead.waitForSelector('#cb-table');
    const real = (await api('GET', '/api/v1/reports/chargeback?by=team&format=json', undefined, leadTok)).json;
    const shown = await lead.$$eval('#cb-table thead th', (ths) => ths.map((t) => t.dataset.col));
    assert(shown.length > 0 && shown.every((c) => real.columns.includes(c)), `chargeback columns from the report: ${shown}`);
    await lead.check('#cb-all');
    const allShown = await lead.$$eval('#cb-table thead th', (ths) => ths.map((t) => t.dataset.col));
    assert(allShown.join(',') === real.columns.join(','), 'every column with "all columns"');
    realHeader = real.columns.join(',');
  }
  const [download] = await Promise.all([lead.waitForEvent('download'), lead.click('#cb-csv')]);
  assert(/^chargeback-.*\.csv$/.test(download.suggestedFilename()), `CSV file name ${download.suggestedFilename()}`);
  const csv = fs.readFileSync(await download.path(), 'utf8');
  assert(realHeader !== null ? csv.split(/\r?\n/)[0] === realHeader : csv === csvExpected, 'the CSV downloaded is the report\'s');
  await shot(lead, 'chargeback');
  log(`queues, utilisation (${hasUtil ? 'real' : 'fixture'}), chargeback (${hasReports ? 'real' : 'fixture'}) and its CSV render`);

  // Text from users (commands, names echoed in API errors) is shown as text, never as markup.
  const evilText = '<img src=x onerror="window.__xss=1">';
  // (in the lead's own team: another team's command is not shown to them at all)
  const evil = await submit({ name: 'evil', queue: 'team-a', resources: { gpus: 1 }, command: ['echo', evilText] });
  await lead.goto(base + `/#/jobs/${evil.id}`);
  await lead.waitForSelector('#job-summary code');
  assert((await lead.textContent('#job-summary code')) === `echo ${evilText}`, 'the command is shown literally');
  await lead.goto(base + '/#/submit');
  await lead.fill('input[name="name"]', evilText);
  await lead.fill('input[name="command"]', 'true');
  await lead.click('#submit-job');
  await lead.waitForSelector('#submit-error-message');
  assert((await lead.textContent('#submit-error-message')).includes(evilText), 'the API error echoing the name is shown literally');
  assert(!(await lead.$('main img')) && (await lead.evaluate(() => window.__xss)) === undefined, 'no markup injected');
  log('user text escaped');

  // ---- a viewer reads only ------------------------------------------------------------------------
  const vic = await newPage();
  lastPage = vic;
  await vic.goto(base + '/');
  await vic.fill('#token', 'tsr_not_a_token');
  await vic.click('#signin');
  await vic.waitForSelector('#signin-error:has-text("unauthenticated")');
  await signIn(vic, viewerTok, 'vic');
  assert(!(await vic.$('a[data-route="submit"]')), 'a viewer has no Submit view');
  // The logs tail follows X-Tessera-Next-Offset (agentless servers have no logs: routed in the browser).
  const offsets = [];
  await vic.route(`**/api/v1/jobs/${gang.id}/logs?*`, (r) => {
    const q = new URL(r.request().url()).searchParams;
    const off = Number(q.get('offset'));
    offsets.push(`${q.get('task')}:${off}`);
    const first = 'step 1 <b>loss</b> 0.9\n';
    const body = off === 0 ? first : off === first.length ? 'step 2 loss 0.7\n' : '';
    r.fulfill({ body, contentType: 'text/plain', headers: { 'X-Tessera-Next-Offset': String(off + body.length), 'X-Tessera-Node': 'gpu-0', 'X-Tessera-Attempt': '1' } });
  });
  await vic.goto(base + `/#/jobs/${later.ref}`);  // held by an admin: no Release (nor Hold, Cancel) for a viewer
  await vic.waitForSelector('#job-actions:has-text("Read only")');
  await vic.waitForSelector('#job-held:has-text("yes, by admin")');
  assert(!(await vic.$('#job-actions button')), 'a viewer has no job buttons');
  await vic.goto(base + `/#/jobs/${gang.id}`);
  await vic.waitForSelector('#job-actions:has-text("Read only")');
  await vic.waitForFunction(() => document.querySelector('#job-logs')?.textContent === 'step 1 <b>loss</b> 0.9\nstep 2 loss 0.7\n');
  assert(offsets.slice(0, 2).join(',') === '0:0,0:23', `log reads continue at the next offset: ${offsets}`);
  await shot(vic, 'job-logs');
  if (hasReports) {  // a viewer sees every row: team-b's gang (team org) has run since the start
    await vic.goto(base + '/#/chargeback');
    await vic.waitForSelector('#cb-table tbody td:text-is("org")');
    await shot(vic, 'chargeback-viewer');
    // Units on every number, the report's totals as the footer row, and the hint that rates are not set.
    const cbUnit = (col) => vic.textContent(`#cb-table th[data-col="${col}"] .unit`);
    assert((await cbUnit('ConsumedQuantity')) === ' (GPU-hours)' && (await cbUnit('BilledCost')) === ' (USD)', 'units in the headers');
    const numCells = await vic.$$eval('#cb-table td.num', (tds) => tds.map((t) => [t.dataset.col, t.textContent]));
    assert(numCells.length > 0 && numCells.every(([c, t]) => c === 'x_Interruptions' ? /^\d+$/.test(t) : / (GPU-h|USD|USD\/GPU-h)$/.test(t)),
      `every number has its unit: ${JSON.stringify(numCells)}`);
    assert((await vic.textContent('#cb-total-row td:first-child')) === 'Total', 'a totals row');
    const shownTotal = parseFloat((await vic.textContent('#cb-total-row td[data-col="x_AllocatedGpuHours"]')).replace(/,/g, ''));
    const pageReport = await vic.evaluate(async () => {
      const q = new URLSearchParams({ from: document.querySelector('#cb-from').value, to: document.querySelector('#cb-to').value, by: 'team', format: 'json' });
      return (await fetch(`/api/v1/reports/chargeback?${q}`, { headers: { Authorization: `Bearer ${sessionStorage.getItem('tessera.token')}` } })).json();
    });
    assert(Math.abs(shownTotal - Number(pageReport.totals.allocated_gpu_hours)) < 0.05, `the total is the report's: ${shownTotal} vs ${pageReport.totals.allocated_gpu_hours}`);
    assert((await vic.textContent('#cb-total-row td[data-col="BilledCost"]')).endsWith(' USD'), 'the cost total in the currency');
    assert(Object.keys(pageReport.rates).length === 0 && (await vic.textContent('#cb-no-rates')).includes('chargeback.rates'), 'no rates: the config key is named');
    // Sorting: by queue, click a header (descending first for numbers), again for ascending.
    await vic.selectOption('#cb-by', 'queue');
    await vic.click('#cb-load');
    await vic.waitForSelector('#cb-table tbody tr:nth-child(2) td[data-col="x_Queue"]');
    const byQueue = async () => vic.$$eval('#cb-table tbody tr', (rs) => rs.map((r) => [r.querySelector('[data-col="x_Queue"]').textContent,
      parseFloat(r.querySelector('[data-col="x_AllocatedGpuHours"]').textContent.replace(/,/g, ''))]));
    assert((await byQueue()).map((r) => r[0]).join(',') === 'team-a,team-b', `report order: ${JSON.stringify(await byQueue())}`);
    await vic.click('#cb-table th[data-col="x_AllocatedGpuHours"]');
    await vic.waitForSelector('#cb-table th[data-col="x_AllocatedGpuHours"][aria-sort="descending"]');
    const desc = await byQueue();
    assert(desc[0][0] === 'team-b' && desc.every((r, i) => i === 0 || desc[i - 1][1] >= r[1]), `sorted descending: ${JSON.stringify(desc)}`);
    await vic.click('#cb-table th[data-col="x_AllocatedGpuHours"]');
    await vic.waitForSelector('#cb-table th[data-col="x_AllocatedGpuHours"][aria-sort="ascending"]');
    const asc = await byQueue();
    assert(asc[0][0] === 'team-a' && asc.every((r, i) => i === 0 || asc[i - 1][1] <= r[1]), `sorted ascending: ${JSON.stringify(asc)}`);
    await vic.click('#cb-table th[data-col="x_Queue"]');
    await vic.waitForSelector('#cb-table th[data-col="x_Queue"][aria-sort="ascending"]');
    await shot(vic, 'chargeback-sorted');
    // A period before the event log began is empty, and says why.
    await vic.fill('#cb-from', '2026-01-01');
    await vic.fill('#cb-to', '2026-02-01');
    await vic.click('#cb-load');
    await vic.waitForSelector('#cb-empty:has-text("before the cluster\'s event log began")');
    // A member who ran nothing: no usage yet, and why (and that they see only their own).
    await bob.goto(base + '/#/chargeback');
    await bob.waitForSelector('#cb-empty:has-text("No usage yet in this period")');
    assert((await bob.textContent('#cb-empty')).includes('only your own usage'), 'a member is told they see their own usage only');
    log('chargeback: units, totals row, no-rates hint, sorting, empty reports explained');
  }
  await vic.click('#signout');
  await vic.waitForSelector('#token');
  assert((await vic.evaluate(() => sessionStorage.getItem('tessera.token'))) === null, 'signing out forgets the token');
  log('viewer read-only; logs tail');

  assert(pageErrors.length === 0, `no uncaught errors in the page: ${pageErrors.join('; ')}`);
  assert(foreignRequests.length === 0, `requests to other origins: ${foreignRequests.join(' ')}`);
  log(`PASS (${((Date.now() - t0) / 1000).toFixed(1)} s); screenshots in ${artifacts}`);
} catch (e) {
  exitCode = 1;
  console.error(`FAIL: ${e.stack ?? e}`);
  if (pageErrors.length) console.error(`page errors: ${pageErrors.join('; ')}`);
  if (lastPage) await shot(lastPage, 'failure').catch(() => {});
} finally {
  if (browser) await browser.close().catch(() => {});
  server.kill('SIGTERM');
  await new Promise((r) => { server.once('exit', r); setTimeout(r, 5000); });
  fs.rmSync(data, { recursive: true, force: true });
}
process.exit(exitCode);
