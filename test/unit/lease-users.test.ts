import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunError } from '../../src/errors.js';
import { createMonitor } from '../../src/monitor/monitor.js';
import { createLeases, type Leases } from '../../src/redis/lease.js';
import { createRunLock } from '../../src/runs/lifecycle/run-lock.js';
import { createSweepStore } from '../../src/sweeps/sweep-store.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { testRunMeta } from '../helpers/run-meta.js';

/** The three former locks now hold leases under their old Redis keys, with their old busy behaviour. */
describe('the run, monitor-tick and sweep locks are leases', () => {
  const prefix = uniquePrefix('lease-users');
  let redis: Redis;
  let leases: Leases;
  let root: string;

  beforeAll(async () => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    leases = createLeases(redis);
    root = await mkdtemp(join(tmpdir(), 'shepherd-lease-users-'));
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
    await deleteKeysWithPrefix(prefix);
    redis.disconnect();
  });

  it('run lock: `<prefix>:lock:run:<name>`, run_busy when it cannot be had, released after the work', async () => {
    const lock = createRunLock({ redis, prefix, ttlMs: 5_000 });
    const held = await leases.acquire(`${prefix}:lock:run:r1`, 5_000);
    const busy = await lock
      .withLock('r1', async () => 'ran', { waitMs: 100 })
      .catch((error: unknown) => error);
    expect(busy).toBeInstanceOf(RunError);
    expect(busy).toMatchObject({ code: 'run_busy', retryable: true });
    await held.release();
    const result = await lock.withLock('r1', async () => {
      expect(await redis.exists(`${prefix}:lock:run:r1`)).toBe(1);
      return 'ran';
    });
    expect(result).toBe('ran');
    expect(await redis.exists(`${prefix}:lock:run:r1`)).toBe(0);
  });

  it('run lock: an error thrown by the work passes through unchanged', async () => {
    const lock = createRunLock({ redis, prefix });
    const failure = new RunError('run_not_found', 'no run r2');
    await expect(
      lock.withLock('r2', async () => {
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(await redis.exists(`${prefix}:lock:run:r2`)).toBe(0);
  });

  it('monitor: a tick while another holds `<prefix>:monitor-lock:<run>` is skipped; the next one runs', async () => {
    const runId = 'm1';
    await mkdir(join(root, runId), { recursive: true });
    await writeFile(join(root, runId, 'metrics.jsonl'), '{"step": 1, "loss": 2.5}\n');
    await writeFile(join(root, runId, 'output.log'), '');
    const monitor = createMonitor({ redis, prefix, runDir: (meta) => join(root, meta.id) });
    const meta = testRunMeta(runId);
    const held = await leases.acquire(`${prefix}:monitor-lock:${runId}`, 5_000);
    const skipped = await monitor.tick(runId, meta, { kind: 'alive' });
    expect(skipped).toMatchObject({ skipped: true, newPoints: 0 });
    await held.release();
    const ran = await monitor.tick(runId, meta, { kind: 'alive' });
    expect(ran.skipped).toBeUndefined();
    expect(ran.newPoints).toBe(1);
    expect(await redis.exists(`${prefix}:monitor-lock:${runId}`)).toBe(0);
  });

  it('sweep store: an update waits for `<prefix>:sweep-lock:<id>` and runs once it is free', async () => {
    const store = createSweepStore({ redis, prefix });
    const sweep = await store.create(
      {
        name: 'lease-sweep',
        threadId: 'web:c:t',
        requester: { id: 'u', name: 'u' },
        script: 'train.py',
        gpus: 1,
        maxHours: 1,
        metric: 'loss',
        mode: 'min',
        canarySteps: 10,
        parallel: 0,
        state: 'pending_approval',
        trials: [],
      },
      new Date(),
    );
    const held = await leases.acquire(`${prefix}:sweep-lock:${sweep.id}`, 5_000);
    let updatedAt = 0;
    const update = store.update(sweep.id, (current) => {
      updatedAt = Date.now();
      return { ...current, state: 'canary' };
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(updatedAt).toBe(0);
    const releasedAt = Date.now();
    await held.release();
    expect((await update).state).toBe('canary');
    expect(updatedAt).toBeGreaterThanOrEqual(releasedAt);
    expect(await redis.exists(`${prefix}:sweep-lock:${sweep.id}`)).toBe(0);
  });
});
