import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { createKeys } from '../redis.js';
import { type ChatMessage, chatMessageSchema } from './messages.js';

/** Older entries than this are dropped; the model only ever sees the last 50 anyway. */
export const DEFAULT_SESSION_MAX_ENTRIES = 1000;

export interface SessionStore {
  /** The thread's history, oldest first. Entries that fail validation are skipped and logged. */
  load(threadId: string): Promise<ChatMessage[]>;
  append(threadId: string, messages: ChatMessage[]): Promise<void>;
  /** Whether the bot takes part in this thread (so unmentioned replies there reach the session). */
  has(threadId: string): Promise<boolean>;
  markKnown(threadId: string): Promise<void>;
}

export interface SessionStoreOptions {
  redis: Redis;
  /** The queue/key prefix (`SHEPHERD_QUEUE_PREFIX`). */
  prefix: string;
  logger?: Logger;
  maxEntries?: number;
}

/** Parses a thread's stored history; entries that fail validation are skipped and logged. */
export function parseSessionEntries(entries: string[], threadId: string, logger?: Logger): ChatMessage[] {
  const messages: ChatMessage[] = [];
  for (const [index, entry] of entries.entries()) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(entry);
    } catch {
      logger?.warn({ threadId, index }, 'session entry is not JSON; skipped');
      continue;
    }
    const result = chatMessageSchema.safeParse(parsed);
    if (!result.success) {
      logger?.warn({ threadId, index, issues: result.error.issues.length }, 'session entry invalid; skipped');
      continue;
    }
    messages.push(result.data as ChatMessage);
  }
  return messages;
}

/** Per-thread history as a Redis list of JSON messages: shared by all workers, survives restarts. */
export function createSessionStore(options: SessionStoreOptions): SessionStore {
  const { redis, logger } = options;
  const keys = createKeys(options.prefix);
  const maxEntries = options.maxEntries ?? DEFAULT_SESSION_MAX_ENTRIES;

  return {
    async load(threadId) {
      return parseSessionEntries(await redis.lrange(keys.session(threadId), 0, -1), threadId, logger);
    },

    async append(threadId, messages) {
      if (messages.length === 0) return;
      const key = keys.session(threadId);
      await redis
        .multi()
        .rpush(key, ...messages.map((message) => JSON.stringify(message)))
        .ltrim(key, -maxEntries, -1)
        .sadd(keys.sessionKnown, threadId)
        .exec();
    },

    async has(threadId) {
      const [known, exists] = await Promise.all([
        redis.sismember(keys.sessionKnown, threadId),
        redis.exists(keys.session(threadId)),
      ]);
      return known === 1 || exists === 1;
    },

    async markKnown(threadId) {
      await redis.sadd(keys.sessionKnown, threadId);
    },
  };
}
