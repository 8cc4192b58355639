import { describe, expect, it } from 'vitest';
import { RunError } from '../../src/errors.js';
import {
  createHardwareCatalog,
  defaultFlavor,
  FALLBACK_FLAVORS,
  flavorFromApi,
  type HfFlavor,
  hourlyPrice,
  pickFlavor,
} from '../../src/runs/hfjobs/hfjobs-hardware.js';
import { createHfJobSpecBuilder } from '../../src/runs/hfjobs/hfjobs-job-spec.js';
import { checkSchedule } from '../../src/runs/hfjobs/hfjobs-scheduled-jobs.js';
import { isFinalStage, jobStateOf } from '../../src/runs/hfjobs/hfjobs-states.js';
import { PYTHON_RUNTIME_DIR } from '../../src/runs/records/run-files.js';
import { hardwareFixture } from '../emulators/hf-jobs-fixtures.js';
import { removeTree } from '../helpers/processes.js';
import { decodeJobPayload, makeRun, makeRunsDir, silentLogger } from './hfjobs-harness.js';

describe('HF job stages as process states', () => {
  it('a new job is pending while SCHEDULING, with the flavour and the Hub message in the reason', () => {
    expect(jobStateOf({ stage: 'SCHEDULING', message: null }, 'a10g-small')).toEqual({
      kind: 'pending',
      reason: 'HF Jobs is scheduling the job on a10g-small',
    });
    expect(jobStateOf({ stage: 'SCHEDULING', message: 'waiting for capacity' })).toEqual({
      kind: 'pending',
      reason: 'HF Jobs is scheduling the job (waiting for capacity)',
    });
  });

  it('RUNNING is alive; COMPLETED exit 0; CANCELED a cancellation; DELETED unknown', () => {
    expect(jobStateOf({ stage: 'RUNNING' })).toEqual({ kind: 'alive' });
    expect(jobStateOf({ stage: 'COMPLETED', message: null })).toEqual({ kind: 'exited', exitCode: 0 });
    expect(jobStateOf({ stage: 'CANCELED' })).toEqual({
      kind: 'signaled',
      signal: 'SIGTERM',
      crashClass: 'cancelled',
    });
    expect(jobStateOf({ stage: 'DELETED' })).toEqual({ kind: 'unknown', reason: 'the HF job was deleted' });
    expect(jobStateOf({ stage: 'PAUSED', message: 'odd' })).toEqual({
      kind: 'unknown',
      reason: 'HF Jobs reports stage PAUSED (odd)',
    });
  });

  it('ERROR keeps the message, reads an exit code from it, and spots timeouts and OOM', () => {
    expect(jobStateOf({ stage: 'ERROR', message: 'Job failed with exit code: 3' })).toEqual({
      kind: 'exited',
      exitCode: 3,
      reason: 'Job failed with exit code: 3',
    });
    expect(jobStateOf({ stage: 'ERROR', message: null })).toEqual({
      kind: 'exited',
      exitCode: 1,
      reason: 'HF Jobs reports ERROR without a message',
    });
    expect(jobStateOf({ stage: 'ERROR', message: 'Job timeout: exceeded 60 seconds' })).toMatchObject({
      crashClass: 'timeout',
    });
    expect(jobStateOf({ stage: 'ERROR', message: 'container OOMKilled' })).toMatchObject({
      crashClass: 'out_of_memory',
    });
  });

  it('knows which stages are final', () => {
    expect(['COMPLETED', 'CANCELED', 'ERROR', 'DELETED'].every(isFinalStage)).toBe(true);
    expect(['SCHEDULING', 'RUNNING', 'UPDATING'].some(isFinalStage)).toBe(false);
  });
});

describe('HF hardware prices and flavours', () => {
  it('turns per-minute prices into hourly ones', () => {
    // huggingface_hub's JobHardware docstring: cpu-basic at unitCostUSD 0.000167 per minute.
    expect(hourlyPrice(0.000167, 'minute')).toBe(0.01);
    expect(hourlyPrice(0.016667, 'minute')).toBe(1);
    expect(hourlyPrice(0.0175, 'minute')).toBe(1.05);
    expect(hourlyPrice(2.5, 'hour')).toBe(2.5);
    expect(hourlyPrice(0.0005, 'seconds')).toBe(1.8);
    expect(hourlyPrice(1, 'fortnight')).toBeUndefined();
  });

  it('reads GPUs from the accelerator quantity (GPUs only)', () => {
    const [cpu, , , , , , , x4] = hardwareFixture();
    expect(cpu && flavorFromApi(cpu)).toMatchObject({ name: 'cpu-basic', gpus: 0, hourlyUsd: 0.01 });
    expect(x4 && flavorFromApi(x4)).toMatchObject({ name: 'a10g-largex4', gpus: 4, hourlyUsd: 5 });
    const neuron = {
      ...cpu,
      name: 'inf2x6',
      accelerator: { type: 'neuron', model: 'Inferentia2', quantity: '6', vram: '192 GB' },
    };
    expect(flavorFromApi(neuron as Parameters<typeof flavorFromApi>[0])?.gpus).toBe(0);
  });

  it('defaults the flavour from --gpus, then by the list’s GPU counts', () => {
    const names = [0, 1, 2, 4, 8].map((gpus) => defaultFlavor(gpus, FALLBACK_FLAVORS).flavor.name);
    expect(names).toEqual(['cpu-basic', 'a10g-small', 'a10g-largex2', 'a10g-largex4', 'a100x8']);
    const flavor = (name: string, gpus: number, hourlyUsd: number): HfFlavor => ({
      name,
      prettyName: name,
      gpus,
      summary: '',
      hourlyUsd,
    });
    const list = [flavor('two-dear', 2, 9), flavor('two-cheap', 2, 4), flavor('four', 4, 7)];
    expect(defaultFlavor(2, list)).toEqual({ flavor: list[1], roundedUp: false });
    expect(defaultFlavor(3, list)).toEqual({ flavor: list[2], roundedUp: true });
    expect(() => defaultFlavor(16, FALLBACK_FLAVORS)).toThrow(
      /no HF Jobs flavour has 16 GPUs; the most in one job is 8/,
    );
  });

  it('refuses an unknown flavour, naming the ones there are, and notes a GPU mismatch', () => {
    const list = { flavors: FALLBACK_FLAVORS, source: 'api' as const };
    const refusal: unknown = (() => {
      try {
        pickFlavor({ gpus: 1, flavor: 'a10g-tiny' }, list, undefined);
        return undefined;
      } catch (error) {
        return error;
      }
    })();
    expect(refusal).toBeInstanceOf(RunError);
    expect((refusal as RunError).code).toBe('invalid_run');
    expect((refusal as RunError).message).toMatch(
      /unknown HF Jobs flavour "a10g-tiny"; available: cpu-basic, .*a10g-small/,
    );
    expect(pickFlavor({ gpus: 2 }, list, 'a10g-small').notes).toEqual([
      'a10g-small has 1 GPU(s); the run asked for 2',
    ]);
    expect(pickFlavor({ gpus: 0, flavor: 't4-small' }, list, 'a10g-small').flavor.name).toBe('t4-small');
    expect(
      pickFlavor({ gpus: 1 }, { ...list, source: 'docs', problem: 'HTTP 503' }, undefined).notes,
    ).toEqual(['prices from the HF Jobs docs table: the hardware list could not be read (HTTP 503)']);
  });

  it('caches the hardware list for an hour and falls back to the last list, then the docs table', async () => {
    let time = Date.parse('2026-01-01T00:00:00Z');
    let fetches = 0;
    let failing = true;
    const catalog = createHardwareCatalog({
      fetchHardware: async () => {
        fetches += 1;
        if (failing) throw new Error('HTTP 503');
        return hardwareFixture({ 'a10g-small': 1.05 });
      },
      logger: silentLogger,
      clock: () => new Date(time),
    });
    expect(await catalog.list()).toMatchObject({ source: 'docs', problem: 'HTTP 503' });
    expect((await catalog.list()).flavors).toBe(FALLBACK_FLAVORS);
    expect(fetches).toBe(1);
    failing = false;
    time += 300_001;
    const live = await catalog.list();
    expect(live.source).toBe('api');
    expect(live.flavors.find((flavor) => flavor.name === 'a10g-small')?.hourlyUsd).toBe(1.05);
    time += 3_000_000;
    await catalog.list();
    expect(fetches).toBe(2);
    failing = true;
    time += 700_000;
    expect(await catalog.list()).toBe(live);
    expect(fetches).toBe(3);
  });
});

describe('schedules', () => {
  it('takes five cron fields or a shortcut and refuses anything else', () => {
    expect(checkSchedule(' 0  3 * * * ')).toBe('0 3 * * *');
    expect(checkSchedule('@daily')).toBe('@daily');
    expect(checkSchedule('*/15 9-17 * * MON-FRI')).toBe('*/15 9-17 * * MON-FRI');
    expect(() => checkSchedule('every day at 3')).toThrow(/is not a schedule/);
    expect(() => checkSchedule('0 3 * *')).toThrow(RunError);
  });
});

describe('what an HF job carries', () => {
  it('the run’s env, timeout and labels, the script and helper in the command, no token; refuses what one job cannot do', async () => {
    const runsDir = await makeRunsDir();
    try {
      const builder = createHfJobSpecBuilder({ helperDir: PYTHON_RUNTIME_DIR });
      const { meta, runDir } = await makeRun(runsDir, 'spec', 'print("hi")\n', {
        maxHours: 0.5,
        launchCount: 3,
        args: ['--lr', '0.1'],
      });
      const spec = await builder.build({ meta, runDir, image: 'python:3.12', flavor: 't4-small' });
      expect(spec).toMatchObject({ dockerImage: 'python:3.12', flavor: 't4-small', timeoutSeconds: 1800 });
      expect(spec.environment).toEqual({
        SHEPHERD_RUN_ID: 'spec',
        SHEPHERD_RUN_NAME: 'run-spec',
        SHEPHERD_RUN_CONFIG: '{}',
        SHEPHERD_LAUNCH: '3',
        PYTHONUNBUFFERED: '1',
      });
      expect(spec.secrets).toBeUndefined();
      const payload = decodeJobPayload(spec.command);
      expect(payload).toMatchObject({
        command: null,
        script: 'train.py',
        args: ['--lr', '0.1'],
        runtime: '.shepherd',
      });
      expect(payload.files['train.py']).toBe('print("hi")\n');

      await expect(
        builder.build({ meta: { ...meta, nodes: 2 }, runDir, image: 'i', flavor: 'f' }),
      ).rejects.toThrow(/one machine per job/);
      await expect(
        builder.build({ meta: { ...meta, environmentName: 'conda-a' }, runDir, image: 'i', flavor: 'f' }),
      ).rejects.toThrow(/environment conda-a lives on this host/);
      const outside = {
        ...meta,
        command: ['python3', '/ws/other/x.py'],
        cwd: '/ws/project',
        scriptPath: '/ws/other/x.py',
      };
      await expect(builder.build({ meta: outside, runDir, image: 'i', flavor: 'f' })).rejects.toThrow(
        /outside the command's directory/,
      );
    } finally {
      removeTree(runsDir);
    }
  });
});
