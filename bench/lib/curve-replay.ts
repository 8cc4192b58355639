import { appendFile, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { createMonitor } from '../../src/monitor/monitor.js';
import type { MonitorOptions } from '../../src/monitor/monitor-types.js';
import type { Incident } from '../../src/monitor/types.js';
import type { ProcessState } from '../../src/runs/executor.js';
import { testRunMeta } from '../../test/helpers/run-meta.js';

/**
 * Replays a curve of the alert-quality corpus (test/fixtures/curves) through the real monitor on a
 * simulated clock: every tick (default 30 s) appends the lines whose `ts` has passed to metrics.jsonl and
 * runs `monitor.tick`, exactly as the monitor worker would. Used by bench/alert-quality.ts and the tests.
 */

export const CURVES_DIR = new URL('../../test/fixtures/curves/', import.meta.url).pathname;

export interface CurveEntry {
  name: string;
  healthy: boolean;
  /** Run config the monitor sees (`meta.config`), e.g. max_steps when a trainer knows it. */
  config: Record<string, unknown>;
  /** Incident curves: the alert kind expected and the step of its first sign. */
  expect?: string;
  firstSignStep?: number;
  /** Seconds the process stays alive after its last line (a stall). */
  aliveAfterEndS: number;
}

export interface ReplayResult {
  entry: CurveEntry;
  /** Every incident delivered, with the tick (1-based) that raised it. */
  incidents: Array<{ incident: Incident; tick: number }>;
  ticks: number;
  /** Incident curves: the tick whose data (or, for a stall, whose clock) first showed the problem. */
  firstSignTick?: number;
}

export async function loadManifest(directory: string = CURVES_DIR): Promise<CurveEntry[]> {
  return JSON.parse(await readFile(join(directory, 'manifest.json'), 'utf8')) as CurveEntry[];
}

const TS = /"ts":\s*([0-9.]+)/;
const STEP = /"step":\s*([0-9]+)/;

export async function replayCurve(
  entry: CurveEntry,
  options: {
    redis: Redis;
    prefix: string;
    /** Scratch directory; the run's metrics.jsonl is written under it. */
    root: string;
    tickS?: number;
    detectors?: MonitorOptions['detectors'];
    directory?: string;
    /** Stop once the expected incident was seen (incident curves). */
    stopWhenDetected?: boolean;
  },
): Promise<ReplayResult> {
  const tickMs = (options.tickS ?? 30) * 1000;
  const text = await readFile(join(options.directory ?? CURVES_DIR, `${entry.name}.jsonl`), 'utf8');
  const lines = text.split('\n').filter((line) => line.trim() !== '');
  const times = lines.map((line) => Number(TS.exec(line)?.[1] ?? Number.NaN) * 1000);
  const steps = lines.map((line) => Number(STEP.exec(line)?.[1] ?? Number.NaN));
  const startMs = (times[0] ?? 0) - 1000;
  let now = startMs;
  const runId = `${entry.name}-${Math.random().toString(36).slice(2, 8)}`;
  const runDir = join(options.root, runId);
  await mkdir(runDir, { recursive: true });
  const monitor = createMonitor({
    redis: options.redis,
    prefix: options.prefix,
    runDir: () => runDir,
    clock: () => now,
    ...(options.detectors === undefined ? {} : { detectors: options.detectors }),
  });
  const meta = testRunMeta(runId, {
    name: entry.name,
    maxHours: 24,
    config: entry.config,
    createdAt: new Date(startMs).toISOString(),
  });
  const lastTs = times.at(-1) ?? startMs;
  const endMs = lastTs + entry.aliveAfterEndS * 1000;
  const stallS = options.detectors?.stallS ?? 300;
  const stallSignMs = lastTs + stallS * 1000;
  const result: ReplayResult = { entry, incidents: [], ticks: 0 };
  const seen = new Set<string>();
  let next = 0;
  for (let tick = 1; ; tick++) {
    now = startMs + tick * tickMs;
    let chunk = '';
    while (next < lines.length && (times[next] ?? 0) <= now) {
      if (
        result.firstSignTick === undefined &&
        entry.expect !== undefined &&
        entry.expect !== 'stall' &&
        (steps[next] ?? -1) >= (entry.firstSignStep ?? Number.POSITIVE_INFINITY)
      )
        result.firstSignTick = tick;
      chunk += `${lines[next]}\n`;
      next++;
    }
    if (entry.expect === 'stall' && result.firstSignTick === undefined && now >= stallSignMs)
      result.firstSignTick = tick;
    if (chunk !== '') await appendFile(join(runDir, 'metrics.jsonl'), chunk);
    const done = next >= lines.length && now > endMs;
    const state: ProcessState = done ? { kind: 'exited', exitCode: 0 } : { kind: 'alive' };
    const tickResult = await monitor.tick(runId, meta, state);
    result.ticks = tick;
    for (const incident of tickResult.incidents) {
      if (seen.has(incident.id)) continue;
      seen.add(incident.id);
      result.incidents.push({ incident, tick });
    }
    await monitor.ack(
      runId,
      tickResult.incidents.map((incident) => incident.id),
    );
    const detected = result.incidents.some((item) => item.incident.kind === entry.expect);
    if (done || (options.stopWhenDetected === true && detected)) break;
  }
  await monitor.forget(runId);
  return result;
}

/** Alerts that count against a healthy run: everything but the end-of-run summary. */
export function alertsOf(result: ReplayResult): Incident[] {
  return result.incidents.map((item) => item.incident).filter((incident) => incident.kind !== 'finished');
}
