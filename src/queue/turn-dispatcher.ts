import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import type { TurnInbox, WakeRequest } from './turn-inbox.js';

/** How long one blocking wait lasts; bounds how long `stop` takes when the connection is slow to close. */
const WAIT_S = 1;
/** The most wake-up requests turned into jobs in one go (one `addBulk`). */
const MAX_TAKE = 500;
/** Pause after a failed take or add before trying again (Redis down, say); the sweeper covers the gap. */
const RETRY_MS = 1000;

interface TurnDispatcherOptions {
  /** Duplicated: the dispatcher blocks on a connection of its own. */
  connection: Redis;
  inbox: TurnInbox;
  /** Adds the turn jobs for a batch of requests (idempotent per request). */
  addTurns: (requests: readonly WakeRequest[]) => Promise<void>;
  logger: Logger;
}

interface TurnDispatcher {
  /** Ends the loop and closes its connection; resolves when the loop has returned. */
  stop(): Promise<void>;
}

/**
 * Makes wake-up requests into turn jobs, in the turn worker's process. Accepting a message queues its
 * request in the same script that records it, so the acking process (an HTTP handler, a Slack or Discord
 * client) does one Redis round trip and no BullMQ work; under load one `addBulk` here carries the turns
 * of hundreds of messages. Several dispatchers (one per worker process) share the list: each request is
 * taken once. A request taken by a dispatcher that dies before adding its job is re-requested by the
 * turn worker's sweeper.
 */
export function startTurnDispatcher(options: TurnDispatcherOptions): TurnDispatcher {
  const { inbox, logger } = options;
  const blocking = options.connection.duplicate({ maxRetriesPerRequest: null });
  blocking.on('error', (error: unknown) => logger.debug({ err: error }, 'turn dispatcher connection'));
  let stopping = false;
  let stopped: () => void = () => undefined;
  // A take parked on a connection that is between reconnect attempts never settles once the connection is
  // disconnected (ioredis keeps it queued): the loop waits for the take or for stop, whichever comes first.
  const stopSignal = new Promise<WakeRequest[]>((resolve) => {
    stopped = () => resolve([]);
  });

  async function pause(ms: number): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, ms).unref());
  }

  async function loop(): Promise<void> {
    while (!stopping) {
      let requests: WakeRequest[];
      try {
        requests = await Promise.race([inbox.takeWakeRequests(blocking, WAIT_S, MAX_TAKE), stopSignal]);
      } catch (error) {
        if (stopping) return;
        logger.warn({ err: error }, 'could not take wake-up requests; retrying');
        await pause(RETRY_MS);
        continue;
      }
      if (requests.length === 0) continue;
      try {
        await options.addTurns(requests);
      } catch (error) {
        // Taken but not added: the inboxes still hold the messages, and the sweeper re-requests them.
        logger.warn({ err: error, requests: requests.length }, 'could not add turn jobs; the sweeper will');
        await pause(RETRY_MS);
      }
    }
  }

  const running = loop();
  return {
    async stop() {
      stopping = true;
      stopped();
      // Ends a blocking wait at once (its promise rejects, or never settles if it was parked offline).
      blocking.disconnect();
      await running;
    },
  };
}
