import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isAboveGradBand } from '../../src/monitor/detectors/grad-norm.js';
import { observeIdleGpus } from '../../src/monitor/detectors/idle-gpu.js';
import { checkOverfitting, type EvalSeries, recordEval } from '../../src/monitor/detectors/overfitting.js';
import { createThroughputState, observeThroughput } from '../../src/monitor/detectors/throughput.js';
import { createNvidiaSmiProbe, parseNvidiaSmi } from '../../src/monitor/gpu-probe.js';
import { createMonitor } from '../../src/monitor/monitor.js';
import { DEFAULT_DETECTOR_CONFIG } from '../../src/monitor/types.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { testRunMeta } from '../helpers/run-meta.js';

const settings = DEFAULT_DETECTOR_CONFIG;

describe('grad-norm explosion', () => {
  const history = Array.from({ length: 100 }, (_, index) => 1 + 0.1 * Math.sin(index * 1.3));

  it('flags a value far above the robust band, not ordinary jitter, a 3x blip or +Inf (the NaN alert)', () => {
    expect(isAboveGradBand(history, 8, settings).above).toBe(true);
    expect(isAboveGradBand(history, Number.POSITIVE_INFINITY, settings).above).toBe(false);
    expect(isAboveGradBand(history, 1.15, settings).above).toBe(false);
    expect(isAboveGradBand(history, 3, settings).above).toBe(false);
  });

  it('needs history first', () => {
    expect(isAboveGradBand(history.slice(0, 5), 100, settings).above).toBe(false);
  });
});

describe('throughput drop', () => {
  it('fires after three slow ticks below half the running median, not on one slow tick', () => {
    const state = createThroughputState();
    let step = 0;
    let now = 0;
    const tick = (steps: number) => {
      step += steps;
      now += 30_000;
      return observeThroughput(state, step, now, settings).dropped;
    };
    for (let index = 0; index < 12; index++) expect(tick(200)).toBe(false);
    expect(tick(60)).toBe(false); // one slow tick (an evaluation pause)
    expect(tick(200)).toBe(false);
    expect([tick(50), tick(50), tick(50)]).toEqual([false, false, true]);
    for (let index = 0; index < 2; index++) tick(200);
    expect(state.slow).toBe(0);
  });
});

describe('overfitting', () => {
  const series = (evals: number[], train: number[]): EvalSeries => {
    const result: EvalSeries = { points: [] };
    evals.forEach((value, index) => {
      recordEval(result, (index + 1) * 100, value, train[index] ?? Number.NaN);
    });
    return result;
  };

  it('flags eval loss rising for three evaluations while the training loss falls', () => {
    const verdict = checkOverfitting(
      series([2, 1.6, 1.4, 1.43, 1.46, 1.5], [2, 1.6, 1.3, 1.2, 1.1, 1]),
      settings,
    );
    expect(verdict.overfitting).toBe(true);
    expect(verdict.best).toEqual({ step: 300, value: 1.4 });
  });

  it('is quiet when the training loss rises too, when eval is only noisy, or after two rises', () => {
    // both rising: that is divergence, not overfitting
    expect(
      checkOverfitting(series([2, 1.6, 1.4, 1.43, 1.46, 1.5], [2, 1.6, 1.3, 1.4, 1.5, 1.6]), settings)
        .overfitting,
    ).toBe(false);
    // eval bouncing around its best
    expect(
      checkOverfitting(series([2, 1.6, 1.4, 1.41, 1.39, 1.42], [2, 1.6, 1.3, 1.2, 1.1, 1]), settings)
        .overfitting,
    ).toBe(false);
    // two rises only
    expect(
      checkOverfitting(series([2, 1.6, 1.4, 1.45, 1.5], [2, 1.6, 1.3, 1.2, 1.1]), settings).overfitting,
    ).toBe(false);
  });
});

describe('idle GPUs', () => {
  it('needs every GPU under 10 % for the whole period; a busy sample or no probe resets nothing wrongly', () => {
    const state: { idleSince?: number } = {};
    const minute = 60_000;
    expect(observeIdleGpus(state, [3, 5], 0, settings).idle).toBe(false);
    expect(observeIdleGpus(state, [3, 5], 14 * minute, settings).idle).toBe(false);
    expect(observeIdleGpus(state, undefined, 14.5 * minute, settings).idle).toBe(false);
    expect(observeIdleGpus(state, [3, 5], 15 * minute, settings).idle).toBe(true);
    expect(observeIdleGpus(state, [3, 55], 16 * minute, settings).idle).toBe(false);
    expect(state.idleSince).toBeUndefined();
  });

  it('parses nvidia-smi csv output', () => {
    expect([...parseNvidiaSmi('0, 3\n1, 97\n').entries()]).toEqual([
      [0, 3],
      [1, 97],
    ]);
  });
});

describe('idle GPUs through the monitor with a fake nvidia-smi on PATH', () => {
  const prefix = uniquePrefix('idle');
  let redis: Redis;
  let root: string;
  let bin: string;

  beforeAll(async () => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    root = await mkdtemp(join(tmpdir(), 'shepherd-idle-'));
    bin = join(root, 'bin');
    await mkdir(bin);
    // Utilisation comes from a file the test rewrites, like a real GPU going quiet.
    await writeFile(
      join(bin, 'nvidia-smi'),
      `#!/bin/sh\ncase "$*" in *--query-gpu=index,utilization.gpu*) cat "${join(root, 'util.csv')}";; *) exit 2;; esac\n`,
    );
    await chmod(join(bin, 'nvidia-smi'), 0o755);
  });

  afterAll(async () => {
    redis.disconnect();
    await deleteKeysWithPrefix(prefix);
    await rm(root, { recursive: true, force: true });
  });

  function meta(id: string, gpuIndices: number[]): RunMeta {
    return testRunMeta(id, {
      name: id,
      gpus: gpuIndices.length,
      gpuIndices,
      maxHours: 24,
      createdAt: new Date(0).toISOString(),
    });
  }

  async function runTicks(runId: string, gpus: number[], utilisation: string, minutes: number) {
    await mkdir(join(root, runId), { recursive: true });
    await writeFile(join(root, 'util.csv'), utilisation);
    let now = 0;
    const monitor = createMonitor({
      redis,
      prefix,
      runDir: () => join(root, runId),
      clock: () => now,
      detectors: { stallS: 100_000 },
      gpuProbe: createNvidiaSmiProbe({
        command: 'nvidia-smi',
        environment: { PATH: `${bin}:/usr/bin:/bin` },
      }),
    });
    const kinds: string[] = [];
    for (let minute = 0; minute <= minutes; minute++) {
      now = minute * 60_000;
      const result = await monitor.tick(runId, meta(runId, gpus), { kind: 'alive' });
      kinds.push(...result.incidents.map((incident) => `${minute}:${incident.kind}`));
      await monitor.ack(
        runId,
        result.incidents.map((incident) => incident.id),
      );
    }
    return kinds;
  }

  it('alerts once after 15 idle minutes on the run’s GPUs', async () => {
    expect(await runTicks('idle-run', [1, 2], '0, 99\n1, 2\n2, 4\n', 20)).toEqual(['15:idle_gpu']);
  });

  it('stays quiet while one of the run’s GPUs works, and for runs without GPUs', async () => {
    expect(await runTicks('busy-run', [0, 1], '0, 99\n1, 2\n', 20)).toEqual([]);
    expect(await runTicks('cpu-run', [], '0, 0\n', 20)).toEqual([]);
  });

  it('stays quiet when nvidia-smi is not installed', async () => {
    const probe = createNvidiaSmiProbe({ command: 'nvidia-smi', environment: { PATH: '/nonexistent' } });
    expect(await probe([0])).toBeUndefined();
  });
});
