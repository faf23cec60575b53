// DOM helpers. Every piece of text from the API goes in through textContent (h's string children),
// never through innerHTML, so job names, commands and messages cannot inject markup.

type Child = Node | string | number | null | undefined | false | Child[];
type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = String(v);
    else if (k === 'value' && 'value' in el) (el as unknown as HTMLInputElement).value = String(v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

// "3 min ago", "in 2 h": times are Unix seconds.
export function relTime(t: number | null | undefined): string {
  if (t === null || t === undefined) return '—';
  const d = t - Date.now() / 1000;
  const a = Math.abs(d);
  const s = a < 60 ? `${Math.round(a)} s` : a < 3600 ? `${Math.round(a / 60)} min` : a < 86400 ? `${(a / 3600).toFixed(1)} h` : `${(a / 86400).toFixed(1)} d`;
  return d >= 0 ? `in ${s}` : `${s} ago`;
}

export function absTime(t: number | null | undefined): string {
  if (t === null || t === undefined) return '—';
  return new Date(t * 1000).toLocaleString();
}

export function stateBadge(state: string): HTMLElement {
  return h('span', { class: `badge st-${state.replace(/[^a-z-]/g, '')}` }, state);
}

// A stable colour per team/queue name: FNV-1a, spread by the golden angle so that names differing in
// one letter (team-a, team-b) get distant hues.
export function colourOf(name: string): string {
  let x = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) x = Math.imul(x ^ name.charCodeAt(i), 0x01000193) >>> 0;
  return `hsl(${Math.round(((x % 1024) * 137.508) % 360)}, 60%, 42%)`;
}

export function gpus(milli: number): string {
  const g = milli / 1000;
  return Number.isInteger(g) ? String(g) : g.toFixed(2);
}

// A duration in seconds as people read it: "45 s", "12 min 5 s", "3 h 20 min", "2 d 4 h".
export function duration(s: number | null | undefined): string {
  if (s === null || s === undefined || !Number.isFinite(s)) return '—';
  s = Math.max(0, Math.round(s));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`;
  if (s < 86400) return `${Math.floor(s / 3600)} h${Math.floor((s % 3600) / 60) ? ` ${Math.floor((s % 3600) / 60)} min` : ''}`;
  return `${Math.floor(s / 86400)} d${Math.floor((s % 86400) / 3600) ? ` ${Math.floor((s % 86400) / 3600)} h` : ''}`;
}

// SVG elements (text through textContent, as for HTML).
export function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number> = {}, ...children: (Node | string)[]): SVGElementTagNameMap[K] {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  return el;
}

// Server reasons may carry times as raw Unix seconds ("t=1796557358"): shown as local times.
export function reasonText(s: string | null | undefined): string {
  if (!s) return '';
  return s.replace(/\bt=(\d{9,11})\b/g, (_, t) => absTime(Number(t)));
}
