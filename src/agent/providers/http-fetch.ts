import http from 'node:http';
import https from 'node:https';
import { brotliDecompressSync, gunzipSync, inflateRawSync, inflateSync } from 'node:zlib';

/**
 * A small buffered `fetch` for the LLM SDKs (their `fetch` client option), over node:http and node:https
 * with keep-alive agents. The built-in fetch (undici) costs a millisecond or two more per call on a
 * nearby server (turn_overhead_p50_ms); an LLM call is one buffered JSON request and one buffered JSON
 * answer, so nothing of undici's streaming is needed. Anything this does not handle (a streamed or form
 * body, a non-HTTP URL) goes to the built-in fetch.
 */
export type FetchFunction = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

interface HttpFetchOptions {
  /** What anything this fetch does not handle goes to; the built-in fetch by default. */
  fallback?: FetchFunction;
  /** Idle sockets kept per host; the SDKs make one call at a time per turn. */
  maxFreeSockets?: number;
}

/** How many redirects are followed, as the built-in fetch does. */
const MAX_REDIRECTS = 20;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** Statuses whose responses have no body (a `Response` with one throws). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

interface PlainRequest {
  url: URL;
  method: string;
  headers: Headers;
  body: Uint8Array | string | undefined;
  signal: AbortSignal | undefined;
}

export function createHttpFetch(options: HttpFetchOptions = {}): FetchFunction {
  const fallback = options.fallback ?? ((input, init) => globalThis.fetch(input, init));
  const agentOptions = { keepAlive: true, maxFreeSockets: options.maxFreeSockets ?? 4 };
  const agents = { http: new http.Agent(agentOptions), https: new https.Agent(agentOptions) };

  return async (input, init) => {
    const plain = toPlainRequest(input, init);
    if (plain === undefined) return fallback(input, init);
    let request = plain;
    for (let redirects = 0; ; redirects++) {
      const response = await send(request, agents);
      const location = response.headers.get('location');
      if (!REDIRECT_STATUSES.has(response.status) || location === null) return response;
      if (redirects >= MAX_REDIRECTS) throw new TypeError('fetch failed: too many redirects');
      request = redirected(request, response.status, new URL(location, request.url));
    }
  };
}

/** The request as this fetch can send it, or `undefined` when the built-in fetch must. */
function toPlainRequest(
  input: string | URL | Request,
  init: RequestInit | undefined,
): PlainRequest | undefined {
  if (input instanceof Request) return undefined;
  const url = new URL(input);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  // Manual and refused redirects are left to the built-in fetch, which answers them as the spec says.
  if ((init?.redirect ?? 'follow') !== 'follow') return undefined;
  const body = init?.body ?? undefined;
  if (body !== undefined && body !== null && typeof body !== 'string' && !(body instanceof Uint8Array)) {
    return undefined;
  }
  return {
    url,
    method: (init?.method ?? 'GET').toUpperCase(),
    headers: new Headers(init?.headers),
    body: body ?? undefined,
    signal: init?.signal ?? undefined,
  };
}

/** The next request of a redirect, changed as fetch changes it (303, and 301/302 of a POST, become a GET). */
function redirected(request: PlainRequest, status: number, url: URL): PlainRequest {
  const headers = new Headers(request.headers);
  // Credentials go no further than the origin they were meant for.
  if (url.origin !== request.url.origin) {
    headers.delete('authorization');
    headers.delete('cookie');
    headers.delete('x-api-key');
  }
  const toGet =
    status === 303
      ? request.method !== 'HEAD'
      : request.method === 'POST' && status !== 307 && status !== 308;
  if (!toGet) return { ...request, url, headers };
  for (const name of [
    'content-type',
    'content-length',
    'content-encoding',
    'content-language',
    'content-location',
  ]) {
    headers.delete(name);
  }
  return { url, method: 'GET', headers, body: undefined, signal: request.signal };
}

/** One HTTP exchange, its answer read whole. */
function send(request: PlainRequest, agents: { http: http.Agent; https: https.Agent }): Promise<Response> {
  const { signal } = request;
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  const headers: Record<string, string> = {};
  for (const [name, value] of request.headers) headers[name] = value;
  if (headers['accept-encoding'] === undefined) headers['accept-encoding'] = 'gzip, deflate, br';
  if (request.body !== undefined) headers['content-length'] = String(Buffer.byteLength(request.body));
  const secure = request.url.protocol === 'https:';
  return new Promise<Response>((resolve, reject) => {
    const outgoing = (secure ? https : http).request(request.url, {
      method: request.method,
      headers,
      agent: secure ? agents.https : agents.http,
    });
    const onAbort = () => {
      const reason = abortReason(signal);
      outgoing.destroy(reason);
      reject(reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const settle = () => signal?.removeEventListener('abort', onAbort);
    outgoing.on('error', (error) => {
      settle();
      reject(signal?.aborted ? abortReason(signal) : new TypeError('fetch failed', { cause: error }));
    });
    outgoing.on('response', (incoming) => {
      const chunks: Buffer[] = [];
      incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
      incoming.on('error', (error) => {
        settle();
        reject(new TypeError('fetch failed', { cause: error }));
      });
      incoming.on('end', () => {
        settle();
        try {
          resolve(toResponse(incoming, Buffer.concat(chunks), request.url));
        } catch (error) {
          reject(new TypeError('fetch failed', { cause: error }));
        }
      });
    });
    outgoing.end(request.body);
  });
}

function toResponse(incoming: http.IncomingMessage, raw: Buffer, url: URL): Response {
  const status = incoming.statusCode ?? 0;
  const headers = new Headers();
  for (const [name, value] of Object.entries(incoming.headers)) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
  }
  const body = decode(raw, headers.get('content-encoding'));
  if (body !== raw) {
    // The body is handed on decoded, as fetch hands it on.
    headers.delete('content-encoding');
    headers.delete('content-length');
  }
  const response = new Response(NULL_BODY_STATUSES.has(status) ? null : new Uint8Array(body), {
    status,
    statusText: incoming.statusMessage ?? '',
    headers,
  });
  // `url` is read-only on a constructed Response; the SDKs only log it, but a caller may look.
  Object.defineProperty(response, 'url', { value: url.href });
  return response;
}

function decode(raw: Buffer, encoding: string | null): Buffer {
  if (raw.length === 0 || encoding === null) return raw;
  const name = encoding.trim().toLowerCase();
  if (name === 'gzip' || name === 'x-gzip') return gunzipSync(raw);
  if (name === 'br') return brotliDecompressSync(raw);
  if (name === 'deflate') {
    // Servers send either zlib-wrapped or raw deflate under this name; fetch accepts both.
    try {
      return inflateSync(raw);
    } catch {
      return inflateRawSync(raw);
    }
  }
  return raw;
}

function abortReason(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new DOMException('This operation was aborted', 'AbortError');
}
