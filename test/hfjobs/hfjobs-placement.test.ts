import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type HfJobsEmulator, startHfJobsEmulator } from '../emulators/hf-jobs-server.js';
import { removeTree } from '../helpers/processes.js';
import {
  emulatorExecutor,
  isOver,
  makeRun,
  makeRunsDir,
  readOutput,
  waitForState,
} from './hfjobs-harness.js';

/* Where an HF run goes and what it costs (cards, `spend`), cluster info, and the secrets a job gets. */

describe('HF Jobs placement, prices and cluster info', () => {
  let emulator: HfJobsEmulator;
  let runsDir: string;

  beforeAll(async () => {
    // The API's price differs from the docs table ($1.00/h) so a test can tell which one was used.
    emulator = await startHfJobsEmulator({ hourlyOverrides: { 'a10g-small': 1.05 }, schedulingMs: 100 });
    runsDir = await makeRunsDir();
  });

  afterAll(async () => {
    await emulator.close();
    removeTree(runsDir);
  });

  const hardwareCalls = () =>
    emulator.requests.filter((request) => request.path === '/api/jobs/hardware').length;

  it('prices a run from the per-minute hardware list, per hour, and names flavour and namespace', async () => {
    const executor = emulatorExecutor(emulator, runsDir);
    const before = hardwareCalls();
    const placement = await executor.placement?.({ gpus: 1, maxHours: 3 });
    expect(placement).toEqual({
      description: 'HF Jobs a10g-small ($1.05/h), namespace shepherd-test',
      hourlyUsd: 1.05,
      notes: [
        'files the job writes (checkpoints) end with it unless the script pushes them to the Hub',
        'pause is not available on HF Jobs: stop cancels the job',
      ],
    });
    // The flavour follows --gpus; --flavor and SHEPHERD_HF_FLAVOR win over it.
    expect(await executor.placement?.({ gpus: 2, maxHours: 1 })).toMatchObject({
      description: 'HF Jobs a10g-largex2 ($3.00/h), namespace shepherd-test',
      hourlyUsd: 3,
    });
    expect((await executor.placement?.({ gpus: 8, maxHours: 1 }))?.description).toMatch(
      /^HF Jobs a100x8 \(\$20\.00\/h\)/,
    );
    expect((await executor.placement?.({ gpus: 0, maxHours: 1 }))?.description).toMatch(
      /^HF Jobs cpu-basic \(\$0\.01\/h\)/,
    );
    const configured = emulatorExecutor(emulator, runsDir, {
      settings: { flavor: 'l4x1', namespace: 'shepherd-test' },
    });
    expect((await configured.placement?.({ gpus: 1, maxHours: 1 }))?.hourlyUsd).toBe(0.8);
    expect((await configured.placement?.({ gpus: 1, maxHours: 1, flavor: 'h200' }))?.description).toBe(
      'HF Jobs h200 ($5.00/h), namespace shepherd-test',
    );
    // One hardware request per executor: the list is cached.
    expect(hardwareCalls() - before).toBe(2);
    await expect(executor.placement?.({ gpus: 1, maxHours: 1, nodes: 2 })).rejects.toThrow(
      /one machine per job/,
    );
    await Promise.all([executor.close(), configured.close()]);
  });

  it('falls back to the docs table when the hardware list fails, and says so', async () => {
    emulator.failHardware(503);
    try {
      const executor = emulatorExecutor(emulator, runsDir);
      const placement = await executor.placement?.({ gpus: 1, maxHours: 1 });
      expect(placement?.hourlyUsd).toBe(1);
      expect(placement?.notes?.[0]).toMatch(
        /^prices from the HF Jobs docs table: the hardware list could not be read \(HF Jobs hardware list: HTTP 503/,
      );
      expect((await executor.clusterInfo()).notes?.[0]).toMatch(/hourly prices from the docs table/);
      await executor.close();
    } finally {
      emulator.failHardware(undefined);
    }
  });

  it('lists every flavour with its hourly price as cluster info', async () => {
    const executor = emulatorExecutor(emulator, runsDir);
    const info = await executor.clusterInfo();
    expect(info).toMatchObject({ executor: 'hfjobs', gpusTotal: 8, gpusFree: 8 });
    expect(info.notes).toContain('a10g-small: 1x A10G 24 GB, 4 vCPU, 15 GB, $1.05/h');
    expect(info.notes).toContain('cpu-basic: 2 vCPU, 16 GB, $0.01/h');
    expect(info.notes?.[0]).toBe(
      'GPUs come with the flavour, up to 8 in one job; hourly prices from the hardware list:',
    );
    await executor.close();
  });

  it('gives a job the secrets it was configured with, as Hub secrets, never the bot token', async () => {
    const executor = emulatorExecutor(emulator, runsDir, { secrets: { HF_TOKEN: 'hf_run_secret_value' } });
    const script =
      'import os\nprint("run token", os.environ.get("HF_TOKEN") == "hf_run_secret_value", flush=True)\n';
    const { meta, runDir } = await makeRun(runsDir, 'with-secret', script);
    const launched = { ...meta, ...(await executor.launch({ meta, runDir, gpuIndices: [] })) };
    const job = emulator.job(launched.jobId ?? '');
    expect(job?.secrets).toEqual(['HF_TOKEN']);
    expect(job?.environment).not.toHaveProperty('HF_TOKEN');
    expect(JSON.stringify(job)).not.toContain(emulator.token);
    expect(await waitForState(executor, launched, isOver, 'the job to end')).toEqual({
      kind: 'exited',
      exitCode: 0,
    });
    expect(await readOutput(runDir)).toContain('run token True');
    await executor.close();
  });
});
