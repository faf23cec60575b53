// Job actions shared by the queue and job views: cancel and change priority, with the API's answer
// (a 403's reason included) shown in the banner.
import { post, type JobSummary } from './api';
import { clearError, showError } from './notice';

export const ACTIVE = new Set(['pending', 'running', 'checkpointing']);

export async function cancelJob(job: Pick<JobSummary, 'id' | 'name'>): Promise<boolean> {
  if (!window.confirm(`Cancel job ${job.id} (${job.name})?`)) return false;
  try {
    await post(`/api/v1/jobs/${job.id}/cancel`);
    clearError();
    return true;
  } catch (e) {
    showError(e, `cancel job ${job.id}`);
    return false;
  }
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
