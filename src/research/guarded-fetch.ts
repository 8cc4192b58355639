import { errorMessage, ResearchError } from '../errors.js';
import type { Logger } from '../logger.js';

/**
 * The research tools' only way out: a fetch that goes to the configured bases (the Hub, the docs, the
 * GitHub API) and nowhere else. A URL must have a base's exact scheme, host and port and sit under its
 * path; redirects are followed by hand and each hop is checked the same way, so a page cannot bounce the
 * tool to Redis or a metadata address. Bodies are read within the timeout and capped.
 */

interface GuardedFetchOptions {
  /** Base URLs, e.g. `https://huggingface.co`, `https://huggingface.co/docs`, `https://api.github.com`. */
  allowedBases: readonly string[];
  fetch?: typeof fetch;
  timeoutMs?: number;
  /** Bodies past this many bytes are cut (a doc page is far below it). */
  maxBytes?: number;
  logger?: Logger;
}

interface FetchedText {
  url: string;
  status: number;
  contentType: string;
  text: string;
  headers: Headers;
}

export type GuardedFetch = (
  url: string,
  init?: { headers?: Record<string, string>; signal?: AbortSignal },
) => Promise<FetchedText>;

const MAX_REDIRECTS = 3;

interface Base {
  origin: string;
  path: string;
}

function parseBase(base: string): Base {
  const url = new URL(base);
  return { origin: url.origin, path: url.pathname.replace(/\/+$/, '') };
}

/** Why `url` may not be fetched, or undefined when it is under one of the bases. */
export function refusalReason(url: string, bases: readonly string[]): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `"${url.slice(0, 200)}" is not a URL`;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return `${parsed.protocol} is not http(s)`;
  if (parsed.username !== '' || parsed.password !== '') return 'URLs with credentials are not fetched';
  const allowed = bases.map(parseBase).some((base) => {
    if (parsed.origin !== base.origin) return false;
    // Under the base's path at a segment boundary: `/docs` allows `/docs/trl`, not `/docsx`.
    return base.path === '' || parsed.pathname === base.path || parsed.pathname.startsWith(`${base.path}/`);
  });
  if (allowed) return undefined;
  return `${parsed.origin}${parsed.pathname} is outside the allowed sources (${bases.join(', ')})`;
}

async function readCapped(response: Response, maxBytes: number): Promise<string> {
  if (response.body === null) return '';
  const reader = response.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    size += value.byteLength;
    if (size >= maxBytes) {
      await reader.cancel();
      break;
    }
  }
  return Buffer.concat(parts).subarray(0, maxBytes).toString('utf8');
}

export function createGuardedFetch(options: GuardedFetchOptions): GuardedFetch {
  const fetchImplementation = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 15_000;
  const maxBytes = options.maxBytes ?? 2_000_000;

  return async (url, init = {}) => {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    const forwardAbort = () => controller.abort();
    init.signal?.addEventListener('abort', forwardAbort, { once: true });
    let current = url;
    try {
      for (let hop = 0; hop <= MAX_REDIRECTS; hop += 1) {
        const refused = refusalReason(current, options.allowedBases);
        if (refused !== undefined) {
          throw new ResearchError(
            'url_refused',
            hop === 0 ? `not fetched: ${refused}` : `not followed: ${url} redirects to ${refused}`,
          );
        }
        let response: Response;
        try {
          response = await fetchImplementation(current, {
            headers: init.headers ?? {},
            redirect: 'manual',
            signal: controller.signal,
          });
        } catch (error) {
          throw new ResearchError('fetch_failed', `cannot fetch ${current}: ${errorMessage(error)}`, {
            cause: error,
          });
        }
        const location = response.headers.get('location');
        if (response.status >= 300 && response.status < 400 && location !== null) {
          await response.body?.cancel();
          current = new URL(location, current).toString();
          continue;
        }
        const text = await readCapped(response, maxBytes);
        options.logger?.debug({ url: current, status: response.status }, 'research fetch');
        return {
          url: current,
          status: response.status,
          contentType: response.headers.get('content-type') ?? '',
          text,
          headers: response.headers,
        };
      }
      throw new ResearchError('fetch_failed', `${url} redirects more than ${MAX_REDIRECTS} times`);
    } catch (error) {
      if (error instanceof ResearchError) throw error;
      throw new ResearchError('fetch_failed', `cannot fetch ${current}: ${errorMessage(error)}`, {
        cause: error,
      });
    } finally {
      clearTimeout(timer);
      init.signal?.removeEventListener('abort', forwardAbort);
    }
  };
}
