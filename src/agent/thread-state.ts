import type { Redis } from 'ioredis';
import { z } from 'zod';
import { turnInboxKeys } from '../queue/turn-inbox.js';
import { sessionKeys, THREAD_KEEP_S } from './session-store.js';

/**
 * Per-thread settings and bookkeeping that live beside the session history in Redis, so they survive a
 * restart and are shared by every worker: the thread's model, the summary of compacted history, and the
 * cancel flag a person raises while a turn runs.
 */

const summarySchema = z.object({
  summary: z.string(),
  /** How many session entries the summary covers in total (across compactions). */
  messages: z.number().int().nonnegative(),
  updatedAt: z.number(),
});
export type SessionSummary = z.infer<typeof summarySchema>;

/** A stored summary (its key's raw value); `undefined` when absent or unreadable. */
export function parseSummary(raw: string | undefined): SessionSummary | undefined {
  if (raw === undefined) return undefined;
  try {
    const parsed = summarySchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** A cancel request stays valid this long; a turn that never reaches a tool boundary must not keep it. */
const CANCEL_TTL_S = 600;

export interface ThreadState {
  model(threadId: string): Promise<string | undefined>;
  setModel(threadId: string, model: string | undefined): Promise<void>;
  summary(threadId: string): Promise<SessionSummary | undefined>;
  /** Stores the new summary and drops the `dropCount` oldest session entries it covers, atomically. */
  compact(threadId: string, summary: SessionSummary, dropCount: number): Promise<void>;
  /** Deletes the history, the summary and the model choice: the thread starts over. */
  reset(threadId: string): Promise<void>;
  /** Whether a turn currently holds the thread (its lock is taken). */
  turnRunning(threadId: string): Promise<boolean>;
  requestCancel(threadId: string, by: string): Promise<void>;
  /** Who asked to cancel the running turn, if someone did. */
  cancelRequested(threadId: string): Promise<string | undefined>;
  clearCancel(threadId: string): Promise<void>;
  /** Remembers that a turn was cancelled, so the `cancel` command that caused it does not answer twice. */
  markCancelled(threadId: string): Promise<void>;
  takeCancelled(threadId: string): Promise<boolean>;
}

export function createThreadState(options: { redis: Redis; prefix: string }): ThreadState {
  const { redis, prefix } = options;
  const { history: historyKey, model: modelKey, summary: summaryKey } = sessionKeys(prefix);
  const cancelKey = (threadId: string) => `${prefix}:turn-cancel:${threadId}`;
  const cancelledKey = (threadId: string) => `${prefix}:turn-cancelled:${threadId}`;
  // The key the turn inbox takes while a turn runs.
  const lockKey = turnInboxKeys(prefix).lock;

  return {
    async model(threadId) {
      return (await redis.get(modelKey(threadId))) ?? undefined;
    },
    async setModel(threadId, model) {
      if (model === undefined) await redis.del(modelKey(threadId));
      else await redis.set(modelKey(threadId), model, 'EX', THREAD_KEEP_S);
    },
    async summary(threadId) {
      return parseSummary((await redis.get(summaryKey(threadId))) ?? undefined);
    },
    async compact(threadId, summary, dropCount) {
      const multi = redis.multi().set(summaryKey(threadId), JSON.stringify(summary), 'EX', THREAD_KEEP_S);
      if (dropCount > 0) multi.ltrim(historyKey(threadId), dropCount, -1);
      await multi.exec();
    },
    async reset(threadId) {
      await redis.del(historyKey(threadId), summaryKey(threadId), modelKey(threadId));
    },
    async turnRunning(threadId) {
      return (await redis.exists(lockKey(threadId))) === 1;
    },
    async requestCancel(threadId, by) {
      await redis.set(cancelKey(threadId), by, 'EX', CANCEL_TTL_S);
    },
    async cancelRequested(threadId) {
      return (await redis.get(cancelKey(threadId))) ?? undefined;
    },
    async clearCancel(threadId) {
      await redis.del(cancelKey(threadId));
    },
    async markCancelled(threadId) {
      await redis.set(cancelledKey(threadId), '1', 'EX', CANCEL_TTL_S);
    },
    async takeCancelled(threadId) {
      return (await redis.del(cancelledKey(threadId))) === 1;
    },
  };
}
