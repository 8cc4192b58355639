import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRunQueries } from '../../src/runs/run-queries.js';
import { ALICE, BOB, createHarness, type Harness } from './harness.js';

/* The one read door into runs/: records, threads, reports and files, on a real store in Redis. */

let harness: Harness;

beforeEach(async () => {
  harness = await createHarness();
});

afterEach(async () => {
  await harness.cleanup();
});

const SCRIPT = 'print("hello")\n';

async function createRuns() {
  const { service } = harness.runtime;
  const first = await service.createRun({
    name: 'first',
    script: SCRIPT,
    gpus: 1,
    threadId: 'web:local:t1',
    requester: ALICE,
  });
  const second = await service.createRun({
    name: 'second',
    script: SCRIPT,
    gpus: 2,
    threadId: 'web:local:t2',
    requester: BOB,
  });
  const third = await service.createRun({
    name: 'third',
    script: SCRIPT,
    gpus: 1,
    threadId: 'web:local:t1',
    requester: ALICE,
  });
  return { first, second, third };
}

describe('RunQueries', () => {
  it('reads runs by id, name, thread and all, from the records the run service wrote', async () => {
    const { first, second, third } = await createRuns();
    const { runtime } = harness;
    const queries = createRunQueries({
      store: runtime.store,
      executor: runtime.executor,
      allocator: runtime.allocator,
    });

    expect((await queries.get(second.id)).name).toBe('second');
    expect((await queries.find('third')).id).toBe(third.id);
    expect((await queries.list()).map((meta) => meta.id).sort()).toEqual(
      [first.id, second.id, third.id].sort(),
    );
    expect((await queries.inThread('web:local:t1')).map((meta) => meta.name).sort()).toEqual([
      'first',
      'third',
    ]);
    expect(await queries.inThread('web:local:nobody')).toEqual([]);
    await expect(queries.find('missing')).rejects.toThrow(/missing/);
    expect(await queries.readScript(first.id)).toBe(SCRIPT);
    expect(queries.runDirectory(first.id)).toBe(runtime.store.runDir(first.id));
  });

  it('reports status, the resume point and the cluster without taking a run lock', async () => {
    const { first } = await createRuns();
    const queries = harness.runtime;
    expect(await queries.readResume(first.id)).toBeUndefined();
    await writeFile(
      path.join(queries.runDirectory(first.id), 'resume.json'),
      JSON.stringify({ step: 40, checkpoint: 'ckpt-40' }),
    );
    expect(await queries.readResume(first.id)).toMatchObject({ step: 40, checkpoint: 'ckpt-40' });

    const report = await queries.status('first');
    expect(report.meta.id).toBe(first.id);
    expect(report.resume).toMatchObject({ step: 40, checkpoint: 'ckpt-40' });
    // Pending approval: no process yet, so the executor is not asked.
    expect(report.process).toBeUndefined();

    const cluster = await queries.clusterInfo();
    expect(cluster.gpusTotal).toBe(4);
    expect(cluster.gpusFree).toBe(4);
    expect(cluster.gpusByRun).toEqual([]);
  });
});
