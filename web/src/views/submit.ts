// Submit: a form that builds a job spec (docs/api.md) and POSTs it to /api/v1/jobs; the API's
// validation message is shown with its field highlighted. The JSON can also be edited directly.
import { ApiError, post, type JobDetail } from '../api';
import { h, replace } from '../dom';
import { describe } from '../notice';
import { allowedClasses, submitQueues } from '../session';
import type { View } from '../view';

// Splits a command line into arguments: whitespace separates, quotes group, backslash escapes.
export function splitArgs(s: string): string[] {
  const out: string[] = [];
  let cur = '', inArg = false, quote = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (quote) {
      if (c === quote) quote = '';
      else if (c === '\\' && quote === '"' && i + 1 < s.length) cur += s[++i];
      else cur += c;
    } else if (c === '"' || c === "'") { quote = c; inArg = true; }
    else if (c === '\\' && i + 1 < s.length) { cur += s[++i]; inArg = true; }
    else if (/\s/.test(c)) { if (inArg) out.push(cur); cur = ''; inArg = false; }
    else { cur += c; inArg = true; }
  }
  if (inArg) out.push(cur);
  return out;
}

export function submitView(): View {
  const queues = submitQueues();
  const f = {
    name: h('input', { name: 'name', 'data-field': 'name', placeholder: 'bert-large', required: true }),
    queue: h('select', { name: 'queue', 'data-field': 'queue' }, queues.map((q) => h('option', { value: q.name }, q.path))),
    project: h('input', { name: 'project', 'data-field': 'project', placeholder: 'optional' }),
    priority: h('select', { name: 'priority_class', 'data-field': 'priority_class' }),
    tasks: h('input', { name: 'tasks', 'data-field': 'tasks', type: 'number', min: 1, value: 1 }),
    kind: h('select', { name: 'kind' }, h('option', { value: 'gpus' }, 'whole GPUs'), h('option', { value: 'mig' }, 'one MIG instance'), h('option', { value: 'share' }, 'GPU share')),
    gpus: h('input', { name: 'gpus', 'data-field': 'resources.gpus', type: 'number', min: 0, value: 1 }),
    models: h('input', { name: 'gpu_models', 'data-field': 'resources.gpu_models', placeholder: 'any (e.g. A100-80GB, H100-80GB-SXM)' }),
    mig: h('input', { name: 'mig', 'data-field': 'resources.mig', placeholder: '3g.40gb' }),
    milli: h('input', { name: 'gpu_milli', 'data-field': 'resources.gpu_milli', type: 'number', min: 1, max: 1000, value: 500 }),
    cpu: h('input', { name: 'cpu', 'data-field': 'resources.cpu', placeholder: 'e.g. 8 or 500m' }),
    memory: h('input', { name: 'memory', 'data-field': 'resources.memory', placeholder: 'e.g. 64Gi' }),
    command: h('input', { name: 'command', 'data-field': 'command', placeholder: 'torchrun train.py --epochs 3', size: 60 }),
    env: h('textarea', { name: 'env', 'data-field': 'env', rows: 3, placeholder: 'KEY=value, one a line' }),
    runtime: h('input', { name: 'expected_runtime', 'data-field': 'expected_runtime', placeholder: 'seconds or 2h' }),
    maxRuntime: h('input', { name: 'max_runtime', 'data-field': 'max_runtime', placeholder: 'e.g. 2d' }),
  };
  const jsonBox = h('textarea', { id: 'spec-json', rows: 14, spellcheck: 'false', readonly: true });
  const editJson = h('input', { type: 'checkbox', id: 'edit-json' });
  const errBox = h('div', { class: 'error', id: 'submit-error', role: 'alert' });
  const submitBtn = h('button', { type: 'submit', id: 'submit-job' }, 'Submit job');

  const updateClasses = () => {
    const classes = allowedClasses(f.queue.value);
    const prev = f.priority.value;
    replace(f.priority, classes.map((c) => h('option', { value: c }, c)));
    f.priority.value = classes.includes(prev) ? prev : classes.includes('research') ? 'research' : classes[0];
  };

  const spec = (): Record<string, unknown> => {
    const res: Record<string, unknown> = {};
    if (f.kind.value === 'mig') res.mig = f.mig.value.trim();
    else {
      res.gpus = Number(f.gpus.value);
      if (f.kind.value === 'share') res.gpu_milli = Number(f.milli.value);
      const models = f.models.value.split(',').map((s) => s.trim()).filter(Boolean);
      if (models.length) res.gpu_models = models;
    }
    const cpu = f.cpu.value.trim();
    if (cpu) res.cpu = /^\d+$/.test(cpu) ? Number(cpu) : cpu;
    const mem = f.memory.value.trim();
    if (mem) res.memory = /^\d+$/.test(mem) ? Number(mem) : mem;
    const s: Record<string, unknown> = {
      name: f.name.value.trim(), queue: f.queue.value, priority_class: f.priority.value,
      tasks: Number(f.tasks.value), resources: res, command: splitArgs(f.command.value),
    };
    if (f.project.value.trim()) s.project = f.project.value.trim();
    const env: Record<string, string> = {};
    for (const line of f.env.value.split('\n')) {
      const i = line.indexOf('=');
      if (line.trim() && i > 0) env[line.slice(0, i).trim()] = line.slice(i + 1);
    }
    if (Object.keys(env).length) s.env = env;
    const rt = f.runtime.value.trim();
    if (rt) s.expected_runtime = /^\d+$/.test(rt) ? Number(rt) : rt;
    const mr = f.maxRuntime.value.trim();
    if (mr) s.max_runtime = /^\d+$/.test(mr) ? Number(mr) : mr;
    return s;
  };

  const sync = () => {
    for (const el of [f.gpus, f.models]) el.closest('label')!.hidden = f.kind.value === 'mig';
    f.mig.closest('label')!.hidden = f.kind.value !== 'mig';
    f.milli.closest('label')!.hidden = f.kind.value !== 'share';
    if (!editJson.checked) jsonBox.value = JSON.stringify(spec(), null, 2);
  };

  const clearFieldErrors = (form: HTMLElement) => {
    for (const el of form.querySelectorAll('.invalid')) el.classList.remove('invalid');
    replace(errBox);
  };

  const form = h('form', { class: 'submit-form card', id: 'submit-form', novalidate: true, oninput: sync, onchange: sync,
    onsubmit: async (ev: Event) => {
      ev.preventDefault();
      clearFieldErrors(form);
      let body: unknown;
      try {
        body = editJson.checked ? JSON.parse(jsonBox.value) : spec();
      } catch (e) {
        replace(errBox, `The JSON does not parse: ${String(e)}`);
        return;
      }
      submitBtn.disabled = true;
      try {
        const job = await post<JobDetail>('/api/v1/jobs', body);
        location.hash = `#/jobs/${job.id}`;
      } catch (e) {
        if (e instanceof ApiError) {
          replace(errBox, h('b', {}, `${e.status} ${e.code}`), ': ', h('span', { id: 'submit-error-message' }, e.message),
            e.field ? [' ', h('span', { class: 'field', id: 'submit-error-field' }, `field: ${e.field}`)] : '');
          const el = e.field ? form.querySelector(`[data-field="${CSS.escape(e.field)}"]`) ?? form.querySelector(`[data-field="${CSS.escape(e.field.split('.')[0])}"]`) : null;
          if (el) { el.classList.add('invalid'); (el as HTMLElement).focus(); }
        } else replace(errBox, describe(e));
      } finally {
        submitBtn.disabled = false;
      }
    } },
    h('div', { class: 'grid2' },
      h('label', {}, 'Name', f.name), h('label', {}, 'Queue', f.queue),
      h('label', {}, 'Project', f.project), h('label', {}, 'Priority class', f.priority),
      h('label', {}, 'Tasks (gang size)', f.tasks), h('label', {}, 'Per task', f.kind),
      h('label', {}, 'GPUs per task', f.gpus), h('label', {}, 'GPU models', f.models),
      h('label', { hidden: true }, 'MIG profile', f.mig), h('label', { hidden: true }, 'milli-GPU per GPU', f.milli),
      h('label', {}, 'CPU per task', f.cpu), h('label', {}, 'Memory per task', f.memory),
      h('label', { class: 'wide' }, 'Command', f.command),
      h('label', { class: 'wide' }, 'Environment', f.env),
      h('label', {}, 'Expected runtime', f.runtime), h('label', {}, 'Max runtime', f.maxRuntime)),
    h('details', {}, h('summary', {}, 'Job spec (JSON)'),
      h('label', {}, editJson, ' edit the JSON directly (the form is then ignored)'), jsonBox),
    h('p', {}, submitBtn), errBox);

  f.queue.addEventListener('change', updateClasses);
  editJson.addEventListener('change', () => { jsonBox.readOnly = !editJson.checked; sync(); });
  updateClasses();
  sync();
  const el = h('section', { class: 'view-submit' }, h('h2', {}, 'Submit a job'),
    queues.length ? form : h('p', { class: 'muted' }, 'Your role may not submit jobs to any queue.'));
  return { el };
}
