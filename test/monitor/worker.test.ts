import { appendFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { createMonitor } from '../../src/monitor/monitor.js';
import { createMonitorScheduler } from '../../src/monitor/monitor-scheduler.js';
import { createMonitorWorker } from '../../src/monitor/monitor-worker.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const prefix = uniquePrefix('mworker');
const connection = { url: TEST_REDIS_URL, maxRetriesPerRequest: null };
const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
let root = '';

afterAll(async () => {
  await deleteKeysWithPrefix(prefix);
  redis.disconnect();
  if (root !== '') await rm(root, { recursive: true, force: true });
});

async function waitFor(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((done) => setTimeout(done, 50));
  }
}

describe('createMonitorWorker', () => {
  it('retries a failed delivery on the next tick, notes a malformed line once, reports unknown runs', async () => {
    root = await mkdtemp(join(tmpdir(), 'shepherd-mworker-'));
    await mkdir(join(root, 'r1'));
    let text = '';
    for (let step = 0; step < 20; step++) text += `{"step": ${step}, "loss": 1}\n`;
    await writeFile(join(root, 'r1', 'metrics.jsonl'), `${text}oops\n{"step": 20, "loss": 25}\n`);
    const meta = {
      id: 'r1',
      name: 'r1',
      status: 'running',
      launchCount: 1,
      startedAt: new Date().toISOString(),
    } as RunMeta;

    const attempts: string[] = [];
    const delivered: string[] = [];
    const notes: string[] = [];
    const missing: string[] = [];
    let ticks = 0;
    const monitor = createMonitor({ redis, prefix, runDir: (run) => join(root, run.id) });
    const scheduler = createMonitorScheduler({ connection, prefix, intervalS: 1 });
    const worker = createMonitorWorker({
      connection,
      prefix,
      monitor,
      logger: pino({ level: 'silent' }),
      loadRun: async (runId) => (runId === 'r1' ? meta : undefined),
      pollProcess: async () => ({ kind: 'alive' }),
      onIncident: async (incident) => {
        attempts.push(incident.id);
        if (attempts.length === 1) throw new Error('chat platform down');
        delivered.push(incident.id);
      },
      onMalformed: async (_runId, note) => {
        notes.push(note);
      },
      onMissingRun: async (runId) => {
        missing.push(runId);
        await scheduler.stop(runId);
      },
      onTick: async () => {
        ticks++;
      },
    });
    try {
      await scheduler.start('r1');
      await scheduler.start('gone');
      await waitFor(() => delivered.length === 1, 10_000);
      const ticksAtDelivery = ticks;
      await appendFile(join(root, 'r1', 'metrics.jsonl'), 'also bad\n{"step": 21, "loss": 1}\n');
      await waitFor(() => ticks >= ticksAtDelivery + 3, 10_000);
      expect(attempts).toHaveLength(2);
      expect(attempts[0]).toBe(attempts[1]);
      expect(delivered).toEqual([attempts[0]]);
      expect(notes).toHaveLength(1);
      expect(notes[0]).toContain('oops');
      expect(missing).toEqual(['gone']);
      expect(await scheduler.listRunIds()).toEqual(['r1']);
    } finally {
      await worker.close();
      await scheduler.queue.obliterate({ force: true });
      await scheduler.close();
    }
  }, 30_000);
});
