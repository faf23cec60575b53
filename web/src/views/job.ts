// Job detail: summary, placement on nodes/GPUs/MIG slices (or, once it ended, where its last attempt
// ran), its attempts as a timeline, its dependencies as a small graph, the events as a readable
// timeline, a logs tail per task, and (when the role and the state allow it) hold, release, requeue,
// cancel and change of priority class (GET /api/v1/jobs/{ref}, .../logs). `ref` is "12" or "12_3".
import { ApiError, get, raw, refOf, type JobDetail, type JobList } from '../api';
import { absTime, duration, h, reasonText, relTime, replace, stateBadge } from '../dom';
import { ACTIVE, cancelJob, jobVerb, setPriority, verbsFor, type Verb } from '../actions';
import { describe } from '../notice';
import { allowedClasses, canModify } from '../session';
import type { View } from '../view';
import { attemptsOf, attemptsView, eventItem } from './job_timeline';
import { depsGraph, loadDeps } from './job_deps';

const LOG_KEEP = 200_000;  // characters of log kept on screen

const VERB_LABEL: Record<Verb, string> = { hold: 'Hold', release: 'Release', requeue: 'Requeue', cancel: 'Cancel job' };
const VERB_HELP: Record<Verb, string> = {
  hold: 'keep it pending until released', release: 'let it start again', requeue: 'stop it (checkpointing first if it can) and put it back in the queue',
  cancel: 'stop it for good',
};

function stateCounts(jobs: { state: string }[]): string {
  const c = new Map<string, number>();
  for (const j of jobs) c.set(j.state, (c.get(j.state) ?? 0) + 1);
  return [...c].map(([s, n]) => `${n} ${s}`).join(', ');
}

export function jobView(id: string): View {
  const title = h('h2', {}, `Job ${id}`);
  const summary = h('dl', { class: 'summary', id: 'job-summary' });
  const actions = h('div', { class: 'actions', id: 'job-actions' });
  const placement = h('tbody');
  const events = h('ol', { class: 'timeline', id: 'job-events' });
  const taskSel = h('select', { id: 'log-task' });
  const logBox = h('pre', { class: 'logs', id: 'job-logs' });
  const logNote = h('div', { class: 'muted', id: 'log-note' });
  const placementNote = h('span');
  const attempts = h('div', { class: 'attempts-box' });
  const deps = h('div', { class: 'deps-box' }, h('p', { class: 'muted' }, 'Loading…'));
  const arrayNote = h('span', { class: 'muted' });
  let depsKey = '';
  let job: JobDetail | null = null;
  let actionsKey = '';
  let logTask = 0, logOffset = 0, logText = '';

  const actionMsg = h('span', { class: 'error', id: 'job-action-error' });
  const renderActions = (j: JobDetail) => {
    const may = canModify(j);
    const key = `${j.state}|${j.held}|${j.priority_class}|${may}`;
    if (key === actionsKey) return;  // keep the select as the user left it between polls
    actionsKey = key;
    const verbs = verbsFor(j);
    if (!may) {
      replace(actions, ACTIVE.has(j.state) || verbs.length ? h('span', { class: 'muted' }, 'Read only: your role may not change this job.') : '');
      return;
    }
    const ref = refOf(j);
    const run = async (v: Verb) => {
      replace(actionMsg, '');
      let err: string | null;
      if (v === 'cancel') {
        if (!(await cancelJob(j, ref))) err = 'cancel refused or not confirmed';
        else err = null;
      } else {
        if (v === 'requeue' && ACTIVE.has(j.state) && !window.confirm(`Requeue job ${ref} (${j.name})? It stops (after a checkpoint if it can) and waits again.`)) return;
        err = await jobVerb(ref, v);
      }
      if (err) replace(actionMsg, err);
      actionsKey = '';
      await refresh();
    };
    const buttons = verbs.map((v) => h('button', { id: `${v === 'cancel' ? 'cancel-job' : `${v}-job`}`, class: v === 'cancel' ? 'danger' : '',
      'data-action': v, title: VERB_HELP[v], onclick: () => void run(v) }, VERB_LABEL[v]));
    const prio: (Node | string)[] = [];
    if (ACTIVE.has(j.state)) {
      const classes = allowedClasses(j.queue);
      const sel = h('select', { id: 'priority-select' }, classes.map((c) => h('option', { value: c }, c)));
      if (!classes.includes(j.priority_class)) sel.prepend(h('option', { value: j.priority_class }, j.priority_class));
      sel.value = j.priority_class;
      prio.push(h('label', {}, 'Priority class ', sel), ' ',
        h('button', { id: 'priority-apply', 'data-action': 'priority', onclick: async () => {
          if (sel.value !== j.priority_class && (await setPriority(j.id, sel.value))) { actionsKey = ''; await refresh(); }
        } }, 'Change priority'));
    }
    replace(actions, prio, buttons, actionMsg);
  };

  const refreshLogs = async () => {
    logBox.hidden = !logText;
    if (!job || job.started === null) {
      replace(logNote, 'No logs before the job starts.');
      return;
    }
    try {
      const res = await raw('GET', `/api/v1/jobs/${encodeURIComponent(id)}/logs?task=${logTask}&offset=${logOffset}&limit=65536`);
      const text = await res.text();
      const next = Number(res.headers.get('X-Tessera-Next-Offset'));
      if (Number.isFinite(next) && next > 0) logOffset = next;
      if (text) {
        logText = (logText + text).slice(-LOG_KEEP);
        const atEnd = logBox.scrollTop + logBox.clientHeight >= logBox.scrollHeight - 4;
        logBox.textContent = logText;
        logBox.hidden = false;
        if (atEnd) logBox.scrollTop = logBox.scrollHeight;
      }
      replace(logNote, `task ${logTask} on ${res.headers.get('X-Tessera-Node') ?? '?'}, attempt ${res.headers.get('X-Tessera-Attempt') ?? '?'}`);
    } catch (e) {
      replace(logNote, e instanceof ApiError ? `Logs not available: ${e.message}` : describe(e));
    }
  };

  const refresh = async () => {
    let j: JobDetail;
    try {
      j = await get<JobDetail>(`/api/v1/jobs/${encodeURIComponent(id)}`);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) replace(title, `Job ${id}: `, h('span', { class: 'error' }, e.message));
      throw e;
    }
    job = j;
    replace(title, `Job ${refOf(j)}: `, h('span', { class: 'name' }, j.name || '(unnamed)'), ' ', stateBadge(j.state));
    const pos = j.pending ? `#${j.pending.queue_position} in ${j.queue} (#${j.pending.overall_position} overall)` : '—';
    const WAIT_WORDS: Record<string, string> = {
      held: 'held', begin_time: 'its begin time', dependency: 'its dependencies', dependency_never_satisfied: 'a dependency that can never be met',
      array_task_limit: "its array's running limit", backoff: "a restart's backoff",
    };
    const perTask = (n: number) => (j.tasks ? n / j.tasks : 0);
    const res = [`${j.tasks} × ${perTask(j.gpus)} GPU`];
    if (j.cpu_milli) res.push(`${j.cpu_milli % 1000 ? `${j.cpu_milli / 1000}` : j.cpu_milli / 1000} CPU`);
    if (j.memory_mib) res.push(j.memory_mib >= 1024 ? `${+(j.memory_mib / 1024).toFixed(1)} GiB` : `${j.memory_mib} MiB`);
    const atts = attemptsOf(j);
    const dl: [string, string | Node][] = [
      ['User', j.user], ['Queue', j.queue], ['Project', j.project || '—'], ['Priority class', h('span', { id: 'job-priority' }, j.priority_class)],
      ['Tasks × GPUs', res.join(', ') + (j.cpu_milli || j.memory_mib ? ' per task' : '')], ['Position', h('span', { id: 'job-position' }, pos)],
      ['Reason', h('span', { id: 'job-reason' }, reasonText(j.reason) || '—')],
    ];
    if (j.wait) dl.push(['Waiting for', h('span', { id: 'job-wait' }, WAIT_WORDS[j.wait] ?? j.wait)]);
    if (j.held) dl.push(['Held', h('span', { id: 'job-held' }, `yes, by ${j.held_by ?? '?'}`)]);
    if (j.begin) dl.push(['Begins', `${absTime(j.begin)} (${relTime(j.begin)})`]);
    if (j.dependency) dl.push(['Dependency', h('code', { id: 'job-dependency' }, j.dependency)]);
    if (j.array_job_id) dl.push(['Array', h('span', { id: 'job-array' }, `element ${j.array_task_id} of array `,
      h('a', { href: `#/queue/${j.array_job_id}` }, String(j.array_job_id)), arrayNote)]);
    dl.push(['Estimated start', j.pending ? `${relTime(j.pending.estimated_start)} (${absTime(j.pending.estimated_start)})` : '—'],
      ['Submitted', absTime(j.submitted)], ['Started', absTime(j.started)], ['Finished', absTime(j.finished)]);
    if (j.elapsed_s !== null && j.elapsed_s !== undefined) dl.push(['Elapsed (last attempt)', duration(j.elapsed_s)]);
    if (j.gpu_seconds) dl.push(['GPU time (all attempts)', `${+(j.gpu_seconds / 3600).toFixed(3)} GPU-hours`]);
    if (j.placement.length === 0 && j.last_nodes && j.last_nodes.length)
      dl.push(['Ran on', h('span', { id: 'job-last-nodes' }, j.last_nodes.join(', '), atts.length ? ` (attempt ${atts[atts.length - 1].n})` : '')]);
    dl.push(['Attempt / restarts / preemptions', `${j.attempt} / ${j.restarts} / ${j.preemptions}`],
      ['Exit code', j.exit_code === null || j.exit_code === undefined ? '—' : h('span', { id: 'job-exit' }, `${j.exit_code} (ExitCode ${j.exit ?? '?'}, code:signal)`)],
      ['Command', Array.isArray(j.spec?.command) ? h('code', {}, (j.spec.command as string[]).join(' '))
        : h('span', { class: 'muted', id: 'job-detail-hidden' }, j.detail_hidden ?? '—')]);
    // Jobs in containers: the image, and each mount (docs/containers.md).
    const c = j.spec?.container as { image: string; user: string; network: string } | null | undefined;
    if (c) dl.push(['Container', h('span', { id: 'job-container' }, h('code', {}, c.image), c.user ? ` as ${c.user}` : '',
      c.network && c.network !== 'host' ? `, network ${c.network}` : '')]);
    const mounts = (j.spec?.mounts ?? []) as Record<string, unknown>[];
    if (mounts.length > 0) dl.push(['Mounts', h('ul', { id: 'job-mounts', class: 'plain' }, mounts.map((m) => {
      const kind = 'dataset' in m ? 'dataset' : 'volume' in m ? 'volume' : 'host_path';
      const ro = typeof m.read_only === 'boolean' ? m.read_only : kind === 'dataset';
      return h('li', {}, `${kind} `, h('code', {}, String(m[kind])), ' at ', h('code', {}, String(m.path)), ro ? ' (read-only)' : '');
    }))]);
    replace(summary, dl.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
    renderActions(j);
    // Placement: where it runs now; once it has ended (or is back in the queue), where its last attempt ran.
    const last = atts.length ? atts[atts.length - 1] : null;
    const shown = j.placement.length ? j.placement : last ? last.placement : [];
    replace(placementNote, j.placement.length ? `Where it runs now (attempt ${j.attempt}).`
      : last ? `Not running now: attempt ${last.n} ran here${last.end ? ` until ${absTime(last.end)}` : ''}.`
      : j.state === 'pending' ? 'Not placed yet: it has not started.' : 'It never started, so it never ran anywhere.');
    replace(placement, shown.length === 0
      ? h('tr', {}, h('td', { colspan: 5, class: 'muted' }, j.last_nodes && j.last_nodes.length ? `Ran on ${j.last_nodes.join(', ')}.` : '—'))
      : shown.map((p) => h('tr', { 'data-task': p.task, class: j.placement.length ? '' : 'past' },
        h('td', {}, String(p.task)), h('td', {}, h('a', { href: '#/cluster' }, p.node)),
        h('td', {}, p.gpus.join(', ')), h('td', { class: 'num' }, `${p.gpu_milli / 1000} GPU`),
        h('td', {}, p.mig ? `GPU ${p.mig.gpu}: ${p.mig.profile} at slice ${p.mig.start}` : '—'))));
    placementTable.dataset.current = j.placement.length ? 'yes' : 'no';
    placementTable.hidden = shown.length === 0 && !(j.last_nodes && j.last_nodes.length);
    replace(attempts, attemptsView(j));
    replace(events, [...j.events].reverse().map(eventItem));
    if (taskSel.options.length !== j.tasks) {
      replace(taskSel, Array.from({ length: j.tasks }, (_, i) => h('option', { value: i }, `task ${i}`)));
      taskSel.value = String(logTask);
    }
    await Promise.all([refreshLogs(), refreshDeps(j), refreshArray(j)]);
  };

  // The dependency graph (redrawn only when something in it changed).
  const refreshDeps = async (j: JobDetail) => {
    try {
      const { up, down } = await loadDeps(j);
      const key = JSON.stringify([j.state, j.dependency, up, down]);
      if (key === depsKey) return;
      depsKey = key;
      replace(deps, depsGraph(j, up, down));
    } catch (e) {
      replace(deps, h('p', { class: 'error' }, `dependencies: ${describe(e)}`));
    }
  };
  // An element's siblings: counts by state.
  const refreshArray = async (j: JobDetail) => {
    if (!j.array_job_id) return;
    try {
      const els = (await get<JobList>(`/api/v1/jobs?array=${j.array_job_id}&limit=1000`)).jobs;
      replace(arrayNote, ` (${els.length} element${els.length === 1 ? '' : 's'}: ${stateCounts(els)})`);
    } catch {
      replace(arrayNote, '');
    }
  };

  taskSel.addEventListener('change', () => {
    logTask = Number(taskSel.value);
    logOffset = 0;
    logText = '';
    logBox.textContent = '';
    void refreshLogs();
  });

  const placementTable = h('table', { class: 'table', id: 'job-placement' },
    h('thead', {}, h('tr', {}, ['Task', 'Node', 'GPUs', 'Share', 'MIG'].map((c) => h('th', {}, c)))), placement);
  const el = h('section', { class: 'view-job' },
    h('p', {}, h('a', { href: '#/queue' }, '← Queue')),
    title, actions, summary,
    h('h3', {}, 'Placement'), h('p', { class: 'muted', id: 'placement-note' }, placementNote), placementTable,
    h('h3', {}, 'Attempts'), attempts,
    h('h3', {}, 'Dependencies'), deps,
    h('div', { class: 'cols' },
      h('div', {}, h('h3', {}, 'Events'), events),
      h('div', {}, h('h3', {}, 'Logs ', taskSel), logNote, logBox)));
  return { el, refresh };
}
