import type { Logger } from '../logger.js';
import type { ClaimedTurn, WakeRequest } from './turn-inbox.js';

/**
 * Direct turns: a wake-up request taken by an idle turn worker runs its turn right there, in the
 * dispatcher's process, instead of going through a BullMQ job (`addBulk`, then the worker's pick-up: about
 * two milliseconds of turn_overhead_p50_ms on an idle queue). The guarantees stay those of a job turn:
 * - one turn at a time per thread: the turn takes the thread's lock first; when another turn holds it,
 *   the request becomes a turn job as before, which waits for the lock;
 * - nothing lost: the inbox stays the durable record until the turn commits; if this process dies
 *   mid-turn, the lock's lease runs out and the turn worker's sweeper re-requests the thread (as for a
 *   wake-up request lost between take and add);
 * - retries: a failed direct turn becomes a turn job with the attempts and backoff a job would have left;
 * - shutdown: `drain` waits for the turns in flight, as closing a BullMQ worker waits for its jobs.
 */

interface DirectTurnsOptions {
  /** Takes the thread's lock and first batch (what the job handler does first). */
  claim: (threadId: string) => Promise<ClaimedTurn | { status: 'locked' }>;
  /** Runs a claimed turn to its end, releasing the lock; throws when the attempt failed and may be retried. */
  run: (threadId: string, claimed: ClaimedTurn, finalAttempt: boolean) => Promise<void>;
  /** Whether this process has room for one more turn now. */
  hasRoom: (inFlight: number) => boolean;
  /** Makes requests into turn jobs (the path taken when a turn cannot run here). */
  addTurns: (requests: readonly WakeRequest[]) => Promise<void>;
  /** Adds the turn job that retries a failed direct turn (attempts and backoff left). */
  retry: (request: WakeRequest) => Promise<void>;
  /** Told when a turn was picked up (before its lock) and when it finished, for metrics and benchmarks. */
  onPickup?: (threadId: string) => void;
  onFinished?: (durationSeconds: number, pickupSeconds: number) => void;
  logger: Logger;
}

interface DirectTurns {
  /** Starts a direct turn for each request there is room for; returns the requests left for jobs. */
  offer(requests: readonly WakeRequest[]): WakeRequest[];
  /** How many direct turns are in flight now. */
  running(): number;
  /** Takes no more requests and resolves once every direct turn in flight has ended. */
  drain(): Promise<void>;
}

export function createDirectTurns(options: DirectTurnsOptions): DirectTurns {
  const { logger } = options;
  const inFlight = new Set<Promise<void>>();
  const threadsInFlight = new Set<string>();
  let draining = false;

  /** A request that could not run here becomes a job; if even that fails, the sweeper re-requests it. */
  async function toJob(request: WakeRequest): Promise<void> {
    await options
      .addTurns([request])
      .catch((error: unknown) =>
        logger.warn({ err: error, threadId: request.threadId }, 'could not add a turn job; the sweeper will'),
      );
  }

  async function turn(request: WakeRequest, takenAt: number): Promise<void> {
    const { threadId } = request;
    options.onPickup?.(threadId);
    let claimed: ClaimedTurn | { status: 'locked' };
    try {
      claimed = await options.claim(threadId);
    } catch (error) {
      logger.warn({ err: error, threadId }, 'could not take a thread lock for a direct turn');
      await toJob(request);
      return;
    }
    // Another turn holds the thread: its job waits for the lock, as a wake-up job always did.
    if (claimed.status === 'locked') return toJob(request);
    const startedAt = Date.now();
    try {
      await options.run(threadId, claimed, false);
    } catch (error) {
      // Logged as a turn job's failed first attempt is (job-worker.ts), then retried as a job.
      logger.warn(
        { queue: 'turns', direct: true, attempt: 1, final: false, threadId, err: error },
        'turns job failed; will retry',
      );
      await options
        .retry(request)
        .catch((retryError: unknown) =>
          logger.warn({ err: retryError, threadId }, 'could not add a turn retry job; the sweeper will'),
        );
    } finally {
      options.onFinished?.((Date.now() - startedAt) / 1000, (startedAt - takenAt) / 1000);
    }
  }

  function start(request: WakeRequest): void {
    threadsInFlight.add(request.threadId);
    const running = turn(request, Date.now())
      .catch((error: unknown) =>
        logger.error({ err: error, threadId: request.threadId }, 'direct turn failed'),
      )
      .finally(() => {
        inFlight.delete(running);
        threadsInFlight.delete(request.threadId);
      });
    inFlight.add(running);
  }

  return {
    offer(requests) {
      if (draining) return [...requests];
      // One turn per thread takes in everything its inbox holds: the last request stands for the others.
      const lastKeyByThread = new Map<string, string>();
      for (const request of requests) lastKeyByThread.set(request.threadId, request.key);
      const left: WakeRequest[] = [];
      for (const [threadId, key] of lastKeyByThread) {
        const request = { threadId, key };
        if (threadsInFlight.has(threadId) || !options.hasRoom(inFlight.size)) left.push(request);
        else start(request);
      }
      return left;
    },
    running: () => inFlight.size,
    async drain() {
      draining = true;
      while (inFlight.size > 0) await Promise.all(inFlight);
    },
  };
}
