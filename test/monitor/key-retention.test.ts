import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { Notifier } from '../../src/bot/notifier.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/logger.js';
import { createAlertPolicyStore } from '../../src/monitor/alerts/alert-policy.js';
import { parseRuleSpec } from '../../src/monitor/alerts/alert-rules.js';
import type { AlertService } from '../../src/monitor/alerts/alert-service.js';
import { createMonitor } from '../../src/monitor/monitor.js';
import { createRunWatcher, MONITOR_KEEP_AFTER_END_MS } from '../../src/monitor/watch-runs.js';
import type { RunMeta, RunStatus } from '../../src/runs/records/run-types.js';
import type { RunQueries } from '../../src/runs/run-queries.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { testRunMeta } from '../helpers/run-meta.js';

/**
 * Issue 26 §4: every Redis key has an owner that deletes it, or a TTL. 200 short runs go through the real
 * monitor worker (BullMQ schedulers, ticks, the final tick after the end); afterwards a run that cannot come
 * back leaves no monitor or alert-rule key, one that can (paused, failed) leaves only keys with a TTL, and
 * the keys without a TTL do not grow with the number of runs.
 */
const prefix = uniquePrefix('keys');
const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
let root = '';

afterAll(async () => {
  await deleteKeysWithPrefix(prefix);
  redis.disconnect();
  if (root !== '') await rm(root, { recursive: true, force: true });
});

const ENDINGS: RunStatus[] = ['completed', 'failed', 'stopped', 'paused'];

async function keysWith(pattern: string): Promise<Array<{ key: string; ttlMs: number }>> {
  const found: Array<{ key: string; ttlMs: number }> = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) found.push({ key, ttlMs: await redis.pttl(key) });
  } while (cursor !== '0');
  return found;
}

describe('no key outlives its run', () => {
  it('200 short runs leave a bounded number of keys without a TTL', async () => {
    root = await mkdtemp(join(tmpdir(), 'shepherd-keys-'));
    const config = loadConfig({ SHEPHERD_QUEUE_PREFIX: prefix, SHEPHERD_MONITOR_INTERVAL_S: '0.2' });
    const metas = new Map<string, RunMeta>();
    const monitor = createMonitor({ redis, prefix, runDir: (meta) => join(root, meta.id) });
    const policy = createAlertPolicyStore({ redis, prefix });
    const runs = {
      get: async (runId: string) => metas.get(runId),
      processState: async (meta: RunMeta) =>
        meta.status === 'running'
          ? { kind: 'alive' }
          : { kind: 'exited', exitCode: meta.status === 'failed' ? 1 : 0 },
      runDirectory: (runId: string) => join(root, runId),
    } as unknown as RunQueries;
    const watcher = createRunWatcher({
      config,
      redis,
      prefix,
      monitor,
      runs,
      alerts: { onIncident: async () => true } as unknown as AlertService,
      notifier: { post: async () => ({ messageId: 'm' }) } as unknown as Notifier,
      postChart: async () => 'chart',
      onRetired: (runId, keepMs) => policy.retire(runId, keepMs),
      logger: createLogger('silent'),
    });
    const worker: Worker = watcher.createWorker();
    const alice = { id: 'U1', name: 'alice' };
    try {
      for (let wave = 0; wave < 4; wave++) {
        const ids = Array.from({ length: 50 }, (_, index) => `r${wave * 50 + index}`);
        for (const runId of ids) {
          await mkdir(join(root, runId));
          const lines = Array.from(
            { length: 10 },
            (_, step) => `{"step": ${step}, "loss": ${2 - step / 10}}\n`,
          );
          await writeFile(join(root, runId, 'metrics.jsonl'), lines.join(''));
          metas.set(runId, testRunMeta(runId));
          await policy.addRule(runId, parseRuleSpec('loss > 9'), alice);
          await policy.mute(runId, 'plateau', alice);
          await watcher.watch(runId);
        }
        await vi.waitFor(
          async () => {
            for (const runId of ids) expect((await monitor.loadState(runId)).rolling.points).toBe(10);
          },
          { timeout: 30_000, interval: 200 },
        );
        ids.forEach((runId, index) => {
          const meta = metas.get(runId);
          if (meta !== undefined) metas.set(runId, { ...meta, status: ENDINGS[index % 4] ?? 'completed' });
        });
        // Each run's final tick reads its end, then the run's scheduler goes.
        await vi.waitFor(async () => expect(await watcher.scheduler.listRunIds()).toEqual([]), {
          timeout: 30_000,
          interval: 200,
        });
      }

      for (const [runId, meta] of metas) {
        const keys = (await keysWith(`${prefix}:*`)).filter(({ key }) => key.endsWith(`:${runId}`));
        if (meta.status === 'completed' || meta.status === 'stopped') expect(keys, runId).toEqual([]);
        else {
          expect(keys.length, runId).toBeGreaterThan(0);
          for (const { key, ttlMs } of keys) {
            expect(ttlMs, key).toBeGreaterThan(0);
            expect(ttlMs, key).toBeLessThanOrEqual(MONITOR_KEEP_AFTER_END_MS);
          }
        }
      }
      // What has no TTL is the queue's own: its finished tick jobs (capped at 100 completed and 100 failed by
      // removeOnComplete / removeOnFail) and a few bookkeeping keys, whatever the number of runs.
      const persistent = (await keysWith(`${prefix}:*`)).filter(({ ttlMs }) => ttlMs === -1);
      const tickJobs = persistent.filter(({ key }) => key.startsWith(`${prefix}:monitor:repeat:`));
      const others = persistent.filter(({ key }) => !key.startsWith(`${prefix}:monitor:repeat:`));
      expect(tickJobs.length).toBeLessThanOrEqual(200);
      expect(others.length, others.map(({ key }) => key).join('\n')).toBeLessThanOrEqual(10);
    } finally {
      await worker.close();
      await watcher.close();
    }
  }, 180_000);

  it('a resumed run keeps its monitor state again', async () => {
    const monitor = createMonitor({ redis, prefix, runDir: (meta) => join(root, meta.id) });
    const runId = 'resumed';
    await mkdir(join(root, runId), { recursive: true });
    await writeFile(join(root, runId, 'metrics.jsonl'), '{"step": 1, "loss": 1}\n');
    const meta = testRunMeta(runId);
    await monitor.tick(runId, meta, { kind: 'alive' });
    await monitor.retire(runId, 60_000);
    expect(await redis.pttl(`${prefix}:monitor:${runId}`)).toBeGreaterThan(0);
    await monitor.tick(runId, meta, { kind: 'alive' });
    expect(await redis.pttl(`${prefix}:monitor:${runId}`)).toBe(-1);
    expect((await monitor.loadState(runId)).rolling.points).toBe(1);
  });
});
