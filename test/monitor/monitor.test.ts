import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { createMonitor } from '../../src/monitor/monitor.js';
import { renderTriageSnapshot } from '../../src/monitor/triage-snapshot.js';
import type { ProcessState } from '../../src/runs/executor.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { testRunMeta } from '../helpers/run-meta.js';

let root: string;
let redis: Redis;
const prefix = uniquePrefix('monitor');
const alive: ProcessState = { kind: 'alive' };

function makeMeta(id: string): RunMeta {
  return testRunMeta(id, { gpus: 1, gpuIndices: [0], createdAt: new Date(0).toISOString() });
}

function line(step: number, loss: number | string, extra = ''): string {
  return `{"ts": ${step}, "step": ${step}, "loss": ${loss}${extra}}\n`;
}

function setup(id: string) {
  let now = 0;
  const clock = () => now;
  const monitor = createMonitor({
    redis,
    prefix,
    runDir: (meta) => join(root, meta.id),
    clock,
    detectors: { stallS: 120 },
  });
  const metricsPath = join(root, id, 'metrics.jsonl');
  return {
    meta: makeMeta(id),
    monitor,
    metricsPath,
    logPath: join(root, id, 'output.log'),
    advance: (ms: number) => {
      now += ms;
    },
    fresh: () =>
      createMonitor({
        redis,
        prefix,
        runDir: (meta) => join(root, meta.id),
        clock,
        detectors: { stallS: 120 },
      }),
  };
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'shepherd-monitor-'));
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
  await deleteKeysWithPrefix(prefix);
  redis.disconnect();
});

async function prepare(id: string) {
  const { mkdir } = await import('node:fs/promises');
  await mkdir(join(root, id), { recursive: true });
  await writeFile(join(root, id, 'metrics.jsonl'), '');
  await writeFile(join(root, id, 'output.log'), '');
}

describe('createMonitor', () => {
  it('a healthy run over 60 ticks raises nothing', async () => {
    await prepare('healthy');
    const run = setup('healthy');
    let step = 0;
    for (let tick = 0; tick < 60; tick++) {
      let text = '';
      for (let index = 0; index < 10; index++, step++) {
        text += line(step, (3 / Math.sqrt(1 + step / 10)) * (1 + 0.01 * Math.sin(step * 1.3)));
      }
      await appendFile(run.metricsPath, text);
      run.advance(30_000);
      const result = await run.monitor.tick('healthy', run.meta, alive);
      expect(result.incidents, `tick ${tick}`).toEqual([]);
      expect(result.newPoints).toBe(10);
    }
    const state = await run.monitor.loadState('healthy');
    expect(state.rolling.points).toBe(600);
    // bounded: the window and the history have hard caps
    expect(state.rolling.metrics.loss?.values.length).toBeLessThanOrEqual(500);
  });

  it('NaN fires once per episode, again after recovery; ack stops redelivery', async () => {
    await prepare('nan');
    const run = setup('nan');
    const kinds: string[] = [];
    const tick = async (lines: string) => {
      await appendFile(run.metricsPath, lines);
      run.advance(1000);
      const result = await run.monitor.tick('nan', run.meta, alive);
      kinds.push(...result.incidents.map((incident) => incident.kind));
      await run.monitor.ack(
        'nan',
        result.incidents.map((incident) => incident.id),
      );
      return result;
    };
    let text = '';
    for (let step = 0; step < 20; step++) text += line(step, 1);
    await tick(text);
    const first = await tick(line(20, 'NaN') + line(21, 'NaN'));
    expect(first.incidents).toHaveLength(1);
    expect(first.incidents[0]).toMatchObject({
      kind: 'nan',
      step: 20,
      severity: 'critical',
      metrics: ['loss'],
    });
    expect(first.incidents[0]?.summary).toContain('loss became NaN at step 20');
    await tick(line(22, 'NaN') + line(23, 'Infinity'));
    // 3 finite points are not a recovery (5 needed) — the next NaN is the same episode
    await tick(line(24, 1) + line(25, 1) + line(26, 1) + line(27, 'NaN'));
    expect(kinds).toEqual(['nan']);
    let recover = '';
    for (let step = 28; step < 34; step++) recover += line(step, 1);
    await tick(recover);
    const again = await tick(line(34, '-Infinity'));
    expect(again.incidents.map((incident) => incident.kind)).toEqual(['nan']);
    expect(again.incidents[0]?.id).not.toBe(first.incidents[0]?.id);
    // non-finite values survive the Redis round trip (a fresh monitor has no in-memory copy)
    const stored = await run.fresh().loadState('nan');
    const values = stored.rolling.metrics.loss?.values ?? [];
    expect(Number.isNaN(values[20])).toBe(true);
    expect(values[23]).toBe(Number.POSITIVE_INFINITY);
    expect(stored.rolling.lastMetrics.loss).toBe(Number.NEGATIVE_INFINITY);
    expect(stored.episodes.nan).toMatchObject({ active: true, fired: 2 });
  });

  it('reads a local run synchronously and a Slurm run asynchronously to the same cursors and points', async () => {
    const runs = [
      { id: 'sync-local', meta: makeMeta('sync-local') },
      { id: 'sync-slurm', meta: { ...makeMeta('sync-slurm'), executor: 'slurm' as const } },
    ];
    for (const { id } of runs) await prepare(id);
    const monitor = setup('sync-local').monitor;
    const seen: string[][] = [[], []];
    const steps = [
      line(0, 1) + line(1, 0.9),
      // a half-written line stays for the next tick
      `${line(2, 0.8)}{"step": 3, "lo`,
      'ss": 0.7}\n',
      '',
      line(4, 'NaN'),
    ];
    for (const [round, text] of steps.entries()) {
      for (const [index, { id, meta }] of runs.entries()) {
        await appendFile(join(root, id, 'metrics.jsonl'), text);
        if (round === 3) await writeFile(join(root, id, 'output.log'), 'epoch 1\n');
        const result = await monitor.tick(id, meta, alive);
        const cursor = await redis.hget(`${prefix}:monitor:${id}`, 'cursor:metrics');
        const logCursor = await redis.hget(`${prefix}:monitor:${id}`, 'cursor:log');
        seen[index]?.push(
          `${result.newPoints} ${result.incidents.map((incident) => incident.kind).join(',')} ` +
            `${JSON.parse(cursor ?? '{}').offset} ${JSON.parse(logCursor ?? '{}').offset}`,
        );
      }
    }
    expect(seen[0]).toEqual(seen[1]);
    expect(seen[0]).toEqual(['2  66 0', '1  100 0', '1  125 0', '0  125 8', '1 nan 159 8']);
  });

  it('an unacknowledged incident is returned again (at-least-once) until acked', async () => {
    await prepare('outbox');
    const run = setup('outbox');
    let text = '';
    for (let step = 0; step < 20; step++) text += line(step, 1);
    await appendFile(run.metricsPath, text + line(20, 50));
    const first = await run.monitor.tick('outbox', run.meta, alive);
    expect(first.incidents.map((incident) => incident.kind)).toEqual(['spike']);
    const second = await run.monitor.tick('outbox', run.meta, alive);
    expect(second.incidents.map((incident) => incident.id)).toEqual(
      first.incidents.map((incident) => incident.id),
    );
    await run.monitor.ack('outbox', [first.incidents[0]?.id ?? '']);
    expect((await run.monitor.tick('outbox', run.meta, alive)).incidents).toEqual([]);
  });

  it('skips an outbox entry that is not an incident, with a log line, and returns the others', async () => {
    await prepare('corrupt-outbox');
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const monitor = createMonitor({
      redis,
      prefix,
      runDir: (meta) => join(root, meta.id),
      clock: () => 0,
      logger: createLogger('info', {}, { destination: sink }),
    });
    const good = {
      id: 'corrupt-outbox:spike:loss#1',
      runId: 'corrupt-outbox',
      kind: 'spike',
      severity: 'warning',
      title: 'corrupt-outbox: loss spike',
      summary: 'loss jumped',
      metrics: ['loss'],
      at: 1,
    };
    await redis.hset(`${prefix}:monitor-outbox:corrupt-outbox`, {
      [good.id]: JSON.stringify(good),
      // A torn write, and an entry with an id and a kind but nothing a card needs (no metrics, no title).
      torn: '{"id": "torn", "kind": "nan"',
      partial: JSON.stringify({ id: 'partial', kind: 'spike' }),
    });
    const result = await monitor.tick('corrupt-outbox', makeMeta('corrupt-outbox'), alive);
    expect(result.incidents).toEqual([good]);
    const warnings = lines
      .map((text) => JSON.parse(text) as { msg: string; runId?: string; entries?: string[] })
      .filter((entry) => entry.msg === 'unreadable monitor outbox entries skipped');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.runId).toBe('corrupt-outbox');
    expect([...(warnings[0]?.entries ?? [])].sort()).toEqual(['partial', 'torn']);
  });

  it('survives a restart: no point read twice or skipped, no re-alert', async () => {
    await prepare('restart');
    const run = setup('restart');
    let text = '';
    for (let step = 0; step < 30; step++) text += line(step, step === 25 ? 40 : 1);
    await appendFile(run.metricsPath, `${text}{"step": 30, "lo`);
    const before = await run.monitor.tick('restart', run.meta, alive);
    expect(before.newPoints).toBe(30);
    expect(before.incidents.map((incident) => incident.kind)).toEqual(['spike']);
    await run.monitor.ack(
      'restart',
      before.incidents.map((incident) => incident.id),
    );
    await appendFile(run.metricsPath, `ss": 1}\n${line(31, 1)}`);
    const restarted = run.fresh();
    const after = await restarted.tick('restart', run.meta, alive);
    expect(after.newPoints).toBe(2);
    expect(after.incidents).toEqual([]);
    expect((await restarted.loadState('restart')).rolling.points).toBe(32);
    expect(after.progress.lastStep).toBe(31);
  });

  it('reports malformed lines once and keeps going', async () => {
    await prepare('malformed');
    const run = setup('malformed');
    await appendFile(run.metricsPath, `${line(0, 1)}not json\n${line(1, 1)}{"step": 2, "loss": \n`);
    const first = await run.monitor.tick('malformed', run.meta, alive);
    expect(first.newPoints).toBe(2);
    expect(first.malformed.count).toBe(2);
    expect(first.malformed.note).toContain('not json');
    await appendFile(run.metricsPath, `garbage\n${line(3, 1)}`);
    const second = await run.monitor.tick('malformed', run.meta, alive);
    expect(second.malformed).toEqual({ count: 1 });
    expect(second.newPoints).toBe(1);
  });

  it('stall fires once while alive, ends when steps advance', async () => {
    await prepare('stall');
    const run = setup('stall');
    let text = '';
    for (let step = 0; step < 10; step++) text += line(step, 3 / (1 + step));
    await appendFile(run.metricsPath, text);
    await run.monitor.tick('stall', run.meta, alive);
    const kinds: string[] = [];
    for (let tick = 0; tick < 8; tick++) {
      run.advance(30_000);
      const result = await run.monitor.tick('stall', run.meta, alive);
      kinds.push(...result.incidents.map((incident) => incident.kind));
      await run.monitor.ack(
        'stall',
        result.incidents.map((incident) => incident.id),
      );
    }
    expect(kinds).toEqual(['stall']);
    await appendFile(run.metricsPath, line(10, 0.2));
    run.advance(1000);
    expect((await run.monitor.tick('stall', run.meta, alive)).incidents).toEqual([]);
  });

  it('crash: class, redacted traceback, summary; finished: summary once', async () => {
    await prepare('crash');
    const run = setup('crash');
    await appendFile(run.metricsPath, line(0, 2) + line(1, 1.5));
    await appendFile(
      run.logPath,
      'loading token=abc123secret\nTraceback (most recent call last):\n  File "train.py", line 9, in <module>\n    step(hf_aaaaaaaaaaaaaaaaaaaaaaaaaa)\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n',
    );
    const crashed = await run.monitor.tick('crash', run.meta, { kind: 'exited', exitCode: 1 });
    expect(crashed.incidents).toHaveLength(1);
    const incident = crashed.incidents[0];
    expect(incident).toMatchObject({ kind: 'crash', crashClass: 'cuda_oom', exitCode: 1, step: 1 });
    expect(incident?.summary).toBe('run-crash failed (exit 1) at step 1 — CUDA out of memory.');
    expect(incident?.traceback).toContain('CUDA out of memory');
    expect(incident?.traceback).not.toContain('hf_aaaa');
    await run.monitor.ack('crash', [incident?.id ?? '']);
    expect((await run.monitor.tick('crash', run.meta, { kind: 'exited', exitCode: 1 })).incidents).toEqual(
      [],
    );

    const snapshot = await run.monitor.snapshot({
      meta: run.meta,
      processState: { kind: 'exited', exitCode: 1 },
      script: `import shepherd\n${'x = 1\n'.repeat(10_000)}`,
      ...(incident === undefined ? {} : { incident }),
    });
    const text = renderTriageSnapshot(snapshot);
    expect(text).toContain('cuda_oom');
    expect(text).toContain('loss: last 1.5');
    expect(text).not.toContain('abc123secret');
    expect(text.length).toBeLessThan(16_000);

    // a relaunch (launchCount 2) that finishes cleanly
    const relaunched = { ...run.meta, launchCount: 2 };
    await appendFile(run.metricsPath, line(2, 1.2));
    const finished = await run.monitor.tick('crash', relaunched, { kind: 'exited', exitCode: 0 });
    expect(finished.incidents.map((item) => item.kind)).toEqual(['finished']);
    expect(finished.incidents[0]?.summary).toMatch(/^run-crash finished in .* at step 2 — loss 1\.2\.$/);
  });

  it('SIGKILL is a host OOM kill unless the run is being stopped', async () => {
    await prepare('kill');
    const run = setup('kill');
    const stopped = await run.monitor.tick(
      'kill',
      { ...run.meta, status: 'stopped' },
      { kind: 'signaled', signal: 'SIGKILL' },
    );
    expect(stopped.incidents).toEqual([]);
    // While the run is still `running`, run-endings has not decided yet: an automatic relaunch may follow.
    const undecided = await run.monitor.tick('kill', run.meta, { kind: 'signaled', signal: 'SIGKILL' });
    expect(undecided.incidents).toEqual([]);
    const killed = await run.monitor.tick(
      'kill',
      { ...run.meta, status: 'failed' },
      { kind: 'signaled', signal: 'SIGKILL' },
    );
    expect(killed.incidents[0]).toMatchObject({
      kind: 'crash',
      crashClass: 'host_oom_kill',
      signal: 'SIGKILL',
    });
  });

  it('serves chart series from the bounded history', async () => {
    await prepare('series');
    const run = setup('series');
    let text = '';
    for (let step = 0; step < 3000; step++) text += line(step, step === 1500 ? 99 : 1, ', "acc": 0.5');
    await appendFile(run.metricsPath, text);
    await run.monitor.tick('series', run.meta, alive);
    const series = await run.monitor.series('series', ['loss']);
    expect(Object.keys(series)).toEqual(['loss']);
    const points = series.loss ?? [];
    expect(points.length).toBeLessThanOrEqual(1500);
    expect(Math.max(...points.map((point) => point.value))).toBe(99);
    expect(points.at(-1)?.step).toBe(2999);
  });
});
