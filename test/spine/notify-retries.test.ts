import { Queue, type Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ChatAdapter } from '../../src/bot/chat-adapter.js';
import { PlatformError, platformApiCode, RateLimitedError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { QUEUE_NAMES } from '../../src/queue/jobs.js';
import { createNotifyWorker, createQueueNotifier, type QueueNotifier } from '../../src/queue/notify-queue.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

/** A chat platform double at the port: each postMessage call runs the next scripted behaviour. */
function scriptedAdapter(behaviours: Array<() => void>) {
  const attempts: number[] = [];
  const adapter: ChatAdapter = {
    platform: 'slack',
    start: async () => undefined,
    stop: async () => undefined,
    async postMessage() {
      attempts.push(Date.now());
      const behaviour = behaviours.shift();
      behaviour?.();
      return { messageId: `msg-${attempts.length}` };
    },
    editMessage: async () => undefined,
    postCard: async () => ({ messageId: 'card' }),
    updateCard: async () => undefined,
    upload: async () => ({ messageId: 'file' }),
  };
  return { adapter, attempts };
}

describe('notify queue retries', () => {
  let redis: Redis;
  let prefix: string;
  let notifier: QueueNotifier;
  let worker: Worker | undefined;

  beforeAll(() => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  });
  afterEach(async () => {
    await worker?.close();
    await notifier?.close();
    await deleteKeysWithPrefix(prefix);
  });
  afterAll(() => redis.disconnect());

  function setUp(adapter: ChatAdapter) {
    prefix = uniquePrefix('notify');
    notifier = createQueueNotifier({ connection: redis, prefix, waitTimeoutMs: 20_000 });
    worker = createNotifyWorker({
      connection: redis,
      prefix,
      adapters: (platform) => (platform === adapter.platform ? adapter : undefined),
      logger: createLogger('silent'),
    });
  }

  it('retries a failing post and delivers it on attempt 3 after about 1 s + 2 s', async () => {
    const failure = () => {
      throw new PlatformError('slack', platformApiCode('internal_error'), 'HTTP 500', { retryable: true });
    };
    const { adapter, attempts } = scriptedAdapter([failure, failure, () => undefined]);
    setUp(adapter);
    const posted = await notifier.post('slack:C1:1700000000.000100', 'hello');
    expect(posted.messageId).toBe('msg-3');
    expect(attempts).toHaveLength(3);
    const [first = 0, second = 0, third = 0] = attempts;
    expect(second - first).toBeGreaterThanOrEqual(950);
    expect(second - first).toBeLessThan(1900);
    expect(third - second).toBeGreaterThanOrEqual(1950);
    expect(third - second).toBeLessThan(3500);
  });

  it('waits 4 s before the fourth attempt and gives up after it', async () => {
    const failure = () => {
      throw new PlatformError('slack', platformApiCode('internal_error'), 'HTTP 500', { retryable: true });
    };
    // A fifth behaviour that would succeed: reaching it would mean a fifth attempt.
    const { adapter, attempts } = scriptedAdapter([failure, failure, failure, failure, () => undefined]);
    setUp(adapter);
    await expect(notifier.post('slack:C1:1700000000.000100', 'hello')).rejects.toThrow(/HTTP 500/);
    expect(attempts).toHaveLength(4);
    const [first = 0, second = 0, third = 0, fourth = 0] = attempts;
    expect(second - first).toBeGreaterThanOrEqual(950);
    expect(third - second).toBeGreaterThanOrEqual(1950);
    expect(fourth - third).toBeGreaterThanOrEqual(3950);
    expect(fourth - third).toBeLessThan(6000);
    const queue = new Queue(QUEUE_NAMES.notify, { connection: redis, prefix });
    try {
      const [failed] = await queue.getFailed();
      expect(failed?.attemptsMade).toBe(4);
      expect(failed?.failedReason).toMatch(/HTTP 500/);
      // Given up for good: nothing is left delayed or waiting that could make a fifth attempt.
      expect(await queue.getJobCounts('delayed', 'waiting', 'active')).toMatchObject({
        delayed: 0,
        waiting: 0,
        active: 0,
      });
    } finally {
      await queue.close();
    }
    expect(attempts).toHaveLength(4);
  }, 20_000);

  it('does not retry an error that retrying cannot fix', async () => {
    const { adapter, attempts } = scriptedAdapter([
      () => {
        throw new PlatformError('slack', platformApiCode('channel_not_found'), 'channel_not_found', {
          retryable: false,
        });
      },
    ]);
    setUp(adapter);
    await expect(notifier.post('slack:C404:1.2', 'hello')).rejects.toThrow(/channel_not_found/);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(attempts).toHaveLength(1);
  });

  it('fails a post to a malformed thread id at once instead of retrying it', async () => {
    const { adapter } = scriptedAdapter([]);
    setUp(adapter);
    const started = Date.now();
    await expect(notifier.post('not-a-thread', 'hello')).rejects.toThrow(/thread_invalid|not a thread id/);
    // Retrying would have taken 1 s + 2 s + 4 s of back-off.
    expect(Date.now() - started).toBeLessThan(2500);
    const queue = new Queue(QUEUE_NAMES.notify, { connection: redis, prefix });
    try {
      const failed = await queue.getFailed();
      expect(failed.map((job) => job.attemptsMade)).toEqual([1]);
    } finally {
      await queue.close();
    }
  });

  it('waits for Retry-After on a rate limit without spending an attempt', async () => {
    const limited = () => {
      throw new RateLimitedError('slack', 1200);
    };
    // Four rate limits then success: more than the 4 attempts, so waiting must not count as attempts.
    const { adapter, attempts } = scriptedAdapter([limited, limited, limited, limited, () => undefined]);
    setUp(adapter);
    const posted = await notifier.post('slack:C1:1.2', 'hello');
    expect(posted.messageId).toBe('msg-5');
    for (let index = 1; index < attempts.length; index += 1) {
      expect((attempts[index] ?? 0) - (attempts[index - 1] ?? 0)).toBeGreaterThanOrEqual(1150);
    }
  });
});

describe('notify queue order through a rate-limit pause', () => {
  let redis: Redis;
  let prefix: string;
  const closers: Array<() => Promise<void>> = [];

  beforeAll(() => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
    await deleteKeysWithPrefix(prefix);
    redis.disconnect();
  });

  it('sends posts held by a pause in the order they were made, with two busy workers', async () => {
    // Issue 26 §5: places in the line used to follow which worker reached Redis first, so under load
    // "order 4" went before "order 3". Two workers on their own connections race for every held post.
    prefix = uniquePrefix('notify-order');
    const texts: string[] = [];
    let limited = false;
    const adapter: ChatAdapter = {
      platform: 'slack',
      start: async () => undefined,
      stop: async () => undefined,
      async postMessage(_threadId, text) {
        if (!limited) {
          limited = true;
          throw new RateLimitedError('slack', 1500);
        }
        texts.push(text);
        return { messageId: `msg-${texts.length}` };
      },
      editMessage: async () => undefined,
      postCard: async () => ({ messageId: 'card' }),
      updateCard: async () => undefined,
      upload: async () => ({ messageId: 'file' }),
    };
    const notifier = createQueueNotifier({ connection: redis, prefix, waitTimeoutMs: 30_000 });
    closers.push(() => notifier.close());
    for (let index = 0; index < 2; index += 1) {
      const connection = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
      const worker = createNotifyWorker({
        connection,
        prefix,
        adapters: (platform) => (platform === 'slack' ? adapter : undefined),
        logger: createLogger('silent'),
        concurrency: 8,
      });
      closers.push(async () => {
        await worker.close();
        connection.disconnect();
      });
    }
    const thread = 'slack:C9:1700000000.000900';
    const first = notifier.post(thread, 'order 0');
    // The rest are made once the first met the 429 and was put back to wait (as in the Slack flow).
    const queue = new Queue(QUEUE_NAMES.notify, { connection: redis, prefix });
    closers.push(() => queue.close());
    const deadline = Date.now() + 10_000;
    while ((await queue.getDelayedCount()) === 0) {
      if (Date.now() > deadline) throw new Error('the first post was never put back after its 429');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const rest = Array.from({ length: 30 }, (_, index) => notifier.post(thread, `order ${index + 1}`));
    await Promise.all([first, ...rest]);
    expect(texts).toEqual(Array.from({ length: 31 }, (_, index) => `order ${index}`));
  });
});
