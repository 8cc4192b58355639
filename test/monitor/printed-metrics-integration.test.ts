import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, mkdtemp, open, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderChart } from '../../src/charts/render-chart.js';
import { compileMetricPattern } from '../../src/config/metric-pattern.js';
import { createMonitor } from '../../src/monitor/monitor.js';
import { createMonitorScheduler, type MonitorScheduler } from '../../src/monitor/monitor-scheduler.js';
import type { Monitor } from '../../src/monitor/monitor-types.js';
import { createMonitorWorker } from '../../src/monitor/monitor-worker.js';
import type { Incident } from '../../src/monitor/types.js';
import type { ProcessState } from '../../src/runs/executor.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { testRunMeta } from '../helpers/run-meta.js';

/*
 * Scripts that never import the `shepherd` helper and only print their metrics, each in one of the
 * formats teams use (Trainer dicts with a tqdm bar, JSON, key/value lines, nanoGPT, Lightning and Keras
 * progress bars, a custom SHEPHERD_METRIC_PATTERN). Real Python processes, a real BullMQ scheduler ticking
 * every second, real Redis: the loss turning NaN must be alerted within two ticks, exactly once, and the
 * alert must have a chart to draw.
 */

const INTERVAL_S = 1;
const SLACK_MS = 1500;
const fixtures = resolve('test/fixtures/printed');
const prefix = uniquePrefix('mprint');
const connection = { url: TEST_REDIS_URL, maxRetriesPerRequest: null };

interface RunHandle {
  meta: RunMeta;
  child: ChildProcess;
  state: ProcessState;
  exitedAt?: number;
  incidents: Array<{ incident: Incident; at: number }>;
  dir: string;
}

let root: string;
let redis: Redis;
let monitor: Monitor;
let scheduler: MonitorScheduler;
let worker: Worker;
const runs = new Map<string, RunHandle>();
const ticksByRun = new Map<string, number>();

function makeMeta(id: string): RunMeta {
  return testRunMeta(id, { name: `printed-${id}` });
}

async function launch(id: string, script: string, env: Record<string, string>): Promise<RunHandle> {
  const dir = join(root, id);
  await mkdir(dir, { recursive: true });
  const log = await open(join(dir, 'output.log'), 'a');
  const child = spawn('python3', ['-u', join(fixtures, script)], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      PYTHONPATH: fixtures,
      FIXTURE_SLEEP: '0.05',
      FIXTURE_STEPS: '60',
      FIXTURE_AT: '30',
      ...env,
    },
    stdio: ['ignore', log.fd, log.fd],
  });
  await log.close();
  const handle: RunHandle = { meta: makeMeta(id), child, state: { kind: 'alive' }, incidents: [], dir };
  child.on('exit', (code, signal) => {
    handle.exitedAt = Date.now();
    handle.state =
      code === null ? { kind: 'signaled', signal: signal ?? 'SIGKILL' } : { kind: 'exited', exitCode: code };
  });
  runs.set(id, handle);
  await scheduler.start(id);
  return handle;
}

async function eventTime(handle: RunHandle, name: string): Promise<number> {
  const text = await readFile(join(handle.dir, 'output.log'), 'utf8');
  const match = new RegExp(`FIXTURE_EVENT ${name} ([0-9.]+)`).exec(text);
  if (match === null) throw new Error(`no ${name} event in ${handle.meta.id}: ${text.slice(-500)}`);
  return Number(match[1]) * 1000;
}

async function waitFor(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((done) => setTimeout(done, 100));
  }
}

async function settle(handle: RunHandle): Promise<void> {
  await waitFor(() => handle.exitedAt !== undefined, 30_000);
  const ticksAtExit = ticksByRun.get(handle.meta.id) ?? 0;
  await waitFor(() => (ticksByRun.get(handle.meta.id) ?? 0) >= ticksAtExit + 3, 15_000);
}

const budgetMs = 2 * INTERVAL_S * 1000 + SLACK_MS;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'shepherd-mprint-'));
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  monitor = createMonitor({
    redis,
    prefix,
    runDir: (meta) => join(root, meta.id),
    detectors: { stallS: 30 },
    metricPattern: compileMetricPattern('^TRAIN it=(?<step>\\d+) L=(?<loss>\\S+) acc=(?<accuracy>\\S+)'),
  });
  scheduler = createMonitorScheduler({ connection, prefix, intervalS: INTERVAL_S });
  worker = createMonitorWorker({
    connection,
    prefix,
    monitor,
    logger: pino({ level: 'silent' }),
    loadRun: async (runId) => runs.get(runId)?.meta,
    pollProcess: async (meta) => runs.get(meta.id)?.state ?? { kind: 'unknown' },
    onIncident: async (incident) => {
      runs.get(incident.runId)?.incidents.push({ incident, at: Date.now() });
    },
    onTick: async (_result, meta) => {
      ticksByRun.set(meta.id, (ticksByRun.get(meta.id) ?? 0) + 1);
    },
  });
});

afterAll(async () => {
  for (const handle of runs.values()) {
    if (handle.exitedAt === undefined && handle.child.pid !== undefined) handle.child.kill('SIGKILL');
  }
  await worker?.close();
  await scheduler?.queue.obliterate({ force: true }).catch(() => undefined);
  await scheduler?.close();
  await deleteKeysWithPrefix(prefix);
  redis?.disconnect();
  await rm(root, { recursive: true, force: true });
});

const FORMATS = [
  'json',
  'pipes',
  'equals',
  'bracket',
  'nanogpt',
  'epoch-step',
  'lightning',
  'keras',
  'pattern',
];

describe('metrics printed by scripts without the helper', () => {
  it('alerts a NaN loss within two ticks, once, with a chart, in every printed format', async () => {
    const trainer = await launch('trainer', 'trainer_style.py', {});
    const others = await Promise.all(
      FORMATS.map((format) => launch(format, 'printed_formats.py', { FIXTURE_FORMAT: format })),
    );
    const all = [trainer, ...others];
    await Promise.all(all.map((handle) => settle(handle)));

    for (const handle of all) {
      const id = handle.meta.id;
      const kinds = handle.incidents.map((item) => item.incident.kind).sort();
      expect(kinds, id).toEqual(['finished', 'nan']);
      const nan = handle.incidents.find((item) => item.incident.kind === 'nan');
      expect(nan?.incident.metrics, id).toContain('loss');
      expect(
        (nan?.at ?? Number.POSITIVE_INFINITY) - (await eventTime(handle, 'nan')),
        id,
      ).toBeLessThanOrEqual(budgetMs);
      // The alert's chart: the run's loss history, healthy points and the NaN, drawn to a PNG.
      const series = await monitor.series(id, nan?.incident.metrics);
      const loss = series.loss ?? [];
      expect(loss.filter((point) => Number.isFinite(point.value)).length, id).toBeGreaterThan(5);
      expect(
        loss.some((point) => Number.isNaN(point.value)),
        id,
      ).toBe(true);
      const png = await renderChart({ runName: id, series }, { quickchartUrl: 'local' });
      expect(Buffer.from(png).subarray(1, 4).toString(), id).toBe('PNG');
    }

    // Steps come from the line, else from the tqdm bar: the Trainer's first NaN dict is at step 30 of 60.
    expect(trainer.incidents.find((item) => item.incident.kind === 'nan')?.incident.step).toBe(30);
    const state = await monitor.loadState('trainer');
    expect(state.printed?.plannedSteps).toBe(60);
    expect(Object.keys(state.rolling.metrics)).toEqual(
      expect.arrayContaining(['loss', 'grad_norm', 'learning_rate', 'epoch', 'eval_loss', 'train_runtime']),
    );
    // Each kind of line kept its own step: Lightning and Keras count from their bar.
    for (const id of ['pipes', 'lightning', 'keras', 'pattern']) {
      expect(runs.get(id)?.incidents.find((item) => item.incident.kind === 'nan')?.incident.step, id).toBe(
        30,
      );
    }
    // The points are also in stdout-metrics.jsonl, marked with their source, for `chart` and `status`.
    const derived = (await readFile(join(trainer.dir, 'stdout-metrics.jsonl'), 'utf8')).trim().split('\n');
    expect(derived[0]).toMatch(/^\{"step": 2, "source": "stdout", "loss": 2\.73\d*, /);
    expect(derived.some((line) => line.includes('"loss": NaN'))).toBe(true);
  }, 120_000);
});
