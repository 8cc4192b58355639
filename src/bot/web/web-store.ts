import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { PlatformError } from '../../errors.js';
import type { ScriptStep } from '../../script-step.js';
import {
  CREATE_MESSAGE_SCRIPT,
  createMessageWithStepScript,
  createScriptRunner,
  EDIT_MESSAGE_SCRIPT,
} from './web-scripts.js';

/*
 * The playground's channels, threads and messages live in Redis, not in the HTTP server's memory, so
 * any process (the bot, or a worker on another machine) can post into the playground; the bot process
 * that serves the page learns about changes over the `<prefix>:web:events` pub/sub channel.
 */

/** Uploaded files above this size are refused (they live in Redis). */
export const WEB_FILE_MAX_BYTES = 8 * 1024 * 1024;

const cardFieldSchema = z.object({ label: z.string(), value: z.string() });
const cardActionSchema = z.object({
  actionId: z.string(),
  label: z.string(),
  style: z.enum(['primary', 'danger', 'default']).optional(),
});

/** A card as the playground stores and serves it: the image is a file URL, a resolved card has no actions. */
export const webCardSchema = z.object({
  title: z.string().optional(),
  text: z.string().optional(),
  fields: z.array(cardFieldSchema).optional(),
  imageUrl: z.string().optional(),
  actions: z.array(cardActionSchema).optional(),
  resolved: z.string().optional(),
  /** A text file shown as an expandable block (the whole script behind a cut excerpt). */
  attachment: z.object({ filename: z.string(), text: z.string() }).optional(),
});
export type WebCard = z.infer<typeof webCardSchema>;

const fileLinkSchema = z.object({ name: z.string(), url: z.string() });
export type WebFileLink = z.infer<typeof fileLinkSchema>;

const imagesSchema = z.array(z.string());
const filesSchema = z.array(fileLinkSchema);

export interface WebMessage {
  id: string;
  channel: string;
  /** The root message id of the thread (equal to `id` for a root). */
  threadId: string;
  user: string;
  text: string;
  /** Milliseconds since the epoch. */
  ts: number;
  editedAt?: number;
  card?: WebCard;
  images?: string[];
  files?: WebFileLink[];
  /** Set on ephemeral messages: the only user meant to see it. */
  visibleTo?: string;
}

export interface NewWebMessage {
  channel: string;
  /** Root id of an existing thread; omit to start a new thread. */
  threadId?: string;
  user: string;
  text: string;
  card?: WebCard;
  images?: string[];
  files?: WebFileLink[];
  visibleTo?: string;
  /** Milliseconds since the epoch; default now. */
  ts?: number;
}

export interface WebThreadSummary {
  /** Root message id. */
  threadId: string;
  user: string;
  /** The root message's text, cut to a preview. */
  preview: string;
  ts: number;
  /** Time of the latest message in the thread. */
  lastActivity: number;
}

export interface WebChannelSummary {
  channel: string;
  /** Newest activity first. */
  threads: WebThreadSummary[];
}

export interface WebFile {
  id: string;
  name: string;
  contentType: string;
  data: Buffer;
}

/** A change published on the events channel for every new or edited message. */
export const webStoreEventSchema = z.object({
  kind: z.enum(['message-create', 'message-edit']),
  channel: z.string(),
  root: z.string(),
  messageId: z.string(),
});
export type WebStoreEvent = z.infer<typeof webStoreEventSchema>;

export interface WebStore {
  /** The Redis pub/sub channel carrying `WebStoreEvent` JSON. */
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
  getMessage(messageId: string): Promise<WebMessage | undefined>;
  /** All messages of a thread, root first; `undefined` if `rootId` is not a thread root. */
  getThread(rootId: string): Promise<WebMessage[] | undefined>;
  listChannels(options?: { threadLimit?: number }): Promise<WebChannelSummary[]>;
  /** The root id of the channel's most recently active thread. */
  latestThread(channel: string): Promise<string | undefined>;
  addChannel(channel: string): Promise<void>;
  /** Store file bytes under a content hash; throws `PlatformError` `file_too_large` above the cap. */
  saveFile(file: {
    name: string;
    contentType: string;
    data: Uint8Array;
  }): Promise<WebFileLink & { id: string }>;
  getFile(fileId: string): Promise<WebFile | undefined>;
}

export interface WebStoreOptions {
  redis: Redis;
  /** The deployment's key prefix (`SHEPHERD_QUEUE_PREFIX`); keys live under `<prefix>:web:`. */
  prefix: string;
  /** `SHEPHERD_FILE_TTL_DAYS`: stored files expire this long after their last save (default 30). */
  fileTtlDays?: number;
  now?: () => number;
}

const PREVIEW_LENGTH = 120;
export const DEFAULT_FILE_TTL_DAYS = 30;

function parseStoredJson<T>(raw: string | undefined, schema: z.ZodType<T>): T | undefined {
  if (raw === undefined) return undefined;
  try {
    const result = schema.safeParse(JSON.parse(raw));
    return result.success ? result.data : undefined;
  } catch {
    return undefined;
  }
}

function messageFromHash(id: string, hash: Record<string, string>): WebMessage | undefined {
  const { channel, root, user, text, ts } = hash;
  if (channel === undefined || root === undefined || user === undefined || text === undefined)
    return undefined;
  const message: WebMessage = { id, channel, threadId: root, user, text, ts: Number(ts) };
  if (hash.editedAt !== undefined) message.editedAt = Number(hash.editedAt);
  const card = parseStoredJson(hash.card, webCardSchema);
  if (card !== undefined) message.card = card;
  const images = parseStoredJson(hash.images, imagesSchema);
  if (images !== undefined) message.images = images;
  const files = parseStoredJson(hash.files, filesSchema);
  if (files !== undefined) message.files = files;
  if (hash.visibleTo !== undefined) message.visibleTo = hash.visibleTo;
  return message;
}

function redisFailure(operation: string, error: unknown): PlatformError {
  return new PlatformError('web', 'store_unavailable', `playground store ${operation} failed`, {
    retryable: true,
    cause: error,
  });
}

/** Create the Redis-backed playground store. */
export function createWebStore(options: WebStoreOptions): WebStore {
  const { redis } = options;
  const now = options.now ?? Date.now;
  const fileTtlSeconds = Math.max(1, Math.round((options.fileTtlDays ?? DEFAULT_FILE_TTL_DAYS) * 24 * 3600));
  const base = `${options.prefix}:web`;
  const eventsChannel = `${base}:events`;
  const keys = {
    counter: `${base}:seq`,
    message: (id: string) => `${base}:msg:${id}`,
    thread: (root: string) => `${base}:thread:${root}`,
    threads: (channel: string) => `${base}:threads:${channel}`,
    channels: `${base}:channels`,
    file: (id: string) => `${base}:file:${id}`,
  };
  const runCreate = createScriptRunner(redis, CREATE_MESSAGE_SCRIPT);
  const runEdit = createScriptRunner(redis, EDIT_MESSAGE_SCRIPT);
  // One fused script per kind of step (in practice one: the inbox accept).
  const stepRunners = new Map<string, ReturnType<typeof createScriptRunner>>();
  const stepRunner = (stepLua: string) => {
    let runner = stepRunners.get(stepLua);
    if (runner === undefined) {
      runner = createScriptRunner(redis, createMessageWithStepScript(stepLua));
      stepRunners.set(stepLua, runner);
    }
    return runner;
  };

  async function readMessages(ids: string[]): Promise<WebMessage[]> {
    if (ids.length === 0) return [];
    const pipeline = redis.pipeline();
    for (const id of ids) pipeline.hgetall(keys.message(id));
    const results = (await pipeline.exec()) ?? [];
    const messages: WebMessage[] = [];
    results.forEach(([error, hash], index) => {
      const id = ids[index];
      if (error !== null || id === undefined) return;
      const message = messageFromHash(id, hash as Record<string, string>);
      if (message !== undefined) messages.push(message);
    });
    return messages;
  }

  /** Runs `create_message` (and `step` after it) in one script. */
  async function create(
    input: NewWebMessage,
    step: ScriptStep | undefined,
  ): Promise<{ message: WebMessage; stepResult: unknown }> {
    const ts = input.ts ?? now();
    const json = (value: unknown) => (value === undefined ? '' : JSON.stringify(value));
    const args: Array<string | number> = [
      base,
      input.channel,
      input.threadId ?? '',
      input.user,
      input.text,
      ts,
      json(input.card),
      input.images?.length ? json(input.images) : '',
      input.files?.length ? json(input.files) : '',
      input.visibleTo ?? '',
      eventsChannel,
    ];
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
    const messageId = String(id);
    const message: WebMessage = {
      id: messageId,
      channel: input.channel,
      threadId: input.threadId ?? messageId,
      user: input.user,
      text: input.text,
      ts,
    };
    if (input.card !== undefined) message.card = input.card;
    if (input.images?.length) message.images = input.images;
    if (input.files?.length) message.files = input.files;
    if (input.visibleTo !== undefined) message.visibleTo = input.visibleTo;
    return { message, stepResult };
  }

  return {
    eventsChannel,

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
            eventsChannel,
          ],
        );
        return Number(result) === 1;
      } catch (error) {
        throw redisFailure('edit', error);
      }
    },

    async getMessage(messageId) {
      const hash = await redis.hgetall(keys.message(messageId));
      return messageFromHash(messageId, hash);
    },

    async getThread(rootId) {
      const ids = await redis.lrange(keys.thread(rootId), 0, -1);
      if (ids[0] !== rootId) return undefined;
      return await readMessages(ids);
    },

    async listChannels(listOptions = {}) {
      const limit = listOptions.threadLimit ?? 50;
      const channels = await redis.zrange(keys.channels, 0, -1);
      if (channels.length === 0) return [];
      const indexPipeline = redis.pipeline();
      for (const channel of channels) {
        indexPipeline.zrevrange(keys.threads(channel), 0, limit - 1, 'WITHSCORES');
      }
      const indexResults = (await indexPipeline.exec()) ?? [];
      const perChannel = channels.map((channel, index) => {
        const flat = (indexResults[index]?.[1] as string[] | undefined) ?? [];
        const entries: { root: string; lastActivity: number }[] = [];
        for (let position = 0; position + 1 < flat.length; position += 2) {
          entries.push({ root: flat[position] as string, lastActivity: Number(flat[position + 1]) });
        }
        return { channel, entries };
      });
      const roots = await readMessages(perChannel.flatMap((item) => item.entries.map((entry) => entry.root)));
      const rootsById = new Map(roots.map((message) => [message.id, message]));
      return perChannel.map(({ channel, entries }) => ({
        channel,
        threads: entries.flatMap((entry) => {
          const root = rootsById.get(entry.root);
          if (root === undefined) return [];
          const text = root.text || root.card?.title || '';
          return [
            {
              threadId: root.id,
              user: root.user,
              preview: text.length > PREVIEW_LENGTH ? `${text.slice(0, PREVIEW_LENGTH - 1)}…` : text,
              ts: root.ts,
              lastActivity: entry.lastActivity,
            },
          ];
        }),
      }));
    },

    async latestThread(channel) {
      const [root] = await redis.zrevrange(keys.threads(channel), 0, 0);
      return root;
    },

    async addChannel(channel) {
      await redis.zadd(keys.channels, 'NX', now(), channel);
    },

    async saveFile(file) {
      if (file.data.byteLength > WEB_FILE_MAX_BYTES) {
        throw new PlatformError(
          'web',
          'file_too_large',
          `${file.name} is ${file.data.byteLength} bytes; the playground keeps at most ${WEB_FILE_MAX_BYTES}`,
          { retryable: false },
        );
      }
      // Content-addressed, so re-rendering a card with the same chart stores the bytes once.
      const id = createHash('sha256').update(file.data).digest('hex').slice(0, 32);
      try {
        await redis
          .multi()
          .hset(keys.file(id), {
            name: file.name,
            contentType: file.contentType,
            data: Buffer.from(file.data.buffer, file.data.byteOffset, file.data.byteLength),
          })
          // Saved again (the same chart re-rendered), the file lives on from now.
          .expire(keys.file(id), fileTtlSeconds)
          .exec();
      } catch (error) {
        throw redisFailure('file save', error);
      }
      return { id, name: file.name, url: `/api/files/${id}` };
    },

    async getFile(fileId) {
      if (!/^[0-9a-f]{32}$/.test(fileId)) return undefined;
      const hash = await redis.hgetallBuffer(keys.file(fileId));
      const { name, contentType, data } = hash;
      if (name === undefined || contentType === undefined || data === undefined) return undefined;
      return { id: fileId, name: name.toString(), contentType: contentType.toString(), data };
    },
  };
}
