import { afterAll, describe, expect, it } from 'vitest';
import { createMonitorScheduler } from '../../src/monitor/monitor-scheduler.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const prefix = uniquePrefix('msched');
const connection = { url: TEST_REDIS_URL, maxRetriesPerRequest: null };

afterAll(async () => {
  await deleteKeysWithPrefix(prefix);
});

describe('createMonitorScheduler', () => {
  it('starts, stops and syncs one job scheduler per run', async () => {
    const scheduler = createMonitorScheduler({ connection, prefix, intervalS: 30 });
    try {
      await scheduler.start('run-a');
      await scheduler.start('run-b');
      await scheduler.start('run-a'); // idempotent
      expect((await scheduler.listRunIds()).sort()).toEqual(['run-a', 'run-b']);
      const job = (await scheduler.queue.getJobs(['delayed', 'waiting', 'prioritized'])).find(
        (item) => item.data?.runId === 'run-a',
      );
      expect(job?.name).toBe('monitor-tick');
      expect(job?.data).toEqual({ v: 1, runId: 'run-a' });

      // after a "restart": run-b ended meanwhile, run-c started
      const restarted = createMonitorScheduler({ connection, prefix, intervalS: 30 });
      const { added, removed } = await restarted.sync(['run-a', 'run-c']);
      expect(added).toEqual(['run-c']);
      expect(removed).toEqual(['run-b']);
      expect((await restarted.listRunIds()).sort()).toEqual(['run-a', 'run-c']);
      expect(await restarted.stop('run-a')).toBe(true);
      expect(await restarted.stop('run-a')).toBe(false);
      expect(await restarted.listRunIds()).toEqual(['run-c']);
      await restarted.close();
    } finally {
      await scheduler.queue.obliterate({ force: true });
      await scheduler.close();
    }
  });
});
