import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, mkdtemp, open, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMonitor } from '../../src/monitor/monitor.js';
import { createMonitorScheduler, type MonitorScheduler } from '../../src/monitor/monitor-scheduler.js';
import { createMonitorWorker } from '../../src/monitor/monitor-worker.js';
import type { Incident } from '../../src/monitor/types.js';
import type { ProcessState } from '../../src/runs/executor.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { testRunMeta } from '../helpers/run-meta.js';

/*
 * Real Python fixtures as child processes, a real BullMQ job scheduler ticking every second, real Redis.
 * Each fixture prints `FIXTURE_EVENT <name> <epoch s>` when its incident appears; the incident must be
 * delivered within two ticks of that moment (plus processing slack on a shared 2-core machine), and each
 * expected kind exactly once.
 */

const INTERVAL_S = 1;
const SLACK_MS = 1500;
// Eight Pythons start at once on two shared cores: a 3 s (later 6 s, at load 12) stall limit fired before a
// slow start's first step.
const STALL_S = 10;
const fixtures = resolve('test/fixtures');
const pythonPath = resolve('src/runs/python');
const prefix = uniquePrefix('mfix');
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
let scheduler: MonitorScheduler;
let worker: Worker;
const runs = new Map<string, RunHandle>();
const ticksByRun = new Map<string, number>();

function makeMeta(id: string): RunMeta {
  return testRunMeta(id, { name: `fixture-${id}` });
}

async function launch(id: string, script: string, env: Record<string, string>): Promise<RunHandle> {
  const dir = join(root, id);
  await mkdir(dir, { recursive: true });
  const log = await open(join(dir, 'output.log'), 'a');
  const child = spawn('python3', ['-u', join(fixtures, script)], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      SHEPHERD_RUN_DIR: dir,
      SHEPHERD_RUN_ID: id,
      PYTHONPATH: `${pythonPath}:${fixtures}`,
      FIXTURE_SLEEP: '0.05',
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
    // What run-endings does in the app: the ending is recorded (a SIGKILL's crash waits for it, since an
    // infrastructure ending may be relaunched instead).
    if (handle.meta.status === 'running' && code !== 0) handle.meta = { ...handle.meta, status: 'failed' };
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

/** Wait until the run's process ended and two more ticks ran (so a late duplicate would show up). */
async function settle(handle: RunHandle): Promise<void> {
  await waitFor(() => handle.exitedAt !== undefined, 30_000);
  const ticksAtExit = ticksByRun.get(handle.meta.id) ?? 0;
  await waitFor(() => (ticksByRun.get(handle.meta.id) ?? 0) >= ticksAtExit + 3, 15_000);
}

function kindsOf(handle: RunHandle): string[] {
  return handle.incidents.map((item) => item.incident.kind).sort();
}

function deliveredAt(handle: RunHandle, kind: string): number {
  const found = handle.incidents.find((item) => item.incident.kind === kind);
  if (found === undefined) throw new Error(`no ${kind} incident for ${handle.meta.id}`);
  return found.at;
}

const budgetMs = 2 * INTERVAL_S * 1000 + SLACK_MS;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'shepherd-mfix-'));
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  const monitor = createMonitor({
    redis,
    prefix,
    runDir: (meta) => join(root, meta.id),
    detectors: { stallS: STALL_S, spikeWindow: 20, divergenceWindow: 20, plateauWindow: 40 },
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

describe('monitor on real fixtures', () => {
  it('detects every incident within two ticks, exactly once per episode', async () => {
    const env = { FIXTURE_AT: '40', FIXTURE_STEPS: '80' };
    const [finish, nan, spike, divergence, plateau, hang, oom, killed] = await Promise.all([
      launch('finish', 'monitor_finish.py', { FIXTURE_STEPS: '200' }),
      launch('nan', 'monitor_nan.py', { FIXTURE_AT: '40', FIXTURE_STEPS: '60' }),
      launch('spike', 'monitor_spike.py', env),
      launch('divergence', 'monitor_divergence.py', { FIXTURE_AT: '40', FIXTURE_STEPS: '75' }),
      // plateau window 40 steps + 5-point smoothing
      launch('plateau', 'monitor_plateau.py', { FIXTURE_AT: '45', FIXTURE_STEPS: '70' }),
      launch('hang', 'monitor_hang.py', { FIXTURE_AT: '30', FIXTURE_HANG_S: '60' }),
      launch('oom', 'monitor_cuda_oom.py', { FIXTURE_AT: '30' }),
      launch('killed', 'monitor_exit137.py', { FIXTURE_AT: '30' }),
    ]);
    const all = [finish, nan, spike, divergence, plateau, hang, oom, killed];

    // The hang: stall alerted, then a person stops the run (an expected kill, not a crash).
    await waitFor(() => hang.incidents.length > 0, 40_000);
    hang.meta = { ...hang.meta, status: 'stopped' };
    hang.child.kill('SIGKILL');

    await Promise.all(all.map((handle) => settle(handle)));

    expect(kindsOf(finish)).toEqual(['finished']);
    expect(kindsOf(nan)).toEqual(['finished', 'nan']);
    expect(kindsOf(spike)).toEqual(['finished', 'spike']);
    expect(kindsOf(divergence)).toEqual(['divergence', 'finished']);
    expect(kindsOf(plateau)).toEqual(['finished', 'plateau']);
    expect(kindsOf(hang)).toEqual(['stall']);
    expect(kindsOf(oom)).toEqual(['crash']);
    expect(kindsOf(killed)).toEqual(['crash']);

    const latency = async (handle: RunHandle, kind: string, event: string, extraMs = 0) =>
      deliveredAt(handle, kind) - ((await eventTime(handle, event)) + extraMs);
    expect(await latency(nan, 'nan', 'nan')).toBeLessThanOrEqual(budgetMs);
    expect(await latency(spike, 'spike', 'spike')).toBeLessThanOrEqual(budgetMs);
    expect(await latency(divergence, 'divergence', 'divergence')).toBeLessThanOrEqual(budgetMs);
    expect(await latency(plateau, 'plateau', 'plateau')).toBeLessThanOrEqual(budgetMs);
    expect(await latency(hang, 'stall', 'hang', STALL_S * 1000)).toBeLessThanOrEqual(budgetMs);
    for (const handle of [finish, nan, oom, killed]) {
      const kind = handle === oom || handle === killed ? 'crash' : 'finished';
      expect(deliveredAt(handle, kind) - (handle.exitedAt ?? 0), handle.meta.id).toBeLessThanOrEqual(
        budgetMs,
      );
    }

    const oomIncident = oom.incidents[0]?.incident;
    expect(oomIncident).toMatchObject({ crashClass: 'cuda_oom', exitCode: 1, severity: 'critical' });
    expect(oomIncident?.summary).toContain('failed (exit 1)');
    expect(oomIncident?.summary).toContain('CUDA out of memory');
    expect(oomIncident?.traceback).toContain('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate');
    expect(oomIncident?.traceback).not.toContain('hf_abcdefghij');
    expect(killed.incidents[0]?.incident).toMatchObject({ crashClass: 'host_oom_kill', signal: 'SIGKILL' });
    expect(finish.incidents[0]?.incident.summary).toMatch(/finished in .* at step 199 — loss /);
  }, 90_000);
});
