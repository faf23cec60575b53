// Cluster map: nodes × GPUs × MIG slices (GET /api/v1/nodes), each GPU coloured by the queue of the
// job holding it, with its utilisation; cordoned, draining, drained, not-ready nodes and unhealthy GPUs
// are marked; admins cordon, drain and resume nodes. Cells carry data-node, data-gpu and data-jobs for
// tests and tooling.
import { get, post, type GpuInfo, type JobList, type NodeInfo } from '../api';
import { clearError, showError } from '../notice';
import { session } from '../session';
import { colourOf, h, replace } from '../dom';
import type { View } from '../view';

// A MIG profile's width in memory slices (of 8): "3g.40gb" on an 80 GB GPU is 4.
function migWidth(profile: string, model: string): number {
  const gb = Number(/\.(\d+)gb/i.exec(profile)?.[1] ?? 0);
  const total = Number(/(\d+)GB/i.exec(model)?.[1] ?? 80);
  const w = Math.round((gb / total) * 8);
  return Math.min(8, Math.max(1, w || 1));
}

function util(g: GpuInfo): number | null {
  const u = g.utilization_pct ?? g.utilisation_pct;
  return typeof u === 'number' ? u : null;
}

export function clusterView(): View {
  // Admins cordon, drain and resume nodes here (POST /api/v1/nodes/{name}/cordon|drain|resume).
  const nodeOps = (n: NodeInfo) => {
    const op = async (what: 'cordon' | 'drain' | 'resume') => {
      let reason = '';
      if (what !== 'resume') {
        const r = window.prompt(`Reason to ${what} ${n.name}:`);
        if (r === null) return;
        reason = r.trim();
      }
      try {
        await post(`/api/v1/nodes/${encodeURIComponent(n.name)}/${what}`, reason ? { reason } : {});
        clearError();
        await refresh();
      } catch (e) {
        showError(e, `${what} ${n.name}`);
      }
    };
    return n.state === 'ready'
      ? [h('button', { class: 'small', 'data-op': 'cordon', onclick: () => void op('cordon') }, 'Cordon'), ' ',
         h('button', { class: 'small', 'data-op': 'drain', onclick: () => void op('drain') }, 'Drain')]
      : [h('button', { class: 'small', 'data-op': 'resume', onclick: () => void op('resume') }, 'Resume'),
         n.state === 'cordoned' ? [' ', h('button', { class: 'small', 'data-op': 'drain', onclick: () => void op('drain') }, 'Drain')] : ''];
  };

  const grid = h('div', { class: 'cluster', id: 'cluster-map' });
  const legend = h('div', { class: 'legend', id: 'cluster-legend' });
  const totals = h('span', { class: 'muted' });

  const refresh = async () => {
    const [{ nodes }, jobs] = await Promise.all([
      get<{ nodes: NodeInfo[] }>('/api/v1/nodes'),
      get<JobList>('/api/v1/jobs?active=true&limit=1000'),
    ]);
    const jobQueue = new Map<number, string>();
    const jobName = new Map<number, string>();
    for (const j of jobs.jobs) { jobQueue.set(j.id, j.queue); jobName.set(j.id, j.name); }
    const seen = new Set<string>();
    let gpuCount = 0, usedMilli = 0;

    const jobLabel = (id: number) => `#${id}${jobName.get(id) ? ` ${jobName.get(id)}` : ''}`;
    const colourFor = (ids: number[]) => {
      const q = ids.map((i) => jobQueue.get(i)).find(Boolean);
      if (q) seen.add(q);
      return q ? colourOf(q) : ids.length ? '#999' : '';
    };

    replace(grid, nodes.map((n) => {
      const flags: string[] = [];
      if (n.state !== 'ready') flags.push(n.state);
      if (n.agent === 'not-ready' || n.agent === 'unknown') flags.push(`agent ${n.agent}`);
      return h('div', { class: `node node-${n.state}${n.agent === 'not-ready' ? ' node-notready' : ''}`, 'data-node': n.name, 'data-state': n.state },
        h('div', { class: 'node-head' },
          h('b', {}, n.name), ' ', h('span', { class: 'muted' }, `${n.gpu_model} · ${n.path.join('/')}`),
          flags.map((fl) => h('span', { class: `badge flag flag-${fl.replace(/[^a-z]/g, '')}` }, fl)),
          session.me?.role === 'admin' ? h('span', { class: 'node-ops' }, nodeOps(n)) : '',
          n.reason ? h('div', { class: 'muted small' }, n.reason) : ''),
        h('div', { class: 'gpus' }, n.gpus.map((g) => {
          gpuCount++;
          usedMilli += g.used_milli;
          const u = util(g);
          const title = `${n.name} GPU ${g.index}: ${g.health}, allocated ${g.used_milli / 10}%` +
            (u === null ? '' : `, utilisation ${u}%`) + (g.jobs.length ? `, jobs ${g.jobs.map(jobLabel).join(', ')}` : '');
          const body = g.mig
            ? h('div', { class: 'mig' }, g.instances.map((m) => h('div', {
                class: `slice${m.job !== null ? ' busy' : ''}`, 'data-job': m.job ?? '', 'data-profile': m.profile,
                style: `grid-column: ${m.start + 1} / span ${migWidth(m.profile, n.gpu_model)};${m.job !== null ? ` background: ${colourFor([m.job])}` : ''}`,
                title: `${m.profile} at ${m.start}${m.job !== null ? `: ${jobLabel(m.job)}` : ' (free)'}` },
                m.profile, m.job !== null ? h('span', { class: 'jobtag' }, `#${m.job}`) : '')))
            : h('div', { class: 'whole', style: g.jobs.length ? `background: ${colourFor(g.jobs)}` : '' },
                g.jobs.map((j) => h('span', { class: 'jobtag' }, `#${j}`)),
                g.used_milli > 0 && g.used_milli < 1000 ? h('span', { class: 'small' }, `${g.used_milli / 10}%`) : '');
          return h('div', { class: `gpu health-${g.health}${g.jobs.length ? ' busy' : ''}`, 'data-node': n.name, 'data-gpu': g.index,
              'data-jobs': g.jobs.join(' '), title },
            h('div', { class: 'gpu-head' }, h('span', {}, `GPU ${g.index}`), g.mig ? h('span', { class: 'small' }, 'MIG') : '',
              g.health !== 'healthy' ? h('span', { class: 'badge flag' }, g.health) : ''),
            body,
            h('div', { class: 'util', title: u === null ? 'allocated (no utilisation reported)' : `utilisation ${u}%` },
              h('div', { class: u === null ? 'alloc' : 'used', style: `width: ${Math.min(100, u ?? g.used_milli / 10)}%` })));
        })));
    }));
    replace(totals, `${nodes.length} nodes, ${gpuCount} GPUs, ${(usedMilli / 1000).toFixed(1)} GPUs allocated`);
    replace(legend, [...seen].sort().map((q) => h('span', { class: 'key' }, h('i', { style: `background: ${colourOf(q)}` }), q)),
      h('span', { class: 'key' }, h('i', { class: 'free' }), 'free'),
      h('span', { class: 'key' }, h('i', { class: 'used' }), 'utilisation (reported)'),
      h('span', { class: 'key' }, h('i', { class: 'alloc' }), 'allocated (no report)'));
  };

  const el = h('section', { class: 'view-cluster' }, h('h2', {}, 'Cluster map ', totals), legend, grid);
  return { el, refresh };
}
