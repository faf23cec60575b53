// Queue: jobs with their position in the queue, pending reason and estimated start; filters by
// queue, user and state (GET /api/v1/jobs).
import { get, type JobList } from '../api';
import { h, relTime, replace, stateBadge } from '../dom';
import { ACTIVE, cancelJob } from '../actions';
import { canModify, session } from '../session';
import type { View } from '../view';

const filters = { queue: '', user: '', state: 'active' };
const STATES = ['active', 'pending', 'running', 'checkpointing', 'succeeded', 'failed', 'cancelled', 'timeout', 'all'];

export function queueView(): View {
  const queueSel = h('select', { id: 'f-queue' }, h('option', { value: '' }, 'all queues'),
    session.queues.map((q) => h('option', { value: q.name }, q.path)));
  queueSel.value = filters.queue;
  const userIn = h('input', { id: 'f-user', placeholder: 'any user', value: filters.user, size: 12 });
  const stateSel = h('select', { id: 'f-state' }, STATES.map((s) => h('option', { value: s }, s)));
  stateSel.value = filters.state;
  const tbody = h('tbody');
  const total = h('span', { class: 'muted', id: 'job-total' });

  const refresh = async () => {
    const q = new URLSearchParams({ limit: '1000' });
    if (filters.queue) q.set('queue', filters.queue);
    if (filters.user) q.set('user', filters.user);
    if (filters.state === 'active') q.set('active', 'true');
    else if (filters.state !== 'all') q.set('state', filters.state);
    const list = await get<JobList>(`/api/v1/jobs?${q}`);
    // Pending jobs first in queue order, then the others by id (newest first).
    const jobs = [...list.jobs].sort((a, b) => {
      const pa = a.queue_position ?? Infinity, pb = b.queue_position ?? Infinity;
      if (pa !== pb) return pa - pb;
      return b.id - a.id;
    });
    replace(total, `${list.total} job${list.total === 1 ? '' : 's'}`);
    replace(tbody, jobs.length === 0 ? h('tr', {}, h('td', { colspan: 12, class: 'muted' }, 'No jobs match.')) : jobs.map((j) =>
      h('tr', { 'data-job': j.id, 'data-state': j.state },
        h('td', {}, h('a', { href: `#/jobs/${j.id}` }, String(j.id))),
        h('td', { class: 'name' }, j.name || '—'),
        h('td', {}, j.user),
        h('td', {}, j.queue),
        h('td', { class: 'prio' }, j.priority_class),
        h('td', {}, stateBadge(j.state)),
        h('td', { class: 'num' }, `${j.tasks} × ${j.tasks ? j.gpus / j.tasks : 0}`),
        h('td', { class: 'num position' }, j.queue_position === null ? '—' : `#${j.queue_position}`),
        h('td', { class: 'reason' }, j.state === 'pending' || !ACTIVE.has(j.state) ? j.reason : j.nodes.join(', ')),
        h('td', {}, j.state === 'pending' ? relTime(j.estimated_start) : j.started ? `started ${relTime(j.started)}` : '—'),
        h('td', {}, relTime(j.submitted)),
        h('td', {}, ACTIVE.has(j.state) && canModify(j)
          ? h('button', { class: 'danger small', 'data-action': 'cancel', onclick: async () => { if (await cancelJob(j)) await refresh(); } }, 'Cancel')
          : ''))));
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
    h('h2', {}, 'Queue ', total),
    h('div', { class: 'filters' }, h('label', {}, 'Queue ', queueSel), h('label', {}, 'User ', userIn), h('label', {}, 'State ', stateSel)),
    h('table', { class: 'table', id: 'jobs' },
      h('thead', {}, h('tr', {}, ['ID', 'Name', 'User', 'Queue', 'Class', 'State', 'Tasks × GPUs', 'Position', 'Reason / nodes', 'Est. start', 'Submitted', ''].map((c) => h('th', {}, c)))),
      tbody));
  return { el, refresh };
}
