import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { enqueueBulk, JOBS } from '../../src/queue/jobs.js';
import { type Batch, createTurnInbox, type InboxItem } from '../../src/queue/turn-inbox.js';
import { createTurnQueue, createTurnRequester, createTurnWorker } from '../../src/queue/turn-worker.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const message = (id: string, text: string): InboxItem => ({
  type: 'message',
  messageId: id,
  deliveryId: id,
  user: { id: 'alice', name: 'alice' },
  text,
  addressed: true,
  receivedAt: Date.now(),
});

async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * The ack path asks for turns through `createTurnRequester`. Under load a coalesced batch becomes one
 * wake-up job, so the acking process adds one BullMQ job per batch, not one per message; a turn worker
 * expands it. Nothing may be lost or run twice on the way.
 */
describe('turn requests under load', () => {
  const prefix = uniquePrefix('wake');
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  afterAll(async () => {
    redis.disconnect();
    await deleteKeysWithPrefix(prefix);
  });

  function startWorker(inbox: ReturnType<typeof createTurnInbox>, queue: ReturnType<typeof createTurnQueue>) {
    const turns: Array<{ threadId: string; texts: string[] }> = [];
    const worker = createTurnWorker({
      connection: redis,
      queue,
      prefix,
      inbox,
      sessionKey: (thread) => `${prefix}:session:${thread}`,
      logger: createLogger('silent'),
      concurrency: 4,
      lockMs: 3000,
      processBatch: async (threadId, batch: Batch) => {
        turns.push({
          threadId,
          texts: batch.items.map((item) => (item.type === 'message' ? item.text : item.text)),
        });
        await inbox.commitBatch(threadId, batch);
      },
    });
    return { worker, turns };
  }

  it('sends a burst as one wake-up job, and every thread gets exactly one turn with all its messages', async () => {
    const inbox = createTurnInbox({ redis, prefix });
    const queue = createTurnQueue(redis, prefix, createLogger('silent'));
    const requestTurn = createTurnRequester(queue);
    const threads = Array.from({ length: 30 }, (_, index) => `web:burst:t${index}`);
    for (const threadId of threads) {
      await inbox.accept(threadId, message(`${threadId}-1`, 'first'), {
        addressed: true,
        deliveryKey: `web:${threadId}-1`,
      });
    }
    // A second message in one thread within the same burst.
    const busy = threads[0] ?? '';
    await inbox.accept(busy, message(`${busy}-2`, 'second'), {
      addressed: true,
      deliveryKey: `web:${busy}-2`,
    });

    // All requests in one event-loop turn, as many acks finishing together would make them.
    await Promise.all([
      ...threads.map((threadId) => requestTurn(threadId, `${threadId}-1`)),
      requestTurn(busy, `${busy}-2`),
    ]);

    const waiting = await queue.getJobs(['waiting', 'prioritized']);
    expect(waiting.map((job) => job.name)).toEqual(['turn-wake']);
    expect(waiting[0]?.data.requests).toHaveLength(31);

    const { worker, turns } = startWorker(inbox, queue);
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
      for (const threadId of threads) expect(await inbox.length(threadId)).toBe(0);
    } finally {
      await worker.close();
      await queue.close();
    }
  });

  it('keeps a lone request as its own turn job (no extra hop on a quiet bot)', async () => {
    const queue = createTurnQueue(redis, `${prefix}-quiet`, createLogger('silent'));
    try {
      await createTurnRequester(queue)('web:quiet:t1', 'q1');
      const waiting = await queue.getJobs(['waiting', 'prioritized']);
      expect(waiting.map((job) => job.name)).toEqual(['agent-turn']);
      expect(waiting[0]?.data).toEqual({ v: 1, threadId: 'web:quiet:t1' });
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });

  it('expands a wake-up job that is delivered twice into each turn job once', async () => {
    const queue = createTurnQueue(redis, `${prefix}-twice`, createLogger('silent'));
    const inbox = createTurnInbox({ redis, prefix: `${prefix}-twice` });
    const requests = [
      { threadId: 'web:twice:a', key: 'a1' },
      { threadId: 'web:twice:b', key: 'b1' },
    ];
    const data = { v: 1 as const, requests };
    await enqueueBulk(queue, JOBS.turnWake, [{ data }, { data }]);
    const turnJobs = async () =>
      (await queue.getJobs(['waiting', 'prioritized', 'active', 'completed', 'delayed'])).filter(
        (job) => job.name === 'agent-turn',
      );
    const worker = createTurnWorker({
      connection: redis,
      queue,
      prefix: `${prefix}-twice`,
      inbox,
      sessionKey: (thread) => `${prefix}:session:${thread}`,
      logger: createLogger('silent'),
      concurrency: 1,
      lockMs: 3000,
      processBatch: async () => undefined,
    });
    try {
      await until(
        async () =>
          (await queue.getJobs(['completed'])).filter((job) => job.name === 'turn-wake').length === 2,
        'both wake-up jobs',
      );
      await until(
        async () => (await queue.getJobCounts('waiting', 'active')).waiting === 0,
        'turn jobs to run',
      );
      expect((await turnJobs()).map((job) => job.data.threadId).sort()).toEqual([
        'web:twice:a',
        'web:twice:b',
      ]);
    } finally {
      await worker.close();
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });
});
