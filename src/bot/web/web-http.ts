import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { definedOnly } from '../../defined-only.js';
import { PlatformError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { SCRIPT_NEW_ID } from '../../script-step.js';
import {
  decodeThreadId,
  encodeThreadId,
  type InboundHandlers,
  type InboundMessage,
} from '../chat-adapter.js';
import { isReservedName } from './reserved-names.js';
import type { WebEventHub } from './web-events.js';
import { createWebGuard, type WebGuardOptions } from './web-guard.js';
import type { WebRoute } from './web-json.js';
import type { WebMessage, WebStore } from './web-store.js';

/*
 * The playground's HTTP API. It is a product interface (tools and tests drive the bot through it), so
 * its shapes are kept stable; see docs/web.md.
 */

/** Request bodies above this are refused with 413 before parsing. */
export const WEB_BODY_MAX_BYTES = 1024 * 1024;
/** Message text above this many characters is refused with 413. */
export const WEB_TEXT_MAX_CHARS = 40_000;

const channelName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$/, 'letters, digits, "_", "." and "-", at most 80');
const userName = z
  .string()
  .trim()
  .min(1)
  .max(80)
  .regex(/^[^\p{Cc}:]+$/u, 'no control characters or ":"');

/**
 * Direct-message channels (`dm.<name>`, the playground's DM mode): like a Slack or Discord DM, every
 * message is addressed to the bot without a mention, and the conversation is one session: a message
 * without a thread continues the channel's thread instead of starting another.
 */
export const WEB_DM_PREFIX = 'dm.';
export const isDirectMessageChannel = (channel: string) => channel.startsWith(WEB_DM_PREFIX);

/** The name bot messages carry in the playground API. */
export const WEB_BOT_USER = 'shepherd';

/** A person posting as the bot (or a lookalike of it) would be indistinguishable from it in the thread. */
function personName(botName: string) {
  return userName.refine((name) => !isReservedName(name, botName), 'this name is reserved');
}

function requestSchemas(botName: string) {
  return {
    postMessage: z.object({
      channel: channelName,
      user: personName(botName),
      text: z.string().min(1),
      threadId: z.string().min(1).optional(),
    }),
    postAction: z.object({
      threadId: z.string().min(1),
      messageId: z.string().min(1),
      actionId: z.string().min(1),
      user: personName(botName),
    }),
  };
}
const postChannelBody = z.object({ channel: channelName });

class HttpProblem extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = 'HttpProblem';
    this.status = status;
  }
}

/** The thread-message shape served by `GET /api/threads/:threadId/messages`; absent fields are omitted. */
export function toMessageView(message: WebMessage): Record<string, unknown> {
  const view: Record<string, unknown> = {
    id: message.id,
    user: message.user,
    text: message.text,
    ts: message.ts,
  };
  if (message.editedAt !== undefined) view.editedAt = message.editedAt;
  if (message.card !== undefined) {
    const { actions, ...rest } = message.card;
    view.card = message.card.resolved === undefined && actions !== undefined ? { ...rest, actions } : rest;
  }
  if (message.images !== undefined) view.images = message.images;
  if (message.files !== undefined) view.files = message.files;
  if (message.visibleTo !== undefined) view.visibleTo = message.visibleTo;
  return view;
}

/** A mention of the bot: `@name`, case-insensitive, not inside a longer word or e-mail address. */
export function createMentionPattern(botName: string): RegExp {
  const escaped = botName.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(?<![\\w@.])@${escaped}(?![\\w-])`, 'i');
}

/** Accept a bare root id (`m17`) or the full `web:<channel>:<root>` form. */
function parseThreadParameter(value: string): { root: string; channel?: string } {
  if (value.startsWith('web:')) {
    try {
      const reference = decodeThreadId(value);
      return { root: reference.thread, channel: reference.channel };
    } catch {
      return { root: value };
    }
  }
  return { root: value };
}

function sendJson(response: ServerResponse, status: number, body: unknown, close = false): void {
  const payload = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(payload),
    'cache-control': 'no-store',
    ...(close ? { connection: 'close' } : {}),
  });
  response.end(payload);
}

function readBody(request: IncomingMessage): Promise<string> {
  const declared = Number(request.headers['content-length'] ?? '0');
  if (declared > WEB_BODY_MAX_BYTES) {
    request.resume();
    return Promise.reject(new HttpProblem(413, `body over ${WEB_BODY_MAX_BYTES} bytes`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    request.on('data', (chunk: Buffer) => {
      if (tooLarge) return;
      size += chunk.length;
      if (size > WEB_BODY_MAX_BYTES) {
        tooLarge = true;
        reject(new HttpProblem(413, `body over ${WEB_BODY_MAX_BYTES} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    request.on('end', () => {
      if (!tooLarge) resolve(Buffer.concat(chunks).toString('utf8'));
    });
    request.on('error', reject);
  });
}

async function readJson<T>(request: IncomingMessage, schema: z.ZodType<T>): Promise<T> {
  const raw = await readBody(request);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new HttpProblem(400, 'body: invalid JSON');
  }
  const result = schema.safeParse(parsed);
  if (!result.success) {
    const issue = result.error.issues[0];
    const field = issue === undefined || issue.path.length === 0 ? 'body' : issue.path.join('.');
    throw new HttpProblem(400, `${field}: ${issue?.message ?? 'invalid'}`);
  }
  return result.data;
}

/** Image and text types are served inline; anything else is a download, so no upload can run script here. */
const INLINE_TYPES = new Set([
  'image/png',
  'image/jpeg',
  'image/gif',
  'image/webp',
  'text/plain',
  'application/json',
]);

export interface WebRequestHandlerOptions {
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

/** Build the `node:http` request listener for the playground. */
export function createWebRequestHandler(
  options: WebRequestHandlerOptions,
): (request: IncomingMessage, response: ServerResponse) => void {
  const { store, handlers, events, logger, page } = options;
  const now = options.now ?? Date.now;
  const mention = createMentionPattern(options.botName);
  const schemas = requestSchemas(options.botName);
  const admit = createWebGuard(options.guard);
  const enabled = options.enabled ?? true;

  async function postMessage(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const body = await readJson(request, schemas.postMessage);
    if (body.text.length > WEB_TEXT_MAX_CHARS) {
      throw new HttpProblem(413, `text: over ${WEB_TEXT_MAX_CHARS} characters`);
    }
    let root: string | undefined;
    if (body.threadId !== undefined) {
      const target = parseThreadParameter(body.threadId);
      if (target.channel !== undefined && target.channel !== body.channel) {
        throw new HttpProblem(404, `threadId: no thread ${body.threadId} in channel ${body.channel}`);
      }
      root = target.root;
    }
    const direct = isDirectMessageChannel(body.channel);
    if (direct && root === undefined) root = await store.latestThread(body.channel);
    const input = {
      channel: body.channel,
      user: body.user,
      text: body.text,
      ts: now(),
      ...definedOnly({ threadId: root }),
    };
    const inbound = (id: string, threadRoot: string): InboundMessage => ({
      threadId: encodeThreadId({ platform: 'web', channel: body.channel, thread: threadRoot }),
      messageId: id,
      user: { id: body.user, name: body.user },
      text: body.text,
      addressed: direct || mention.test(body.text),
      startsThread: root === undefined,
      deliveryId: id,
      receivedAt: input.ts,
    });
    let stored: WebMessage | undefined;
    try {
      if (handlers.onMessageStored !== undefined) {
        // The ack's one round trip: the message and its inbox entry in one script.
        await handlers.onMessageStored(inbound(SCRIPT_NEW_ID, root ?? SCRIPT_NEW_ID), async (step) => {
          const created = await store.createMessageWithStep(input, step);
          stored = created.message;
          return { messageId: created.message.id, stepResult: created.stepResult };
        });
      } else {
        stored = await store.createMessage(input);
        await handlers.onMessage(inbound(stored.id, stored.threadId));
      }
    } catch (error) {
      if (error instanceof PlatformError && error.code === 'thread_unknown') {
        throw new HttpProblem(404, `threadId: no thread ${body.threadId ?? ''} in channel ${body.channel}`);
      }
      throw error;
    }
    if (stored === undefined) throw new Error('the playground store did not run');
    sendJson(response, 202, { threadId: stored.threadId, messageId: stored.id });
  }

  async function postAction(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const body = await readJson(request, schemas.postAction);
    const target = parseThreadParameter(body.threadId);
    const message = await store.getMessage(body.messageId);
    if (
      message === undefined ||
      message.threadId !== target.root ||
      (target.channel !== undefined && target.channel !== message.channel)
    ) {
      throw new HttpProblem(404, `messageId: no message ${body.messageId} in thread ${body.threadId}`);
    }
    if (message.card?.resolved !== undefined) {
      throw new HttpProblem(409, `this card is already resolved: ${message.card.resolved}`);
    }
    if (!message.card?.actions?.some((action) => action.actionId === body.actionId)) {
      throw new HttpProblem(404, `actionId: ${body.actionId} is not a button on message ${body.messageId}`);
    }
    const outcome = await handlers.onAction({
      threadId: encodeThreadId({ platform: 'web', channel: message.channel, thread: message.threadId }),
      messageId: message.id,
      actionId: body.actionId,
      user: { id: body.user, name: body.user },
    });
    switch (outcome.status) {
      case 'accepted':
        sendJson(
          response,
          200,
          outcome.message === undefined ? { ok: true } : { ok: true, message: outcome.message },
        );
        return;
      case 'forbidden':
        throw new HttpProblem(403, outcome.message);
      case 'resolved':
        throw new HttpProblem(409, outcome.message);
      case 'unknown':
        throw new HttpProblem(404, outcome.message);
    }
  }

  async function getThreadMessages(response: ServerResponse, parameter: string): Promise<void> {
    const target = parseThreadParameter(parameter);
    const messages = await store.getThread(target.root);
    if (messages === undefined || (target.channel !== undefined && messages[0]?.channel !== target.channel)) {
      throw new HttpProblem(404, `no thread ${parameter}`);
    }
    sendJson(response, 200, { messages: messages.map(toMessageView) });
  }

  async function getFile(response: ServerResponse, fileId: string): Promise<void> {
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

  async function route(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const method = request.method ?? 'GET';
    const path = new URL(request.url ?? '/', 'http://playground').pathname;
    if (!enabled && path !== '/healthz') throw new HttpProblem(404, 'the playground is off');
    if (!admit(request, response)) return;

    if (method === 'POST' && path === '/api/messages') return await postMessage(request, response);
    if (method === 'POST' && path === '/api/actions') return await postAction(request, response);
    if (method === 'GET' && path === '/') {
      response.writeHead(200, {
        'content-type': 'text/html; charset=utf-8',
        'content-security-policy': page.contentSecurityPolicy,
        'cache-control': 'no-store',
      });
      response.end(page.html);
      return;
    }
    if (method === 'GET' && path === '/favicon.ico') {
      response.writeHead(204).end();
      return;
    }
    if (method === 'GET' && path === '/healthz') {
      sendJson(response, 200, { ok: true, time: now() });
      return;
    }
    if (method === 'GET' && path === '/api/channels') {
      sendJson(response, 200, { channels: await store.listChannels() });
      return;
    }
    if (method === 'POST' && path === '/api/channels') {
      const body = await readJson(request, postChannelBody);
      await store.addChannel(body.channel);
      sendJson(response, 201, { channel: body.channel });
      return;
    }
    if (method === 'GET' && path === '/api/events') {
      events.addClient(response);
      return;
    }
    const threadMatch = /^\/api\/threads\/([^/]+)\/messages$/.exec(path);
    if (method === 'GET' && threadMatch?.[1] !== undefined) {
      let parameter: string;
      try {
        parameter = decodeURIComponent(threadMatch[1]);
      } catch {
        throw new HttpProblem(400, 'threadId: malformed URL encoding');
      }
      return await getThreadMessages(response, parameter);
    }
    const fileMatch = /^\/api\/files\/([^/]+)$/.exec(path);
    if (method === 'GET' && fileMatch?.[1] !== undefined) return await getFile(response, fileMatch[1]);
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
