import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMonitor } from '../../src/monitor/monitor.js';
import type { ProcessState } from '../../src/runs/executor.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

/*
 * The corpus replayed as real runs: test/fixtures/curves/replay.py logs a curve through the Python helper
 * at (a multiple of) its own pace while the real monitor ticks on the wall clock.
 */

const prefix = uniquePrefix('replay');
let redis: Redis;
let root: string;

beforeAll(async () => {
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  root = await mkdtemp(join(tmpdir(), 'shepherd-replay-'));
});

afterAll(async () => {
  redis.disconnect();
  await deleteKeysWithPrefix(prefix);
  await rm(root, { recursive: true, force: true });
});

async function replayAsRun(curve: string, limit: number): Promise<string[]> {
  const dir = join(root, curve);
  await mkdir(dir, { recursive: true });
  const log = await open(join(dir, 'output.log'), 'a');
  const child = spawn('python3', ['-u', resolve('test/fixtures/curves/replay.py'), curve], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      SHEPHERD_RUN_DIR: dir,
      SHEPHERD_RUN_ID: curve,
      PYTHONPATH: resolve('src/runs/python'),
      REPLAY_SPEED: '400',
      REPLAY_LIMIT: String(limit),
    },
    stdio: ['ignore', log.fd, log.fd],
  });
  await log.close();
  const tracked: { state: ProcessState } = { state: { kind: 'alive' } };
  child.on('exit', (code) => {
    tracked.state = { kind: 'exited', exitCode: code ?? 1 };
  });
  const now = new Date().toISOString();
  const meta: RunMeta = {
    schemaVersion: 1,
    id: curve,
    name: curve,
    threadId: 'web:c:t',
    requester: { id: 'u', name: 'u' },
    status: 'running',
    gpus: 0,
    gpuIndices: [],
    maxHours: 1,
    scriptVersion: 1,
    executor: 'local',
    launchCount: 1,
    createdAt: now,
    updatedAt: now,
    startedAt: now,
  };
  const monitor = createMonitor({ redis, prefix, runDir: () => dir });
  const kinds: string[] = [];
  for (;;) {
    const observed = tracked.state;
    const result = await monitor.tick(curve, meta, observed);
    kinds.push(...result.incidents.map((incident) => incident.kind));
    await monitor.ack(
      curve,
      result.incidents.map((incident) => incident.id),
    );
    if (observed.kind === 'exited' && !result.backlog) break;
    await new Promise((done) => setTimeout(done, 300));
  }
  return kinds;
}

describe('corpus curves replayed as real runs', () => {
  it('a healthy DPO run is quiet until its finish summary', { timeout: 60_000 }, async () => {
    expect(await replayAsRun('healthy_dpo_margin', 600)).toEqual(['finished']);
  });

  it('a run whose loss turns NaN gets the NaN alert', { timeout: 60_000 }, async () => {
    expect((await replayAsRun('incident_nan', 620)).sort()).toEqual(['finished', 'nan']);
  });
});
