// Utilisation over time: allocated and really used GPUs per GPU model and pool over the last hour
// (GET /api/v1/utilisation?minutes=60), one uPlot chart per series; "not available" on 404.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { ApiError, get } from '../api';
import { h, replace } from '../dom';
import { describe } from '../notice';
import type { View } from '../view';

// used_milli is null where no agent reported utilisation (a gap in the used line).
interface Series { model: string; pool: string; total_milli: number; points: [number, number, number | null][] }
interface Utilisation { step_s: number; series: Series[] }

export function utilisationView(): View {
  const box = h('div', { id: 'utilisation' });
  const charts = new Map<string, uPlot>();
  let minutes = 60;
  const range = h('select', { id: 'util-range' }, [15, 60, 360, 1440].map((m) => h('option', { value: m }, m < 60 ? `${m} min` : `${m / 60} h`)));
  range.value = '60';
  range.addEventListener('change', () => { minutes = Number(range.value); void refresh(); });

  const dispose = () => { for (const c of charts.values()) c.destroy(); charts.clear(); };

  const refresh = async () => {
    let u: Utilisation;
    try {
      u = await get<Utilisation>(`/api/v1/utilisation?minutes=${minutes}`);
    } catch (e) {
      dispose();
      if (e instanceof ApiError && e.status === 404)
        replace(box, h('p', { class: 'notice', id: 'util-unavailable' }, 'Utilisation history is not available on this server (GET /api/v1/utilisation answered 404).'));
      else replace(box, h('p', { class: 'error' }, describe(e)));
      return;
    }
    if (!u.series.length) { dispose(); replace(box, h('p', { class: 'muted' }, 'No utilisation recorded yet.')); return; }
    const keys = new Set(u.series.map((s) => `${s.model}|${s.pool}`));
    if ([...charts.keys()].some((k) => !keys.has(k)) || !box.querySelector('.charts')) { dispose(); replace(box, h('div', { class: 'charts' })); }
    const holder = box.querySelector('.charts')!;
    for (const s of u.series) {
      const key = `${s.model}|${s.pool}`;
      const data: uPlot.AlignedData = [s.points.map((p) => p[0]), s.points.map((p) => p[1] / 1000), s.points.map((p) => (p[2] === null ? null : p[2] / 1000))];
      const existing = charts.get(key);
      if (existing) { existing.setData(data); continue; }
      const wrap = h('div', { class: 'chart card', 'data-model': s.model, 'data-pool': s.pool },
        h('h3', {}, `${s.model}`, s.pool ? ` · pool ${s.pool}` : '', h('span', { class: 'muted' }, ` (${s.total_milli / 1000} GPUs)`)));
      holder.appendChild(wrap);
      charts.set(key, new uPlot({
        width: Math.min(900, Math.max(360, holder.clientWidth - 40)), height: 220,
        scales: { y: { range: [0, Math.max(1, s.total_milli / 1000)] } },
        series: [{}, { label: 'allocated GPUs', stroke: '#3b6fd4', fill: 'rgba(59,111,212,0.15)', width: 2 },
                     { label: 'used GPUs', stroke: '#2a9d5c', width: 2 }],
        axes: [{}, { label: 'GPUs' }],
      }, data, wrap));
    }
  };

  const el = h('section', { class: 'view-utilisation' }, h('h2', {}, 'Utilisation over time ', h('label', { class: 'small' }, 'last ', range)), box);
  return { el, refresh, pollMs: 10000, dispose };
}
