import { spawnSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseMetricLine } from '../../src/runs/file-tail.js';
import { PYTHON_RUNTIME_DIR } from '../../src/runs/records/run-files.js';
import { ALICE, BOB, createHarness, type Harness, waitFor } from './harness.js';

function runPython(code: string, environment: Record<string, string>, cwd?: string) {
  const { SHEPHERD_RUN_DIR: _ignored, ...inherited } = process.env;
  return spawnSync('python3', ['-c', code], {
    ...(cwd === undefined ? {} : { cwd }),
    env: { ...inherited, PYTHONPATH: PYTHON_RUNTIME_DIR, ...environment },
    encoding: 'utf8',
    timeout: 10_000,
  });
}

describe('shepherd.py runtime helper', () => {
  let directory: string;
  beforeEach(async () => {
    directory = await mkdtemp(path.join(os.tmpdir(), 'shepherd-py-'));
  });
  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('writes numeric metrics (NaN included) and reports non-numeric ones instead of dropping them silently', async () => {
    const result = runPython(
      `import shepherd
shepherd.log_metrics(step=1, loss=0.5, lr=1e-3, note="warmup", flag=True)
shepherd.log_metrics(step=2, loss=float("nan"), gn=float("inf"), note="again")
shepherd.finish()`,
      { SHEPHERD_RUN_DIR: directory },
    );
    expect(result.status).toBe(0);
    const lines = (await readFile(path.join(directory, 'metrics.jsonl'), 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(parseMetricLine(lines[0] ?? '')?.values).toEqual({ loss: 0.5, lr: 1e-3 });
    expect(lines[1]).toContain('"loss": NaN');
    expect(lines[1]).toContain('"gn": Infinity');
    expect(result.stderr).toContain("metric 'note' at step 1 is not a number (str: 'warmup')");
    expect(result.stderr).toContain("metric 'flag' at step 1 is not a number (bool: True)");
    expect(JSON.parse(await readFile(path.join(directory, 'finish.json'), 'utf8'))).toMatchObject({
      step: 2,
      stopped: false,
    });
  });

  it('also prints each metrics line with SHEPHERD_METRICS_STDOUT=1 (a pod whose files Shepherd cannot see)', async () => {
    const result = runPython(
      'import shepherd\nshepherd.log_metrics(step=3, loss=float("nan"))\nshepherd.finish()',
      { SHEPHERD_RUN_DIR: directory, SHEPHERD_METRICS_STDOUT: '1' },
    );
    expect(result.status).toBe(0);
    const written = (await readFile(path.join(directory, 'metrics.jsonl'), 'utf8')).trim();
    expect(result.stdout.trim()).toBe(`[metrics] ${written}`);
    expect(written).toContain('"loss": NaN');
  });

  it('persists resume info across processes', async () => {
    runPython('import shepherd\nshepherd.save_checkpoint(40, "ckpt/40.pt", epoch=2)', {
      SHEPHERD_RUN_DIR: directory,
    });
    const result = runPython('import json, shepherd\nprint(json.dumps(shepherd.resume_info()))', {
      SHEPHERD_RUN_DIR: directory,
    });
    const info = JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
    expect(info).toMatchObject({ step: 40, checkpoint: 'ckpt/40.pt', epoch: 2 });
  });

  it('works without Shepherd: prints, writes no files', async () => {
    const result = runPython(
      `import json, shepherd
shepherd.log_metrics(step=1, loss=0.25)
shepherd.save_checkpoint(1)
shepherd.finish()
print(json.dumps({k: v for k, v in shepherd.resume_info().items() if k != "ts"}))`,
      {},
      directory,
    );
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('[metrics] {"ts":');
    expect(result.stdout).toContain('{"step": 1, "checkpoint": null}');
    expect(await readdir(directory)).toEqual([]);
  });
});

describe('examples/tiny_train.py under Shepherd', () => {
  let harness: Harness;
  beforeEach(async () => {
    harness = await createHarness();
  });
  afterEach(async () => {
    await harness.cleanup();
  });

  it('logs loss and lr, checkpoints on pause and resumes from it', async () => {
    const { service } = harness.runtime;
    const script = await readFile(path.resolve(import.meta.dirname, '../../examples/tiny_train.py'), 'utf8');
    const created = await service.createRun({
      name: 'tiny',
      script,
      gpus: 0,
      threadId: 'web:l:t',
      requester: ALICE,
    });
    await service.approve(created.id, BOB);
    await waitFor(
      async () => (await harness.runFile(created.id, 'metrics.jsonl').catch(() => '')).split('\n').length > 4,
    );
    const paused = await service.pause(created.id, BOB);
    expect(paused.status).toBe('paused');
    const status = await harness.runtime.status(created.id);
    expect(status.resume?.checkpoint).toBe('checkpoint.json');
    expect(status.lastMetrics.at(-1)?.values).toHaveProperty('lr');
    const savedStep = status.resume?.step as number;
    const checkpoint = JSON.parse(await harness.runFile(created.id, 'checkpoint.json')) as { step: number };
    expect(checkpoint.step).toBe(savedStep);
    await service.resume(created.id, BOB);
    const output = await waitFor(async () => {
      const metrics = await harness.runFile(created.id, 'metrics.jsonl');
      const steps = metrics
        .trim()
        .split('\n')
        .map((line) => parseMetricLine(line)?.step);
      const resumedAt = steps.lastIndexOf(savedStep + 1);
      return resumedAt > steps.indexOf(savedStep) ? steps : undefined;
    });
    expect(output).toContain(savedStep + 1);
    await service.stop(created.id, BOB);
  });
});
