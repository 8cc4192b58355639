import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createHostCheck, isCrossSite } from '../bot/web/web-guard.js';
import { ADMIN_BASE_PATH } from './admin-board.js';
import type { OpsMetrics } from './ops-metrics.js';
import type { Readiness } from './readiness.js';

interface OpsHttpOptions {
  readiness: Readiness;
  metrics: OpsMetrics;
  /** When set, `/metrics` needs it (Bearer, or basic auth with it as the password). */
  metricsToken: string | undefined;
  /** When set, the queue dashboard is served and needs it; when unset, `/admin/queues` is 404. */
  adminToken: string | undefined;
  adminBoard: (() => (request: IncomingMessage, response: ServerResponse) => void) | undefined;
  /** The playground's host rules; the dashboard refuses other Host names like the API does. */
  hosts: { host: string; allowedHosts: readonly string[] };
}

/** The paths this listener answers; the web server hands them over before its own routes. */
export const OPS_PATHS = ['/healthz', '/readyz', '/metrics', ADMIN_BASE_PATH] as const;

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Accepts `Authorization: Bearer <token>` or basic auth whose password is the token. */
function hasToken(request: IncomingMessage, token: string): boolean {
  const header = request.headers.authorization ?? '';
  const [scheme, value = ''] = header.split(' ', 2);
  if (scheme?.toLowerCase() === 'bearer') return sameSecret(value.trim(), token);
  if (scheme?.toLowerCase() === 'basic') {
    const decoded = Buffer.from(value.trim(), 'base64').toString('utf8');
    const password = decoded.slice(decoded.indexOf(':') + 1);
    return decoded.includes(':') && sameSecret(password, token);
  }
  return false;
}

function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
) {
  response.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    ...headers,
  });
  response.end(JSON.stringify(body));
}

/** `/healthz`, `/readyz`, `/metrics` and the queue dashboard, for every role. */
export function createOpsListener(options: OpsHttpOptions) {
  let board: ((request: IncomingMessage, response: ServerResponse) => void) | undefined;
  const hostAllowed = createHostCheck(options.hosts);
  return async function handleOps(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const method = request.method ?? 'GET';
    const path = new URL(request.url ?? '/', 'http://ops').pathname;
    if (path === '/healthz' && method === 'GET') {
      sendJson(response, 200, { ok: true, pid: process.pid, uptimeSeconds: Math.round(process.uptime()) });
      return;
    }
    if (path === '/readyz' && method === 'GET') {
      const report = await options.readiness.report();
      const down = Object.entries(report.checks)
        .filter(([, result]) => !result.ok)
        .map(([name]) => name);
      sendJson(response, report.ready ? 200 : 503, { ready: report.ready, down, checks: report.checks });
      return;
    }
    if (path === '/metrics' && method === 'GET') {
      if (options.metricsToken !== undefined && !hasToken(request, options.metricsToken)) {
        sendJson(
          response,
          401,
          { error: 'metrics need SHEPHERD_METRICS_TOKEN' },
          { 'www-authenticate': 'Bearer' },
        );
        return;
      }
      const rendered = await options.metrics.render();
      response.writeHead(200, { 'content-type': rendered.contentType, 'cache-control': 'no-store' });
      response.end(rendered.body);
      return;
    }
    if (path === ADMIN_BASE_PATH || path.startsWith(`${ADMIN_BASE_PATH}/`)) {
      if (options.adminToken === undefined || options.adminBoard === undefined) {
        sendJson(response, 404, { error: `no route ${method} ${path}` });
        return;
      }
      if (!hostAllowed(request.headers.host)) {
        sendJson(response, 403, { error: `host not allowed: ${request.headers.host ?? '(none)'}` });
        return;
      }
      // Browsers replay cached basic-auth credentials on cross-site form posts: refuse other sites' pages.
      if (isCrossSite(request)) {
        sendJson(response, 403, { error: 'cross-origin request refused' });
        return;
      }
      if (!hasToken(request, options.adminToken)) {
        sendJson(
          response,
          401,
          { error: 'the queue dashboard needs SHEPHERD_ADMIN_TOKEN' },
          { 'www-authenticate': 'Basic realm="shepherd admin", charset="UTF-8"' },
        );
        return;
      }
      board ??= options.adminBoard();
      board(request, response);
      return;
    }
    sendJson(response, 404, { error: `no route ${method} ${path}` });
  };
}
