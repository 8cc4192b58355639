import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { createRunsRuntime } from '../../src/app/create-runs.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/logger.js';
import type { Executor, ProcessState } from '../../src/runs/executor.js';
import type { RunEvent } from '../../src/runs/lifecycle/run-events.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

/**
 * Wall-time chains through the real run service on real Redis, with a Slurm-kind executor port that
 * reports each job's end as the test says (the CI-cluster test, slurm-chain-flow, runs a real chain).
 */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function chainRuntime() {
  const prefix = uniquePrefix('chain');
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'shepherd-chain-'));
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  cleanups.push(async () => {
    redis.disconnect();
    await deleteKeysWithPrefix(prefix);
    await rm(dataDir, { recursive: true, force: true });
  });
  const jobs = new Map<string, ProcessState>();
  const launches: RunMeta[] = [];
  const executor: Executor = {
    kind: 'slurm',
    allocatesGpus: true,
    launch: async ({ meta }) => {
      launches.push(meta);
      const jobId = String(launches.length);
      jobs.set(jobId, { kind: 'alive' });
      return { jobId, segment: { index: meta.nextSegment ?? 1, of: 3 } };
    },
    poll: async (runs) =>
      new Map(runs.map((meta) => [meta.id, jobs.get(meta.jobId ?? '') ?? { kind: 'unknown' }])),
    terminate: async () => ({ kind: 'signaled', signal: 'SIGTERM' }),
    clusterInfo: async () => ({ executor: 'slurm', gpusTotal: 0, gpusFree: 0 }),
  };
  const events: RunEvent[] = [];
  const config = loadConfig({
    SHEPHERD_DATA_DIR: dataDir,
    SHEPHERD_QUEUE_PREFIX: prefix,
    SHEPHERD_GPUS: '0',
    SHEPHERD_LOG_LEVEL: 'silent',
  });
  const runtime = await createRunsRuntime({
    config,
    redis,
    logger: createLogger('silent'),
    environment: process.env,
    executor,
    onEvent: (event) => {
      events.push(event);
    },
  });
  return { runtime, jobs, launches, events };
}

const timeout: ProcessState = { kind: 'signaled', signal: 'SIGTERM', crashClass: 'timeout' };
const requester = { id: 'U-alice', name: 'alice' };

describe('wall-time chains in the run service', () => {
  it('submits the next segment when one ends at its limit, and pauses after the last', async () => {
    const { runtime, jobs, launches, events } = await chainRuntime();
    const { service } = runtime;
    const created = await service.createRun({
      name: 'long',
      script: 'print(1)\n',
      gpus: 0,
      threadId: 'web:c:t',
      requester,
      maxHours: 3,
    });
    const first = await service.approve(created.id, { id: 'U-bob', name: 'bob' });
    expect(first.segment).toEqual({ index: 1, of: 3 });
    expect(events.map((event) => event.message)).toContain(
      'long is running on Slurm (script v1, segment 1 of 3)',
    );

    jobs.set('1', timeout);
    await service.refresh();
    const second = await runtime.find('long');
    expect(second).toMatchObject({
      status: 'running',
      launchCount: 2,
      jobId: '2',
      segment: { index: 2, of: 3 },
    });
    expect(second.nextSegment).toBeUndefined();
    expect(launches[1]?.nextSegment).toBe(2);
    expect(events.map((event) => event.message)).toEqual(
      expect.arrayContaining([
        "long: segment 1 of 3 reached the partition's time limit; submitting segment 2 of 3 under the same approval, resuming from scratch (no checkpoint yet)",
        'long is running on Slurm (script v1, segment 2 of 3)',
      ]),
    );

    jobs.set('2', { kind: 'signaled', signal: 'SIGUSR1', exitCode: 0, crashClass: 'timeout' });
    await service.refresh();
    expect(await runtime.find('long')).toMatchObject({ status: 'running', segment: { index: 3, of: 3 } });

    jobs.set('3', timeout);
    await service.refresh();
    const paused = await runtime.find('long');
    expect(paused.status).toBe('paused');
    expect(launches).toHaveLength(3);
    expect(events.at(-1)?.type).toBe('run-time-limit');
  });

  it('a segment that crashes ends the chain as a failure', async () => {
    const { runtime, jobs, launches } = await chainRuntime();
    const { service } = runtime;
    const created = await service.createRun({
      name: 'crashy',
      script: 'print(1)\n',
      gpus: 0,
      threadId: 'web:c:t',
      requester,
      maxHours: 3,
    });
    await service.approve(created.id, { id: 'U-bob', name: 'bob' });
    jobs.set('1', { kind: 'exited', exitCode: 1 });
    await service.refresh();
    expect((await runtime.find('crashy')).status).toBe('failed');
    expect(launches).toHaveLength(1);
  });
});
