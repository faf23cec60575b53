// Queues: per queue and GPU class, used vs guaranteed vs borrowed (and limit, fair share) as bars
// (GET /api/v1/queues). Amounts are milli-GPU.
import { type QueueInfo } from '../api';
import { colourOf, gpus, h, replace } from '../dom';
import { loadQueues } from '../session';
import type { View } from '../view';

function bar(q: QueueInfo, cls: string, scale: number): HTMLElement {
  const used = q.used[cls] ?? 0, guar = q.guaranteed[cls] ?? 0, borrowed = q.borrowed[cls] ?? 0;
  const limit = q.limit[cls], fair = q.fair_share[cls];
  const pct = (v: number) => `${Math.min(100, (v / scale) * 100)}%`;
  return h('div', { class: 'qbar', 'data-queue': q.name, 'data-class': cls,
      title: `${q.path} ${cls}: used ${gpus(used)}, guaranteed ${gpus(guar)}, borrowed ${gpus(borrowed)}` +
        (fair !== undefined ? `, fair share ${gpus(fair)}` : '') + (limit !== undefined ? `, limit ${gpus(limit)}` : '') },
    h('div', { class: 'in-guarantee', style: `width: ${pct(used - borrowed)}; background: ${colourOf(q.name)}` }),
    h('div', { class: 'borrowed', style: `left: ${pct(used - borrowed)}; width: ${pct(borrowed)}` }),
    h('div', { class: 'guarantee', style: `left: ${pct(guar)}` }),
    limit !== undefined ? h('div', { class: 'limit', style: `left: ${pct(limit)}` }) : '');
}

export function queuesView(): View {
  const body = h('tbody');
  const refresh = async () => {
    const queues = await loadQueues();
    const classes = [...new Set(queues.flatMap((q) => [...Object.keys(q.used), ...Object.keys(q.guaranteed)]))].sort();
    // One scale per class, so bars of the same class compare.
    const scale = new Map(classes.map((c) => [c, Math.max(1, ...queues.flatMap((q) => [q.used[c] ?? 0, q.guaranteed[c] ?? 0, q.fair_share[c] ?? 0]))]));
    replace(body, queues.flatMap((q) => {
      const depth = q.path.split('/').length - 1;
      const rows = classes.filter((c) => (q.used[c] ?? 0) > 0 || (q.guaranteed[c] ?? 0) > 0 || c === classes[0]);
      return rows.map((c, i) => h('tr', { 'data-queue': q.name },
        h('td', { class: 'qname', style: `padding-left: ${0.5 + depth * 1.2}em` }, i === 0 ? [h('i', { class: 'swatch', style: `background: ${colourOf(q.name)}` }), q.name] : ''),
        h('td', {}, i === 0 ? (q.priority_classes.length ? q.priority_classes.join(', ') : 'all') : ''),
        h('td', {}, i === 0 ? `${q.running} / ${q.pending}` : ''),
        h('td', {}, c),
        h('td', { class: 'num' }, gpus(q.used[c] ?? 0)), h('td', { class: 'num' }, gpus(q.guaranteed[c] ?? 0)),
        h('td', { class: 'num' }, gpus(q.borrowed[c] ?? 0)), h('td', { class: 'num' }, gpus(q.fair_share[c] ?? 0)),
        h('td', { class: 'barcell' }, bar(q, c, scale.get(c)!))));
    }));
  };
  const el = h('section', { class: 'view-queues' }, h('h2', {}, 'Queues'),
    h('p', { class: 'legend' },
      h('span', { class: 'key' }, h('i', { class: 'solid' }), 'used within guarantee'),
      h('span', { class: 'key' }, h('i', { class: 'hatch' }), 'borrowed'),
      h('span', { class: 'key' }, h('i', { class: 'gline' }), 'guaranteed'),
      h('span', { class: 'key' }, h('i', { class: 'lline' }), 'limit')),
    h('table', { class: 'table', id: 'queues' },
      h('thead', {}, h('tr', {}, ['Queue', 'Classes allowed', 'Running / pending', 'GPU class', 'Used', 'Guaranteed', 'Borrowed', 'Fair share', ''].map((c) => h('th', {}, c)))),
      body));
  return { el, refresh };
}
