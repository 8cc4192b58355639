import { appendFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMonitor } from '../../src/monitor/monitor.js';
import type { WakeResult, WokenEvaluation } from '../../src/monitor/monitor-holds.js';
import { parseCursor } from '../../src/monitor/tail-reader.js';
import { WOKEN_FILE_BITS } from '../../src/monitor/woken-files.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { testRunMeta } from '../helpers/run-meta.js';

/**
 * Woken evaluations on a hold (monitor-holds.ts): the run's state and cursors stay in this process between
 * wake-ups, and a commit happens when something is raised, at the timer's tick, or when the run goes quiet.
 */

let root: string;
let redis: Redis;
const prefix = uniquePrefix('holds');
const alive = { kind: 'alive' } as const;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'shepherd-holds-'));
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await deleteKeysWithPrefix(prefix);
  redis.disconnect();
  await rm(root, { recursive: true, force: true });
});

function lines(
  from: number,
  count: number,
  loss: (step: number) => number | string = (step) => 3 / (1 + step),
) {
  let text = '';
  for (let step = from; step < from + count; step++) text += `{"step": ${step}, "loss": ${loss(step)}}\n`;
  return text;
}

async function runWith(id: string) {
  await mkdir(join(root, id), { recursive: true });
  const clock = { now: 1_000_000 };
  const make = () =>
    createMonitor({ redis, prefix, runDir: (meta) => join(root, meta.id), clock: () => clock.now });
  return {
    meta: testRunMeta(id, { name: id }),
    clock,
    make,
    append: (text: string) => appendFile(join(root, id, 'metrics.jsonl'), text),
    committedOffset: async () =>
      parseCursor(await redis.hget(`${prefix}:monitor:${id}`, 'cursor:metrics'))?.offset,
    lockHolder: () => redis.get(`${prefix}:monitor-lock:${id}`),
  };
}

function evaluated(result: WakeResult): WokenEvaluation {
  if (typeof result === 'string') throw new Error(`not evaluated: ${result}`);
  return result;
}

describe('woken evaluations on a hold', () => {
  it('read each new line once, commit nothing until the tick, and the tick goes on from the hold', async () => {
    const run = await runWith('quiet-commit');
    const monitor = run.make();
    await run.append(lines(0, 20));
    expect((await monitor.tick(run.meta.id, run.meta, alive)).newPoints).toBe(20);
    const committed = await run.committedOffset();
    await run.append(lines(20, 3));
    expect(evaluated(await monitor.wake(run.meta.id, run.meta)).newPoints).toBe(3);
    await run.append(lines(23, 2));
    expect(evaluated(await monitor.wake(run.meta.id, run.meta)).newPoints).toBe(2);
    // Nothing raised: no commit yet; the hold keeps the lease and the newest state (charts read it).
    expect(await run.committedOffset()).toBe(committed);
    expect((await run.lockHolder())?.startsWith('hold.')).toBe(true);
    expect((await monitor.series(run.meta.id, ['loss'])).loss).toHaveLength(25);
    const tick = await monitor.tick(run.meta.id, run.meta, alive);
    expect(tick.skipped).toBeUndefined();
    expect(tick.newPoints).toBe(0);
    expect((await monitor.loadState(run.meta.id)).rolling.points).toBe(25);
    expect(await run.committedOffset()).toBeGreaterThan(committed ?? 0);
    expect(await run.lockHolder()).toBeNull();
  });

  it('commit a NaN at once, with its cursor, before the alert is handed out', async () => {
    const run = await runWith('nan-now');
    const monitor = run.make();
    await run.append(lines(0, 20));
    await monitor.tick(run.meta.id, run.meta, alive);
    await run.append(lines(20, 2, (step) => (step === 21 ? 'NaN' : 1)));
    const result = evaluated(await monitor.wake(run.meta.id, run.meta));
    expect(result.incidents.map((incident) => incident.kind)).toEqual(['nan']);
    expect(await redis.hlen(`${prefix}:monitor-outbox:${run.meta.id}`)).toBe(1);
    const state = await monitor.loadState(run.meta.id);
    expect(state.rolling.points).toBe(22);
    expect(state.episodes.nan?.active).toBe(true);
    await monitor.endHolds();
    expect(await run.lockHolder()).toBeNull();
  });

  it('leave a run held by another process to it, and let a quiet run go with its commit', async () => {
    const run = await runWith('two-processes');
    const first = run.make();
    const second = run.make();
    await run.append(lines(0, 20));
    await first.tick(run.meta.id, run.meta, alive);
    await run.append(lines(20, 1));
    evaluated(await first.wake(run.meta.id, run.meta));
    expect(await second.wake(run.meta.id, run.meta)).toBe('held-elsewhere');
    expect((await second.tick(run.meta.id, run.meta, alive)).skipped).toBe(true);
    // Quiet for longer than HOLD_IDLE_MS: the sweep commits the hold and lets the run go.
    run.clock.now += 6_000;
    await vi.waitFor(async () => expect(await run.lockHolder()).toBeNull(), { timeout: 5_000, interval: 50 });
    expect((await second.loadState(run.meta.id)).rolling.points).toBe(21);
    await run.append(lines(21, 1));
    expect(evaluated(await second.wake(run.meta.id, run.meta)).newPoints).toBe(1);
    await second.endHolds();
    expect((await second.loadState(run.meta.id)).rolling.points).toBe(22);
  });

  it('drop a hold whose lease was lost: the new owner redoes its lines, and none is counted twice', async () => {
    const run = await runWith('lost-lease');
    const first = run.make();
    const second = run.make();
    await run.append(lines(0, 20));
    await first.tick(run.meta.id, run.meta, alive);
    await run.append(lines(20, 5));
    evaluated(await first.wake(run.meta.id, run.meta));
    // The first process stalls past its lease (it expires); the second ticks the run meanwhile.
    await redis.pexpire(`${prefix}:monitor-lock:${run.meta.id}`, 1);
    await vi.waitFor(async () => expect(await run.lockHolder()).toBeNull(), { timeout: 2_000, interval: 10 });
    expect((await second.tick(run.meta.id, run.meta, alive)).newPoints).toBe(5);
    await run.append(lines(25, 4));
    expect(evaluated(await second.wake(run.meta.id, run.meta)).newPoints).toBe(4);
    // The first process comes back: its hold is past the time it trusted the lease, the renewal fails,
    // and it leaves the run to the holder instead of evaluating its stale copy.
    run.clock.now += 13_000;
    await run.append(lines(29, 1));
    expect(await first.wake(run.meta.id, run.meta)).toBe('held-elsewhere');
    await second.endHolds();
    expect(evaluated(await first.wake(run.meta.id, run.meta)).newPoints).toBe(1);
    await first.endHolds();
    const state = await first.loadState(run.meta.id);
    expect(state.rolling.points).toBe(30);
    expect(state.rolling.metrics.loss?.steps.slice(-11)).toEqual([
      19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
    ]);
  });

  it('read only the files a wake-up names (every file on the first of a hold), leaving the rest for later', async () => {
    const run = await runWith('named-files');
    const monitor = run.make();
    const printed = (from: number, count: number) =>
      Array.from(
        { length: count },
        (_, index) => `step=${from + index} loss=${1 / (1 + from + index)}\n`,
      ).join('');
    const log = (text: string) => appendFile(join(root, run.meta.id, 'output.log'), text);
    // A run without the helper: its points come from what it prints.
    await log(printed(0, 20));
    expect((await monitor.tick(run.meta.id, run.meta, alive)).newPoints).toBe(20);
    // The hold's first evaluation reads every file, whichever the wake-up named.
    await log(printed(20, 2));
    const first = await monitor.wake(run.meta.id, run.meta, WOKEN_FILE_BITS.metrics);
    expect(evaluated(first).newPoints).toBe(2);
    // After that, a wake-up for metrics.jsonl does not read output.log: its lines wait, unread, not lost.
    await log(printed(22, 3));
    expect(evaluated(await monitor.wake(run.meta.id, run.meta, WOKEN_FILE_BITS.metrics)).newPoints).toBe(0);
    expect(evaluated(await monitor.wake(run.meta.id, run.meta, WOKEN_FILE_BITS.log)).newPoints).toBe(3);
    await log(printed(25, 1));
    expect(evaluated(await monitor.wake(run.meta.id, run.meta, WOKEN_FILE_BITS.alerts)).newPoints).toBe(0);
    // The tick reads every file: the line no wake-up named is counted once.
    expect((await monitor.tick(run.meta.id, run.meta, alive)).newPoints).toBe(1);
    expect((await monitor.loadState(run.meta.id)).rolling.points).toBe(26);
  });

  it('go on with a read cut at the byte cap at the next wake-up, whichever file that one names', async () => {
    const run = await runWith('capped-read');
    const monitor = createMonitor({
      redis,
      prefix,
      runDir: (meta) => join(root, meta.id),
      clock: () => run.clock.now,
      maxBytesPerTick: 400,
    });
    await run.append(lines(0, 5));
    await monitor.tick(run.meta.id, run.meta, alive);
    await monitor.wake(run.meta.id, run.meta, WOKEN_FILE_BITS.metrics);
    // 30 lines of ~30 bytes: more than two reads' worth at 400 bytes each.
    await run.append(lines(5, 30));
    let points = evaluated(await monitor.wake(run.meta.id, run.meta, WOKEN_FILE_BITS.metrics)).newPoints;
    expect(points).toBeLessThan(30);
    for (let wake = 0; wake < 5 && points < 30; wake++)
      points += evaluated(await monitor.wake(run.meta.id, run.meta, WOKEN_FILE_BITS.log)).newPoints;
    expect(points).toBe(30);
    await monitor.endHolds();
    expect((await monitor.loadState(run.meta.id)).rolling.points).toBe(35);
  });
});
