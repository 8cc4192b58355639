import { Redis } from 'ioredis';
import type {
  ActionOutcome,
  CardForm,
  InboundAction,
  InboundHandlers,
  InboundMessage,
} from '../../src/bot/chat-adapter.js';
import { createPlaygroundApp, type PlaygroundApp } from '../../src/bot/web/playground-app.js';
import { createWebAdapter, type WebAdapter } from '../../src/bot/web/web-adapter.js';
import { createWebStore, type WebStore } from '../../src/bot/web/web-store.js';
import { createLogger } from '../../src/logger.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

/** A fake `InboundHandlers` port: records every call and answers actions from a script. */
export interface FakeHandlers extends InboundHandlers {
  messages: InboundMessage[];
  actions: InboundAction[];
  /** Outcome for the next clicks (default `accepted`). */
  actionOutcome: ActionOutcome;
  /** Optional reaction run after a message is recorded (e.g. the bot replying). */
  onMessageHook?: (message: InboundMessage) => void;
  onActionHook?: (action: InboundAction) => void;
  /** The form every click opens (`formFor`), when set. */
  form?: CardForm;
}

export function createFakeHandlers(): FakeHandlers {
  const fake: FakeHandlers = {
    messages: [],
    actions: [],
    actionOutcome: { status: 'accepted' },
    async onMessage(message) {
      fake.messages.push(message);
      fake.onMessageHook?.(message);
      return message.addressed || !message.startsThread;
    },
    async formFor() {
      return fake.form;
    },
    async onAction(action) {
      fake.actions.push(action);
      fake.onActionHook?.(action);
      return fake.actionOutcome;
    },
  };
  return fake;
}

export interface Playground {
  prefix: string;
  redis: Redis;
  store: WebStore;
  /** The web chat adapter, hosted by `app`. */
  adapter: WebAdapter;
  app: PlaygroundApp;
  handlers: FakeHandlers;
  url: string;
  /** POST JSON and return status and parsed body. */
  post(path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }>;
  get(path: string): Promise<{ status: number; body: Record<string, unknown> }>;
  close(): Promise<void>;
}

export async function startPlayground(label: string): Promise<Playground> {
  const prefix = uniquePrefix(label);
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  const store = createWebStore({ redis, prefix });
  const handlers = createFakeHandlers();
  const app = createPlaygroundApp({
    store,
    redis,
    host: '127.0.0.1',
    port: 0,
    botName: 'shepherd',
    logger: createLogger('silent'),
  });
  const adapter = createWebAdapter({ store, host: app });
  await adapter.start(handlers);
  const url = app.address().url;
  const parse = async (response: Response) => ({
    status: response.status,
    body: (await response.json()) as Record<string, unknown>,
  });
  return {
    prefix,
    redis,
    store,
    adapter,
    app,
    handlers,
    url,
    post: async (path, body) =>
      parse(
        await fetch(`${url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: typeof body === 'string' ? body : JSON.stringify(body),
        }),
      ),
    get: async (path) => parse(await fetch(`${url}${path}`)),
    async close() {
      await adapter.stop();
      await deleteKeysWithPrefix(prefix);
      redis.disconnect();
    },
  };
}
