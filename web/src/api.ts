// The REST API client (docs/api.md): bearer token from sessionStorage, the one error shape turned
// into ApiError (status, code, message, field).

const TOKEN_KEY = 'tessera.token';

export class ApiError extends Error {
  constructor(public status: number, public code: string, message: string, public field?: string) {
    super(message);
  }
  describe(): string {
    return `${this.status} ${this.code}: ${this.message}`;
  }
}

export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}
export function setToken(t: string | null): void {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

let onUnauthenticated: (() => void) | null = null;
export function setUnauthenticatedHandler(f: () => void): void {
  onUnauthenticated = f;
}

export async function raw(method: string, path: string, body?: unknown, tok = token()): Promise<Response> {
  const headers: Record<string, string> = {};
  if (tok) headers['Authorization'] = `Bearer ${tok}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, 'unavailable', `cannot reach the server (${String(e)})`);
  }
  if (!res.ok) {
    let code = `http_${res.status}`, message = `HTTP ${res.status}`, field: string | undefined;
    try {
      const j = await res.json();
      if (j && j.error) {
        code = j.error.code ?? code;
        message = j.error.message ?? message;
        field = j.error.field;
      }
    } catch {
      /* not JSON */
    }
    if (res.status === 401 && onUnauthenticated && tok === token()) onUnauthenticated();
    throw new ApiError(res.status, code, message, field);
  }
  return res;
}

export async function get<T>(path: string): Promise<T> {
  return (await raw('GET', path)).json() as Promise<T>;
}
export async function post<T>(path: string, body: unknown = {}): Promise<T> {
  return (await raw('POST', path, body)).json() as Promise<T>;
}

// A job's name as users write it: "12", or "12_3" for element 3 of array 12 (older servers: the id).
export function refOf(j: { id: number; ref?: string }): string {
  return j.ref ?? String(j.id);
}

// ---- shapes (the fields the portal reads) ---------------------------------------------------------

export type Role = 'admin' | 'team-lead' | 'member' | 'viewer' | 'agent';
export interface Me { user: string; role: Role; queue: string }

export interface JobSummary {
  id: number; name: string; user: string; queue: string; project: string; priority_class: string;
  state: string; tasks: number; gpus: number; submitted: number; started: number | null; finished: number | null;
  reason: string; queue_position: number | null; estimated_start: number | null; nodes: string[];
  // Workflow fields (docs/api.md, "Workflow fields"); optional so that an older server still renders.
  ref?: string; array_job_id?: number | null; array_task_id?: number | null; held?: boolean; held_by?: string | null;
  begin?: number | null; dependency?: string | null; attempt?: number; elapsed_s?: number | null; gpu_seconds?: number;
  exit_code?: number | null; exit?: string | null; last_nodes?: string[]; cpu_milli?: number; memory_mib?: number;
  wait?: string | null;
}
export interface Placement {
  task: number; node: string; gpus: number[]; gpu_milli: number;
  mig: { gpu: number; profile: string; start: number } | null;
  cpu_milli?: number; memory_mib?: number;
}
export interface JobEvent { seq: number; time: number; kind: string; actor: string; detail: unknown }
export interface JobDetail extends JobSummary {
  spec: Record<string, unknown>; placement: Placement[]; events: JobEvent[]; attempt: number;
  preemptions: number; restarts: number; exit_code: number | null; exit?: string | null; restart_at?: number | null;
  detail_hidden?: string;  // why the command, env and logs are not shown to this token
  pending: { reason: string; queue_position: number; overall_position: number; estimated_start: number | null; reserved: boolean } | null;
}
export interface JobList { jobs: JobSummary[]; next_after: number | null; total: number }

export type Amounts = Record<string, number>;
export interface QueueInfo {
  name: string; parent: string; path: string; leaf: boolean; weight: number; guaranteed: Amounts; limit: Amounts;
  used: Amounts; borrowed: Amounts; fair_share: Amounts; pending: number; running: number; priority_classes: string[];
  usable_classes?: string[];  // the classes the caller may use in this queue (the server's class policy)
}
export interface GpuInfo {
  index: number; health: string; mig: boolean; used_milli: number; jobs: number[];
  instances: { profile: string; start: number; job: number | null }[];
  utilization_pct?: number | null; utilisation_pct?: number | null; memory_used_mib?: number | null;
}
export interface NodeInfo {
  name: string; path: string[]; gpu_model: string; state: string; reason: string; agent?: string;
  cpu_milli: number; cpu_milli_used: number; memory_mib: number; memory_mib_used: number; gpus: GpuInfo[];
}
