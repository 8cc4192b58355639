import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HF_LOG_CURSOR_FILE } from '../../src/runs/hfjobs/hfjobs-log-follower.js';
import { type HfJobsEmulator, startHfJobsEmulator } from '../emulators/hf-jobs-server.js';
import { removeTree } from '../helpers/processes.js';
import {
  countLines,
  emulatorExecutor,
  isOver,
  makeRun,
  makeRunsDir,
  readOutput,
  waitFor,
  waitForState,
} from './hfjobs-harness.js';

/*
 * The log of an HF job in output.log: every line exactly once, whatever happens to the stream (the library's
 * `streamJobLogs` does not reconnect) and across a bot restart (a new executor instance).
 */

/** Prints `line 1` … `line <count>`, `delay` seconds apart. */
const countingScript = (count: number, delay: number) => `import time
for number in range(1, ${count + 1}):
    print(f"line {number}", flush=True)
    time.sleep(${delay})
`;

function expectEachLineOnce(output: string, count: number): void {
  for (let number = 1; number <= count; number += 1)
    expect(countLines(output, `line ${number}`), `line ${number}`).toBe(1);
  expect(countLines(output, `line ${count + 1}`)).toBe(0);
}

describe('HF job log into output.log', () => {
  let emulator: HfJobsEmulator;
  let runsDir: string;

  beforeAll(async () => {
    emulator = await startHfJobsEmulator({ schedulingMs: 100, keepAliveMs: 200 });
    runsDir = await makeRunsDir();
  });

  afterAll(async () => {
    await emulator.close();
    removeTree(runsDir);
  });

  it('reconnects when the stream drops (reset and clean end) and writes no line twice', async () => {
    const executor = emulatorExecutor(emulator, runsDir);
    // The next two connections break after 4 events: one by a reset socket, one by a clean end.
    emulator.dropLogStreams({ afterEvents: 4, times: 1, how: 'reset' });
    emulator.dropLogStreams({ afterEvents: 4, times: 1, how: 'end' });
    const { meta, runDir } = await makeRun(runsDir, 'dropped', countingScript(12, 0.08));
    const launched = { ...meta, ...(await executor.launch({ meta, runDir, gpuIndices: [] })) };
    // No poll meanwhile: the follower started by launch must reconnect by itself.
    await waitFor(
      async () => ((await readOutput(runDir)).includes('line 12\n') ? true : undefined),
      'the last line',
    );
    expect(emulator.logConnections(launched.jobId ?? '')).toBeGreaterThanOrEqual(3);
    expect(await waitForState(executor, launched, isOver, 'the job to end')).toEqual({
      kind: 'exited',
      exitCode: 0,
    });
    const output = await readOutput(runDir);
    expectEachLineOnce(output, 12);
    expect(output.match(/^===== Job started at /gm)?.length).toBe(1);
    await executor.close();
  });

  it('replays once more after the job ended, for the lines a stalled stream never sent', async () => {
    // Keep-alives (every 200 ms) count as life: the quiet stream outlives idleMs without being reopened.
    const executor = emulatorExecutor(emulator, runsDir, { idleMs: 1_000 });
    // The stream goes quiet after 3 events (keep-alives only) and closes when the job has ended.
    emulator.dropLogStreams({ afterEvents: 3, times: 1, how: 'stall' });
    const { meta, runDir } = await makeRun(runsDir, 'stalled', countingScript(10, 0.2));
    const launched = { ...meta, ...(await executor.launch({ meta, runDir, gpuIndices: [] })) };
    await waitFor(
      async () => ((await readOutput(runDir)).includes('line 10\n') ? true : undefined),
      'the last line',
    );
    expectEachLineOnce(await readOutput(runDir), 10);
    expect(emulator.logConnections(launched.jobId ?? '')).toBe(2);
    await executor.close();
  });

  it('drops a connection that went silent (no keep-alive either) and reopens it', async () => {
    const executor = emulatorExecutor(emulator, runsDir, { idleMs: 800 });
    emulator.dropLogStreams({ afterEvents: 2, times: 1, how: 'hang' });
    const { meta, runDir } = await makeRun(runsDir, 'silent', countingScript(8, 0.05));
    const launched = { ...meta, ...(await executor.launch({ meta, runDir, gpuIndices: [] })) };
    await waitFor(
      async () => ((await readOutput(runDir)).includes('line 8\n') ? true : undefined),
      'the last line',
    );
    expectEachLineOnce(await readOutput(runDir), 8);
    expect(emulator.logConnections(launched.jobId ?? '')).toBeGreaterThanOrEqual(2);
    await executor.close();
  });

  it('a new executor (bot restart) re-attaches to a running job and appends only what is new', async () => {
    const first = emulatorExecutor(emulator, runsDir);
    const { meta, runDir } = await makeRun(runsDir, 'restarted', countingScript(30, 0.05));
    const launched = { ...meta, ...(await first.launch({ meta, runDir, gpuIndices: [] })) };
    await waitFor(
      async () => ((await readOutput(runDir)).includes('line 5\n') ? true : undefined),
      'the first lines',
    );
    await first.close();
    const cursor = JSON.parse(await readFile(path.join(runDir, HF_LOG_CURSOR_FILE), 'utf8')) as {
      jobId: string;
      events: number;
    };
    expect(cursor.jobId).toBe(launched.jobId);
    expect(cursor.events).toBeGreaterThanOrEqual(6);

    // The bot is down for a while: the job keeps printing.
    await waitFor(
      async () => (emulator.logLines(launched.jobId ?? '').includes('line 12') ? true : undefined),
      'the job to print on while no follower runs',
    );
    expect(await readOutput(runDir)).not.toContain('line 12\n');
    const second = emulatorExecutor(emulator, runsDir);
    expect(await waitForState(second, launched, isOver, 'the job to end')).toEqual({
      kind: 'exited',
      exitCode: 0,
    });
    expectEachLineOnce(await readOutput(runDir), 30);
    // The second follower read the whole log again from the Hub and skipped what the first had written.
    expect(emulator.logConnections(launched.jobId ?? '')).toBeGreaterThanOrEqual(2);
    await second.close();
  });

  it('after a restart, a job that ended while the bot was down is reported ended only with its whole log', async () => {
    const first = emulatorExecutor(emulator, runsDir);
    const { meta, runDir } = await makeRun(runsDir, 'ended-while-down', countingScript(20, 0.03));
    const launched = { ...meta, ...(await first.launch({ meta, runDir, gpuIndices: [] })) };
    await waitFor(
      async () => ((await readOutput(runDir)).includes('line 3\n') ? true : undefined),
      'the first lines',
    );
    await first.close();
    await waitFor(
      async () => (emulator.job(launched.jobId ?? '')?.status.stage === 'COMPLETED' ? true : undefined),
      'the job to complete while no follower runs',
    );
    const before = await readOutput(runDir);
    expect(before).not.toContain('line 20');

    const second = emulatorExecutor(emulator, runsDir);
    const state = (await second.poll([launched])).get(meta.id);
    expect(state).toEqual({ kind: 'exited', exitCode: 0 });
    expectEachLineOnce(await readOutput(runDir), 20);
    await second.close();
  });
});
