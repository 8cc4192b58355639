import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import { PlatformError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { InboundHandlers } from '../chat-adapter.js';
import { renderPage } from './page.js';
import { loadPageAssets } from './page-assets.js';
import { createWebEventHub, type WebEventHub } from './web-events.js';
import { createWebRequestHandler } from './web-http.js';
import type { WebRoute } from './web-json.js';
import type { WebStore } from './web-store.js';

/*
 * The playground as an app of its own: the HTTP server, the page, the messages, runs and turns APIs, and
 * the guard in front of them. It hosts the web chat adapter (web-adapter.ts), which only writes to the
 * store: `start(handlers)` is how people's messages and clicks reach the core.
 */

interface PlaygroundAppOptions {
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
  /** Routes kept in their own modules (runs, turns), tried after the messages API. */
  extensions?: readonly PlaygroundExtension[];
  /** Other listeners served by the same HTTP server under a path prefix (e.g. Slack's `/slack/`). */
  mounts?: ReadonlyArray<{ pathPrefix: string; listener: RequestListener }>;
}

interface PlaygroundAddress {
  host: string;
  port: number;
  url: string;
}

/** Routes outside web-http.ts, with an optional life cycle tied to the server's (live events). */
interface PlaygroundExtension {
  /** Named on the page (`data-extensions`), so it only calls APIs that exist. */
  name: string;
  route: WebRoute;
  start?(events: WebEventHub): void;
  stop?(): void;
}

export interface PlaygroundApp {
  /** Serves the page and the API; people's messages and clicks go to `handlers`. */
  start(handlers: InboundHandlers): Promise<void>;
  stop(): Promise<void>;
  /** Whether the server listens; for `/readyz`. */
  isConnected(): boolean;
  /** Where the playground listens; only valid after `start()`. */
  address(): PlaygroundAddress;
}

async function listen(server: Server, port: number, host: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

export function createPlaygroundApp(options: PlaygroundAppOptions): PlaygroundApp {
  const { store, logger } = options;
  const extensions = options.extensions ?? [];
  let server: Server | undefined;
  let events: WebEventHub | undefined;
  let bound: PlaygroundAddress | undefined;

  async function requestListener(handlers: InboundHandlers, hub: WebEventHub): Promise<RequestListener> {
    const listener = createWebRequestHandler({
      store,
      handlers,
      events: hub,
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
    return (request, response) => {
      const mount = mounts.find((entry) => request.url?.startsWith(entry.pathPrefix));
      if (mount !== undefined) return mount.listener(request, response);
      return listener(request, response);
    };
  }

  return {
    async start(handlers) {
      if (server !== undefined) throw new Error('playground already started');
      const subscriber = options.redis.duplicate();
      subscriber.on('error', (error: Error) =>
        logger.warn({ err: error }, 'playground event subscriber: redis error'),
      );
      const hub = createWebEventHub({ subscriber, channel: store.eventsChannel, logger });
      events = hub;
      await hub.start();
      const created = createServer(await requestListener(handlers, hub));
      try {
        await listen(created, options.port, options.host);
      } catch (error) {
        // E.g. the port is taken: release the subscriber so a failed start leaks nothing.
        await hub.stop();
        events = undefined;
        throw new PlatformError(
          'web',
          'listen_failed',
          `playground cannot listen on ${options.host}:${options.port}`,
          { retryable: false, cause: error },
        );
      }
      server = created;
      for (const extension of extensions) extension.start?.(hub);
      const info = created.address() as AddressInfo;
      const urlHost = info.address.includes(':') ? `[${info.address}]` : info.address;
      bound = { host: info.address, port: info.port, url: `http://${urlHost}:${info.port}` };
      logger.info({ url: bound.url }, 'web playground listening');
    },

    isConnected: () => server?.listening === true,

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
      if (bound === undefined) throw new Error('playground not started');
      return bound;
    },
  };
}
