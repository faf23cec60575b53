// A job's events as people read them (local times, kinds in words, details as sentences, never raw
// JSON), and its attempts rebuilt from them: a `started` event (detail: attempt, placement) opens an
// attempt; the next event that ends one (succeeded, failed, cancelled, timed_out, preempted, lost,
// interrupted) closes it. Used by the job view.
import type { JobDetail, JobEvent, Placement } from '../api';
import { absTime, duration, h, gpus as gpuText, reasonText } from '../dom';

export const KIND_WORDS: Record<string, string> = {
  submitted: 'Submitted', started: 'Started', priority_changed: 'Priority changed',
  checkpoint_requested: 'Checkpoint requested', checkpoint_acknowledged: 'Checkpoint saved',
  spot_interrupted: 'Spot interruption notice', spot_avoided: 'Now avoids spot pools', requeued: 'Requeued',
  held: 'Held', released: 'Released', signalled: 'Signalled', succeeded: 'Succeeded', failed: 'Failed',
  cancelled: 'Cancelled', timed_out: 'Timed out', preempted: 'Preempted', lost: 'Lost (its node or agent went away)',
  interrupted: 'Interrupted (stopped to be requeued, no restart counted)', denied: 'Denied',
};
const ENDS = new Set(['succeeded', 'failed', 'cancelled', 'timed_out', 'preempted', 'lost', 'interrupted']);
export const END_WORDS: Record<string, string> = {
  succeeded: 'succeeded', failed: 'failed', cancelled: 'cancelled', timed_out: 'timed out (time limit)',
  preempted: 'preempted', lost: 'lost (node or agent lost)', interrupted: 'interrupted (requeued or planned stop)',
};

export function kindWords(kind: string): string {
  return KIND_WORDS[kind] ?? kind.replace(/_/g, ' ').replace(/^./, (c) => c.toUpperCase());
}

export function actorWords(actor: string): string {
  if (actor.startsWith('agent:')) return `the agent on ${actor.slice(6)}`;
  if (actor === 'scheduler' || actor === 'controller') return `the ${actor}`;
  return actor;
}

function taskPlace(p: Placement): string {
  if (p.mig) return `${p.node} (MIG ${p.mig.profile} on GPU ${p.mig.gpu}, slice ${p.mig.start})`;
  if (!p.gpus || p.gpus.length === 0) return `${p.node} (no GPU${p.cpu_milli ? `, ${p.cpu_milli / 1000} CPU` : ''})`;
  const share = p.gpu_milli && p.gpu_milli !== 1000 ? `${gpuText(p.gpu_milli)} of ` : '';
  return `${p.node} (${share}GPU${p.gpus.length > 1 ? 's' : ''} ${p.gpus.join(', ')})`;
}

// Where a placement ran, per node: "gpu-0 (GPUs 0, 1, 2, 3), gpu-1 (GPUs 0, 1, 2, 3)"; tasks on one
// node with whole GPUs are merged.
export function placementWords(pl: Placement[] | undefined): string {
  if (!pl || pl.length === 0) return '—';
  const byNode = new Map<string, Placement[]>();
  for (const p of pl) byNode.set(p.node, [...(byNode.get(p.node) ?? []), p]);
  const out: string[] = [];
  for (const [node, ps] of byNode) {
    if (ps.every((p) => !p.mig && (p.gpu_milli ?? 1000) === 1000 && p.gpus.length > 0)) {
      const g = ps.flatMap((p) => p.gpus);
      out.push(`${node} (GPU${g.length > 1 ? 's' : ''} ${g.join(', ')}${ps.length > 1 ? `; ${ps.length} tasks` : ''})`);
    } else out.push(...ps.map(taskPlace));
  }
  return out.join(', ');
}

function valueWords(v: unknown): string {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (Array.isArray(v)) return v.map(valueWords).join(', ');
  if (typeof v === 'object') return Object.entries(v as object).map(([k, x]) => `${k.replace(/_/g, ' ')} ${valueWords(x)}`).join(', ');
  return String(v);
}

// The detail of an event as short sentences (never JSON).
export function detailWords(e: JobEvent): string[] {
  const d = (e.detail && typeof e.detail === 'object' ? { ...(e.detail as Record<string, unknown>) } : {}) as Record<string, unknown>;
  const out: string[] = [];
  const take = (k: string) => { const v = d[k]; delete d[k]; return v; };
  const attempt = take('attempt');
  const placement = take('placement') as Placement[] | undefined;
  if (attempt !== undefined) out.push(`attempt ${attempt}`);
  if (placement) out.push(`on ${placementWords(placement)}`);
  const reason = take('reason');
  if (typeof reason === 'string' && reason) out.push(reasonText(reason));
  const q = take('queue'), cls = take('priority_class');
  if (q !== undefined || cls !== undefined) out.push(`to queue ${valueWords(q)}${cls !== undefined ? `, class ${valueWords(cls)}` : ''}`);
  const aj = take('array_job_id'), at = take('array_task_id');
  if (aj !== undefined && aj !== null) out.push(`element ${aj}_${valueWords(at)} of array ${aj}`);
  const from = take('from'), to = take('to');
  if (from !== undefined || to !== undefined) out.push(`from ${valueWords(from)} to ${valueWords(to)}`);
  const sig = take('signal');
  if (sig !== undefined) out.push(`signal ${valueWords(sig)}`);
  const adminHold = take('admin_hold');
  if (adminHold === true) out.push('an admin hold: only an admin releases it');
  const ck = take('checkpointed');
  if (ck !== undefined) out.push(ck ? 'after saving a checkpoint' : 'without a checkpoint');
  const util = take('gpu_util_pct');
  if (typeof util === 'number') out.push(`mean GPU utilisation ${util.toFixed(0)} %`);
  const evict = take('evict_by');
  if (typeof evict === 'number' && evict > 0) out.push(`to stop by ${absTime(evict)}`);
  const restarts = take('restarts');
  if (restarts !== undefined) out.push(`after ${valueWords(restarts)} restart${restarts === 1 ? '' : 's'}`);
  if (take('spot_interruption') === true) out.push('because of a spot interruption');
  for (const [k, v] of Object.entries(d)) out.push(`${k.replace(/_/g, ' ')}: ${valueWords(v)}`);
  return out;
}

export function eventItem(e: JobEvent): HTMLElement {
  const words = detailWords(e);
  return h('li', { 'data-kind': e.kind, class: `ev-${e.kind}` },
    h('time', { datetime: new Date(e.time * 1000).toISOString() }, absTime(e.time)), ' ',
    h('b', { class: 'kind' }, kindWords(e.kind)), ' ', h('span', { class: 'actor muted' }, `by ${actorWords(e.actor)}`),
    words.length ? h('span', { class: 'detail' }, words.join('; ')) : '');
}

export interface Attempt {
  n: number; start: number; end: number | null; placement: Placement[]; endKind: string | null; endReason: string;
  checkpoints: number; checkpointed: boolean;
}

export function attemptsOf(j: Pick<JobDetail, 'events'>): Attempt[] {
  const out: Attempt[] = [];
  let open: Attempt | null = null;
  for (const e of [...j.events].sort((a, b) => a.seq - b.seq)) {
    const d = (e.detail ?? {}) as Record<string, unknown>;
    if (e.kind === 'started') {
      if (open) open.end = e.time;  // (not expected: a start without an end)
      open = { n: typeof d.attempt === 'number' ? d.attempt : out.length + 1, start: e.time, end: null,
               placement: Array.isArray(d.placement) ? (d.placement as Placement[]) : [], endKind: null, endReason: '',
               checkpoints: 0, checkpointed: false };
      out.push(open);
    } else if (open && e.kind === 'checkpoint_acknowledged') {
      open.checkpoints++;
    } else if (open && ENDS.has(e.kind)) {
      open.end = e.time;
      open.endKind = e.kind;
      open.endReason = typeof d.reason === 'string' ? reasonText(d.reason) : '';
      open.checkpointed = d.checkpointed === true;
      open = null;
    }
  }
  return out;
}

// One row per attempt, and a bar per attempt on a common time axis (submission to now or the end).
export function attemptsView(j: JobDetail, now = Date.now() / 1000): HTMLElement {
  const atts = attemptsOf(j);
  if (atts.length === 0)
    return h('p', { class: 'muted', id: 'job-attempts-none' }, j.state === 'pending' ? 'No attempt yet: the job has not started.' : 'The job never started.');
  const t0 = Math.min(j.submitted, ...atts.map((a) => a.start));
  const t1 = Math.max(now, ...atts.map((a) => a.end ?? now));
  const span = Math.max(1, t1 - t0);
  const bars = h('div', { class: 'att-track', title: `from ${absTime(t0)} to ${absTime(t1)}` },
    atts.map((a) => h('div', {
      class: `att-bar end-${a.endKind ?? 'open'}`,
      style: `left:${(((a.start - t0) / span) * 100).toFixed(2)}%;width:${Math.max(0.6, (((a.end ?? now) - a.start) / span) * 100).toFixed(2)}%`,
      title: `attempt ${a.n}: ${absTime(a.start)} – ${a.end ? absTime(a.end) : 'now'}`,
    }, String(a.n))));
  const rows = atts.map((a) => {
    const live = a.end === null;
    const ended = live ? (j.state === 'checkpointing' ? 'checkpointing (still running)' : j.state === 'running' ? 'running' : '—')
      : END_WORDS[a.endKind ?? ''] ?? a.endKind ?? '—';
    return h('tr', { 'data-attempt': a.n, 'data-end': a.endKind ?? (live ? 'running' : '') },
      h('td', { class: 'num' }, `#${a.n}`),
      h('td', {}, absTime(a.start)),
      h('td', { class: 'where' }, placementWords(a.placement)),
      h('td', { class: 'num dur' }, live ? `${duration(now - a.start)} so far` : duration((a.end ?? now) - a.start)),
      h('td', { class: 'why' }, h('b', {}, ended),
        a.endReason ? ` — ${a.endReason}` : '',
        a.checkpoints ? ` (${a.checkpoints} checkpoint${a.checkpoints > 1 ? 's' : ''} saved)` : a.checkpointed ? ' (checkpoint saved)' : ''));
  });
  return h('div', { id: 'job-attempts' }, bars,
    h('table', { class: 'table attempts' },
      h('thead', {}, h('tr', {}, ['Attempt', 'Started', 'Where it ran', 'How long', 'How it ended'].map((c) => h('th', {}, c)))),
      h('tbody', {}, rows)));
}
