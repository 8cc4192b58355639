import { access } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ALICE, BOB, createHarness, fixture, groupExists, type Harness, waitFor } from './harness.js';

let harness: Harness;
beforeEach(async () => {
  harness = await createHarness();
});
afterEach(async () => {
  await harness.cleanup();
});

const thread = 'web:local:t2';

describe('bot restarts and the GPU queue', () => {
  it('re-attaches to a run that is still alive, which later completes correctly', async () => {
    const created = await harness.runtime.service.createRun({
      name: 'survivor',
      script: await fixture('healthy_train.py'),
      gpus: 2,
      threadId: thread,
      requester: ALICE,
      config: { steps: 60, sleep: 0.04 },
    });
    const running = await harness.runtime.service.approve(created.id, BOB);

    // A second instance on the same data dir and Redis: the "restarted bot".
    const restarted = await harness.restart();
    const report = await restarted.runtime.service.reconcile();
    expect(report.reattached.map((meta) => meta.id)).toEqual([created.id]);
    expect(report.finalized).toEqual([]);
    expect(report.releasedStale).toEqual([]);
    const status = await restarted.runtime.status(created.id);
    expect(status.meta.status).toBe('running');
    expect(status.process).toEqual({ kind: 'alive' });
    expect((await restarted.runtime.clusterInfo()).gpusFree).toBe(2);

    const done = await waitFor(async () => {
      await restarted.runtime.service.refresh();
      const meta = await restarted.runtime.find(created.id);
      return meta.status === 'completed' ? meta : undefined;
    });
    expect(done.exitCode).toBe(0);
    expect(done.lastStep).toBe(60);
    expect(groupExists(running.pgid ?? -1)).toBe(false);
    expect(restarted.events.at(-1)).toMatchObject({
      type: 'run-ended',
      message: 'survivor completed at step 60',
    });
    expect((await restarted.runtime.clusterInfo()).gpusFree).toBe(4);
  });

  it('finalises runs that ended while the bot was down from their exit-code file', async () => {
    const { service, store } = harness.runtime;
    const crash = await service.createRun({
      name: 'crashed-while-down',
      script: await fixture('crash_train.py'),
      gpus: 1,
      threadId: thread,
      requester: ALICE,
    });
    const healthy = await service.createRun({
      name: 'finished-while-down',
      script: await fixture('healthy_train.py'),
      gpus: 1,
      threadId: thread,
      requester: ALICE,
      config: { steps: 5, sleep: 0.01 },
    });
    await service.approve(crash.id, BOB);
    await service.approve(healthy.id, BOB);
    // Nobody refreshes: the "bot" is down while both processes end.
    for (const id of [crash.id, healthy.id]) {
      await waitFor(() =>
        access(path.join(store.runDir(id), 'exit_status.json')).then(
          () => true,
          () => false,
        ),
      );
    }
    expect((await harness.runtime.find(crash.id)).status).toBe('running');

    const restarted = await harness.restart();
    const report = await restarted.runtime.service.reconcile();
    expect(report.finalized.map((meta) => meta.name).sort()).toEqual([
      'crashed-while-down',
      'finished-while-down',
    ]);
    const failed = await restarted.runtime.find(crash.id);
    expect(failed).toMatchObject({ status: 'failed', exitCode: 1, statusReason: 'exit 1' });
    const completed = await restarted.runtime.find(healthy.id);
    expect(completed).toMatchObject({ status: 'completed', exitCode: 0, lastStep: 5 });
    expect((await restarted.runtime.allocator.owners()).size).toBe(0);
  });

  it('a pid reused by another process is not mistaken for the run', async () => {
    const { service, store, executor } = harness.runtime;
    const created = await service.createRun({
      name: 'ghost',
      script: await fixture('healthy_train.py'),
      gpus: 0,
      threadId: thread,
      requester: ALICE,
    });
    // Pretend the run's recorded pid is this (alive) test process, started at another time.
    const ghost = {
      ...(await store.readMeta(created.id)),
      status: 'running' as const,
      pid: process.pid,
      pgid: process.pid,
      processStartTime: '1',
      launchCount: 1,
    };
    const state = (await executor.poll([ghost])).get(created.id);
    expect(state?.kind).toBe('unknown');
  });

  it('frees stale GPU claims at start-up', async () => {
    const { service, allocator } = harness.runtime;
    const created = await service.createRun({
      name: 'stale',
      script: await fixture('healthy_train.py'),
      gpus: 2,
      threadId: thread,
      requester: ALICE,
    });
    // A claim left behind by a crash between allocation and launch.
    expect(await allocator.allocate(created.id, 2)).toMatchObject({ ok: true });
    await allocator.allocate('r-0101-dead', 1);
    const report = await service.reconcile();
    expect(report.releasedStale.sort()).toEqual([created.id, 'r-0101-dead'].sort());
    expect(await allocator.freeCount()).toBe(4);
  });

  it('two 3-GPU runs on 4 GPUs: the second waits queued, then starts when the first ends', async () => {
    const { service } = harness.runtime;
    const first = await service.createRun({
      name: 'big-one',
      script: await fixture('healthy_train.py'),
      gpus: 3,
      threadId: thread,
      requester: ALICE,
      config: { steps: 30, sleep: 0.04 },
    });
    const second = await service.createRun({
      name: 'big-two',
      script: await fixture('healthy_train.py'),
      gpus: 3,
      threadId: thread,
      requester: ALICE,
      config: { steps: 3, sleep: 0.01 },
    });
    const firstRunning = await service.approve(first.id, BOB);
    expect(firstRunning.gpuIndices).toEqual([0, 1, 2]);
    const waiting = await service.approve(second.id, BOB);
    expect(waiting.status).toBe('queued');
    expect(waiting.statusReason).toBe('waiting for 3 GPUs, 1 free');
    expect(harness.events.at(-1)).toMatchObject({
      type: 'run-waiting',
      message: 'big-two is queued: waiting for 3 GPUs, 1 free',
    });
    // A refresh while the first still runs changes nothing and does not repeat the message.
    await service.refresh();
    expect((await harness.runtime.find(second.id)).status).toBe('queued');
    expect(harness.events.filter((event) => event.type === 'run-waiting')).toHaveLength(1);

    const started = await waitFor(async () => {
      await service.refresh();
      const meta = await harness.runtime.find(second.id);
      return meta.status === 'running' || meta.status === 'completed' ? meta : undefined;
    });
    expect((await harness.runtime.find(first.id)).status).toBe('completed');
    expect(started.launchCount).toBe(1);
    const output = await waitFor(async () => {
      const text = await harness.runFile(second.id, 'output.log');
      return text.includes('CUDA_VISIBLE_DEVICES=') ? text : undefined;
    });
    expect(output).toMatch(/CUDA_VISIBLE_DEVICES='\d,\d,\d'/);
    const startedEvent = harness.events.find(
      (event) => event.type === 'run-started' && event.meta.id === second.id,
    );
    expect(startedEvent?.message).toMatch(/^big-two is running on GPUs \d,\d,\d \(script v1\)$/);
  });
});
