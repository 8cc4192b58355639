import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { createMonitor } from '../../src/monitor/monitor.js';
import { createTickHandler } from '../../src/monitor/monitor-worker.js';
import { createRunWakeups } from '../../src/monitor/run-wakeups.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { testRunMeta } from '../helpers/run-meta.js';

const prefix = uniquePrefix('wakelease');
const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
const root = mkdtempSync(join(tmpdir(), 'shepherd-wakelease-'));
const logger = pino({ level: 'silent' });
afterAll(async () => {
  await deleteKeysWithPrefix(prefix);
  redis.disconnect();
  rmSync(root, { recursive: true, force: true });
});

describe('two monitor processes woken by the same run', () => {
  it('never evaluate it at once: the lease has one holder at a time, and both still evaluate', async () => {
    const meta = testRunMeta('shared', { name: 'shared' });
    let holders = 0;
    let mostHolders = 0;
    const evaluations = [0, 0];
    // Called inside the tick's lease: counts who is inside at the same moment.
    const countingPolicy = (worker: 0 | 1) => ({
      async load() {
        holders += 1;
        evaluations[worker] = (evaluations[worker] ?? 0) + 1;
        mostHolders = Math.max(mostHolders, holders);
        await new Promise((resolve) => setTimeout(resolve, 40));
        holders -= 1;
        return { rules: [], mutes: [] };
      },
    });
    const wakeupsOf = (worker: 0 | 1) => {
      const monitor = createMonitor({ redis, prefix, runDir: () => root, policy: countingPolicy(worker) });
      const tickRun = createTickHandler({
        monitor,
        logger,
        loadRun: async () => meta,
        pollProcess: async () => ({ kind: 'alive' }),
        onIncident: async () => undefined,
      });
      return createRunWakeups({
        evaluate: async (runId) => {
          const outcome = await tickRun(runId);
          return 'skipped' in outcome && outcome.skipped === 'locked' ? 'locked' : 'done';
        },
        maxEvalsPerS: 10,
        logger,
      });
    };
    const both = [wakeupsOf(0), wakeupsOf(1)];
    for (const wakeups of both) wakeups.follow(meta.id, root);
    const writer = spawn('/usr/bin/python3', [
      '-c',
      `import json, time, sys
out = open(sys.argv[1], "a", buffering=1)
for step in range(400):
    out.write(json.dumps({"step": step, "loss": 1.0 / (1 + step)}) + "\\n")
    time.sleep(0.005)`,
      join(root, 'metrics.jsonl'),
    ]);
    expect(await new Promise((resolve) => writer.on('close', resolve))).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await Promise.all(both.map((wakeups) => wakeups.close()));
    expect(mostHolders).toBe(1);
    expect(evaluations[0]).toBeGreaterThan(0);
    expect(evaluations[1]).toBeGreaterThan(0);
  });
});
