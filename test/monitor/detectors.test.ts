import { describe, expect, it } from 'vitest';
import { classifyCrash, detectCrash, extractTraceback } from '../../src/monitor/detectors/crash.js';
import { checkDivergence, checkSpike } from '../../src/monitor/detectors/loss-detectors.js';
import { checkPlateau } from '../../src/monitor/detectors/plateau.js';
import { checkStall } from '../../src/monitor/detectors/stall.js';
import { observeEpisode } from '../../src/monitor/episodes.js';
import {
  addPoint,
  chartSeries,
  createRollingState,
  visitChartSeries,
} from '../../src/monitor/rolling-stats.js';
import { plannedMaxSteps } from '../../src/monitor/run-plan.js';
import { DEFAULT_DETECTOR_CONFIG } from '../../src/monitor/types.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { redactSecrets } from '../../src/text/redact.js';

const config = DEFAULT_DETECTOR_CONFIG;

function noisy(count: number, base = 1, noise = 0.01): number[] {
  return Array.from({ length: count }, (_, index) => base * (1 + noise * Math.sin(index * 1.7)));
}

const meta = { status: 'running', name: 'qwen' } as RunMeta;

describe('spike detector', () => {
  it('flags a 10x jump and not ordinary noise', () => {
    const window = noisy(50);
    expect(checkSpike(window, 1.02, config).spike).toBe(false);
    expect(checkSpike(window, 10, config).spike).toBe(true);
  });
  it('needs the minimum ratio even when the curve is perfectly flat (MAD 0)', () => {
    const flat = Array.from({ length: 50 }, () => 1);
    expect(checkSpike(flat, 1.5, config).spike).toBe(false);
    expect(checkSpike(flat, 3.5, config).spike).toBe(true);
  });
  it('does not judge with too little history', () => {
    expect(checkSpike([1, 1, 1], 100, config).spike).toBe(false);
  });
});

describe('divergence detector', () => {
  it('flags a sustained rise and ignores a single spike', () => {
    const rising = Array.from({ length: 30 }, (_, index) => 1 * 1.05 ** index);
    expect(checkDivergence(rising, config).diverging).toBe(true);
    const spiky = noisy(30);
    spiky[25] = 50;
    expect(checkDivergence(spiky, config).diverging).toBe(false);
    const falling = Array.from({ length: 30 }, (_, index) => 2 / (1 + index));
    expect(checkDivergence(falling, config).diverging).toBe(false);
  });
});

describe('plateau detector', () => {
  const settings = DEFAULT_DETECTOR_CONFIG;
  const curve = (steps: number, value: (step: number) => number) =>
    Array.from({ length: steps + 1 }, (_, step) => ({ step, value: value(step) }));

  it('flags a flat curve once a whole window was watched, not an improving one', () => {
    const flat = curve(1000, (step) => 1 + 0.001 * Math.sin(step));
    const improving = curve(1000, (step) => 3 / Math.sqrt(1 + step / 10));
    expect(checkPlateau({ points: flat, firstStep: 0, lastStep: 1000 }, settings).plateau).toBe(true);
    expect(checkPlateau({ points: improving, firstStep: 0, lastStep: 1000 }, settings).plateau).toBe(false);
    // watched for less than the window (max(200 steps, 25 % of the steps so far))
    expect(checkPlateau({ points: flat, firstStep: 900, lastStep: 1000 }, settings).plateau).toBe(false);
  });

  it('reads noise as noise: a flat-looking but noisy curve is no plateau', () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    // a real 2 % improvement over the window, hidden under ±40 % noise
    const noisy = curve(1000, (step) => (1 - 0.00002 * step) * (0.6 + 0.8 * random()));
    expect(checkPlateau({ points: noisy, firstStep: 0, lastStep: 1000 }, settings).plateau).toBe(false);
  });

  it('is silent near the planned end and while the learning rate anneals', () => {
    const flat = curve(1000, (step) => 1 + 0.001 * Math.sin(step));
    expect(
      checkPlateau({ points: flat, firstStep: 0, lastStep: 1000, maxSteps: 1100 }, settings).plateau,
    ).toBe(false);
    expect(
      checkPlateau({ points: flat, firstStep: 0, lastStep: 1000, maxSteps: 5000 }, settings).plateau,
    ).toBe(true);
    const annealing = curve(1000, (step) => 1e-3 * (1 - step / 1000));
    expect(
      checkPlateau({ points: flat, firstStep: 0, lastStep: 1000, learningRate: annealing }, settings).plateau,
    ).toBe(false);
    const constant = curve(1000, () => 1e-3);
    expect(
      checkPlateau({ points: flat, firstStep: 0, lastStep: 1000, learningRate: constant }, settings).plateau,
    ).toBe(true);
  });

  it('gives the same verdict from a rolling state walked point by point as from its chart series', () => {
    const rolling = createRollingState();
    for (let step = 0; step <= 3000; step++) {
      const loss = step > 1500 && step % 97 === 0 ? -1 : 1 + 0.001 * Math.sin(step) + 2 / (1 + step);
      addPoint(rolling, { step, metrics: { loss, lr: step < 2000 ? 1e-3 : 1e-4 } }, step * 1000);
      if (step % 250 !== 0) continue;
      for (const firstStep of [0, step - 300]) {
        const walked = checkPlateau(
          {
            points: (from, visit) => visitChartSeries(rolling, 'loss', from, visit),
            learningRate: (from, visit) => visitChartSeries(rolling, 'lr', from, visit),
            firstStep,
            lastStep: step,
          },
          settings,
        );
        const built = checkPlateau(
          {
            points: chartSeries(rolling, 'loss'),
            learningRate: chartSeries(rolling, 'lr'),
            firstStep,
            lastStep: step,
          },
          settings,
        );
        expect(walked, `step ${step}`).toEqual(built);
      }
    }
  });

  it('reads max_steps from the run config', () => {
    const meta = { config: { max_steps: '4000' } } as unknown as RunMeta;
    expect(plannedMaxSteps(meta)).toBe(4000);
    expect(plannedMaxSteps({ config: { num_train_epochs: 3 } } as unknown as RunMeta)).toBeUndefined();
  });
});

describe('stall detector', () => {
  it('uses max(stallS, 10 x median step interval) and only for live processes', () => {
    const base = {
      now: 1_000_000,
      lastProgressAt: 1_000_000 - 301_000,
      medianStepIntervalMs: 1000,
      stallS: 300,
    };
    expect(checkStall({ ...base, state: { kind: 'alive' } }).stalled).toBe(true);
    expect(checkStall({ ...base, state: { kind: 'exited', exitCode: 0 } }).stalled).toBe(false);
    // slow steps (60 s each) raise the limit to 600 s
    expect(checkStall({ ...base, medianStepIntervalMs: 60_000, state: { kind: 'alive' } }).stalled).toBe(
      false,
    );
  });
});

describe('crash detector', () => {
  const oom = `step 10\nTraceback (most recent call last):\n  File "train.py", line 3, in <module>\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB`;
  it('classifies crashes', () => {
    expect(classifyCrash({ kind: 'exited', exitCode: 1 }, oom)).toBe('cuda_oom');
    expect(classifyCrash({ kind: 'exited', exitCode: 137 }, 'killed')).toBe('host_oom_kill');
    expect(classifyCrash({ kind: 'signaled', signal: 'SIGKILL' }, '')).toBe('host_oom_kill');
    expect(
      classifyCrash({ kind: 'exited', exitCode: 1 }, 'ModuleNotFoundError: No module named "peft"'),
    ).toBe('missing_module');
    expect(
      classifyCrash({ kind: 'exited', exitCode: 1 }, '  File "x.py", line 2\nSyntaxError: invalid syntax'),
    ).toBe('syntax_error');
    expect(
      classifyCrash(
        { kind: 'exited', exitCode: 1 },
        "FileNotFoundError: [Errno 2] No such file or directory: 'd'",
      ),
    ).toBe('file_not_found');
    expect(
      classifyCrash(
        { kind: 'exited', exitCode: 1 },
        '[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600000 ms',
      ),
    ).toBe('nccl_timeout');
    expect(classifyCrash({ kind: 'exited', exitCode: 1, crashClass: 'timeout' }, oom)).toBe('timeout');
    expect(classifyCrash({ kind: 'signaled', signal: 'SIGKILL', crashClass: 'out_of_memory' }, '')).toBe(
      'out_of_memory',
    );
    expect(classifyCrash({ kind: 'exited', exitCode: 2 }, 'ValueError: bad')).toBe('other');
  });

  it('does not call a requested stop a crash, nor a clean exit', () => {
    expect(
      detectCrash({ ...meta, status: 'stopped' }, { kind: 'signaled', signal: 'SIGTERM' }, ''),
    ).toBeUndefined();
    expect(detectCrash(meta, { kind: 'exited', exitCode: 0 }, '')).toBeUndefined();
    // Between a fix's stop and its relaunch the run is queued: the SIGTERM'd old launch is no crash.
    expect(
      detectCrash({ ...meta, status: 'queued' }, { kind: 'signaled', signal: 'SIGTERM' }, ''),
    ).toBeUndefined();
    expect(detectCrash(meta, { kind: 'signaled', signal: 'SIGTERM' }, '')).toBeDefined();
    // Shepherd is stopping it (an HF job it cancelled, a pod it deleted): not a crash either.
    expect(
      detectCrash(
        { ...meta, stopRequested: 'stop' },
        { kind: 'signaled', signal: 'SIGTERM', crashClass: 'cancelled' },
        '',
      ),
    ).toBeUndefined();
    expect(detectCrash(meta, { kind: 'alive' }, '')).toBeUndefined();
    expect(detectCrash(meta, { kind: 'signaled', signal: 'SIGSEGV' }, 'Segmentation fault')?.crashClass).toBe(
      'other',
    );
  });

  it('keeps the last traceback, bounded to ~1,500 chars with the exception line', () => {
    const long = `Traceback (most recent call last):\n${'  File "a.py", line 1, in f\n    g()\n'.repeat(200)}RuntimeError: boom`;
    const text = extractTraceback(`old\nTraceback (most recent call last):\nOldError\n${long}`);
    expect(text.length).toBeLessThanOrEqual(1500);
    expect(text.startsWith('Traceback (most recent call last):')).toBe(true);
    expect(text.endsWith('RuntimeError: boom')).toBe(true);
    expect(text).not.toContain('OldError');
  });
});

describe('redaction', () => {
  it('removes tokens, keys and passwords', () => {
    const text = [
      'openai sk-proj-abcdefghijklmnop1234567890',
      'hf hf_abcdefghijklmnopqrstuvwxyz12',
      'slack xoxb-1234567890-abcdefghij',
      'aws AKIAABCDEFGHIJKLMNOP',
      'password=hunter2 api_key: "zzz123" HF_TOKEN=abc',
      'Authorization: Bearer abcdef.ghijkl.mnopqr',
      'postgres://admin:s3cret@db:5432/x',
    ].join('\n');
    const redacted = redactSecrets(text);
    for (const secret of [
      'abcdefghijklmnop1234567890',
      'hf_abcdefghij',
      'xoxb-1234',
      'AKIAABCDEFGHIJKLMNOP',
      'hunter2',
      'zzz123',
      'abcdef.ghijkl',
      's3cret',
      'HF_TOKEN=abc',
    ]) {
      expect(redacted, secret).not.toContain(secret);
    }
    expect(redacted).toContain('[REDACTED]');
    expect(redactSecrets('loss 0.5 at step 10')).toBe('loss 0.5 at step 10');
  });
});

describe('episodes', () => {
  it('fires once per episode and again only after recovery', () => {
    const book = {};
    const fired: boolean[] = [];
    for (const condition of [false, true, true, true, false, true, false, false, true, true]) {
      fired.push(observeEpisode(book, 'nan', condition, 2));
    }
    // fires at index 1; the single calm point at 4 is not a recovery (needs 2); recovered at 6-7; fires at 8
    expect(fired.map((value, index) => (value ? index : -1)).filter((index) => index >= 0)).toEqual([1, 8]);
  });
});

describe('detectorConfigFrom', () => {
  it('maps config.monitor onto the detector thresholds', async () => {
    const { loadConfig } = await import('../../src/config/config.js');
    const { detectorConfigFrom } = await import('../../src/monitor/types.js');
    const parsed = loadConfig({
      SHEPHERD_STALL_S: '5',
      SHEPHERD_SPIKE_MAD_K: '7',
      SHEPHERD_PLATEAU_WINDOW: '40',
      SHEPHERD_PLATEAU_MAX_ALERTS: '2',
      SHEPHERD_IDLE_GPU_MIN: '5',
      SHEPHERD_NVIDIA_SMI: '/opt/nvidia/bin/nvidia-smi',
    });
    expect(parsed.monitor.nvidiaSmi).toBe('/opt/nvidia/bin/nvidia-smi');
    expect(detectorConfigFrom(parsed.monitor)).toMatchObject({
      stallS: 5,
      spikeMadK: 7,
      plateauWindow: 40,
      plateauMaxAlerts: 2,
      idleGpuMin: 5,
      spikeWindow: 50,
    });
  });
});
