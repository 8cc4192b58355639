import { appendFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMonitor } from '../../src/monitor/monitor.js';
import { plannedStepsOf } from '../../src/monitor/printed-metrics.js';
import { renderTriageSnapshot } from '../../src/monitor/triage-snapshot.js';
import type { ProcessState } from '../../src/runs/executor.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { testRunMeta } from '../helpers/run-meta.js';

let root: string;
let redis: Redis;
const prefix = uniquePrefix('mprinted');
const alive: ProcessState = { kind: 'alive' };

function makeMeta(id: string): RunMeta {
  return testRunMeta(id, { gpus: 1, gpuIndices: [0], createdAt: new Date(0).toISOString() });
}

async function setup(id: string) {
  let now = 0;
  const monitor = createMonitor({
    redis,
    prefix,
    runDir: (meta) => join(root, meta.id),
    clock: () => now,
    detectors: { stallS: 120 },
  });
  const dir = join(root, id);
  await mkdir(dir, { recursive: true });
  const meta = makeMeta(id);
  return {
    monitor,
    dir,
    print: (text: string) => appendFile(join(dir, 'output.log'), text),
    helper: (text: string) => appendFile(join(dir, 'metrics.jsonl'), text),
    tick: async (state: ProcessState = alive) => {
      now += 30_000;
      return monitor.tick(id, meta, state);
    },
  };
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'shepherd-mprinted-'));
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await deleteKeysWithPrefix(prefix);
  redis.disconnect();
  await rm(root, { recursive: true, force: true });
});

describe('metrics from output.log in the monitor', () => {
  it('feeds printed points to the detectors, marked as coming from stdout', async () => {
    const run = await setup('printed');
    await run.print('step 1 | loss 2.0\nstep 2 | loss 1.9\nsome other output\n');
    const first = await run.tick();
    expect(first.newPoints).toBe(2);
    expect(first.progress).toMatchObject({ lastStep: 2, lastMetrics: { loss: 1.9 } });
    await run.print('step 3 | loss nan\n');
    const second = await run.tick();
    expect(second.incidents.map((incident) => incident.kind)).toEqual(['nan']);
    expect((await run.monitor.loadState('printed')).printed).toMatchObject({ helper: false, counted: 3 });
    const snapshot = await run.monitor.snapshot({ meta: makeMeta('printed'), processState: alive });
    expect(renderTriageSnapshot(snapshot)).toContain(
      'Metrics (parsed from what the script prints to output.log)',
    );
    const derived = await readFile(join(run.dir, 'stdout-metrics.jsonl'), 'utf8');
    expect(derived).toBe(
      '{"step": 1, "source": "stdout", "loss": 2}\n{"step": 2, "source": "stdout", "loss": 1.9}\n{"step": 3, "source": "stdout", "loss": NaN}\n',
    );
  });

  it('counts nothing twice when the run also uses the helper: the helper wins', async () => {
    const run = await setup('both');
    // The script prints its dicts and calls log_metrics for the same steps.
    for (let step = 1; step <= 5; step++) {
      await run.print(`{'loss': ${2 - step / 10}, 'epoch': 0.1}\n`);
      await run.helper(`{"step": ${step}, "loss": ${2 - step / 10}}\n`);
    }
    const result = await run.tick();
    expect(result.newPoints).toBe(5);
    const state = await run.monitor.loadState('both');
    expect(state.rolling.metrics.loss?.count).toBe(5);
    expect(state.rolling.metrics.epoch).toBeUndefined();
  });

  it('keeps a run that used the helper before this version on the helper', async () => {
    const run = await setup('upgraded');
    await run.helper('{"step": 1, "loss": 2.0}\n');
    await run.tick();
    // As a monitor state written before printed metrics existed.
    const key = `${prefix}:monitor:upgraded`;
    const saved = JSON.parse((await redis.hget(key, 'state')) ?? '{}') as Record<string, unknown>;
    delete saved.printed;
    await redis.hset(key, { state: JSON.stringify(saved), rev: 'old' });
    await run.print('step 2 | loss 1.0\n');
    expect((await run.tick()).newPoints).toBe(0);
    expect((await run.monitor.loadState('upgraded')).printed?.helper).toBe(true);
  });

  it('drops points read from output.log when the helper shows up later', async () => {
    const run = await setup('late-helper');
    await run.print("{'loss': 2.0}\n{'loss': 1.9}\n");
    await run.tick();
    expect((await run.monitor.loadState('late-helper')).rolling.metrics.loss?.count).toBe(2);
    await run.print("{'loss': 1.8}\n");
    await run.helper('{"step": 3, "loss": 1.8}\n');
    await run.tick();
    const state = await run.monitor.loadState('late-helper');
    expect(state.rolling.metrics.loss?.count).toBe(1);
    expect(state.rolling.lastStep).toBe(3);
    expect(state.printed?.helper).toBe(true);
  });

  it('sees a progress bar that only redraws itself with \\r, and records its total', async () => {
    const run = await setup('bar');
    const bar = (n: number) => `\r${n}%|#   | ${n}/100 [00:01<00:09, 9.8it/s]`;
    await run.print(`${bar(1)}${bar(2)}\r{'loss': 2.0}\n${bar(2)}${bar(3)}${bar(4)}`);
    const first = await run.tick();
    expect(first.newPoints).toBe(1);
    // tqdm starts each redraw with \r: the text after the last one may be half-written, so it waits.
    expect(first.progress.lastStep).toBe(3);
    await run.print(`${bar(5)}${bar(9)}`);
    expect((await run.tick()).progress.lastStep).toBe(5);
    const state = await run.monitor.loadState('bar');
    expect(state.printed?.plannedSteps).toBe(100);
    // The plateau detector's max_steps when the run names none.
    expect(plannedStepsOf(state)).toBe(100);
    expect(state.rolling.metrics.loss?.steps).toEqual([2]);
  });

  it('reads a replaced output.log from the start without mixing the two histories', async () => {
    const run = await setup('replaced');
    await run.print('step 10 | loss 1.0\nstep 11 | loss 0.9\n');
    await run.tick();
    await rm(join(run.dir, 'output.log'));
    await writeFile(join(run.dir, 'output.log'), 'step 1 | loss 3.0\n');
    await run.tick();
    const state = await run.monitor.loadState('replaced');
    expect(state.rolling.metrics.loss?.steps).toEqual([1]);
    expect(await readFile(join(run.dir, 'stdout-metrics.jsonl'), 'utf8')).toBe(
      '{"step": 1, "source": "stdout", "loss": 3}\n',
    );
  });
});
