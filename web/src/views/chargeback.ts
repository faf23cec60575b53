// Chargeback: GPU-hours and cost per team/queue/project/user/model/pool for a period
// (GET /api/v1/reports/chargeback?...&format=json), rendered generically from its "columns" and "rows"
// (with rows, columns empty in every row are hidden, and those equal in every row are listed above the table,
// unless "all columns" is ticked). Every number has its unit (GPU-hours, the report's currency); the
// footer row holds the report's totals; a click on a header sorts by that column. An empty report
// says why, and costs of 0 because no rates are configured name `chargeback.rates`. CSV via the same
// endpoint with format=csv. "Not available" on 404.
import { ApiError, raw } from '../api';
import { h, replace } from '../dom';
import { describe } from '../notice';
import { session } from '../session';
import type { View } from '../view';

interface Report { columns: string[]; rows: Record<string, unknown>[]; totals?: Record<string, unknown>; currency?: string;
                  rates?: Record<string, unknown>; pool_rates?: Record<string, unknown>; charge_period_start?: string;
                  charge_period_end?: string; [k: string]: unknown }

const day = (d: Date) => d.toISOString().slice(0, 10);
const isNum = (v: unknown) => typeof v === 'number' || (typeof v === 'string' && /^-?\d+(\.\d+)?$/.test(v));
const empty = (v: unknown) => v === null || v === undefined || v === '';
const RATES_KEY = 'chargeback.rates';
// Report columns that repeat a field of the report itself, and others that are the same for a whole report.
const REPEATS: Record<string, string> = { BillingPeriodStart: 'from', BillingPeriodEnd: 'to', ChargePeriodStart: 'charge_period_start',
  ChargePeriodEnd: 'charge_period_end', BillingCurrency: 'currency', x_IdleShareRule: 'idle_share' };
const REPORT_WIDE = new Set(['ChargeCategory', 'ResourceType', 'ConsumedUnit', 'PricingUnit']);

// The unit of a report column (docs/chargeback.md, "Output"): GPU-hours, money in the report's
// currency, a price per GPU-hour, or a count.
type Unit = 'hours' | 'money' | 'price' | 'count' | 'milli' | 'micro' | '';
function unitOf(col: string): Unit {
  if (/GpuHours$|^(Consumed|Pricing)Quantity$|gpu_hours$/i.test(col)) return 'hours';
  if (col === 'ListUnitPrice' || /rate$/i.test(col)) return 'price';
  if (/milli_gpu_seconds$/.test(col)) return 'milli';
  if (/cost_micro$/.test(col)) return 'micro';
  if (/cost$/i.test(col)) return 'money';
  if (/interruptions$/i.test(col)) return 'count';
  return '';
}
function unitWords(u: Unit, currency: string): string {
  return { hours: 'GPU-hours', money: currency, price: `${currency} per GPU-hour`, count: 'count', milli: 'milli-GPU-seconds', micro: `millionths of ${currency}`, '': '' }[u];
}
const num = (v: unknown) => (typeof v === 'number' ? v : Number(v));
function fmt(v: number, max: number, min = 0): string {
  return v.toLocaleString('en-US', { maximumFractionDigits: max, minimumFractionDigits: min });
}
// A value with its unit: "12.5 GPU-h", "25.00 USD", "1.60 USD/GPU-h".
function withUnit(v: unknown, u: Unit, currency: string): string {
  if (v === null || v === undefined || v === '') return '';
  if (!isNum(v)) return typeof v === 'object' ? JSON.stringify(v) : String(v);
  const n = num(v);
  switch (u) {
    case 'hours': return `${fmt(n, n !== 0 && Math.abs(n) < 0.1 ? 4 : 2)} GPU-h`;
    case 'money': return `${fmt(n, n !== 0 && Math.abs(n) < 0.01 ? 6 : 2, 2)} ${currency}`;
    case 'price': return `${fmt(n, 6, 2)} ${currency}/GPU-h`;
    case 'count': return fmt(n, 0);
    case 'milli': return `${fmt(n, 0)} milli-GPU-s`;
    case 'micro': return `${fmt(n, 0)} µ${currency}`;
    default: return fmt(n, 3);
  }
}

// The report's total for a column: `totals[col]`, else the totals' snake_case name for it.
function totalOf(col: string, totals: Record<string, unknown>, rows: Record<string, unknown>[]): unknown {
  if (totals[col] !== undefined) return totals[col];
  const t = (k: string) => (totals[k] !== undefined && isNum(totals[k]) ? num(totals[k]) : undefined);
  if (col === 'ConsumedQuantity') return t('allocated_gpu_hours');
  if (col === 'PricingQuantity') {
    const a = t('allocated_gpu_hours'), i = t('idle_share_gpu_hours');
    return a !== undefined && i !== undefined ? Math.round((a + i) * 1e6) / 1e6 : undefined;
  }
  if (col === 'BilledCost' || col === 'EffectiveCost') return totals.billed_cost;
  const snake = col.replace(/^x_/, '').replace(/([a-z])([A-Z])/g, '$1_$2').toLowerCase();
  if (totals[snake] !== undefined) return totals[snake];
  const u = unitOf(col);  // else the sum of the rows for additive quantities
  if ((u === 'hours' || u === 'money' || u === 'count') && rows.some((r) => isNum(r[col])))
    return Math.round(rows.reduce((acc, r) => acc + (isNum(r[col]) ? num(r[col]) : 0), 0) * 1e6) / 1e6;
  return undefined;
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
  let sortCol = '', sortDir = 1;

  const unavailable = (e: unknown) => {
    if (e instanceof ApiError && e.status === 404 && e.code !== 'invalid_argument')
      replace(out, h('p', { class: 'notice', id: 'cb-unavailable' }, 'Chargeback reports are not available on this server (GET /api/v1/reports/chargeback answered 404).'));
    else replace(out, h('p', { class: 'error', id: 'cb-error' }, describe(e)));
  };

  // Why a report has no rows, or why its costs are 0.
  const whyEmpty = (r: Report): HTMLElement => {
    const s = r.charge_period_start, e = r.charge_period_end;
    const local = (t?: string) => (t ? new Date(t).toLocaleString() : '?');
    const role = session.me?.role;
    const mine = role === 'team-lead' ? ` You see only the rows of your queue subtree (${session.me?.queue}).`
      : role === 'member' ? ' You see only your own usage.' : '';
    if (s && e && s >= e)
      return h('p', { class: 'notice', id: 'cb-empty' }, `No usage in this period: it lies before the cluster's event log began (or in the future), so nothing was recorded for it. Pick a period after ${local(s)}.`, mine);
    return h('p', { class: 'notice', id: 'cb-empty' },
      `No usage yet in this period (${local(s)} – ${local(e)}): no job has held a GPU in it. GPU-hours are counted from the moment a job starts on a GPU until its attempt ends (finished or still running); a fresh cluster, or one whose jobs are all still pending, has no finished or running usage yet.`, mine);
  };
  const whyZeroCost = (r: Report, rows: Record<string, unknown>[]): HTMLElement | '' => {
    const rates = r.rates && typeof r.rates === 'object' ? Object.keys(r.rates) : null;
    const poolRates = r.pool_rates && typeof r.pool_rates === 'object' ? Object.keys(r.pool_rates) : [];
    const cur = r.currency ?? '';
    if (rates !== null && rates.length === 0 && poolRates.length === 0)
      return h('p', { class: 'notice', id: 'cb-no-rates' }, 'Costs are 0 because no GPU rates are configured. Set ', h('code', {}, RATES_KEY),
        ' in the cluster config (a price per GPU-hour for each GPU model, e.g. ', h('code', {}, 'chargeback: {rates: {A100-80GB: "1.60"}, currency: USD}'),
        ') and reload the server (SIGHUP or POST /api/v1/admin/reload); see docs/chargeback.md. GPU-hours are counted either way.');
    const free = rows.some((row) => num(row.BilledCost ?? row.cost) === 0 && num(row.PricingQuantity ?? row.ConsumedQuantity ?? 0) > 0);
    if (free && rates !== null)
      return h('p', { class: 'notice', id: 'cb-some-free' }, 'Some usage costs 0: GPU models without a rate in ', h('code', {}, RATES_KEY),
        ` are not charged (rates set for: ${[...rates, ...poolRates.map((p) => `pool ${p}`)].join(', ')}${cur ? `, in ${cur}` : ''}).`);
    return '';
  };

  const render = (r: Report) => {
    const currency = typeof r.currency === 'string' && r.currency ? r.currency : String(r.rows?.[0]?.BillingCurrency ?? '');
    let rows = r.rows ?? [];
    let cols = r.columns ?? [];
    const constants: [string, unknown][] = [];
    if (!all.checked && rows.length > 0) {
      cols = cols.filter((c) => rows.some((row) => !empty(row[c])));
      // Columns equal in every row go above the table (with one row, only the report-wide ones);
      // those that repeat a field of the report (period, currency, rule) are not listed twice.
      const same = (c: string) => rows.every((row) => JSON.stringify(row[c]) === JSON.stringify(rows[0][c]));
      const moved = cols.filter((c) => (rows.length > 1 || c in REPEATS || REPORT_WIDE.has(c)) && same(c));
      for (const c of moved) if (!(c in REPEATS && String(r[REPEATS[c]]) === String(rows[0][c]))) constants.push([c, rows[0][c]]);
      cols = cols.filter((c) => !moved.includes(c));
    }
    const numeric = new Set(cols.filter((c) => rows.some((row) => isNum(row[c]))));
    if (sortCol && cols.includes(sortCol)) {
      const c = sortCol;
      rows = [...rows].sort((a, b) => {
        const x = a[c], y = b[c];
        const d = numeric.has(c) ? (isNum(x) ? num(x) : -Infinity) - (isNum(y) ? num(y) : -Infinity) : String(x ?? '').localeCompare(String(y ?? ''));
        return d * sortDir;
      });
    }
    const meta = Object.entries(r).filter(([k, v]) => !['columns', 'rows', 'totals'].includes(k) && (typeof v === 'string' || typeof v === 'number'));
    const rates = r.rates && typeof r.rates === 'object' ? Object.entries(r.rates) : [];
    const totals = r.totals ?? {};
    const colTotals = cols.map((c) => (numeric.has(c) ? totalOf(c, totals, r.rows ?? []) : undefined));
    const head = (c: string) => {
      const u = unitWords(unitOf(c), currency);
      const sorted = sortCol === c;
      return h('th', { class: `sortable${numeric.has(c) ? ' num' : ''}`, 'data-col': c, title: `sort by ${c}`,
        'aria-sort': sorted ? (sortDir > 0 ? 'ascending' : 'descending') : 'none',
        onclick: () => { if (sortCol === c) sortDir = -sortDir; else { sortCol = c; sortDir = numeric.has(c) ? -1 : 1; } render(r); } },
        h('span', { class: 'col' }, c), u ? h('span', { class: 'unit' }, ` (${u})`) : '', h('span', { class: 'arrow' }, sorted ? (sortDir > 0 ? ' ▲' : ' ▼') : ''));
    };
    const cellOf = (c: string, v: unknown) => (numeric.has(c) || isNum(v) && unitOf(c) ? withUnit(v, unitOf(c), currency) : withUnit(v, '', currency));
    replace(out,
      meta.length || constants.length || rates.length ? h('p', { class: 'meta', id: 'cb-meta' },
        [...meta, ...constants].map(([k, v]) => h('span', { class: 'chip' }, h('b', {}, k), ' ', cellOf(k, v))),
        rates.map(([m, v]) => h('span', { class: 'chip rate' }, h('b', {}, `rate ${m}`), ' ', withUnit(v, 'price', currency)))) : '',
      rows.length ? whyZeroCost(r, rows) : whyEmpty(r),
      h('div', { class: 'scroll' }, h('table', { class: 'table report', id: 'cb-table' },
        h('thead', {}, h('tr', {}, cols.map(head))),
        h('tbody', {}, rows.length ? rows.map((row) => h('tr', {}, cols.map((c) => h('td', { class: numeric.has(c) ? 'num' : '', 'data-col': c }, cellOf(c, row[c])))))
          : h('tr', {}, h('td', { colspan: Math.max(1, cols.length), class: 'muted' }, 'No usage in this period (see above).'))),
        rows.length && colTotals.some((t) => t !== undefined)
          ? h('tfoot', {}, h('tr', { id: 'cb-total-row' }, cols.map((c, i) => h('td', { class: numeric.has(c) ? 'num' : '', 'data-col': c },
            colTotals[i] !== undefined ? withUnit(colTotals[i], unitOf(c), currency) : i === 0 ? 'Total' : '')))) : '')),
      Object.keys(totals).length ? [h('h3', {}, 'Totals'), h('dl', { class: 'summary', id: 'cb-totals' },
        Object.entries(totals).map(([k, v]) => [h('dt', {}, k.replace(/_/g, ' ')), h('dd', { 'data-total': k }, withUnit(v, unitOf(k), currency))]))] : '');
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
