import type { ChainableCommander, Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { type ChatMessage, chatMessageSchema } from './messages.js';

/** Older entries than this are dropped; the model only ever sees the last 50 anyway. */
const DEFAULT_SESSION_MAX_ENTRIES = 1000;

/**
 * A thread's state (history, summary, model choice) lives this long after its last turn, then expires: a
 * thread taken up again after that starts afresh, as after `@shepherd forget`. Every write renews it.
 */
export const THREAD_KEEP_S = 90 * 24 * 3600;

/** The session's Redis keys; this module owns them (thread state trims and deletes the same list). */
export function sessionKeys(prefix: string) {
  return {
    /** A thread's history: a list of JSON `ChatMessage`s, oldest first. */
    history: (threadId: string) => `${prefix}:session:${threadId}`,
    /** The summary of the history's older part (thread-state.ts writes it). */
    summary: (threadId: string) => `${prefix}:session-summary:${threadId}`,
    /** The thread's model choice (thread-state.ts writes it). */
    model: (threadId: string) => `${prefix}:thread-model:${threadId}`,
  } as const;
}

export interface SessionStore {
  /** The thread's history, oldest first. Entries that fail validation are skipped and logged. */
  load(threadId: string): Promise<ChatMessage[]>;
  /**
   * Queues the append (capped at the newest `maxEntries`) on `multi`, so it commits together with the
   * caller's other writes — the turn's inbox trim — or not at all.
   */
  appendInTransaction(multi: ChainableCommander, threadId: string, messages: ChatMessage[]): void;
  /** The number of stored history entries. */
  length(threadId: string): Promise<number>;
  /** The Redis key of a thread's history (read by the turn inbox under the thread lock). */
  historyKey(threadId: string): string;
}

interface SessionStoreOptions {
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
  const { history, summary, model } = sessionKeys(options.prefix);
  const maxEntries = options.maxEntries ?? DEFAULT_SESSION_MAX_ENTRIES;

  return {
    async load(threadId) {
      return parseSessionEntries(await redis.lrange(history(threadId), 0, -1), threadId, logger);
    },

    appendInTransaction(multi, threadId, messages) {
      if (messages.length === 0) return;
      const key = history(threadId);
      multi.rpush(key, ...messages.map((message) => JSON.stringify(message)));
      multi.ltrim(key, -maxEntries, -1);
      // The thread's state lives on while it is in use; an expire of a missing key is a no-op.
      for (const stateKey of [key, summary(threadId), model(threadId)]) multi.expire(stateKey, THREAD_KEEP_S);
    },

    length: (threadId) => redis.llen(history(threadId)),

    historyKey: history,
  };
}
