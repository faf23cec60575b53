// Job detail: summary, placement on nodes/GPUs/MIG slices, the events timeline, a logs tail per task,
// and (when the role allows) cancel and change of priority class (GET /api/v1/jobs/{id}, .../logs).
import { ApiError, get, raw, type JobDetail } from '../api';
import { absTime, h, relTime, replace, stateBadge } from '../dom';
import { ACTIVE, cancelJob, setPriority } from '../actions';
import { describe } from '../notice';
import { allowedClasses, canModify } from '../session';
import type { View } from '../view';

const LOG_KEEP = 200_000;  // characters of log kept on screen

export function jobView(id: number): View {
  const title = h('h2', {}, `Job ${id}`);
  const summary = h('dl', { class: 'summary', id: 'job-summary' });
  const actions = h('div', { class: 'actions', id: 'job-actions' });
  const placement = h('tbody');
  const events = h('ol', { class: 'timeline', id: 'job-events' });
  const taskSel = h('select', { id: 'log-task' });
  const logBox = h('pre', { class: 'logs', id: 'job-logs' });
  const logNote = h('div', { class: 'muted', id: 'log-note' });
  let job: JobDetail | null = null;
  let actionsKey = '';
  let logTask = 0, logOffset = 0, logText = '';

  const renderActions = (j: JobDetail) => {
    const key = `${j.state}|${j.priority_class}|${canModify(j)}`;
    if (key === actionsKey) return;  // keep the select as the user left it between polls
    actionsKey = key;
    if (!ACTIVE.has(j.state) || !canModify(j)) {
      replace(actions, ACTIVE.has(j.state) ? h('span', { class: 'muted' }, 'Read only: your role may not change this job.') : '');
      return;
    }
    const classes = allowedClasses(j.queue);
    const sel = h('select', { id: 'priority-select' }, classes.map((c) => h('option', { value: c }, c)));
    if (!classes.includes(j.priority_class)) sel.prepend(h('option', { value: j.priority_class }, j.priority_class));
    sel.value = j.priority_class;
    replace(actions,
      h('label', {}, 'Priority class ', sel), ' ',
      h('button', { id: 'priority-apply', 'data-action': 'priority', onclick: async () => {
        if (sel.value !== j.priority_class && (await setPriority(j.id, sel.value))) { actionsKey = ''; await refresh(); }
      } }, 'Change priority'), ' ',
      h('button', { id: 'cancel-job', class: 'danger', 'data-action': 'cancel', onclick: async () => {
        if (await cancelJob(j)) { actionsKey = ''; await refresh(); }
      } }, 'Cancel job'));
  };

  const refreshLogs = async () => {
    logBox.hidden = !logText;
    if (!job || job.started === null) {
      replace(logNote, 'No logs before the job starts.');
      return;
    }
    try {
      const res = await raw('GET', `/api/v1/jobs/${id}/logs?task=${logTask}&offset=${logOffset}&limit=65536`);
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
      j = await get<JobDetail>(`/api/v1/jobs/${id}`);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) replace(title, `Job ${id}: `, h('span', { class: 'error' }, e.message));
      throw e;
    }
    job = j;
    replace(title, `Job ${j.id}: `, h('span', { class: 'name' }, j.name || '(unnamed)'), ' ', stateBadge(j.state));
    const pos = j.pending ? `#${j.pending.queue_position} in ${j.queue} (#${j.pending.overall_position} overall)` : '—';
    const dl: [string, string | Node][] = [
      ['User', j.user], ['Queue', j.queue], ['Project', j.project || '—'], ['Priority class', h('span', { id: 'job-priority' }, j.priority_class)],
      ['Tasks × GPUs', `${j.tasks} × ${j.tasks ? j.gpus / j.tasks : 0}`], ['Position', h('span', { id: 'job-position' }, pos)],
      ['Reason', j.reason || '—'], ['Estimated start', j.pending ? `${relTime(j.pending.estimated_start)} (${absTime(j.pending.estimated_start)})` : '—'],
      ['Submitted', absTime(j.submitted)], ['Started', absTime(j.started)], ['Finished', absTime(j.finished)],
      ['Attempt / restarts / preemptions', `${j.attempt} / ${j.restarts} / ${j.preemptions}`],
      ['Exit code', j.exit_code === null ? '—' : `${j.exit_code} (ExitCode ${j.exit ?? '?'}, code:signal)`],
      ['Command', Array.isArray(j.spec?.command) ? h('code', {}, (j.spec.command as string[]).join(' '))
        : h('span', { class: 'muted', id: 'job-detail-hidden' }, j.detail_hidden ?? '—')],
    ];
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
    replace(placement, j.placement.length === 0 ? h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'Not placed.')) :
      j.placement.map((p) => h('tr', { 'data-task': p.task },
        h('td', {}, String(p.task)), h('td', {}, h('a', { href: '#/cluster' }, p.node)),
        h('td', {}, p.gpus.join(', ')), h('td', { class: 'num' }, `${p.gpu_milli / 1000} GPU`),
        h('td', {}, p.mig ? `GPU ${p.mig.gpu}: ${p.mig.profile} at slice ${p.mig.start}` : '—'))));
    replace(events, [...j.events].reverse().map((e) => h('li', { 'data-kind': e.kind },
      h('time', {}, absTime(e.time)), ' ', h('b', {}, e.kind), ' by ', e.actor,
      e.detail && Object.keys(e.detail as object).length ? h('code', { class: 'detail' }, JSON.stringify(e.detail)) : '')));
    if (taskSel.options.length !== j.tasks) {
      replace(taskSel, Array.from({ length: j.tasks }, (_, i) => h('option', { value: i }, `task ${i}`)));
      taskSel.value = String(logTask);
    }
    await refreshLogs();
  };

  taskSel.addEventListener('change', () => {
    logTask = Number(taskSel.value);
    logOffset = 0;
    logText = '';
    logBox.textContent = '';
    void refreshLogs();
  });

  const el = h('section', { class: 'view-job' },
    h('p', {}, h('a', { href: '#/queue' }, '← Queue')),
    title, actions, summary,
    h('h3', {}, 'Placement'),
    h('table', { class: 'table', id: 'job-placement' }, h('thead', {}, h('tr', {}, ['Task', 'Node', 'GPUs', 'Share', 'MIG'].map((c) => h('th', {}, c)))), placement),
    h('div', { class: 'cols' },
      h('div', {}, h('h3', {}, 'Events'), events),
      h('div', {}, h('h3', {}, 'Logs ', taskSel), logNote, logBox)));
  return { el, refresh };
}
