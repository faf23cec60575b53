// Queue: jobs with their position in the queue, pending reason and estimated start; filters by
// queue, user and state (GET /api/v1/jobs). An array is one row (its array job id, with its elements'
// counts by state, from GET /api/v1/jobs?array=ID) that expands to its elements (ID_0, ID_1, ...);
// `#/queue/ID` shows array ID alone, expanded.
import { get, refOf, type JobList, type JobSummary } from '../api';
import { h, reasonText, relTime, replace, stateBadge } from '../dom';
import { ACTIVE, cancelJob } from '../actions';
import { canModify, session } from '../session';
import type { View } from '../view';

const expanded = new Set<number>();  // arrays the user opened (kept across polls and visits)
const STATE_ORDER = ['running', 'checkpointing', 'pending', 'succeeded', 'failed', 'timeout', 'cancelled'];

// "3 running, 5 pending, 2 succeeded" as badges, in a fixed order of states.
function countBadges(els: JobSummary[]): HTMLElement {
  const c = new Map<string, number>();
  for (const e of els) c.set(e.state, (c.get(e.state) ?? 0) + 1);
  const states = [...c.keys()].sort((a, b) => (STATE_ORDER.indexOf(a) + 99) % 99 - (STATE_ORDER.indexOf(b) + 99) % 99);
  const held = els.filter((e) => e.held).length;
  return h('span', { class: 'counts' }, states.map((s, i) => [i ? ', ' : '', h('span', { class: `badge st-${s}`, 'data-count-state': s }, `${c.get(s)} ${s}`)]),
    held ? h('span', { class: 'chip held' }, `${held} held`) : '');
}

const filters = { queue: '', user: '', state: 'active' };
const STATES = ['active', 'pending', 'running', 'checkpointing', 'succeeded', 'failed', 'cancelled', 'timeout', 'all'];

export function queueView(arrayArg = ''): View {
  const onlyArray = /^\d+$/.test(arrayArg) ? Number(arrayArg) : null;
  if (onlyArray !== null) expanded.add(onlyArray);
  const queueSel = h('select', { id: 'f-queue' }, h('option', { value: '' }, 'all queues'),
    session.queues.map((q) => h('option', { value: q.name }, q.path)));
  queueSel.value = filters.queue;
  const userIn = h('input', { id: 'f-user', placeholder: 'any user', value: filters.user, size: 12 });
  const stateSel = h('select', { id: 'f-state' }, STATES.map((s) => h('option', { value: s }, s)));
  stateSel.value = filters.state;
  const tbody = h('tbody');
  const total = h('span', { class: 'muted', id: 'job-total' });

  const jobRow = (j: JobSummary, element = false) =>
    h('tr', { 'data-job': j.id, 'data-ref': refOf(j), 'data-state': j.state, class: element ? 'element' : '' },
      h('td', { class: element ? 'ref indent' : 'ref' }, h('a', { href: `#/jobs/${refOf(j)}` }, refOf(j))),
      h('td', { class: 'name' }, j.name || '—'),
      h('td', {}, j.user),
      h('td', {}, j.queue),
      h('td', { class: 'prio' }, j.priority_class),
      h('td', {}, stateBadge(j.state), j.held ? h('span', { class: 'chip held' }, 'held') : ''),
      h('td', { class: 'num' }, `${j.tasks} × ${j.tasks ? j.gpus / j.tasks : 0}`),
      h('td', { class: 'num position' }, j.queue_position === null ? '—' : `#${j.queue_position}`),
      h('td', { class: 'reason' }, j.state === 'pending' || !ACTIVE.has(j.state) ? reasonText(j.reason) : j.nodes.join(', ')),
      h('td', {}, j.state === 'pending' ? relTime(j.estimated_start) : j.started ? `started ${relTime(j.started)}` : '—'),
      h('td', {}, relTime(j.submitted)),
      h('td', {}, ACTIVE.has(j.state) && canModify(j)
        ? h('button', { class: 'danger small', 'data-action': 'cancel', onclick: async () => { if (await cancelJob(j)) await refresh(); } }, 'Cancel')
        : ''));

  const arrayRows = (id: number, els: JobSummary[]) => {
    const open = expanded.has(id);
    const first = els[0];
    const pending = els.filter((e) => e.state === 'pending');
    const positions = els.map((e) => e.queue_position).filter((p): p is number => p !== null);
    const ests = pending.map((e) => e.estimated_start).filter((t): t is number => t !== null);
    const reasons = new Map<string, number>();
    for (const e of pending) if (e.reason) reasons.set(e.reason, (reasons.get(e.reason) ?? 0) + 1);
    const reason = [...reasons].sort((a, b) => b[1] - a[1])[0]?.[0] ?? els.filter((e) => ACTIVE.has(e.state) && e.state !== 'pending').flatMap((e) => e.nodes).join(', ');
    const active = els.filter((e) => ACTIVE.has(e.state));
    const toggle = h('button', { class: 'link toggle', 'data-action': 'expand', 'aria-expanded': String(open),
      title: open ? 'hide its elements' : 'show its elements', onclick: () => {
        if (expanded.has(id)) expanded.delete(id); else expanded.add(id);
        void refresh();
      } }, open ? '▾' : '▸');
    const head = h('tr', { class: 'array-row', 'data-array': id, 'data-state': 'array' },
      h('td', { class: 'ref' }, toggle, ' ', h('a', { href: `#/queue/${id}` }, String(id))),
      h('td', { class: 'name' }, first.name || '—', h('span', { class: 'muted small' }, ` array of ${els.length}`)),
      h('td', {}, first.user),
      h('td', {}, first.queue),
      h('td', { class: 'prio' }, first.priority_class),
      h('td', { class: 'array-counts' }, countBadges(els)),
      h('td', { class: 'num' }, `${first.tasks} × ${first.tasks ? first.gpus / first.tasks : 0} each`),
      h('td', { class: 'num position' }, positions.length ? `#${Math.min(...positions)}` : '—'),
      h('td', { class: 'reason' }, reasonText(reason)),
      h('td', {}, ests.length ? relTime(Math.min(...ests)) : '—'),
      h('td', {}, relTime(Math.min(...els.map((e) => e.submitted)))),
      h('td', {}, active.length && canModify(first)
        ? h('button', { class: 'danger small', 'data-action': 'cancel-array', onclick: async () => {
          if (await cancelJob({ id, name: `${first.name}, ${active.length} active element${active.length > 1 ? 's' : ''}` }, String(id))) await refresh();
        } }, 'Cancel array') : ''));
    return [head, open ? [...els].sort((a, b) => (a.array_task_id ?? 0) - (b.array_task_id ?? 0)).map((e) => jobRow(e, true)) : []];
  };

  const refresh = async () => {
    const q = new URLSearchParams({ limit: '1000' });
    if (onlyArray !== null) q.set('array', String(onlyArray));
    else {
      if (filters.queue) q.set('queue', filters.queue);
      if (filters.user) q.set('user', filters.user);
      if (filters.state === 'active') q.set('active', 'true');
      else if (filters.state !== 'all') q.set('state', filters.state);
    }
    const list = await get<JobList>(`/api/v1/jobs?${q}`);
    // Arrays: every element of each array listed (for counts over all its states).
    const arrayIds = [...new Set(list.jobs.map((j) => j.array_job_id).filter((a): a is number => !!a))];
    const elements = new Map<number, JobSummary[]>();
    await Promise.all(arrayIds.slice(0, 50).map(async (a) => {
      elements.set(a, onlyArray === a ? list.jobs : (await get<JobList>(`/api/v1/jobs?array=${a}&limit=1000`)).jobs);
    }));
    // Pending jobs first in queue order, then the others by id (newest first); an array sorts by its best element.
    type Entry = { key: number; id: number; job?: JobSummary; array?: number };
    const entries: Entry[] = [];
    const seen = new Set<number>();
    for (const j of list.jobs) {
      const a = j.array_job_id;
      if (a && elements.has(a)) {
        if (seen.has(a)) continue;
        seen.add(a);
        const pos = list.jobs.filter((x) => x.array_job_id === a).map((x) => x.queue_position ?? Infinity);
        entries.push({ key: Math.min(...pos), id: a, array: a });
      } else entries.push({ key: j.queue_position ?? Infinity, id: j.id, job: j });
    }
    entries.sort((x, y) => (x.key !== y.key ? x.key - y.key : y.id - x.id));
    const shown = entries.length;
    replace(total, `${list.total} job${list.total === 1 ? '' : 's'}`, arrayIds.length ? ` (${shown} row${shown === 1 ? '' : 's'}: arrays grouped)` : '');
    replace(tbody, entries.length === 0 ? h('tr', {}, h('td', { colspan: 12, class: 'muted' }, 'No jobs match.'))
      : entries.map((e) => (e.job ? jobRow(e.job) : arrayRows(e.array!, elements.get(e.array!)!))));
  };

  const onFilter = () => {
    filters.queue = queueSel.value;
    filters.user = userIn.value.trim();
    filters.state = stateSel.value;
    void refresh();
  };
  queueSel.addEventListener('change', onFilter);
  stateSel.addEventListener('change', onFilter);
  userIn.addEventListener('change', onFilter);

  const el = h('section', { class: 'view-queue' },
    h('h2', {}, onlyArray !== null ? `Array ${onlyArray} ` : 'Queue ', total),
    onlyArray !== null
      ? h('p', { class: 'filters', id: 'array-only' }, `Only the elements of array ${onlyArray}, in every state. `, h('a', { href: '#/queue' }, 'Show all jobs'))
      : h('div', { class: 'filters' }, h('label', {}, 'Queue ', queueSel), h('label', {}, 'User ', userIn), h('label', {}, 'State ', stateSel)),
    h('table', { class: 'table', id: 'jobs' },
      h('thead', {}, h('tr', {}, ['Job', 'Name', 'User', 'Queue', 'Class', 'State', 'Tasks × GPUs', 'Position', 'Reason / nodes', 'Est. start', 'Submitted', ''].map((c) => h('th', {}, c)))),
      tbody));
  return { el, refresh };
}
