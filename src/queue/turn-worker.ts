import { DelayedError, Queue, type Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { definedOnly } from '../defined-only.js';
import type { Logger } from '../logger.js';
import { createDirectTurns } from './direct-turns.js';
import { logQueueErrors } from './job-payload.js';
import { createJobWorker, isFinalError } from './job-worker.js';
import { agentTurnJob, enqueue, enqueueBulk, JOBS, QUEUE_NAMES, TURN_ATTEMPTS } from './jobs.js';
import { startTurnDispatcher } from './turn-dispatcher.js';
import type { Batch, ClaimedTurn, LockedRead, LockedValue, TurnInbox, WakeRequest } from './turn-inbox.js';

/** How long a turn job waits before trying a busy thread's lock again. */
const LOCKED_RETRY_MS = 150;
/** An inbox item this old without its turn having started gets a turn requested again. */
const SWEEP_AFTER_MS = 5000;
const SWEEP_EVERY_MS = 2000;
/** A turn job's first retry delay (JOBS.agentTurn's backoff), for the job that retries a direct turn. */
const RETRY_DELAY_MS = 500;

export { TURN_ATTEMPTS };

/** The most inbox items one agent turn takes in. */
const MAX_BATCH = 50;

/** `values`: what `lockedReads` found, read under the lock with the first batch (absent for later batches). */
type BatchProcessor = (threadId: string, batch: Batch, values?: readonly LockedValue[]) => Promise<void>;

interface TurnWorkerOptions {
  connection: Redis;
  /** Where the sweeper re-requests turns for inboxes whose wake-up job was lost. */
  queue: Queue;
  prefix: string;
  inbox: TurnInbox;
  processBatch: BatchProcessor;
  /**
   * What a turn reads before its first LLM call (the session, the thread's model…), read in the same
   * round trip as the lock and the first batch.
   */
  lockedReads: (threadId: string) => readonly LockedRead[];
  logger: Logger;
  concurrency: number;
  /** Told when a batch failed on every attempt and was dropped (to say so in the thread). */
  onBatchDropped?: (threadId: string, batch: Batch, error: unknown) => Promise<void>;
  /** Lease of a job and of a thread's lock; a crashed worker's work is picked up after it. */
  lockMs: number;
  /** Told when a turn (a job or a direct one) is picked up, before its lock (bench/spine-turn-overhead.ts). */
  onTurnPickup?: (threadId: string) => void;
  /** Told when a direct turn ends; job turns are observed from the worker's events (observe-workers.ts). */
  onDirectTurnFinished?: (durationSeconds: number, pickupSeconds: number) => void;
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

/**
 * Turn jobs for a batch of wake-up requests: one per thread, since a turn takes in everything its
 * thread's inbox holds. Job ids come from the requests, so adding the same request twice adds one job.
 */
export async function requestTurns(queue: Queue, requests: readonly WakeRequest[]): Promise<void> {
  const lastKeyByThread = new Map<string, string>();
  for (const request of requests) lastKeyByThread.set(request.threadId, request.key);
  if (lastKeyByThread.size === 0) return;
  await enqueueBulk(
    queue,
    JOBS.agentTurn,
    [...lastKeyByThread].map(([threadId, key]) => turnJob(threadId, key)),
  );
}

/** The turn job that retries a failed direct turn: the attempts and backoff a job would have had left. */
async function retryTurn(queue: Queue, request: WakeRequest): Promise<void> {
  const { data, opts } = turnJob(request.threadId, `retry-${request.key}`);
  // A job's first retry waits 0.5 s, then 1 s, 2 s, 4 s (jobs.ts): the direct turn was the first attempt.
  await enqueue(queue, JOBS.agentTurn, data, {
    ...opts,
    attempts: TURN_ATTEMPTS - 1,
    delay: RETRY_DELAY_MS,
    backoff: { type: 'exponential', delay: RETRY_DELAY_MS * 2 },
  });
}

/**
 * A claimed turn run to its end: its first batch, then whatever arrived meanwhile, the lock renewed
 * throughout and released after. Throws when a batch failed and `finalAttempt` is false (to be retried);
 * on the final attempt, or on a final error, the batch is dropped instead.
 */
function createClaimedTurnRunner(options: TurnWorkerOptions) {
  const { inbox, logger, lockMs } = options;
  return async (threadId: string, claimed: ClaimedTurn, finalAttempt: boolean): Promise<void> => {
    const lock = claimed.token;
    const renew = setInterval(
      () => {
        inbox.extendLock(threadId, lock, lockMs).catch((error: unknown) => {
          logger.warn({ threadId, err: error }, 'could not extend a thread lock');
        });
      },
      Math.max(200, Math.floor(lockMs / 3)),
    );
    const process = async (batch: Batch, values?: readonly LockedValue[]) => {
      try {
        await options.processBatch(threadId, batch, values);
      } catch (error) {
        // A final error (no attempt can help) drops the batch at once, like the last failed attempt.
        if (!isFinalError(error) && !finalAttempt) throw error;
        // Every attempt failed: drop this batch so one poisonous message cannot block the thread.
        logger.error({ threadId, batchId: batch.batchId, err: error }, 'turn failed on every attempt');
        await inbox.commitBatch(threadId, batch);
        await options.onBatchDropped?.(threadId, batch, error);
      }
    };
    try {
      if (claimed.batch !== undefined) {
        await process(claimed.batch, claimed.values);
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
  };
}

/**
 * Runs agent turns with at most one turn per thread at a time, across any number of worker processes.
 * Items that arrive during a turn are picked up by the loop above or by their own (delayed) job. A wake-up
 * request taken while this process has room runs as a direct turn (direct-turns.ts), without a job.
 */
export function createTurnWorker(options: TurnWorkerOptions): Worker {
  const { inbox, logger, lockMs } = options;
  const claim = (threadId: string) =>
    inbox.lockAndClaim(threadId, lockMs, MAX_BATCH, options.lockedReads(threadId));
  const runClaimed = createClaimedTurnRunner(options);
  /** Job turns running in this process (direct turns are counted by `direct`). */
  let jobTurns = 0;
  // Room while fewer turns run here than the concurrency, job turns and direct turns together.
  const direct = createDirectTurns({
    claim,
    run: runClaimed,
    hasRoom: (directTurns) => jobTurns + directTurns < options.concurrency,
    addTurns: (requests) => requestTurns(options.queue, requests),
    retry: (request) => retryTurn(options.queue, request),
    logger,
    ...definedOnly({ onPickup: options.onTurnPickup, onFinished: options.onDirectTurnFinished }),
  });
  const worker = createJobWorker(
    QUEUE_NAMES.turns,
    agentTurnJob,
    async ({ threadId }, job, token) => {
      jobTurns += 1;
      try {
        // BullMQ counts only its own jobs: a job taken while direct turns fill the process waits its turn,
        // so one process never runs more than `concurrency` turns at once.
        if (jobTurns + direct.running() > options.concurrency) {
          await job.moveToDelayed(Date.now() + LOCKED_RETRY_MS, token);
          throw new DelayedError();
        }
        options.onTurnPickup?.(threadId);
        const claimed = await claim(threadId);
        if (claimed.status === 'locked') {
          await job.moveToDelayed(Date.now() + LOCKED_RETRY_MS, token);
          throw new DelayedError();
        }
        // A direct turn's retry job has one attempt fewer: its own `attempts` say which one is the last.
        await runClaimed(threadId, claimed, job.attemptsMade + 1 >= (job.opts.attempts ?? TURN_ATTEMPTS));
      } finally {
        jobTurns -= 1;
      }
    },
    {
      connection: options.connection,
      prefix: options.prefix,
      logger,
      concurrency: options.concurrency,
      describe: (data) => ({ threadId: data.threadId }),
      workerOptions: {
        lockDuration: lockMs,
        stalledInterval: Math.max(500, Math.floor(lockMs / 2)),
        maxStalledCount: 5,
      },
    },
  );
  // Accepting a message queued its wake-up request; the dispatcher runs it here or makes it a turn job.
  const dispatcher = startTurnDispatcher({
    connection: options.connection,
    inbox,
    addTurns: (requests) => requestTurns(options.queue, direct.offer(requests)),
    logger,
  });
  // Closing waits for the direct turns in flight, as BullMQ's close waits for the jobs in flight.
  const closeWorker = worker.close.bind(worker);
  worker.close = async (force?: boolean) => {
    await dispatcher.stop();
    await direct.drain();
    await closeWorker(force);
  };
  // The inbox is the durable record; a turn job is only the wake-up call. If a dispatcher died between
  // taking a wake-up request and adding its job, or a process died mid direct turn, the sweeper adds it:
  // no message waits for a later one.
  const sweeper = setInterval(() => {
    inbox
      .stale(SWEEP_AFTER_MS, Date.now())
      .then((threads) =>
        requestTurns(
          options.queue,
          threads.map(({ threadId, key }) => ({ threadId, key: `sweep-${key}` })),
        ),
      )
      .catch((error: unknown) => logger.warn({ err: error }, 'inbox sweep failed'));
  }, SWEEP_EVERY_MS);
  sweeper.unref();
  worker.on('closing', () => clearInterval(sweeper));
  return worker;
}
