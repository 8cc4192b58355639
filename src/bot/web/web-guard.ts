import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isLoopbackName } from '../../config/security.js';

/*
 * What every playground request passes before routing (SECURITY.md, "The web playground"):
 * - the Host must be a loopback name, the configured host or an allowed host (defeats DNS rebinding);
 * - an Origin, when sent, must be this very host (a page on another site cannot drive the API);
 * - a POST must be `application/json` (a cross-site form or `text/plain` fetch cannot make one);
 * - with a token set, every request but `/healthz` carries it (header or the cookie `?token=` sets).
 */

export interface WebGuardOptions {
  /** `SHEPHERD_HOST`. */
  host: string;
  /** `SHEPHERD_ALLOWED_HOSTS`: extra names the playground is reached by (a reverse proxy's). */
  allowedHosts: readonly string[];
  /** `SHEPHERD_PLAYGROUND_TOKEN`. */
  token: string | undefined;
}

type GuardVerdict =
  | { allowed: true }
  | { allowed: false; status: number; message: string }
  | { allowed: false; status: 303; location: string; cookie: string };

const COOKIE = 'shepherd_playground';
/** Addresses that bind every interface are not names anyone reaches the server by. */
const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '[::]']);

function hostnameOf(hostHeader: string): string | undefined {
  try {
    return new URL(`http://${hostHeader}`).hostname
      .toLowerCase()
      .replace(/^\[(.*)\]$/, '$1')
      .replace(/\.$/, '');
  } catch {
    return undefined;
  }
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const [key, ...rest] = part.trim().split('=');
    if (key === name) return decodeURIComponent(rest.join('='));
  }
  return undefined;
}

/**
 * A request a page on another site made (its `Origin` is not the request's own host, or the browser says
 * so in `Sec-Fetch-Site`). Requests without those headers (curl, probes, Prometheus) are not cross-site.
 */
export function isCrossSite(request: IncomingMessage): boolean {
  const fetchSite = request.headers['sec-fetch-site'];
  if (fetchSite === 'cross-site' || fetchSite === 'same-site') return true;
  const origin = request.headers.origin;
  if (origin === undefined) return false;
  try {
    const parsed = new URL(origin);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return true;
    return parsed.host.toLowerCase() !== (request.headers.host ?? '').toLowerCase();
  } catch {
    return true;
  }
}

/** The Host check alone (DNS rebinding): a loopback name, the configured host, or an allowed host. */
export function createHostCheck(
  options: Pick<WebGuardOptions, 'host' | 'allowedHosts'>,
): (hostHeader: string | undefined) => boolean {
  const allowedNames = new Set(
    [options.host, ...options.allowedHosts]
      .filter((name) => !WILDCARD_HOSTS.has(name))
      .map((name) => hostnameOf(name) ?? name.toLowerCase()),
  );
  // Every request asks, nearly always with the same one or two Host values; parsing one takes a URL.
  const verdicts = new Map<string, boolean>();
  return (hostHeader) => {
    if (hostHeader === undefined || hostHeader === '') return false;
    let allowed = verdicts.get(hostHeader);
    if (allowed === undefined) {
      const name = hostnameOf(hostHeader);
      allowed = name !== undefined && (isLoopbackName(name) || allowedNames.has(name));
      if (verdicts.size >= 256) verdicts.clear();
      verdicts.set(hostHeader, allowed);
    }
    return allowed;
  };
}

export function createWebGuard(options: WebGuardOptions) {
  const hostAllowed = createHostCheck(options);

  function check(request: IncomingMessage): GuardVerdict {
    const hostHeader = request.headers.host;
    if (!hostAllowed(hostHeader)) {
      return { allowed: false, status: 403, message: `host not allowed: ${hostHeader ?? '(none)'}` };
    }
    const origin = request.headers.origin;
    if (origin !== undefined) {
      let originHost: string | undefined;
      try {
        const parsed = new URL(origin);
        originHost = parsed.protocol === 'http:' || parsed.protocol === 'https:' ? parsed.host : undefined;
      } catch {
        originHost = undefined;
      }
      if (originHost === undefined || originHost.toLowerCase() !== hostHeader?.toLowerCase()) {
        return { allowed: false, status: 403, message: `cross-origin request refused: ${origin}` };
      }
    }
    const fetchSite = request.headers['sec-fetch-site'];
    if (fetchSite === 'cross-site' || fetchSite === 'same-site') {
      return { allowed: false, status: 403, message: 'cross-site request refused' };
    }
    const url = options.token === undefined ? undefined : new URL(request.url ?? '/', 'http://playground');
    if (options.token !== undefined && url !== undefined && url.pathname !== '/healthz') {
      const fromQuery = url.searchParams.get('token');
      if (request.method === 'GET' && url.pathname === '/' && fromQuery !== null) {
        if (!sameSecret(fromQuery, options.token)) {
          return { allowed: false, status: 401, message: 'wrong playground token' };
        }
        // Trade the URL token for a cookie the page's own requests carry, and drop it from the address bar.
        return {
          allowed: false,
          status: 303,
          location: '/',
          cookie: `${COOKIE}=${encodeURIComponent(options.token)}; HttpOnly; SameSite=Strict; Path=/`,
        };
      }
      const authorization = request.headers.authorization ?? '';
      const bearer = /^Bearer\s+(.+)$/i.exec(authorization)?.[1]?.trim();
      const given = bearer ?? cookieValue(request.headers.cookie, COOKIE);
      if (given === undefined || !sameSecret(given, options.token)) {
        return {
          allowed: false,
          status: 401,
          message:
            'this playground needs its token: open /?token=<SHEPHERD_PLAYGROUND_TOKEN> once, or send Authorization: Bearer <token>',
        };
      }
    }
    if (request.method === 'POST') {
      const mediaType = (request.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
      if (mediaType !== 'application/json') {
        return { allowed: false, status: 415, message: 'POST bodies must be application/json' };
      }
    }
    return { allowed: true };
  }

  /** Answers a refused request and returns false; returns true when the request may go on. */
  return function admit(request: IncomingMessage, response: ServerResponse): boolean {
    const verdict = check(request);
    if (verdict.allowed) return true;
    request.resume();
    if ('location' in verdict) {
      response.writeHead(303, {
        location: verdict.location,
        'set-cookie': verdict.cookie,
        'cache-control': 'no-store',
      });
      response.end();
      return false;
    }
    const payload = JSON.stringify({ error: verdict.message });
    response.writeHead(verdict.status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(payload),
      'cache-control': 'no-store',
      connection: 'close',
    });
    response.end(payload);
    return false;
  };
}
