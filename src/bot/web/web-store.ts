import type { Redis } from 'ioredis';
import { PlatformError } from '../../errors.js';
import { plainScriptRunners, type ScriptRunner, type ScriptRunners } from '../../redis/connection.js';
import type { ScriptStep } from '../../redis/script-step.js';
import { CREATE_MESSAGE_SCRIPT, createMessageWithStepScript, EDIT_MESSAGE_SCRIPT } from './web-scripts.js';
import { createWebFileStore, type WebFileStore } from './web-store-files.js';
import {
  type NewWebMessage,
  redisFailure,
  type WebCard,
  type WebMessage,
  type WebStoreKeys,
  webStoreKeys,
} from './web-store-model.js';
import { createWebStoreReads, type WebStoreReads } from './web-store-reads.js';

/*
 * The playground's channels, threads and messages live in Redis, not in the HTTP server's memory, so
 * any process (the bot, or a worker on another machine) can post into the playground; the bot process
 * that serves the page learns about changes over the `<prefix>:web:events` pub/sub channel.
 */

// The records, for the modules that import them with the store.
export type { NewWebMessage, WebCard, WebMessage } from './web-store-model.js';
export { webStoreEventSchema } from './web-store-model.js';

export interface WebStore extends WebStoreReads, WebFileStore {
  /** The Redis pub/sub channel carrying event JSON (`webStoreEventSchema`). */
  readonly eventsChannel: string;
  /** Store a message (one atomic round trip). Throws `PlatformError` `thread_unknown` for a bad thread. */
  createMessage(input: NewWebMessage): Promise<WebMessage>;
  /**
   * Store a message and run `step` (another module's write, e.g. the inbox accept) in the same script:
   * still one round trip; the step does not run when the message is refused.
   */
  createMessageWithStep(
    input: NewWebMessage,
    step: ScriptStep,
  ): Promise<{ message: WebMessage; stepResult: unknown }>;
  /** Replace a message's text and/or card and set `editedAt`. Resolves `false` if there is no such message. */
  /** `card: null` removes the card (the message becomes plain text). */
  editMessage(messageId: string, patch: { text?: string; card?: WebCard | null }): Promise<boolean>;
  addChannel(channel: string): Promise<void>;
}

interface WebStoreOptions {
  redis: Redis;
  /** Runs the store's scripts (`createScriptGate` on the acking connection); plain runners on `redis` by default. */
  scripts?: ScriptRunners;
  /** The deployment's key prefix (`SHEPHERD_QUEUE_PREFIX`); keys live under `<prefix>:web:`. */
  prefix: string;
  /** `SHEPHERD_FILE_TTL_DAYS`: stored files expire this long after their last save (default 30). */
  fileTtlDays?: number;
  now?: () => number;
}

const DEFAULT_FILE_TTL_DAYS = 30;

const jsonOrEmpty = (value: unknown) => (value === undefined ? '' : JSON.stringify(value));

/** The ARGV of `create_message` (web-scripts.ts), in its order. */
function createArguments(keys: WebStoreKeys, input: NewWebMessage, ts: number): Array<string | number> {
  return [
    keys.base,
    input.channel,
    input.threadId ?? '',
    input.user,
    input.text,
    ts,
    jsonOrEmpty(input.card),
    input.images?.length ? jsonOrEmpty(input.images) : '',
    input.files?.length ? jsonOrEmpty(input.files) : '',
    input.visibleTo ?? '',
    keys.events,
  ];
}

/** The message as stored, without reading it back. */
function storedMessage(id: string, input: NewWebMessage, ts: number): WebMessage {
  const message: WebMessage = {
    id,
    channel: input.channel,
    threadId: input.threadId ?? id,
    user: input.user,
    text: input.text,
    ts,
  };
  if (input.card !== undefined) message.card = input.card;
  if (input.images?.length) message.images = input.images;
  if (input.files?.length) message.files = input.files;
  if (input.visibleTo !== undefined) message.visibleTo = input.visibleTo;
  return message;
}

/** Message creation: `create_message`, alone or with another module's step, in one script. */
function createMessageWriter(scripts: ScriptRunners, keys: WebStoreKeys, now: () => number) {
  const runCreate = scripts(CREATE_MESSAGE_SCRIPT);
  // One fused script per kind of step (in practice one: the inbox accept).
  const stepRunners = new Map<string, ScriptRunner>();
  const stepRunner = (stepLua: string) => {
    let runner = stepRunners.get(stepLua);
    if (runner === undefined) {
      runner = scripts(createMessageWithStepScript(stepLua));
      stepRunners.set(stepLua, runner);
    }
    return runner;
  };

  return async function create(
    input: NewWebMessage,
    step: ScriptStep | undefined,
  ): Promise<{ message: WebMessage; stepResult: unknown }> {
    const ts = input.ts ?? now();
    const args = createArguments(keys, input, ts);
    let id: unknown;
    let stepResult: unknown;
    try {
      if (step === undefined) {
        id = await runCreate([keys.counter], args);
      } else {
        const result = (await stepRunner(step.lua)([keys.counter], [...args, ...step.args])) as unknown[];
        [id, stepResult] = result;
      }
    } catch (error) {
      if (error instanceof Error && error.message.includes('ERR_THREAD_UNKNOWN')) {
        throw new PlatformError(
          'web',
          'thread_unknown',
          `no thread ${input.threadId ?? ''} in channel ${input.channel}`,
          { retryable: false },
        );
      }
      throw redisFailure('create', error);
    }
    return { message: storedMessage(String(id), input, ts), stepResult };
  };
}

/** Create the Redis-backed playground store. */
export function createWebStore(options: WebStoreOptions): WebStore {
  const { redis } = options;
  const now = options.now ?? Date.now;
  const fileTtlSeconds = Math.max(1, Math.round((options.fileTtlDays ?? DEFAULT_FILE_TTL_DAYS) * 24 * 3600));
  const keys = webStoreKeys(options.prefix);
  const scripts = options.scripts ?? plainScriptRunners(redis);
  const create = createMessageWriter(scripts, keys, now);
  const runEdit = scripts(EDIT_MESSAGE_SCRIPT);

  return {
    eventsChannel: keys.events,
    ...createWebStoreReads(redis, keys),
    ...createWebFileStore(redis, keys, fileTtlSeconds),

    async createMessage(input) {
      return (await create(input, undefined)).message;
    },

    createMessageWithStep: (input, step) => create(input, step),

    async editMessage(messageId, patch) {
      try {
        const result = await runEdit(
          [keys.message(messageId)],
          [
            now(),
            patch.text ?? '',
            patch.text === undefined ? '0' : '1',
            patch.card === undefined ? '' : patch.card === null ? '-' : JSON.stringify(patch.card),
            keys.events,
          ],
        );
        return Number(result) === 1;
      } catch (error) {
        throw redisFailure('edit', error);
      }
    },

    async addChannel(channel) {
      await redis.zadd(keys.channels, 'NX', now(), channel);
    },
  };
}
