// A job's dependencies as a small graph (inline SVG): on the left the jobs it waits for, each with the
// dependency type (after, afterany, afterok, afternotok, singleton) and its state; in the middle the
// job; on the right the pending jobs that wait for it (found in the active jobs' `dependency` text).
// An arrow is green when the condition holds, grey while it may still hold, red when it never can.
import { get, refOf, type JobDetail, type JobList, type JobSummary } from '../api';
import { h, svg } from '../dom';
import { ENDED } from '../actions';

export interface DepPart { type: string; refs: string[] }
export type DepStatus = 'met' | 'waiting' | 'never';
export interface DepNode { ref: string; name: string; state: string; type: string; status: DepStatus; note: string }

// "afterok:12:13_2,afterany:14,singleton" -> [{type: afterok, refs: [12, 13_2]}, ...]
export function parseDeps(text: string | null | undefined): DepPart[] {
  if (!text) return [];
  return text.split(',').map((p) => p.trim()).filter(Boolean).map((p) => {
    const [type, ...refs] = p.split(':');
    return { type, refs: refs.filter(Boolean) };
  });
}

// Does `type` hold for a job in `state` (or can it never)?
export function depStatus(type: string, state: string): DepStatus {
  const bad = state === 'failed' || state === 'cancelled' || state === 'timeout';
  switch (type) {
    case 'after': return state === 'pending' ? 'waiting' : 'met';
    case 'afterany': return ENDED.has(state) ? 'met' : 'waiting';
    case 'afterok': return state === 'succeeded' ? 'met' : bad ? 'never' : 'waiting';
    case 'afternotok': return bad ? 'met' : state === 'succeeded' ? 'never' : 'waiting';
    default: return 'waiting';
  }
}

function counts(jobs: JobSummary[]): string {
  const c = new Map<string, number>();
  for (const j of jobs) c.set(j.state, (c.get(j.state) ?? 0) + 1);
  return [...c].map(([s, n]) => `${n} ${s}`).join(', ');
}

async function upstreamOf(j: JobDetail): Promise<DepNode[]> {
  const out: DepNode[] = [];
  for (const part of parseDeps(j.dependency)) {
    if (part.type === 'singleton') {
      const q = new URLSearchParams({ name: j.name, user: j.user, active: 'true', limit: '1000' });
      const others = (await get<JobList>(`/api/v1/jobs?${q}`)).jobs.filter((o) => o.id !== j.id &&
        (o.state === 'running' || o.state === 'checkpointing' || (o.state === 'pending' && o.id < j.id)));
      if (others.length === 0)
        out.push({ ref: '', name: `no other “${j.name}” of ${j.user}`, state: 'none running', type: 'singleton', status: 'met', note: '' });
      for (const o of others)
        out.push({ ref: refOf(o), name: o.name, state: o.state, type: 'singleton', status: 'waiting', note: 'same name and user' });
      continue;
    }
    for (const ref of part.refs) {
      try {
        if (!ref.includes('_')) {  // an array job id stands for all its elements
          const els = (await get<JobList>(`/api/v1/jobs?array=${encodeURIComponent(ref)}&limit=1000`)).jobs;
          if (els.length > 0) {
            const st = els.map((e) => depStatus(part.type, e.state));
            const status: DepStatus = st.includes('never') ? 'never' : st.every((s) => s === 'met') ? 'met' : 'waiting';
            out.push({ ref, name: els[0].name, state: counts(els), type: part.type, status, note: `array of ${els.length}` });
            continue;
          }
        }
        const d = await get<JobSummary>(`/api/v1/jobs/${encodeURIComponent(ref)}`);
        out.push({ ref, name: d.name, state: d.state, type: part.type, status: depStatus(part.type, d.state), note: '' });
      } catch {
        out.push({ ref, name: '(not found)', state: 'unknown', type: part.type, status: 'waiting', note: '' });
      }
    }
  }
  return out;
}

async function downstreamOf(j: JobDetail): Promise<DepNode[]> {
  const names = new Set([refOf(j)]);
  if (j.array_job_id) names.add(String(j.array_job_id));  // the array's id names this element too
  else names.add(String(j.id));
  const active = (await get<JobList>('/api/v1/jobs?active=true&limit=1000')).jobs;
  const out: DepNode[] = [];
  for (const o of active) {
    if (o.id === j.id || !o.dependency) continue;
    for (const part of parseDeps(o.dependency))
      if (part.refs.some((r) => names.has(r)))
        out.push({ ref: refOf(o), name: o.name, state: o.state, type: part.type, status: depStatus(part.type, j.state), note: '' });
  }
  return out;
}

export async function loadDeps(j: JobDetail): Promise<{ up: DepNode[]; down: DepNode[] }> {
  const [up, down] = await Promise.all([upstreamOf(j), downstreamOf(j)]);
  return { up, down };
}

const STATUS_WORDS: Record<DepStatus, string> = { met: 'met', waiting: 'waiting', never: 'can never be met' };
const BOX_W = 280, BOX_H = 58, GAP = 14, COL = 370, MAX = 12;
const cut = (s: string, n = 36) => (s.length > n ? s.slice(0, n - 1) + '…' : s);

function box(x: number, y: number, side: string, n: DepNode | null, self?: JobDetail): SVGElement {
  const ref = self ? refOf(self) : n!.ref;
  const state = self ? self.state : n!.state;
  const g = svg('g', { class: `dep-node side-${side}${n ? ` status-${n.status}` : ''}`, 'data-side': side, 'data-ref': ref,
                       'data-state': state, ...(n ? { 'data-type': n.type, 'data-status': n.status } : {}) });
  const label = self ? `${ref} ${self.name}` : `${ref}${ref ? ' ' : ''}${n!.name}`;
  // (an array: its size on the second line, its counts by state on the third)
  const line2 = self ? `this job · ${state}` : n!.note ? `${n!.type} · ${n!.note}` : `${n!.type} · ${state}`;
  const line3 = self ? (self.dependency ? `depends: ${self.dependency}` : 'no dependency')
    : n!.note ? `${STATUS_WORDS[n!.status]} · ${state}` : STATUS_WORDS[n!.status];
  const body = [
    svg('rect', { x, y, width: BOX_W, height: BOX_H, rx: 6, class: `dep-box st-${state.replace(/[^a-z-]/g, '')}` }),
    svg('text', { x: x + 8, y: y + 17, class: 'dep-title' }, cut(label)),
    svg('text', { x: x + 8, y: y + 34, class: 'dep-line' }, cut(line2, 42)),
    svg('text', { x: x + 8, y: y + 50, class: 'dep-line muted' }, cut(line3, 42)),
    svg('title', {}, `${label}\n${line2}\n${line3}`),
  ];
  if (ref && !self) g.appendChild(svg('a', { href: `#/jobs/${ref}` }, ...body));
  else for (const b of body) g.appendChild(b);
  return g;
}

export function depsGraph(j: JobDetail, up: DepNode[], down: DepNode[]): HTMLElement {
  if (up.length === 0 && down.length === 0)
    return h('p', { class: 'muted', id: 'job-deps-none' }, 'No dependencies: it waits for no job, and no pending job waits for it.');
  const ups = up.slice(0, MAX), downs = down.slice(0, MAX);
  const rows = Math.max(ups.length, downs.length, 1);
  const height = rows * (BOX_H + GAP) + GAP;
  const cols = (ups.length ? 1 : 0) + 1 + (downs.length ? 1 : 0);
  const width = (cols - 1) * COL + BOX_W + 20;
  const xSelf = ups.length ? 10 + COL : 10;
  const ySelf = (height - BOX_H) / 2;
  const yAt = (i: number, n: number) => (height - n * (BOX_H + GAP) + GAP) / 2 + i * (BOX_H + GAP);
  const el = svg('svg', { id: 'job-deps-graph', class: 'deps', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img',
                          'aria-label': `dependencies of job ${refOf(j)}` });
  const defs = svg('defs', {});
  for (const s of ['met', 'waiting', 'never'])
    defs.appendChild(svg('marker', { id: `arrow-${s}`, viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto' },
      svg('path', { d: 'M0,0 L10,5 L0,10 z', class: `dep-arrowhead status-${s}` })));
  el.appendChild(defs);
  const edge = (x1: number, y1: number, x2: number, y2: number, s: DepStatus, type: string) => {
    const mx = (x1 + x2) / 2;
    el.appendChild(svg('path', { d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, class: `dep-edge status-${s}`,
                                 'marker-end': `url(#arrow-${s})`, 'data-type': type }));
  };
  ups.forEach((n, i) => {
    const y = yAt(i, ups.length);
    edge(10 + BOX_W, y + BOX_H / 2, xSelf, ySelf + BOX_H / 2, n.status, n.type);
    el.appendChild(box(10, y, 'up', n));
  });
  downs.forEach((n, i) => {
    const y = yAt(i, downs.length);
    edge(xSelf + BOX_W, ySelf + BOX_H / 2, xSelf + COL, y + BOX_H / 2, n.status, n.type);
    el.appendChild(box(xSelf + COL, y, 'down', n));
  });
  el.appendChild(box(xSelf, ySelf, 'self', null, j));
  const more = up.length - ups.length + down.length - downs.length;
  return h('div', { id: 'job-deps' },
    h('div', { class: 'deps-legend muted' }, ups.length ? 'Left: the jobs it waits for. ' : '', downs.length ? 'Right: pending jobs that wait for it. ' : '',
      'Arrows: ', h('span', { class: 'k-met' }, 'met'), ', ', h('span', { class: 'k-waiting' }, 'waiting'), ', ',
      h('span', { class: 'k-never' }, 'can never be met'), '.'),
    h('div', { class: 'scroll' }, el),
    more > 0 ? h('p', { class: 'muted' }, `and ${more} more not drawn`) : '');
}
