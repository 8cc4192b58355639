import { DelayedError, Queue, type Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { logQueueErrors } from './job-payload.js';
import { createJobWorker, isFinalError } from './job-worker.js';
import {
  enqueue,
  enqueueBulk,
  JOBS,
  MAX_WAKE_REQUESTS,
  QUEUE_NAMES,
  TURN_ATTEMPTS,
  turnQueueJob,
} from './jobs.js';
import type { Batch, TurnInbox } from './turn-inbox.js';

/** How long a turn job waits before trying a busy thread's lock again. */
const LOCKED_RETRY_MS = 150;
/** An inbox item this old without its turn having started gets a turn requested again. */
const SWEEP_AFTER_MS = 5000;
const SWEEP_EVERY_MS = 2000;

export { TURN_ATTEMPTS };

/** The most inbox items one agent turn takes in. */
const MAX_BATCH = 50;

/** `prefetchedHistory`: the thread's stored session, read under the lock with the first batch. */
type BatchProcessor = (threadId: string, batch: Batch, prefetchedHistory?: string[]) => Promise<void>;

interface TurnWorkerOptions {
  connection: Redis;
  /** Where the sweeper re-requests turns for inboxes whose wake-up job was lost. */
  queue: Queue;
  prefix: string;
  inbox: TurnInbox;
  processBatch: BatchProcessor;
  /** Redis key of a thread's session history, read together with the first batch. */
  sessionKey: (threadId: string) => string;
  logger: Logger;
  concurrency: number;
  /** Told when a batch failed on every attempt and was dropped (to say so in the thread). */
  onBatchDropped?: (threadId: string, batch: Batch, error: unknown) => Promise<void>;
  /** Lease of a job and of a thread's lock; a crashed worker's work is picked up after it. */
  lockMs: number;
}

/** Creates the queue producers use to ask for a turn. */
export function createTurnQueue(connection: Redis, prefix: string, logger?: Logger): Queue {
  const queue = new Queue(QUEUE_NAMES.turns, { connection, prefix });
  logQueueErrors(queue, logger, 'turn queue');
  return queue;
}

/** The turn job for a thread; `key` makes the request idempotent (a delivery id). */
function turnJob(threadId: string, key: string) {
  return {
    data: { v: 1 as const, threadId },
    opts: { jobId: `turn-${Buffer.from(`${threadId}|${key}`).toString('base64url')}` },
  };
}

/** Asks for a turn for a thread; `key` makes the request idempotent (a delivery id). */
export async function requestTurn(queue: Queue, threadId: string, key: string): Promise<void> {
  const job = turnJob(threadId, key);
  await enqueue(queue, JOBS.agentTurn, job.data, job.opts);
}

interface TurnRequest {
  threadId: string;
  key: string;
}

/**
 * Adds what a coalesced batch of requests needs: one request keeps its own turn job (a quiet bot pays no
 * extra hop); several become wake-up jobs of up to `MAX_WAKE_REQUESTS` each, which a turn worker expands.
 * Under load that moves the per-message BullMQ work (a `Job`, its options, its Redis script) off the
 * acking process.
 */
async function addTurnRequests(queue: Queue, requests: readonly TurnRequest[]): Promise<void> {
  const [only] = requests;
  if (only === undefined) return;
  if (requests.length === 1) {
    await requestTurn(queue, only.threadId, only.key);
    return;
  }
  const parts: TurnRequest[][] = [];
  for (let start = 0; start < requests.length; start += MAX_WAKE_REQUESTS) {
    parts.push(requests.slice(start, start + MAX_WAKE_REQUESTS));
  }
  await enqueueBulk(
    queue,
    JOBS.turnWake,
    parts.map((part) => ({ data: { v: 1 as const, requests: part } })),
  );
}

/**
 * A wake-up job's turn jobs: one per thread, since a turn takes in everything its thread's inbox holds
 * (every request in the batch was accepted into its inbox before the batch was sent). Job ids come from
 * the requests, so a retried expansion adds nothing twice.
 */
async function expandWake(queue: Queue, requests: readonly TurnRequest[]): Promise<void> {
  const lastKeyByThread = new Map<string, string>();
  for (const request of requests) lastKeyByThread.set(request.threadId, request.key);
  await enqueueBulk(
    queue,
    JOBS.agentTurn,
    [...lastKeyByThread].map(([threadId, key]) => turnJob(threadId, key)),
  );
}

/**
 * `requestTurn` for the ack path. Requests are coalesced: at most one add is in flight, and the
 * requests made meanwhile go out together when it returns (at once when none is in flight, so a quiet
 * bot adds no delay). Under load that is one write and one round trip for many messages instead of one
 * per event-loop turn, and one wake-up job instead of one job per message (`addTurnRequests`). Nothing
 * is lost by waiting: the inbox already holds every accepted message, and the turn worker's sweeper
 * requests the turn of any inbox left waiting.
 */
export function createTurnRequester(queue: Queue): (threadId: string, key: string) => Promise<void> {
  type Entry = { request: TurnRequest; settle: (error?: unknown) => void };
  let pending: Entry[] = [];
  let scheduled = false;
  let inFlight = false;
  const schedule = () => {
    if (scheduled || inFlight || pending.length === 0) return;
    scheduled = true;
    setImmediate(flush);
  };
  const flush = () => {
    scheduled = false;
    const batch = pending;
    pending = [];
    inFlight = true;
    addTurnRequests(
      queue,
      batch.map((entry) => entry.request),
    )
      .then(
        () => {
          for (const entry of batch) entry.settle();
        },
        (error: unknown) => {
          for (const entry of batch) entry.settle(error);
        },
      )
      .finally(() => {
        inFlight = false;
        schedule();
      });
  };
  return (threadId, key) =>
    new Promise<void>((resolve, reject) => {
      pending.push({
        request: { threadId, key },
        settle: (error) => (error === undefined ? resolve() : reject(error)),
      });
      schedule();
    });
}

/**
 * Runs agent turns with at most one turn per thread at a time, across any number of worker processes.
 * Items that arrive during a turn are picked up by the loop below or by their own (delayed) job.
 */
export function createTurnWorker(options: TurnWorkerOptions): Worker {
  const { inbox, logger, lockMs } = options;
  const worker = createJobWorker(
    QUEUE_NAMES.turns,
    turnQueueJob,
    async (data, job, token) => {
      if ('requests' in data) {
        await expandWake(options.queue, data.requests);
        return;
      }
      const { threadId } = data;
      const claimed = await inbox.lockAndClaim(threadId, lockMs, MAX_BATCH, options.sessionKey(threadId));
      if (claimed.status === 'locked') {
        await job.moveToDelayed(Date.now() + LOCKED_RETRY_MS, token);
        throw new DelayedError();
      }
      const lock = claimed.token;
      const renew = setInterval(
        () => {
          inbox.extendLock(threadId, lock, lockMs).catch((error: unknown) => {
            logger.warn({ threadId, err: String(error) }, 'could not extend a thread lock');
          });
        },
        Math.max(200, Math.floor(lockMs / 3)),
      );
      const process = async (batch: Batch, prefetched?: string[]) => {
        try {
          await options.processBatch(threadId, batch, prefetched);
        } catch (error) {
          // A final error (no attempt can help) drops the batch at once, like the last failed attempt.
          if (!isFinalError(error) && job.attemptsMade + 1 < TURN_ATTEMPTS) throw error;
          // Every attempt failed: drop this batch so one poisonous message cannot block the thread.
          logger.error(
            { threadId, batchId: batch.batchId, err: String(error) },
            'turn failed on every attempt',
          );
          await inbox.commitBatch(threadId, batch);
          await options.onBatchDropped?.(threadId, batch, error);
        }
      };
      try {
        if (claimed.batch !== undefined) {
          await process(claimed.batch, claimed.prefetched);
          for (;;) {
            const batch = await inbox.claimBatch(threadId, MAX_BATCH);
            if (batch === undefined) break;
            await process(batch);
          }
        }
      } finally {
        clearInterval(renew);
        await inbox.releaseLock(threadId, lock);
      }
    },
    {
      connection: options.connection,
      prefix: options.prefix,
      logger,
      concurrency: options.concurrency,
      describe: (data) => {
        const fields: { threadId?: string; requests?: unknown[] } = data;
        return fields.requests === undefined
          ? { threadId: fields.threadId }
          : { wakeRequests: fields.requests.length };
      },
      workerOptions: {
        lockDuration: lockMs,
        stalledInterval: Math.max(500, Math.floor(lockMs / 2)),
        maxStalledCount: 5,
      },
    },
  );
  // The inbox is the durable record; a turn job is only the wake-up call. If the process that accepted a
  // message died before adding its job, the sweeper adds it: no message waits for a later one.
  const sweeper = setInterval(() => {
    inbox
      .stale(SWEEP_AFTER_MS, Date.now())
      .then((threads) =>
        Promise.all(threads.map(({ threadId, key }) => requestTurn(options.queue, threadId, `sweep-${key}`))),
      )
      .catch((error: unknown) => logger.warn({ err: String(error) }, 'inbox sweep failed'));
  }, SWEEP_EVERY_MS);
  sweeper.unref();
  worker.on('closing', () => clearInterval(sweeper));
  return worker;
}
