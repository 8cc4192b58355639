import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { type Batch, createTurnInbox } from '../../src/queue/turn-inbox.js';
import { createTurnQueue, createTurnWorker, requestTurns } from '../../src/queue/turn-worker.js';
import { inboxMessage } from '../helpers/inbox-items.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { until } from '../helpers/until.js';

/**
 * Accepting a message queues its thread's wake-up request in the same script; the acking process adds
 * no BullMQ job. A turn worker's dispatcher makes requests into turn jobs, many per `addBulk`. Nothing
 * may be lost or run twice on the way.
 */
describe('turn dispatcher', () => {
  const prefix = uniquePrefix('dispatch');
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  afterAll(async () => {
    redis.disconnect();
    await deleteKeysWithPrefix(prefix);
  });

  function startWorker(
    keyPrefix: string,
    inbox: ReturnType<typeof createTurnInbox>,
    queue: ReturnType<typeof createTurnQueue>,
  ) {
    const turns: Array<{ threadId: string; texts: string[] }> = [];
    const worker = createTurnWorker({
      connection: redis,
      queue,
      prefix: keyPrefix,
      inbox,
      lockedReads: (thread) => [{ key: `${keyPrefix}:session:${thread}`, kind: 'list' }],
      logger: createLogger('silent'),
      concurrency: 4,
      lockMs: 3000,
      processBatch: async (threadId, batch: Batch) => {
        turns.push({ threadId, texts: batch.items.map((item) => item.text) });
        await inbox.commitBatch(threadId, batch);
      },
    });
    return { worker, turns };
  }

  it('turns a burst accepted while no worker ran into one turn per thread, with all its messages', async () => {
    const inbox = createTurnInbox({ redis, prefix });
    const queue = createTurnQueue(redis, prefix, createLogger('silent'));
    const threads = Array.from({ length: 30 }, (_, index) => `web:burst:t${index}`);
    for (const threadId of threads) {
      await inbox.accept(threadId, inboxMessage(`${threadId}-1`, 'first'), {
        addressed: true,
        deliveryKey: `web:${threadId}-1`,
      });
    }
    const busy = threads[0] ?? '';
    await inbox.accept(busy, inboxMessage(`${busy}-2`, 'second'), {
      addressed: true,
      deliveryKey: `web:${busy}-2`,
    });
    await inbox.pushEvent(threads[1] ?? '', {
      type: 'event',
      eventId: 'approved-1',
      text: 'approved',
      receivedAt: Date.now(),
    });

    // Accepting added no job: the requests wait on the wake list.
    expect(await queue.count()).toBe(0);
    expect(await redis.llen(`${prefix}:turn-wake`)).toBe(32);

    const { worker, turns } = startWorker(prefix, inbox, queue);
    try {
      await until(() => turns.length >= threads.length, 'a turn in every thread');
      await until(
        async () => (await queue.getJobCounts('waiting', 'active', 'delayed')).waiting === 0,
        'the queue to drain',
      );
      // Late duplicates would show up within a few more polls.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(turns.map((turn) => turn.threadId).sort()).toEqual([...threads].sort());
      expect(turns.find((turn) => turn.threadId === busy)?.texts).toEqual(['first', 'second']);
      expect(turns.find((turn) => turn.threadId === threads[1])?.texts).toEqual(['first', 'approved']);
      for (const threadId of threads) expect(await inbox.length(threadId)).toBe(0);
      expect(await redis.llen(`${prefix}:turn-wake`)).toBe(0);

      // With the worker running, a new message is answered from its wake-up request alone.
      await inbox.accept('web:burst:late', inboxMessage('late-1', 'late'), {
        addressed: true,
        deliveryKey: 'web:late-1',
      });
      await until(() => turns.some((turn) => turn.threadId === 'web:burst:late'), 'the late turn');
    } finally {
      await worker.close();
      await queue.close();
    }
  });

  it('adds each turn job once when the same requests are dispatched twice', async () => {
    const twice = `${prefix}-twice`;
    const queue = createTurnQueue(redis, twice, createLogger('silent'));
    try {
      const requests = [
        { threadId: 'web:twice:a', key: 'a1' },
        { threadId: 'web:twice:b', key: 'b1' },
        { threadId: 'web:twice:a', key: 'a1' },
      ];
      await requestTurns(queue, requests);
      await requestTurns(queue, requests);
      const jobs = await queue.getJobs(['waiting', 'prioritized']);
      expect(jobs.map((job) => job.data.threadId).sort()).toEqual(['web:twice:a', 'web:twice:b']);
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });

  it('stops promptly while blocked waiting for requests, and leaves later requests for the next worker', async () => {
    const idle = `${prefix}-idle`;
    const inbox = createTurnInbox({ redis, prefix: idle });
    const queue = createTurnQueue(redis, idle, createLogger('silent'));
    const { worker } = startWorker(idle, inbox, queue);
    try {
      await new Promise((resolve) => setTimeout(resolve, 200));
      const started = Date.now();
      await worker.close();
      expect(Date.now() - started).toBeLessThan(2000);
      await inbox.accept('web:idle:t', inboxMessage('i1', 'after close'), {
        addressed: true,
        deliveryKey: 'web:i1',
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await redis.llen(`${idle}:turn-wake`)).toBe(1);
      expect(await queue.count()).toBe(0);
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });

  it('takes wake-up requests with BLPOP + LPOP from a Redis without BLMPOP (before 7.0)', async () => {
    const old = `${prefix}-old`;
    const inbox = createTurnInbox({ redis, prefix: old });
    const blocking = redis.duplicate();
    const calls: string[] = [];
    // What Redis 6.2 answers to a command it does not know; everything else goes to the real server.
    const redis62 = new Proxy(blocking, {
      get(target, property, receiver) {
        if (property === 'call') {
          return async (command: string) => {
            calls.push(command);
            throw new Error(`ERR unknown command '${command}', with args beginning with: `);
          };
        }
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    try {
      for (const id of ['o1', 'o2', 'o3']) {
        await inbox.accept(`web:old:${id}`, inboxMessage(id, id), {
          addressed: true,
          deliveryKey: `web:${id}`,
        });
      }
      expect(await inbox.takeWakeRequests(redis62, 1, 2)).toEqual([
        { threadId: 'web:old:o1', key: 'o1' },
        { threadId: 'web:old:o2', key: 'o2' },
      ]);
      expect(await inbox.takeWakeRequests(redis62, 1, 2)).toEqual([{ threadId: 'web:old:o3', key: 'o3' }]);
      // Asked once, then remembered.
      expect(calls).toEqual(['BLMPOP']);
      // And the real (7.x) server answers BLMPOP in one call, oldest first.
      await inbox.accept('web:old:o4', inboxMessage('o4', 'o4'), { addressed: true, deliveryKey: 'web:o4' });
      expect(await inbox.takeWakeRequests(blocking, 1, 10)).toEqual([{ threadId: 'web:old:o4', key: 'o4' }]);
    } finally {
      blocking.disconnect();
    }
  });
});
