import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import type { Logger } from '../../logger.js';
import type { InboundHandlers } from '../chat-adapter.js';
import type { WebEventHub } from './web-events.js';
import { createWebGuard, type WebGuardOptions } from './web-guard.js';
import { HttpProblem, readJson, sendJson } from './web-http-io.js';
import type { WebRoute } from './web-json.js';
import { channelName, createMessagesApi } from './web-messages-api.js';
import type { WebStore } from './web-store.js';

/*
 * The playground's HTTP API. It is a product interface (tools and tests drive the bot through it), so
 * its shapes are kept stable; see docs/web.md. The message routes are in web-messages-api.ts.
 */

const postChannelBody = z.object({ channel: channelName });

/** Image and text types are served inline; anything else is a download, so no upload can run script here. */
const INLINE_TYPES = new Set([
  'image/png',
  'image/jpeg',
  'image/gif',
  'image/webp',
  'text/plain',
  'application/json',
]);

interface WebRequestHandlerOptions {
  store: WebStore;
  handlers: InboundHandlers;
  events: WebEventHub;
  botName: string;
  logger: Logger;
  page: { html: string; contentSecurityPolicy: string };
  /** Routes kept in their own modules (runs, turns); tried after the built-in ones. */
  routes?: readonly WebRoute[];
  /** Host, Origin, content-type and token checks; see web-guard.ts. */
  guard: WebGuardOptions;
  /** `SHEPHERD_PLAYGROUND=off`: only `/healthz` answers (the server may still carry Slack's mount). */
  enabled?: boolean;
  now?: () => number;
}

/** The request's path; the ack path's own URL skips the `URL` parser (it is taken on every message). */
function requestPath(url: string | undefined): string {
  if (url === '/api/messages') return url;
  return new URL(url ?? '/', 'http://playground').pathname;
}

async function getFile(store: WebStore, response: ServerResponse, fileId: string): Promise<void> {
  const file = await store.getFile(fileId);
  if (file === undefined) throw new HttpProblem(404, `no file ${fileId}`);
  const inline = INLINE_TYPES.has(file.contentType);
  const safeName = file.name.replace(/[^\w.-]/g, '_');
  response.writeHead(200, {
    'content-type': inline ? file.contentType : 'application/octet-stream',
    'content-length': file.data.length,
    'content-disposition': `${inline ? 'inline' : 'attachment'}; filename="${safeName}"`,
    'x-content-type-options': 'nosniff',
    // Files are content-addressed, so a URL never changes meaning.
    'cache-control': 'public, max-age=31536000, immutable',
  });
  response.end(file.data);
}

function sendPage(response: ServerResponse, page: WebRequestHandlerOptions['page']): void {
  response.writeHead(200, {
    'content-type': 'text/html; charset=utf-8',
    'content-security-policy': page.contentSecurityPolicy,
    'cache-control': 'no-store',
  });
  response.end(page.html);
}

/** `decodeURIComponent` of a path part, 400 when it is malformed. */
function decodeThreadPart(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new HttpProblem(400, 'threadId: malformed URL encoding');
  }
}

/** Build the `node:http` request listener for the playground. */
export function createWebRequestHandler(
  options: WebRequestHandlerOptions,
): (request: IncomingMessage, response: ServerResponse) => void {
  const { store, handlers, events, logger, page } = options;
  const now = options.now ?? Date.now;
  const admit = createWebGuard(options.guard);
  const enabled = options.enabled ?? true;
  const messages = createMessagesApi({ store, handlers, botName: options.botName, now });

  async function route(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const method = request.method ?? 'GET';
    const path = requestPath(request.url);
    if (!enabled && path !== '/healthz') throw new HttpProblem(404, 'the playground is off');
    if (!admit(request, response)) return;

    if (method === 'POST' && path === '/api/messages') return await messages.postMessage(request, response);
    if (method === 'POST' && path === '/api/actions') return await messages.postAction(request, response);
    if (method === 'GET' && path === '/') return sendPage(response, page);
    if (method === 'GET' && path === '/favicon.ico') {
      response.writeHead(204).end();
      return;
    }
    if (method === 'GET' && path === '/healthz') return sendJson(response, 200, { ok: true, time: now() });
    if (method === 'GET' && path === '/api/channels') {
      return sendJson(response, 200, { channels: await store.listChannels() });
    }
    if (method === 'POST' && path === '/api/channels') {
      const body = await readJson(request, postChannelBody);
      await store.addChannel(body.channel);
      return sendJson(response, 201, { channel: body.channel });
    }
    if (method === 'GET' && path === '/api/events') return events.addClient(response);
    const threadMatch = /^\/api\/threads\/([^/]+)\/messages$/.exec(path);
    if (method === 'GET' && threadMatch?.[1] !== undefined) {
      return await messages.getThreadMessages(response, decodeThreadPart(threadMatch[1]));
    }
    const fileMatch = /^\/api\/files\/([^/]+)$/.exec(path);
    if (method === 'GET' && fileMatch?.[1] !== undefined) return await getFile(store, response, fileMatch[1]);
    for (const extra of options.routes ?? []) if (await extra(request, response, method, path)) return;
    throw new HttpProblem(404, `no route ${method} ${path}`);
  }

  return (request, response) => {
    route(request, response).catch((error: unknown) => {
      if (response.headersSent) {
        response.destroy();
        return;
      }
      if (error instanceof HttpProblem) {
        logger.debug(
          { method: request.method, url: request.url, status: error.status, error: error.message },
          'bad playground request',
        );
        sendJson(response, error.status, { error: error.message }, error.status === 413);
        return;
      }
      logger.error({ err: error, method: request.method, url: request.url }, 'playground request failed');
      sendJson(response, 500, { error: 'internal error' });
    });
  };
}
