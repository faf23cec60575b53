// Chargeback: GPU-hours and cost per team/queue/project/user/model/pool for a period
// (GET /api/v1/reports/chargeback?...&format=json), rendered generically from its "columns" and "rows"
// (with rows, columns empty in every row are hidden, and those equal in every row are listed above the table,
// unless "all columns" is ticked); its "totals" are listed below. CSV via the same endpoint with
// format=csv. "Not available" on 404.
import { ApiError, raw } from '../api';
import { h, replace } from '../dom';
import { describe } from '../notice';
import type { View } from '../view';

interface Report { columns: string[]; rows: Record<string, unknown>[]; totals?: Record<string, unknown>; [k: string]: unknown }

const day = (d: Date) => d.toISOString().slice(0, 10);
const isNum = (v: unknown) => typeof v === 'number' || (typeof v === 'string' && /^-?\d+(\.\d+)?$/.test(v));
const empty = (v: unknown) => v === null || v === undefined || v === '';

function cell(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'number') return v.toLocaleString('en-US', { maximumFractionDigits: 3 });
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

export function chargebackView(): View {
  const now = new Date();
  const from = h('input', { type: 'date', id: 'cb-from', value: day(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1))) });
  const to = h('input', { type: 'date', id: 'cb-to', value: day(new Date(now.getTime() + 86400_000)) });
  const by = h('select', { id: 'cb-by' }, ['team', 'queue', 'project', 'user', 'model', 'pool', 'team,project', 'team,user', 'team,model', 'model,pool']
    .map((b) => h('option', { value: b }, b)));
  const all = h('input', { type: 'checkbox', id: 'cb-all' });
  const out = h('div', { id: 'chargeback' });
  const query = (format: string) => `/api/v1/reports/chargeback?${new URLSearchParams({ from: from.value, to: to.value, by: by.value, format })}`;
  let last: Report | null = null;

  const unavailable = (e: unknown) => {
    if (e instanceof ApiError && e.status === 404 && e.code !== 'invalid_argument')
      replace(out, h('p', { class: 'notice', id: 'cb-unavailable' }, 'Chargeback reports are not available on this server (GET /api/v1/reports/chargeback answered 404).'));
    else replace(out, h('p', { class: 'error', id: 'cb-error' }, describe(e)));
  };

  const render = (r: Report) => {
    const rows = r.rows ?? [];
    let cols = r.columns ?? [];
    const constants: [string, unknown][] = [];
    if (!all.checked && rows.length > 0) {
      cols = cols.filter((c) => rows.some((row) => !empty(row[c])));
      if (rows.length > 1) {
        const varying = cols.filter((c) => rows.some((row) => JSON.stringify(row[c]) !== JSON.stringify(rows[0][c])));
        for (const c of cols) if (!varying.includes(c)) constants.push([c, rows[0][c]]);
        cols = varying;
      }
    }
    const numeric = new Set(cols.filter((c) => rows.some((row) => isNum(row[c]))));
    const meta = Object.entries(r).filter(([k, v]) => !['columns', 'rows', 'totals'].includes(k) && (typeof v === 'string' || typeof v === 'number'));
    const totals = r.totals ?? {};
    replace(out,
      meta.length || constants.length ? h('p', { class: 'meta', id: 'cb-meta' }, [...meta, ...constants].map(([k, v]) => h('span', { class: 'chip' }, h('b', {}, k), ' ', cell(v)))) : '',
      h('div', { class: 'scroll' }, h('table', { class: 'table report', id: 'cb-table' },
        h('thead', {}, h('tr', {}, cols.map((c) => h('th', { class: numeric.has(c) ? 'num' : '' }, c)))),
        h('tbody', {}, rows.length ? rows.map((row) => h('tr', {}, cols.map((c) => h('td', { class: numeric.has(c) ? 'num' : '' }, cell(row[c])))))
          : h('tr', {}, h('td', { colspan: Math.max(1, cols.length), class: 'muted' }, 'No usage in this period.'))),
        cols.some((c) => totals[c] !== undefined)
          ? h('tfoot', {}, h('tr', {}, cols.map((c, i) => h('td', { class: 'num' }, totals[c] !== undefined ? cell(totals[c]) : i === 0 ? 'total' : '')))) : '')),
      Object.keys(totals).length ? [h('h3', {}, 'Totals'), h('dl', { class: 'summary', id: 'cb-totals' },
        Object.entries(totals).map(([k, v]) => [h('dt', {}, k), h('dd', {}, cell(v))]))] : '');
  };

  const load = async () => {
    replace(out, h('p', { class: 'muted' }, 'Loading…'));
    try {
      last = (await (await raw('GET', query('json'))).json()) as Report;
      render(last);
    } catch (e) {
      last = null;
      unavailable(e);
    }
  };

  const download = async () => {
    try {
      const blob = await (await raw('GET', query('csv'))).blob();
      const url = URL.createObjectURL(blob);
      const a = h('a', { href: url, download: `chargeback-${from.value}-${to.value}-${by.value.replace(/,/g, '-')}.csv` });
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (e) {
      unavailable(e);
    }
  };

  all.addEventListener('change', () => { if (last) render(last); });
  const el = h('section', { class: 'view-chargeback' }, h('h2', {}, 'Chargeback'),
    h('form', { class: 'filters', onsubmit: (ev: Event) => { ev.preventDefault(); void load(); } },
      h('label', {}, 'From ', from), h('label', {}, 'To (exclusive) ', to), h('label', {}, 'By ', by),
      h('button', { type: 'submit', id: 'cb-load' }, 'Show'), ' ',
      h('button', { type: 'button', id: 'cb-csv', onclick: () => void download() }, 'Download CSV'),
      h('label', { class: 'muted' }, all, ' all columns')),
    out);
  void load();
  return { el };
}
