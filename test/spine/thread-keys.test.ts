import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { THREAD_KEEP_S } from '../../src/agent/session-store.js';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';

/**
 * Issue 26 §4: 2,000 messages in 100 threads through the whole spine (inbox, dispatcher, turns, notify);
 * once the threads are idle, each keeps only keys with a TTL (its history, at most THREAD_KEEP_S), and the
 * queues' finished jobs stay under their retention caps. The playground's own message store (`:web:`)
 * is the chat platform's history, like Slack's, and is not counted here.
 */
describe('keys per idle thread', () => {
  let shepherd: TestApp;
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });

  beforeAll(async () => {
    // Plain commands only: no model is needed (and none answers).
    shepherd = await startTestApp({ environment: { SHEPHERD_LLM_BASE_URL: 'http://127.0.0.1:9/v1' } });
  });
  afterAll(async () => {
    await shepherd.stop();
    redis.disconnect();
  });

  async function keysOf(pattern: string): Promise<Array<{ key: string; ttlS: number }>> {
    const found: Array<{ key: string; ttlS: number }> = [];
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) found.push({ key, ttlS: await redis.ttl(key) });
    } while (cursor !== '0');
    return found;
  }

  it('2,000 messages leave each idle thread only keys that expire', async () => {
    const threads: string[] = [];
    for (let index = 0; index < 100; index++)
      threads.push(await shepherd.mention('runs', `user${index % 7}`));
    for (let round = 1; round < 20; round++)
      await Promise.all(threads.map((threadId) => shepherd.reply(threadId, '@shepherd runs')));

    const prefix = shepherd.prefix;
    // Idle: every inbox drained, no batch open, no turn holding a thread.
    await vi.waitFor(
      async () => {
        expect(await redis.scard(`${prefix}:inbox-pending`)).toBe(0);
        const busy = (await keysOf(`${prefix}:*`)).filter(({ key }) =>
          /:(inbox|turn-batch|turn-lock):/.test(key),
        );
        expect(busy).toEqual([]);
      },
      { timeout: 120_000, interval: 250 },
    );

    const all = await keysOf(`${prefix}:*`);
    for (const threadId of threads) {
      const own = all.filter(({ key }) => key.endsWith(`:${threadId}`) && !key.startsWith(`${prefix}:web:`));
      expect(own.length, threadId).toBeGreaterThan(0);
      expect(own.length, threadId).toBeLessThanOrEqual(4);
      for (const { key, ttlS } of own) {
        expect(ttlS, key).toBeGreaterThan(0);
        expect(ttlS, key).toBeLessThanOrEqual(THREAD_KEEP_S);
      }
    }
    // Keys without a TTL outside the playground's store: the queues' bookkeeping and their finished jobs,
    // which BullMQ trims to the retention set in jobs.ts (turns ≤ 10,000, notify ≤ 5,000).
    const persistent = all.filter(({ ttlS, key }) => ttlS === -1 && !key.startsWith(`${prefix}:web:`));
    const jobs = (queue: string) =>
      persistent.filter(({ key }) => new RegExp(`^${prefix}:${queue}:[^:]+$`).test(key)).length;
    expect(jobs('turns')).toBeLessThanOrEqual(10_000);
    expect(jobs('notify')).toBeLessThanOrEqual(5_000);
    const other = persistent.filter(({ key }) => !/^[^:]+:(turns|notify|control|monitor):/.test(key));
    expect(other.map(({ key }) => key.slice(prefix.length + 1)).sort()).toEqual([
      'runs-imported',
      'sessions',
    ]);
  }, 240_000);
});
