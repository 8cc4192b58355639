import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { plainScriptRunners, type ScriptRunners } from '../redis/connection.js';
import { SCRIPT_NEW_ID, type ScriptStep } from '../redis/script-step.js';
import {
  ACCEPT_SCRIPT,
  ACCEPT_STEP_LUA,
  CLAIM_SCRIPT,
  COMMIT_SCRIPT,
  EXTEND_SCRIPT,
  FORGET_IF_EMPTY_SCRIPT,
  LOCK_AND_CLAIM_SCRIPT,
  PUSH_EVENT_SCRIPT,
  RELEASE_SCRIPT,
} from './turn-inbox-scripts.js';

/**
 * The per-thread inbox that makes agent turns serial and lossless.
 *
 * Every inbound item is appended to `inbox:<thread>` and, in the same script, queues a wake-up request
 * that a turn worker's dispatcher makes into the thread's turn job (turn-dispatcher.ts). A turn job first takes
 * the thread's lock (a lease renewed while it works); a job that finds the lock taken is delayed and
 * tries again, so a message that lands just as a turn finishes is never stranded. The lock holder claims
 * a batch (remembered in Redis so a retry after a crash re-processes exactly the same batch), and commits
 * it — session append plus inbox trim — in one MULTI, so no item is handled twice or lost.
 */

export const inboxItemSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('message'),
    messageId: z.string(),
    deliveryId: z.string(),
    user: z.object({ id: z.string(), name: z.string() }),
    text: z.string(),
    addressed: z.boolean(),
    receivedAt: z.number(),
  }),
  z.object({
    /** Something the system tells the agent (an approval decision, an alert); it starts a turn. */
    type: z.literal('event'),
    eventId: z.string(),
    text: z.string(),
    receivedAt: z.number(),
  }),
]);
export type InboxItem = z.infer<typeof inboxItemSchema>;

const batchSchema = z.object({ batchId: z.string(), count: z.number().int().positive() });
export type Batch = z.infer<typeof batchSchema> & { items: InboxItem[] };

export type AcceptResult = 'accepted' | 'ignored' | 'duplicate';

/** A key a turn reads under its thread's lock, in the lock's own round trip (its owner names the key). */
export interface LockedRead {
  key: string;
  /** `list`: every entry; `hash`: every field; `string`: the value. */
  kind: 'list' | 'hash' | 'string';
}
/** What a `LockedRead` found: a list's entries, a hash's fields, a string (`undefined` when absent). */
export type LockedValue = string[] | Record<string, string> | string | undefined;

/** A thread whose inbox got an item; `key` (the delivery or event id) makes its turn job idempotent. */
export interface WakeRequest {
  threadId: string;
  key: string;
}

/** What a message's or event's turn request is keyed by (the turn job's id comes from it). */
function wakeKey(item: InboxItem): string {
  return item.type === 'message' ? item.deliveryId : `event-${item.eventId}`;
}

function parseWakeRequest(raw: string): WakeRequest | undefined {
  const parsed = safeJson(raw);
  if (!Array.isArray(parsed)) return undefined;
  const [threadId, key] = parsed as unknown[];
  return typeof threadId === 'string' && typeof key === 'string' ? { threadId, key } : undefined;
}

const ACCEPT_RESULTS: ReadonlySet<string> = new Set<AcceptResult>(['accepted', 'ignored', 'duplicate']);

/** The result of an accept script or step. */
export function parseAcceptResult(raw: unknown): AcceptResult {
  if (typeof raw === 'string' && ACCEPT_RESULTS.has(raw)) return raw as AcceptResult;
  throw new Error(`unexpected inbox accept result: ${String(raw)}`);
}

// Stands for SCRIPT_NEW_ID while an item is JSON-encoded (JSON would escape the raw byte); random, so no
// user text can spell it.
const ID_HOLE_TOKEN = `id-hole-${randomBytes(16).toString('hex')}`;

/** An item's JSON, with a message's `SCRIPT_NEW_ID` ids kept as the raw byte the host script replaces. */
function encodeItem(item: InboxItem): string {
  if (item.type !== 'message' || (item.messageId !== SCRIPT_NEW_ID && item.deliveryId !== SCRIPT_NEW_ID)) {
    return JSON.stringify(item);
  }
  const hole = (id: string) => (id === SCRIPT_NEW_ID ? ID_HOLE_TOKEN : id);
  const json = JSON.stringify({
    ...item,
    messageId: hole(item.messageId),
    deliveryId: hole(item.deliveryId),
  });
  return json.replaceAll(`"${ID_HOLE_TOKEN}"`, `"${SCRIPT_NEW_ID}"`);
}

/** A thread's lock taken, with its first batch (none when the inbox is empty) and the locked reads. */
export type ClaimedTurn = {
  status: 'claimed';
  token: string;
  batch: Batch | undefined;
  values: LockedValue[];
};

export interface TurnInbox {
  /** Records an inbound item; `ignored` when not addressed and the thread has no session. */
  accept(
    threadId: string,
    item: InboxItem,
    options: { addressed: boolean; deliveryKey: string },
  ): Promise<AcceptResult>;
  /**
   * The same accept as a step of the caller's own script, for an adapter that stores the message in
   * this Redis: one round trip for both. `SCRIPT_NEW_ID` in the thread id, the item's ids or the
   * delivery key stands for the id the host script assigns. Read its result with `parseAcceptResult`.
   */
  acceptStep(
    threadId: string,
    item: InboxItem,
    options: { addressed: boolean; deliveryKey: string },
  ): ScriptStep;
  /** Appends a system event for a thread that already has a session (approval results, alerts). */
  pushEvent(threadId: string, item: InboxItem): Promise<void>;
  extendLock(threadId: string, token: string, leaseMs: number): Promise<boolean>;
  releaseLock(threadId: string, token: string): Promise<void>;
  /**
   * Takes the thread's lock and its first batch in one round trip, doing `reads` under the lock too (what
   * the turn needs before its first LLM call); `values` are in their order. `locked` when another turn
   * holds the thread; no reads when the inbox is empty.
   */
  lockAndClaim(
    threadId: string,
    leaseMs: number,
    max: number,
    reads: readonly LockedRead[],
  ): Promise<{ status: 'locked' } | ClaimedTurn>;
  /** The batch to work on: the one a crashed attempt claimed, or up to `max` fresh items. */
  claimBatch(threadId: string, max: number): Promise<Batch | undefined>;
  /** Removes the batch from the inbox, in the same MULTI as `extra` writes (the session append). */
  commitBatch(
    threadId: string,
    batch: Batch,
    extra?: (multi: ReturnType<Redis['multi']>) => void,
  ): Promise<void>;
  length(threadId: string): Promise<number>;
  /**
   * Waits up to `timeoutS` on `blocking` (a connection of its own) for wake-up requests and takes up to
   * `max` of them, oldest first; `[]` when none came.
   */
  takeWakeRequests(blocking: Redis, timeoutS: number, max: number): Promise<WakeRequest[]>;
  /** Threads whose oldest inbox item has waited longer than `olderThanMs` (for the sweeper), with its key. */
  stale(olderThanMs: number, now: number): Promise<Array<{ threadId: string; key: string }>>;
}

/** The inbox's Redis keys; this module owns them (thread state only reads whether the lock is taken). */
export function turnInboxKeys(prefix: string) {
  return {
    /** Threads that have a session: unmentioned messages there are accepted. */
    knownThreads: `${prefix}:sessions`,
    inbox: (threadId: string) => `${prefix}:inbox:${threadId}`,
    /** Taken while a turn runs in the thread. */
    lock: (threadId: string) => `${prefix}:turn-lock:${threadId}`,
    batch: (threadId: string) => `${prefix}:turn-batch:${threadId}`,
    /** Threads whose inbox is not empty (what the sweeper looks at). */
    pending: `${prefix}:inbox-pending`,
    /** Wake-up requests (`[thread, key]` JSON) waiting for a dispatcher to add their turn jobs. */
    wake: `${prefix}:turn-wake`,
    /** Seen platform deliveries (`<platform>:<delivery id>`), kept a day. */
    delivery: (deliveryKey: string) => `${prefix}:delivery:${deliveryKey}`,
  } as const;
}

export function createTurnInbox(options: {
  redis: Redis;
  prefix: string;
  deliveryTtlS?: number;
  /** Runs the inbox's scripts (`createScriptGate` on the acking connection); plain runners by default. */
  scripts?: ScriptRunners;
}): TurnInbox {
  const { redis } = options;
  const scripts = options.scripts ?? plainScriptRunners(redis);
  const deliveryTtlS = options.deliveryTtlS ?? 24 * 3600;
  const keys = turnInboxKeys(options.prefix);
  const known = keys.knownThreads;
  const inboxKey = keys.inbox;
  const lockKey = keys.lock;
  const batchKey = keys.batch;
  const pending = keys.pending;
  const deliveryKeyFor = keys.delivery;
  const runAccept = scripts(ACCEPT_SCRIPT);
  const runPushEvent = scripts(PUSH_EVENT_SCRIPT);
  const runClaim = scripts(CLAIM_SCRIPT);
  const runLockAndClaim = scripts(LOCK_AND_CLAIM_SCRIPT);

  function toBatch(threadId: string, batchJson: string, raw: string[]): Batch {
    const batch = batchSchema.safeParse(safeJson(batchJson));
    if (!batch.success) throw new Error(`corrupt turn batch for ${threadId}: ${batchJson}`);
    const items: InboxItem[] = [];
    for (const entry of raw) {
      const parsed = inboxItemSchema.safeParse(safeJson(entry));
      // A corrupt entry is dropped with the batch rather than wedging the thread forever.
      if (parsed.success) items.push(parsed.data);
    }
    return { ...batch.data, count: raw.length, items };
  }

  return {
    async accept(threadId, item, { addressed, deliveryKey }) {
      const result = await runAccept(
        [deliveryKeyFor(deliveryKey), known, inboxKey(threadId), pending, keys.wake],
        [JSON.stringify(item), threadId, addressed ? '1' : '0', deliveryTtlS, wakeKey(item)],
      );
      return parseAcceptResult(result);
    },
    acceptStep(threadId, item, { addressed, deliveryKey }) {
      return {
        lua: ACCEPT_STEP_LUA,
        args: [
          deliveryKeyFor(deliveryKey),
          known,
          inboxKey(threadId),
          pending,
          encodeItem(item),
          threadId,
          addressed ? '1' : '0',
          String(deliveryTtlS),
          keys.wake,
          wakeKey(item),
        ],
      };
    },
    async pushEvent(threadId, item) {
      await runPushEvent(
        [known, inboxKey(threadId), pending, keys.wake],
        [JSON.stringify(item), threadId, wakeKey(item)],
      );
    },
    async extendLock(threadId, token, leaseMs) {
      return (await redis.eval(EXTEND_SCRIPT, 1, lockKey(threadId), token, String(leaseMs))) === 1;
    },
    async releaseLock(threadId, token) {
      await redis.eval(RELEASE_SCRIPT, 1, lockKey(threadId), token);
    },
    async lockAndClaim(threadId, leaseMs, max, reads) {
      const token = randomBytes(8).toString('hex');
      const result = (await runLockAndClaim(
        [lockKey(threadId), batchKey(threadId), inboxKey(threadId), ...reads.map((read) => read.key)],
        [token, leaseMs, randomBytes(6).toString('hex'), max, ...reads.map((read) => read.kind)],
      )) as [] | [string] | [string, string[], unknown[]];
      if (result.length === 0) return { status: 'locked' };
      const [batchJson, items, found] = result;
      if (batchJson === '' || items === undefined) {
        return { status: 'claimed', token, batch: undefined, values: [] };
      }
      const values = reads.map((read, index) => lockedValue(read.kind, found?.[index]));
      return { status: 'claimed', token, batch: toBatch(threadId, batchJson, items), values };
    },
    async claimBatch(threadId, max) {
      const result = (await runClaim(
        [batchKey(threadId), inboxKey(threadId)],
        [randomBytes(6).toString('hex'), max],
      )) as string[];
      const [batchJson, ...raw] = result;
      if (batchJson === undefined) return undefined;
      return toBatch(threadId, batchJson, raw);
    },
    async commitBatch(threadId, batch, extra) {
      const multi = redis.multi();
      extra?.(multi);
      multi.eval(COMMIT_SCRIPT, 3, inboxKey(threadId), batchKey(threadId), pending, batch.count, threadId);
      await multi.exec();
    },
    length: (threadId) => redis.llen(inboxKey(threadId)),
    async takeWakeRequests(blocking, timeoutS, max) {
      const raw = await takeFromList(blocking, keys.wake, timeoutS, max);
      const requests: WakeRequest[] = [];
      // A malformed entry (none is written so) is skipped; the sweeper still finds its inbox.
      for (const entry of raw) {
        const request = parseWakeRequest(entry);
        if (request !== undefined) requests.push(request);
      }
      return requests;
    },
    async stale(olderThanMs, now) {
      const threads = await redis.srandmember(pending, 200);
      if (threads.length === 0) return [];
      // Every inbox head in one round trip (the sweeper runs every 2 s, whatever the load).
      const pipeline = redis.pipeline();
      for (const threadId of threads) pipeline.lindex(inboxKey(threadId), 0);
      const heads = (await pipeline.exec()) ?? [];
      const stale: Array<{ threadId: string; key: string }> = [];
      for (const [index, threadId] of threads.entries()) {
        const [error, head] = heads[index] ?? [null, null];
        if (error !== null && error !== undefined) continue;
        if (head === null || head === undefined) {
          // Only if still empty: an item may have arrived since LINDEX.
          await redis.eval(FORGET_IF_EMPTY_SCRIPT, 2, inboxKey(threadId), pending, threadId);
          continue;
        }
        const parsed = inboxItemSchema.safeParse(safeJson(String(head)));
        const receivedAt = parsed.success ? parsed.data.receivedAt : 0;
        if (now - receivedAt < olderThanMs) continue;
        const key = parsed.success
          ? parsed.data.type === 'message'
            ? parsed.data.deliveryId
            : parsed.data.eventId
          : 'corrupt';
        stale.push({ threadId, key });
      }
      return stale;
    },
  };
}

/** A locked read's raw reply as its kind's value (a hash comes as a flat field, value list). */
function lockedValue(kind: LockedRead['kind'], raw: unknown): LockedValue {
  if (kind === 'string') return typeof raw === 'string' ? raw : undefined;
  const entries = Array.isArray(raw) ? raw.map(String) : [];
  if (kind === 'list') return entries;
  const fields: Record<string, string> = {};
  for (let index = 0; index + 1 < entries.length; index += 2)
    fields[entries[index] ?? ''] = entries[index + 1] ?? '';
  return fields;
}

/** Redis servers without BLMPOP (before 7.0), remembered once one said so. */
const noBlmpop = new WeakSet<Redis>();

/**
 * Up to `max` entries from the head of `key`, waiting up to `timeoutS` for the first: one BLMPOP (one round
 * trip) where Redis has it, else BLPOP then LPOP with a count (Redis 6.2).
 */
async function takeFromList(blocking: Redis, key: string, timeoutS: number, max: number): Promise<string[]> {
  if (!noBlmpop.has(blocking)) {
    try {
      const reply = (await blocking.call('BLMPOP', timeoutS, 1, key, 'LEFT', 'COUNT', max)) as
        | [string, string[]]
        | null;
      return reply === null ? [] : reply[1];
    } catch (error) {
      if (!(error instanceof Error) || !/unknown command/i.test(error.message)) throw error;
      noBlmpop.add(blocking);
    }
  }
  const first = await blocking.blpop(key, timeoutS);
  if (first === null) return [];
  const more = max > 1 ? ((await blocking.lpop(key, max - 1)) ?? []) : [];
  return [first[1], ...more];
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
