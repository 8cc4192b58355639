import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import { definedOnly } from '../../defined-only.js';
import { PlatformError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import {
  type Card,
  type ChatAdapter,
  decodeThreadId,
  type InboundHandlers,
  type PostedMessage,
  type Upload,
} from '../chat-adapter.js';
import { renderPage } from './page.js';
import { loadPageAssets } from './page-assets.js';
import { toWebCard } from './web-cards.js';
import { createWebEventHub, type WebEventHub } from './web-events.js';
import { createWebRequestHandler, WEB_BOT_USER } from './web-http.js';
import type { WebRoute } from './web-json.js';
import type { NewWebMessage, WebStore } from './web-store.js';

interface WebAdapterOptions {
  store: WebStore;
  /** Used only to `duplicate()` a subscriber connection for live events when the server starts. */
  redis: Redis;
  host: string;
  /** 0 picks a free port; read it back with `address()`. */
  port: number;
  /** The name people mention (`@shepherd`). */
  botName: string;
  logger: Logger;
  /** `SHEPHERD_PLAYGROUND`, `SHEPHERD_PLAYGROUND_TOKEN`, `SHEPHERD_ALLOWED_HOSTS` (default: on, no token). */
  playground?: { enabled: boolean; token: string | undefined; allowedHosts: readonly string[] };
  /** Other listeners served by the same HTTP server under a path prefix (e.g. Slack's `/slack/`). */
  mounts?: Array<{ pathPrefix: string; listener: RequestListener }>;
}

interface WebAddress {
  host: string;
  port: number;
  url: string;
}

export interface WebAdapter extends ChatAdapter {
  readonly platform: 'web';
  /** Where the playground listens; only valid after `start()`. */
  address(): WebAddress;
  /** Adds routes kept in their own module (runs, turns); call before `start()`. */
  extend(extension: WebExtension): void;
}

/** Routes outside web-http.ts, with an optional life cycle tied to the server's (live events). */
interface WebExtension {
  /** Named on the page (`data-extensions`), so it only calls APIs that exist. */
  name: string;
  route: WebRoute;
  start?(events: WebEventHub): void;
  stop?(): void;
}

/** Resolve `web:<channel>:<root>`; an empty root means "a new top-level message in the channel". */
function resolveThread(threadId: string): { channel: string; root: string | undefined } {
  let reference: ReturnType<typeof decodeThreadId>;
  try {
    reference = decodeThreadId(threadId);
  } catch (error) {
    throw new PlatformError('web', 'thread_invalid', `not a thread id: ${threadId}`, {
      retryable: false,
      cause: error,
    });
  }
  if (reference.platform !== 'web') {
    throw new PlatformError('web', 'thread_invalid', `not a playground thread: ${threadId}`, {
      retryable: false,
    });
  }
  return { channel: reference.channel, root: reference.thread === '' ? undefined : reference.thread };
}

/**
 * The local web playground: the embedded default chat platform. Posting methods write through the
 * Redis store and work in any process (no `start()` needed); `start()` serves the page and API.
 */
export function createWebAdapter(options: WebAdapterOptions): WebAdapter {
  const { store, logger } = options;
  let server: Server | undefined;
  let events: WebEventHub | undefined;
  let bound: WebAddress | undefined;
  const extensions: WebExtension[] = [];

  async function post(threadId: string, fields: Omit<NewWebMessage, 'channel' | 'threadId' | 'user'>) {
    const { channel, root } = resolveThread(threadId);
    const message = await store.createMessage({
      channel,
      user: WEB_BOT_USER,
      ...fields,
      ...definedOnly({ threadId: root }),
    });
    return { messageId: message.id } satisfies PostedMessage;
  }

  async function edit(threadId: string, messageId: string, patch: Parameters<WebStore['editMessage']>[1]) {
    resolveThread(threadId);
    const found = await store.editMessage(messageId, patch);
    if (!found) {
      throw new PlatformError('web', 'message_unknown', `no playground message ${messageId}`, {
        retryable: false,
      });
    }
  }

  return {
    platform: 'web',

    async start(handlers: InboundHandlers) {
      if (server !== undefined) throw new Error('web adapter already started');
      const subscriber = options.redis.duplicate();
      subscriber.on('error', (error: Error) =>
        logger.warn({ err: error }, 'playground event subscriber: redis error'),
      );
      events = createWebEventHub({ subscriber, channel: store.eventsChannel, logger });
      await events.start();
      const listener = createWebRequestHandler({
        store,
        handlers,
        events,
        botName: options.botName,
        logger,
        page: renderPage(
          { botName: options.botName, extensions: extensions.map((extension) => extension.name) },
          await loadPageAssets(),
        ),
        routes: extensions.map((extension) => extension.route),
        enabled: options.playground?.enabled ?? true,
        guard: {
          host: options.host,
          allowedHosts: options.playground?.allowedHosts ?? [],
          token: options.playground?.token,
        },
      });
      const mounts = options.mounts ?? [];
      const created = createServer((request, response) => {
        const mount = mounts.find((entry) => request.url?.startsWith(entry.pathPrefix));
        if (mount !== undefined) return mount.listener(request, response);
        return listener(request, response);
      });
      try {
        await new Promise<void>((resolve, reject) => {
          created.once('error', reject);
          created.listen(options.port, options.host, () => {
            created.off('error', reject);
            resolve();
          });
        });
      } catch (error) {
        // E.g. the port is taken: release the subscriber so a failed start leaks nothing.
        await events.stop();
        events = undefined;
        throw new PlatformError(
          'web',
          'listen_failed',
          `playground cannot listen on ${options.host}:${options.port}`,
          {
            retryable: false,
            cause: error,
          },
        );
      }
      server = created;
      for (const extension of extensions) if (events !== undefined) extension.start?.(events);
      const info = created.address() as AddressInfo;
      const urlHost = info.address.includes(':') ? `[${info.address}]` : info.address;
      bound = { host: info.address, port: info.port, url: `http://${urlHost}:${info.port}` };
      logger.info({ url: bound.url }, 'web playground listening');
    },

    isConnected: () => server?.listening === true,

    extend(extension) {
      if (server !== undefined) throw new Error('extend the web adapter before it starts');
      extensions.push(extension);
    },

    async stop() {
      const closing = server;
      server = undefined;
      for (const extension of extensions) extension.stop?.();
      await events?.stop();
      events = undefined;
      if (closing !== undefined) {
        await new Promise<void>((resolve) => {
          closing.close(() => resolve());
          closing.closeAllConnections();
        });
      }
    },

    address() {
      if (bound === undefined) throw new Error('web adapter not started');
      return bound;
    },

    postMessage: (threadId, text) => post(threadId, { text }),

    // An edit to text makes the message plain text, as on Slack and Discord (a status card loses its button).
    editMessage: (threadId, messageId, text) => edit(threadId, messageId, { text, card: null }),

    async postCard(threadId: string, card: Card) {
      return await post(threadId, { text: '', card: await toWebCard(card, store) });
    },

    async updateCard(threadId: string, messageId: string, card: Card) {
      await edit(threadId, messageId, { card: await toWebCard(card, store) });
    },

    async upload(threadId: string, upload: Upload) {
      const saved = await store.saveFile({
        name: upload.filename,
        contentType: upload.contentType,
        data: upload.data,
      });
      const isImage = upload.contentType.startsWith('image/');
      return await post(threadId, {
        text: upload.comment ?? '',
        ...(isImage
          ? { images: [saved.url] }
          : { files: [{ name: upload.title ?? upload.filename, url: saved.url }] }),
      });
    },

    async postEphemeral(threadId: string, userId: string, text: string) {
      await post(threadId, { text, visibleTo: userId });
    },
  };
}
