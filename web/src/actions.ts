// Job actions shared by the queue and job views: cancel, hold, release, requeue and change of
// priority, with the API's answer (a 403's or 409's reason included) shown in the banner. Jobs are
// named by their ref ("12", "12_3"): an array element's id is not its array's, but the first element's
// id is the array job id, which names the whole array.
import { post, refOf, type JobSummary } from './api';
import { clearError, describe, showError } from './notice';

export const ACTIVE = new Set(['pending', 'running', 'checkpointing']);
export const ENDED = new Set(['succeeded', 'failed', 'cancelled', 'timeout']);

export type Verb = 'cancel' | 'hold' | 'release' | 'requeue';

// Which verbs a job's state allows (the server still decides; docs/api.md "Hold, release, requeue").
export function verbsFor(j: Pick<JobSummary, 'state' | 'held'>): Verb[] {
  const v: Verb[] = [];
  if (j.state === 'pending' && !j.held) v.push('hold');
  if (j.held) v.push('release');
  if (j.state === 'running' || ENDED.has(j.state)) v.push('requeue');
  if (ACTIVE.has(j.state)) v.push('cancel');
  return v;
}

// Runs a verb on a job (or a whole array, by its array job id); null when done, else the error text.
export async function jobVerb(ref: string, verb: Verb, body: unknown = {}): Promise<string | null> {
  try {
    await post(`/api/v1/jobs/${encodeURIComponent(ref)}/${verb}`, body);
    clearError();
    return null;
  } catch (e) {
    showError(e, `${verb} job ${ref}`);
    return describe(e);
  }
}

export async function cancelJob(job: Pick<JobSummary, 'id' | 'name' | 'ref'>, ref = refOf(job)): Promise<boolean> {
  if (!window.confirm(`Cancel job ${ref} (${job.name})?`)) return false;
  return (await jobVerb(ref, 'cancel')) === null;
}

export async function setPriority(id: number, cls: string): Promise<boolean> {
  try {
    await post(`/api/v1/jobs/${id}/priority`, { priority_class: cls });
    clearError();
    return true;
  } catch (e) {
    showError(e, `priority of job ${id}`);
    return false;
  }
}
