import type { ServerResponse } from 'node:http';
import type { Redis } from 'ioredis';
import type { Logger } from '../../logger.js';
import { encodeThreadId } from '../chat-adapter.js';
import { webStoreEventSchema } from './web-store.js';

/** What the page receives on `/api/events` for each new or edited message. */
interface WebPageEvent {
  kind: 'message-create' | 'message-edit';
  channel: string;
  /** Root message id of the thread. */
  threadId: string;
  /** The same thread as a `web:<channel>:<root>` id. */
  encodedThreadId: string;
  messageId: string;
}

export interface WebEventHub {
  start(): Promise<void>;
  /** Attach an SSE response; it is detached when the client goes away. */
  addClient(response: ServerResponse): void;
  readonly clientCount: number;
  /** Send an event to this process's page clients only (e.g. `{ kind: 'runs' }` when runs changed). */
  publish(event: Record<string, unknown>): void;
  stop(): Promise<void>;
}

const HEARTBEAT_MS = 20_000;

/**
 * Fans the store's Redis pub/sub events out to Server-Sent-Events clients. Events come from Redis, not
 * from this process, so posts made by worker processes reach the page too.
 */
export function createWebEventHub(options: {
  subscriber: Redis;
  channel: string;
  logger: Logger;
}): WebEventHub {
  const { subscriber, channel, logger } = options;
  const clients = new Set<ServerResponse>();
  let heartbeat: NodeJS.Timeout | undefined;

  // Subscribed when the first page connects, not at start: until then every stored message would be
  // delivered to this process and parsed for nobody (it runs on the ack path's event loop).
  let subscription: Promise<unknown> | undefined;
  const subscribed = () => {
    subscription ??= subscriber.subscribe(channel).catch((error: unknown) => {
      subscription = undefined;
      throw error;
    });
    return subscription;
  };

  function openStream(response: ServerResponse): void {
    response.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    // Tells EventSource how soon to reconnect, and flushes the headers so the client sees "open".
    response.write('retry: 2000\n\n');
  }

  function broadcast(chunk: string): void {
    for (const client of clients) client.write(chunk);
  }

  function onRedisMessage(source: string, raw: string): void {
    // Nobody is watching: skip the parse (this runs for every message under load).
    if (source !== channel || clients.size === 0) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      parsed = undefined;
    }
    const result = webStoreEventSchema.safeParse(parsed);
    if (!result.success) {
      logger.warn({ raw }, 'ignoring malformed playground event');
      return;
    }
    const event: WebPageEvent = {
      kind: result.data.kind,
      channel: result.data.channel,
      threadId: result.data.root,
      encodedThreadId: encodeThreadId({
        platform: 'web',
        channel: result.data.channel,
        thread: result.data.root,
      }),
      messageId: result.data.messageId,
    };
    broadcast(`data: ${JSON.stringify(event)}\n\n`);
  }

  return {
    get clientCount() {
      return clients.size;
    },

    async start() {
      subscriber.on('message', onRedisMessage);
      heartbeat = setInterval(() => broadcast(': ping\n\n'), HEARTBEAT_MS);
      heartbeat.unref();
    },

    publish(event) {
      if (clients.size > 0) broadcast(`data: ${JSON.stringify(event)}\n\n`);
    },

    addClient(response) {
      // The page sees "open" only once the subscription is live, so it misses no event after that.
      subscribed().then(
        () => {
          if (response.destroyed || response.writableEnded) return;
          openStream(response);
          clients.add(response);
          response.on('close', () => clients.delete(response));
        },
        (error: unknown) => {
          logger.warn({ err: error }, 'playground events: could not subscribe');
          response.destroy();
        },
      );
    },

    async stop() {
      if (heartbeat !== undefined) clearInterval(heartbeat);
      for (const client of clients) client.end();
      clients.clear();
      subscriber.off('message', onRedisMessage);
      try {
        await subscriber.quit();
      } catch {
        subscriber.disconnect();
      }
    },
  };
}
