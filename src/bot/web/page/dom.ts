/** Small DOM and fetch helpers. All user text goes through textContent; only sanitized Markdown uses HTML. */

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const node = document.getElementById(id);
  if (node === null) throw new Error(`the page has no #${id}`);
  return node as T;
}

export function make<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className?: string | null,
  text?: string | number | null,
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

export function formatTime(ts: number): string {
  const date = new Date(ts);
  const time = date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  return date.toDateString() === new Date().toDateString() ? time : `${date.toLocaleDateString()} ${time}`;
}

/** Only files the playground itself serves may be shown: nothing else can load under the CSP anyway. */
export function isFileUrl(url: unknown): url is string {
  return typeof url === 'string' && url.startsWith('/api/files/');
}

interface ApiResult<T> {
  status: number;
  ok: boolean;
  data: Partial<T> & { error?: string; message?: string };
}

export async function api<T = Record<string, unknown>>(
  method: string,
  path: string,
  body?: unknown,
): Promise<ApiResult<T>> {
  const init: RequestInit = { method, headers: {} };
  if (body !== undefined) {
    init.headers = { 'content-type': 'application/json' };
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  let data: ApiResult<T>['data'] = {};
  try {
    data = (await response.json()) as ApiResult<T>['data'];
  } catch {
    data = {};
  }
  return { status: response.status, ok: response.ok, data };
}

/** Optional APIs this server offers (`runs`, `turns`), from the page's `data-extensions`. */
export function hasExtension(name: string): boolean {
  return (document.body.dataset.extensions ?? '').split(' ').includes(name);
}
