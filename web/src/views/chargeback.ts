// Chargeback: GPU-hours and cost per team/project/user/model/pool for a period
// (GET /api/v1/reports/chargeback?...&format=json), rendered generically from its "columns"; CSV via the
// same endpoint with format=csv. "Not available" on 404.
import { ApiError, raw } from '../api';
import { h, replace } from '../dom';
import { describe } from '../notice';
import type { View } from '../view';

interface Report { columns: string[]; rows: Record<string, unknown>[]; totals?: Record<string, unknown> }

const day = (d: Date) => d.toISOString().slice(0, 10);

function cell(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'number') return v.toLocaleString('en-US', { maximumFractionDigits: 3 });
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

export function chargebackView(): View {
  const now = new Date();
  const from = h('input', { type: 'date', id: 'cb-from', value: day(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1))) });
  const to = h('input', { type: 'date', id: 'cb-to', value: day(now) });
  const by = h('select', { id: 'cb-by' }, ['team', 'project', 'user', 'model', 'pool', 'team,project', 'team,user', 'team,model'].map((b) => h('option', { value: b }, b)));
  const out = h('div', { id: 'chargeback' });
  const query = (format: string) => `/api/v1/reports/chargeback?${new URLSearchParams({ from: from.value, to: to.value, by: by.value, format })}`;

  const unavailable = (e: unknown) => {
    if (e instanceof ApiError && e.status === 404 && e.code !== 'invalid_argument')
      replace(out, h('p', { class: 'notice', id: 'cb-unavailable' }, 'Chargeback reports are not available on this server (GET /api/v1/reports/chargeback answered 404).'));
    else replace(out, h('p', { class: 'error', id: 'cb-error' }, describe(e)));
  };

  const load = async () => {
    replace(out, h('p', { class: 'muted' }, 'Loading…'));
    try {
      const r = (await (await raw('GET', query('json'))).json()) as Report;
      const cols = r.columns ?? [];
      const numeric = new Set(cols.filter((c) => r.rows.some((row) => typeof row[c] === 'number')));
      replace(out, h('table', { class: 'table report', id: 'cb-table' },
        h('thead', {}, h('tr', {}, cols.map((c) => h('th', { class: numeric.has(c) ? 'num' : '' }, c)))),
        h('tbody', {}, r.rows.length ? r.rows.map((row) => h('tr', {}, cols.map((c) => h('td', { class: typeof row[c] === 'number' ? 'num' : '' }, cell(row[c])))))
          : h('tr', {}, h('td', { colspan: Math.max(1, cols.length), class: 'muted' }, 'No usage in this period.'))),
        r.totals ? h('tfoot', {}, h('tr', {}, cols.map((c, i) => h('td', { class: 'num' }, r.totals![c] !== undefined ? cell(r.totals![c]) : i === 0 ? 'total' : '')))) : ''));
    } catch (e) {
      unavailable(e);
    }
  };

  const download = async () => {
    try {
      const blob = await (await raw('GET', query('csv'))).blob();
      const url = URL.createObjectURL(blob);
      const a = h('a', { href: url, download: `chargeback-${from.value}-${to.value}-${by.value.replace(',', '-')}.csv` });
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (e) {
      unavailable(e);
    }
  };

  const el = h('section', { class: 'view-chargeback' }, h('h2', {}, 'Chargeback'),
    h('form', { class: 'filters', onsubmit: (ev: Event) => { ev.preventDefault(); void load(); } },
      h('label', {}, 'From ', from), h('label', {}, 'To ', to), h('label', {}, 'By ', by),
      h('button', { type: 'submit', id: 'cb-load' }, 'Show'), ' ',
      h('button', { type: 'button', id: 'cb-csv', onclick: () => void download() }, 'Download CSV')),
    out);
  void load();
  return { el };
}
