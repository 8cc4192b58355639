import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RunError } from '../../src/errors.js';
import {
  ALICE,
  BOB,
  createHarness,
  fixture,
  groupExists,
  type Harness,
  metricSteps,
  waitFor,
} from './harness.js';

let harness: Harness;
beforeEach(async () => {
  harness = await createHarness();
});
afterEach(async () => {
  await harness.cleanup();
});

const thread = 'web:local:t1';

describe('run lifecycle on the local executor', () => {
  it('launches with the granted CUDA_VISIBLE_DEVICES, writes metrics and completes', async () => {
    const { service } = harness.runtime;
    const created = await service.createRun({
      name: 'Healthy Run!',
      script: await fixture('healthy_train.py'),
      gpus: 2,
      threadId: thread,
      requester: ALICE,
      config: { steps: 20, sleep: 0.03 },
    });
    expect(created.status).toBe('pending_approval');
    expect(created.name).toBe('healthy-run');
    expect(created.id).toMatch(/^r-\d{4}-[0-9a-f]{4}$/);

    const running = await service.approve(created.id, BOB);
    expect(running.status).toBe('running');
    expect(running.gpuIndices).toEqual([0, 1]);
    expect(running.pid).toBeGreaterThan(0);
    expect(harness.events.map((event) => event.type)).toContain('run-started');

    const info = await harness.runtime.clusterInfo();
    expect(info.gpusTotal).toBe(4);
    expect(info.gpusFree).toBe(2);
    expect(info.gpusByRun).toEqual([{ runId: created.id, name: 'healthy-run', gpus: 2, indices: [0, 1] }]);

    const ended = await waitFor(async () => {
      await service.refresh();
      const meta = await harness.runtime.find('healthy-run');
      return meta.status === 'completed' ? meta : undefined;
    });
    expect(ended.exitCode).toBe(0);
    expect(ended.lastStep).toBe(20);
    expect(ended.gpuIndices).toEqual([]);
    expect((await harness.runtime.clusterInfo()).gpusFree).toBe(4);

    const output = await harness.runFile(created.id, 'output.log');
    expect(output).toContain("CUDA_VISIBLE_DEVICES='0,1'");
    expect(output).toMatch(/=== launch 1 at .* \(script v1, gpus 0,1\) ===/);
    expect(metricSteps(await harness.runFile(created.id, 'metrics.jsonl'))).toEqual(
      Array.from({ length: 20 }, (_, index) => index + 1),
    );
    const status = await harness.runtime.status(created.id);
    expect(status.lastMetrics.at(-1)?.step).toBe(20);
    expect(status.lastMetrics.at(-1)?.values.loss).toBeGreaterThan(0);
    expect(status.logTail.at(-1)).toContain('ended: exit code 0');
    expect(harness.events.at(-1)).toMatchObject({
      type: 'run-ended',
      message: 'healthy-run completed at step 20',
    });

    const audit = (await harness.runFile(created.id, 'audit.jsonl'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { from: string | null; to: string; by: unknown });
    expect(audit.map((entry) => `${entry.from}->${entry.to}`)).toEqual([
      'null->pending_approval',
      'pending_approval->queued',
      'queued->running',
      'running->completed',
    ]);
    expect(audit[1]?.by).toEqual(BOB);
    expect(audit[3]?.by).toBe('system');
    const stream = await harness.runtime.audit.recent(10);
    expect(stream.filter((entry) => entry.runId === created.id)).toHaveLength(4);
  });

  it('gpus 0 runs on CPU with an empty CUDA_VISIBLE_DEVICES', async () => {
    const { service } = harness.runtime;
    const created = await service.createRun({
      name: 'cpu',
      script: await fixture('healthy_train.py'),
      gpus: 0,
      threadId: thread,
      requester: ALICE,
      config: { steps: 3, sleep: 0.01 },
    });
    await service.approve(created.id, BOB);
    await waitFor(async () => {
      await service.refresh();
      return (await harness.runtime.find('cpu')).status === 'completed';
    });
    expect(await harness.runFile(created.id, 'output.log')).toContain("CUDA_VISIBLE_DEVICES=''");
  });

  it('pause checkpoints, frees GPUs and ends the group; resume continues from the saved step', async () => {
    const { service } = harness.runtime;
    const created = await service.createRun({
      name: 'pausable',
      script: await fixture('healthy_train.py'),
      gpus: 3,
      threadId: thread,
      requester: ALICE,
      config: { steps: 400, sleep: 0.02, checkpoint_every: 1000 },
    });
    const running = await service.approve(created.id, BOB);
    await waitFor(
      async () => metricSteps(await harness.runFile(created.id, 'metrics.jsonl').catch(() => '')).length >= 5,
    );

    const paused = await service.pause('pausable', ALICE);
    expect(paused.status).toBe('paused');
    expect(paused.gpuIndices).toEqual([]);
    expect(groupExists(running.pgid ?? -1)).toBe(false);
    expect((await harness.runtime.clusterInfo()).gpusFree).toBe(4);
    const resume = (await harness.runtime.status(created.id)).resume;
    const savedStep = resume?.step;
    expect(typeof savedStep).toBe('number');
    expect(savedStep).toBeGreaterThanOrEqual(5);
    // The on_stop checkpoint is the last completed step.
    expect(savedStep).toBe(metricSteps(await harness.runFile(created.id, 'metrics.jsonl')).at(-1));
    expect(harness.events.find((event) => event.type === 'run-paused')?.message).toContain(
      `at step ${savedStep}`,
    );

    const linesBefore = metricSteps(await harness.runFile(created.id, 'metrics.jsonl')).length;
    const resumed = await service.resume('pausable', BOB);
    expect(resumed.status).toBe('running');
    expect(resumed.launchCount).toBe(2);
    await waitFor(
      async () => metricSteps(await harness.runFile(created.id, 'metrics.jsonl')).length > linesBefore + 2,
    );
    const steps = metricSteps(await harness.runFile(created.id, 'metrics.jsonl'));
    expect(steps[linesBefore]).toBe((savedStep as number) + 1);

    const stopped = await service.stop('pausable', BOB);
    expect(stopped.status).toBe('stopped');
    expect(groupExists(resumed.pgid ?? -1)).toBe(false);
    expect(stopped.endedAt).toBeDefined();

    const output = await harness.runFile(created.id, 'output.log');
    expect(output.match(/=== launch \d+ at/g)).toHaveLength(2);
    expect(output).toMatch(/=== launch 1 at .*\(script v1, gpus 0,1,2\) ===/);
    expect(output).toMatch(/=== launch 2 at .*\(script v1, gpus 0,1,2\) ===/);
    expect(output).toContain('received SIGTERM');
    expect(output.indexOf('launch 1 at')).toBeLessThan(output.indexOf('launch 2 at'));
    await expect(service.resume('pausable', BOB)).rejects.toMatchObject({ code: 'illegal_transition' });
  });

  it('a crash is marked failed with exit code 1 and its traceback stays in output.log', async () => {
    const { service } = harness.runtime;
    const created = await service.createRun({
      name: 'crashy',
      script: await fixture('crash_train.py'),
      gpus: 1,
      threadId: thread,
      requester: ALICE,
    });
    await service.approve(created.id, BOB);
    const failed = await waitFor(async () => {
      await service.refresh();
      const meta = await harness.runtime.find(created.id);
      return meta.status === 'failed' ? meta : undefined;
    });
    expect(failed.exitCode).toBe(1);
    expect(failed.statusReason).toBe('exit 1');
    expect(failed.gpuIndices).toEqual([]);
    expect(harness.events.at(-1)).toMatchObject({ type: 'run-ended', message: 'crashy failed (exit 1)' });
    const output = await harness.runFile(created.id, 'output.log');
    expect(output).toContain('Traceback (most recent call last)');
    expect(output).toContain('RuntimeError: simulated crash in forward pass at step 3');
    expect((await harness.runtime.clusterInfo()).gpusFree).toBe(4);
  });

  it('stop escalates to SIGKILL when the script ignores SIGTERM, leaving no process behind', async () => {
    const { service } = harness.runtime;
    const created = await service.createRun({
      name: 'stubborn',
      script: await fixture('slow_train.py'),
      gpus: 1,
      threadId: thread,
      requester: ALICE,
      config: { ignore_sigterm: true },
    });
    const running = await service.approve(created.id, BOB);
    await waitFor(
      async () => (await harness.runFile(created.id, 'metrics.jsonl').catch(() => '')).length > 0,
    );
    const started = Date.now();
    const stopped = await service.stop(created.id, BOB);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_900);
    expect(stopped.status).toBe('stopped');
    expect(groupExists(running.pgid ?? -1)).toBe(false);
  });

  it('ten concurrent approvals launch exactly once', async () => {
    const { service } = harness.runtime;
    const second = await harness.restart();
    const created = await service.createRun({
      name: 'contended',
      script: await fixture('slow_train.py'),
      gpus: 1,
      threadId: thread,
      requester: ALICE,
    });
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, index) =>
        (index % 2 === 0 ? service : second.runtime.service).approve(created.id, BOB),
      ),
    );
    const fulfilled = results.filter((result) => result.status === 'fulfilled');
    expect(fulfilled).toHaveLength(1);
    for (const result of results) {
      if (result.status === 'rejected') {
        expect(result.reason).toBeInstanceOf(RunError);
        expect((result.reason as RunError).code).toBe('illegal_transition');
      }
    }
    const meta = await harness.runtime.find(created.id);
    expect(meta.launchCount).toBe(1);
    expect(meta.status).toBe('running');
    const output = await harness.runFile(created.id, 'output.log');
    expect(output.match(/=== launch/g)).toHaveLength(1);
    expect((await harness.runtime.allocator.owners()).size).toBe(1);
    await service.stop(created.id, BOB);
  });

  it('approve racing stop has one outcome', async () => {
    const { service } = harness.runtime;
    const created = await service.createRun({
      name: 'racy',
      script: await fixture('slow_train.py'),
      gpus: 1,
      threadId: thread,
      requester: ALICE,
    });
    const [approved, stopped] = await Promise.allSettled([
      service.approve(created.id, BOB),
      service.stop(created.id, ALICE),
    ]);
    expect(stopped.status).toBe('fulfilled');
    const final = await harness.runtime.find(created.id);
    expect(final.status).toBe('stopped');
    // Either approve won (one launch, then stopped) or stop won (never launched, approve refused).
    if (approved.status === 'fulfilled') {
      expect(final.launchCount).toBe(1);
      expect(groupExists(approved.value.pgid ?? -1)).toBe(false);
    } else {
      expect(final.launchCount).toBe(0);
      expect(approved.reason).toMatchObject({ code: 'illegal_transition' });
    }
    expect((await harness.runtime.allocator.owners()).size).toBe(0);
  });

  it('update_script archives train_v1.py, returns a diff, and restart runs the new version', async () => {
    const { service } = harness.runtime;
    const original = await fixture('crash_train.py');
    const created = await service.createRun({
      name: 'fixme',
      script: original,
      gpus: 1,
      threadId: thread,
      requester: ALICE,
    });
    await service.approve(created.id, BOB);
    await waitFor(async () => {
      await service.refresh();
      return (await harness.runtime.find(created.id)).status === 'failed';
    });

    const fixed = original.replace('if step == 3:', 'if step == -1:');
    const update = await service.updateScript(created.id, fixed, 'system', 'skip the crash');
    expect(update.archivedAs).toBe('train_v1.py');
    expect(update.meta.scriptVersion).toBe(2);
    expect(update.diff).toContain('--- train_v1.py');
    expect(update.diff).toContain('+++ train_v2.py');
    expect(update.diff).toContain('-    if step == 3:');
    expect(update.diff).toContain('+    if step == -1:');
    expect(await harness.runFile(created.id, 'train_v1.py')).toBe(original);
    expect(await harness.runFile(created.id, 'train.py')).toBe(fixed);
    expect((await harness.runtime.find(created.id)).status).toBe('failed');

    const relaunched = await service.restartWithCurrentScript(created.id, BOB);
    expect(relaunched.status).toBe('running');
    const done = await waitFor(async () => {
      await service.refresh();
      const meta = await harness.runtime.find(created.id);
      return meta.status === 'completed' ? meta : undefined;
    });
    expect(done.exitCode).toBe(0);
    const output = await harness.runFile(created.id, 'output.log');
    expect(output).toMatch(/=== launch 2 at .*\(script v2, gpus 0\) ===/);
    const again = await service.updateScript(created.id, `${fixed}\n# v3\n`, BOB, 'too late').catch((e) => e);
    expect(again).toMatchObject({ code: 'run_finished' });
  });

  it('refuses bad requests with clear messages', async () => {
    const { service } = harness.runtime;
    const script = await fixture('healthy_train.py');
    const base = { script, threadId: thread, requester: ALICE };
    await expect(service.createRun({ ...base, name: 'huge', gpus: 8 })).rejects.toThrow(
      'asked for 8 GPUs but this host has 4',
    );
    await expect(service.createRun({ ...base, name: 'huge', gpus: 8 })).rejects.toMatchObject({
      code: 'gpus_unavailable',
    });
    await expect(service.createRun({ ...base, name: 'half', gpus: 1.5 })).rejects.toMatchObject({
      code: 'invalid_run',
    });
    await expect(service.createRun({ ...base, name: 'neg', gpus: -1 })).rejects.toMatchObject({
      code: 'invalid_run',
    });
    const one = await service.createRun({ ...base, name: 'dup', gpus: 0 });
    const two = await service.createRun({ ...base, name: 'dup', gpus: 0 });
    expect([one.name, two.name]).toEqual(['dup', 'dup-2']);
    await expect(harness.runtime.status('nope')).rejects.toThrow(
      /^no run named nope; runs: (dup-2, dup|dup, dup-2)$/,
    );
    await expect(service.pause('dup', BOB)).rejects.toMatchObject({ code: 'illegal_transition' });
    const rejected = await service.reject('dup', BOB, 'not now');
    expect(rejected.status).toBe('rejected');
    await expect(
      service.approve('dup-2', BOB).then(() => service.approve('dup-2', BOB)),
    ).rejects.toMatchObject({
      code: 'illegal_transition',
    });
    // A rejected run's name can be reused.
    const three = await service.createRun({ ...base, name: 'dup', gpus: 0 });
    expect(three.name).toBe('dup');
  });
});
