// Who is signed in and what their role lets them do (mirrors the server's checks in docs/api.md; the
// server still decides: a forced call gets its 403, which the portal shows).
import { get, type JobSummary, type Me, type QueueInfo } from './api';

// The scheduler's default classes; a cluster config may declare others, which queues then list.
const DEFAULT_CLASSES = ['production-inference', 'production-training', 'research', 'preemptible'];

export const session: { me: Me | null; queues: QueueInfo[] } = { me: null, queues: [] };

export async function loadQueues(): Promise<QueueInfo[]> {
  session.queues = (await get<{ queues: QueueInfo[] }>('/api/v1/queues')).queues;
  return session.queues;
}

export function queueByName(name: string): QueueInfo | undefined {
  return session.queues.find((q) => q.name === name);
}

// Whether queue `name` is `root` or below it.
export function inSubtree(name: string, root: string): boolean {
  if (!root) return false;
  const q = queueByName(name);
  const path = q ? q.path.split('/') : [name];
  return path.includes(root);
}

export function canSubmit(me: Me | null = session.me): boolean {
  return !!me && (me.role === 'admin' || me.role === 'team-lead' || me.role === 'member');
}

// Cancel and change priority: admin anything; team lead their subtree; member their own jobs there.
export function canModify(job: Pick<JobSummary, 'queue' | 'user'>, me: Me | null = session.me): boolean {
  if (!me) return false;
  if (me.role === 'admin') return true;
  if (me.role === 'team-lead') return inSubtree(job.queue, me.queue);
  if (me.role === 'member') return job.user === me.user && inSubtree(job.queue, me.queue);
  return false;
}

export function allClasses(): string[] {
  const s = new Set(DEFAULT_CLASSES);
  for (const q of session.queues) for (const c of q.priority_classes) s.add(c);
  return [...s];
}

// The classes a job in `queue` may use for this user (admins are not limited by the queue).
export function allowedClasses(queue: string, me: Me | null = session.me): string[] {
  const q = queueByName(queue);
  if (q && Array.isArray(q.usable_classes)) return q.usable_classes;  // the server's class policy for this caller
  if (me?.role === 'admin' || !q || q.priority_classes.length === 0) return allClasses();
  return q.priority_classes;
}

// Leaf queues this user may submit to.
export function submitQueues(me: Me | null = session.me): QueueInfo[] {
  const leaves = session.queues.filter((q) => q.leaf);
  if (!me) return [];
  if (me.role === 'admin') return leaves;
  return leaves.filter((q) => inSubtree(q.name, me.queue));
}
