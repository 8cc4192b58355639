import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { type Batch, createTurnInbox } from '../../src/queue/turn-inbox.js';
import { createTurnQueue, createTurnWorker, TURN_ATTEMPTS } from '../../src/queue/turn-worker.js';
import { inboxMessage } from '../helpers/inbox-items.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

describe('a batch that fails on every attempt', () => {
  const prefix = uniquePrefix('poison');
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  afterAll(async () => {
    redis.disconnect();
    await deleteKeysWithPrefix(prefix);
  });

  it('is dropped after the last attempt with a note, and the thread keeps working', async () => {
    const inbox = createTurnInbox({ redis, prefix });
    const queue = createTurnQueue(redis, prefix);
    const threadId = 'web:c:poisoned';
    const seen: string[][] = [];
    const dropped: Batch[] = [];
    let attempts = 0;
    const worker = createTurnWorker({
      connection: redis,
      queue,
      prefix,
      inbox,
      lockedReads: (thread) => [{ key: `${prefix}:session:${thread}`, kind: 'list' }],
      logger: createLogger('silent'),
      concurrency: 2,
      lockMs: 3000,
      processBatch: async (_thread, batch) => {
        const texts = batch.items.map((item) => (item.type === 'message' ? item.text : item.text));
        seen.push(texts);
        if (texts.includes('poison')) {
          attempts += 1;
          throw new Error('cannot handle this');
        }
        await inbox.commitBatch(_thread, batch);
      },
      onBatchDropped: async (_thread, batch) => {
        dropped.push(batch);
      },
    });
    try {
      await inbox.accept(threadId, inboxMessage('p1', 'poison'), { addressed: true, deliveryKey: 'web:p1' });
      const deadline = Date.now() + 20_000;
      while (dropped.length === 0 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 100));
      // At least every attempt of its own job (the sweeper may add a wake-up of its own meanwhile).
      expect(attempts).toBeGreaterThanOrEqual(TURN_ATTEMPTS);
      expect(dropped).toHaveLength(1);
      expect(await inbox.length(threadId)).toBe(0);

      await inbox.accept(threadId, inboxMessage('h1', 'hello again'), {
        addressed: true,
        deliveryKey: 'web:h1',
      });
      const later = Date.now() + 10_000;
      while (!seen.some((texts) => texts.includes('hello again')) && Date.now() < later) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(seen.at(-1)).toEqual(['hello again']);
      expect(await inbox.length(threadId)).toBe(0);
    } finally {
      await worker.close();
      await queue.close();
    }
  });
});
