// The error banner under the navigation: API errors (status, code, message, field) shown to the user.
import { ApiError } from './api';
import { h, replace } from './dom';

export const banner = h('div', { id: 'banner', class: 'banner', role: 'alert', hidden: true });

export function describe(e: unknown): string {
  return e instanceof ApiError ? e.describe() + (e.field ? ` (field: ${e.field})` : '') : String(e);
}

export function showError(e: unknown, context = ''): void {
  const msg = describe(e);
  replace(banner, h('span', {}, context ? `${context}: ${msg}` : msg), ' ',
    h('button', { class: 'link', onclick: () => (banner.hidden = true) }, 'dismiss'));
  banner.hidden = false;
}

export function clearError(): void {
  banner.hidden = true;
}
