import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type App, type AppOverrides, createApp } from '../../src/app/app.js';
import { type Config, loadConfig } from '../../src/config/config.js';
import { createLogger, type Logger } from '../../src/logger.js';
import { endProcessGroups, launchedGroups, removeTree, runsOnDisk } from './processes.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from './redis.js';

export interface PlaygroundMessage {
  id: string;
  user: string;
  text: string;
  ts: number;
  editedAt?: number;
  card?: {
    title?: string;
    text?: string;
    fields?: Array<{ label: string; value: string }>;
    imageUrl?: string;
    actions?: Array<{ actionId: string; label: string; style?: string }>;
    resolved?: string;
  };
  images?: string[];
}

export interface TestApp {
  app: App;
  config: Config;
  url: string;
  prefix: string;
  dataDir: string;
  /** POST /api/messages; returns the status and body. */
  post(body: Record<string, unknown>): Promise<{ status: number; body: Record<string, unknown> }>;
  /** Starts a thread with a mention and returns its id. */
  mention(text: string, user?: string, channel?: string): Promise<string>;
  reply(threadId: string, text: string, user?: string, channel?: string): Promise<void>;
  messages(threadId: string): Promise<PlaygroundMessage[]>;
  click(
    threadId: string,
    messageId: string,
    actionId: string,
    user: string,
    /** More of the body: `openForm: true`, or a form's `values`. */
    extra?: Record<string, unknown>,
  ): Promise<{ status: number; body: Record<string, unknown> }>;
  /** Polls the thread until `predicate` holds; fails with the thread's content after `timeoutMs`. */
  waitForMessages(
    threadId: string,
    predicate: (messages: PlaygroundMessage[]) => boolean,
    timeoutMs?: number,
  ): Promise<PlaygroundMessage[]>;
  stop(): Promise<void>;
}

export interface TestAppOptions {
  environment?: Record<string, string>;
  overrides?: AppOverrides;
  /** Keep data and keys (for restart tests that build a second app on the same state). */
  prefix?: string;
  dataDir?: string;
  keepState?: boolean;
  /** Replaces the silent default logger (e.g. to capture log lines a test asserts on). */
  logger?: Logger;
}

/** A whole Shepherd (adapters and workers) in-process on real Redis, with its playground on a free port. */
export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const prefix = options.prefix ?? uniquePrefix('app');
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'shepherd-test-'));
  const config = loadConfig({
    REDIS_URL: TEST_REDIS_URL,
    SHEPHERD_QUEUE_PREFIX: prefix,
    SHEPHERD_PORT: '0',
    SHEPHERD_DATA_DIR: dataDir,
    SHEPHERD_LOG_LEVEL: process.env.SHEPHERD_TEST_LOG_LEVEL ?? 'silent',
    SHEPHERD_LLM_MAX_RETRIES: '0',
    SHEPHERD_JOB_LOCK_MS: '3000',
    ...options.environment,
  });
  const logger = options.logger ?? createLogger(config.logLevel);
  const app = await createApp(config, logger, { runEnvironment: process.env, ...options.overrides });
  await app.start();
  const url = app.playground.address().url;

  const json = async (path: string, init?: RequestInit) => {
    const response = await fetch(`${url}${path}`, init);
    const text = await response.text();
    // A server error is the test's answer, not something to wait out: fail at once with what it said.
    if (response.status >= 500)
      throw new Error(`${init?.method ?? 'GET'} ${path}: HTTP ${response.status} ${text}`);
    let body: Record<string, unknown>;
    try {
      body = (text === '' ? {} : JSON.parse(text)) as Record<string, unknown>;
    } catch {
      throw new Error(
        `${init?.method ?? 'GET'} ${path}: HTTP ${response.status}, not JSON: ${text.slice(0, 200)}`,
      );
    }
    return { status: response.status, body };
  };
  const post = (body: Record<string, unknown>) =>
    json('/api/messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const messages = async (threadId: string) => {
    const { status, body } = await json(`/api/threads/${threadId}/messages`);
    if (status !== 200 || !Array.isArray(body.messages))
      throw new Error(`GET /api/threads/${threadId}/messages: HTTP ${status} ${JSON.stringify(body)}`);
    return body.messages as PlaygroundMessage[];
  };

  const harness: TestApp = {
    app,
    config,
    url,
    prefix,
    dataDir,
    post,
    async mention(text, user = 'alice', channel = 'ml-runs') {
      const result = await post({
        channel,
        user,
        text: text.includes('@shepherd') ? text : `@shepherd ${text}`,
      });
      if (result.status !== 202)
        throw new Error(`post failed: ${result.status} ${JSON.stringify(result.body)}`);
      return String(result.body.threadId);
    },
    async reply(threadId, text, user = 'alice', channel = 'ml-runs') {
      const result = await post({ channel, user, text, threadId });
      if (result.status !== 202)
        throw new Error(`post failed: ${result.status} ${JSON.stringify(result.body)}`);
    },
    messages,
    click: (threadId, messageId, actionId, user, extra = {}) =>
      json('/api/actions', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ threadId, messageId, actionId, user, ...extra }),
      }),
    async waitForMessages(threadId, predicate, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      let last: PlaygroundMessage[] = [];
      while (Date.now() < deadline) {
        last = await messages(threadId);
        if (predicate(last)) return last;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      throw new Error(`timed out waiting on thread ${threadId}; it holds:\n${JSON.stringify(last, null, 2)}`);
    },
    async stop() {
      // Runs outlive the bot by design, so a test ends the processes its app launched (by pid) first.
      const launched = options.keepState ? [] : await app.features.runs.list().catch(() => []);
      await app.stop();
      if (!options.keepState) {
        // A run launched while the app was stopping is in the store by now, not in the first list.
        const after = runsOnDisk(dataDir);
        await endProcessGroups([...new Set(launchedGroups([...launched, ...after]))]);
        await deleteKeysWithPrefix(prefix);
        if (options.dataDir === undefined) removeTree(dataDir);
      }
    },
  };
  return harness;
}

export const botMessages = (messages: PlaygroundMessage[]) =>
  messages.filter((message) => message.user === 'shepherd');
