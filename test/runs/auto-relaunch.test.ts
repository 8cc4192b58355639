import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { trainingChild, trainScript } from '../helpers/relaunch-script.js';
import { ALICE, BOB, createHarness, type Harness, waitFor } from './harness.js';

/**
 * Issue 22: the relaunch decision is applied once, however many workers see the ending. Two independent
 * runtimes on the same data directory and Redis prefix (two worker processes) refresh at the same time
 * after the training process was SIGKILLed: one relaunch, one audit entry, one thread line.
 */

let harness: Harness | undefined;

afterEach(async () => {
  for (const meta of (await harness?.runtime.store.listRuns()) ?? []) {
    if (meta.status === 'running') await harness?.runtime.service.stop(meta.id, 'system');
  }
  await harness?.cleanup();
  harness = undefined;
});

describe('automatic relaunch with several workers', () => {
  it('two workers that see the same SIGKILL relaunch the run once; --hours count the first launch', async () => {
    harness = await createHarness({ SHEPHERD_PYTHON: '/usr/bin/python3', SHEPHERD_GPUS: '0' });
    const second = await harness.restart();
    const { service } = harness.runtime;
    const runs = harness.runtime;
    const created = await service.createRun({
      name: 'twice',
      script: trainScript({ steps: 100_000 }),
      gpus: 0,
      threadId: 'web:local:t1',
      requester: ALICE,
      maxHours: 1,
    });
    const running = await service.approve(created.id, BOB);
    const runDir = harness.runtime.store.runDir(created.id);
    await waitFor(
      () =>
        readFileSync(path.join(runDir, 'output.log'), 'utf8').includes('starting from scratch') || undefined,
    );
    const child = await waitFor(() => trainingChild(running.pid ?? 0), 10_000, 'the training process');
    process.kill(child, 'SIGKILL');
    await waitFor(async () => {
      const state = (await harness?.runtime.executor.poll([running]))?.get(created.id);
      return state?.kind === 'signaled' ? state : undefined;
    });

    // Both workers refresh at once; only the one holding the run's lock may decide.
    await Promise.all([service.refresh(), second.runtime.service.refresh(), service.refresh()]);
    const relaunched = await waitFor(async () => {
      await Promise.all([service.refresh(), second.runtime.service.refresh()]);
      const meta = await runs.find(created.id);
      return meta.launchCount === 2 && meta.status === 'running' ? meta : undefined;
    });
    // Refreshes after the relaunch find a live process: nothing more happens.
    await Promise.all([service.refresh(), second.runtime.service.refresh()]);
    const after = await runs.find(created.id);
    expect(after.launchCount).toBe(2);
    expect(after.autoRelaunches).toHaveLength(1);
    expect(relaunched.priorHours).toBeGreaterThan(0);
    // The new launch's deadline is what is left of the hour, not a whole new hour.
    const left = Date.parse(relaunched.deadlineAt ?? '') - Date.parse(relaunched.startedAt ?? '');
    expect(left).toBeLessThan(3_600_000 - (relaunched.priorHours ?? 0) * 3_600_000 + 5_000);

    const audit = readFileSync(path.join(runDir, 'audit.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { from: string; to: string; by: unknown; reason?: string });
    const relaunches = audit.filter((entry) => entry.reason?.startsWith('automatic relaunch'));
    expect(relaunches).toHaveLength(1);
    expect(relaunches[0]).toMatchObject({ from: 'running', to: 'queued', by: 'system' });
    expect(relaunches[0]?.reason).toMatch(
      /^automatic relaunch 1 of 2: killed (at step \d+ )?\(SIGKILL, no stop requested\); from (step \d+|scratch)$/,
    );
    const lines = [...harness.events, ...second.events].filter((event) =>
      /relaunched (from step [\d,]+|from scratch), retry 1 of 2$/.test(event.message),
    );
    expect(lines).toHaveLength(1);
    expect(lines[0]?.type).toBe('run-started');
  }, 60_000);
});
