/**
 * Monitor tick cost. Prints:
 *  tick_ms_1k_lines / tick_ms_1m_lines — median wall time of a tick that reads 100 new lines appended to a
 *    metrics.jsonl already holding 1k vs 1M lines (offset committed near the end, window primed), and
 *    their ratio (goal ≤ 1.5: the cost must not grow with the file);
 *  monitored_runs_at_30s_per_core — runs one core can tick every 30 s using under half a core, from the
 *    CPU time (process.cpuUsage) of steady-state ticks with 30 new lines each (Redis server CPU excluded);
 *  tick_cpu_ms_warm — the same, over the 20 rounds after those (the compiler's warm-up left behind);
 *  llm_calls_per_healthy_run_hour — an hour of a healthy run (1 step/s, 120 ticks of 30 s on a simulated
 *    clock); the monitor never calls an LLM itself, so this counts the triage requests it would cause
 *    (one per incident).
 * Run: npx tsx bench/monitor-tick.ts  (needs Redis at REDIS_URL or 127.0.0.1:6379)
 */
import { appendFile, mkdir, mkdtemp, open, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createMonitor } from '../src/monitor/monitor.js';
import type { RunMeta } from '../src/runs/records/run-types.js';
import { testRunMeta } from '../test/helpers/run-meta.js';

/** Benchmarks print `name=value` lines on stdout. */
function print(line: string): void {
  process.stdout.write(`${line}\n`);
}

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `bench-monitor-${process.pid}`;
const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
const root = await mkdtemp(join(tmpdir(), 'shepherd-bench-monitor-'));

function meta(id: string): RunMeta {
  return testRunMeta(id, { name: id, gpus: 1, gpuIndices: [0] });
}

function healthyLine(step: number): string {
  const loss = (3 / Math.sqrt(1 + step / 10)) * (1 + 0.01 * Math.sin(step * 1.37));
  return `{"ts": ${1_700_000_000 + step}, "step": ${step}, "loss": ${loss}, "lr": 0.0003, "grad_norm": ${1 + 0.1 * Math.cos(step)}}\n`;
}

function lines(from: number, count: number): string {
  let text = '';
  for (let step = from; step < from + count; step++) text += healthyLine(step);
  return text;
}

let now = 1_700_000_000_000;
const clock = () => now;
const monitor = createMonitor({ redis, prefix, runDir: (run) => join(root, run.id), clock });
const alive = { kind: 'alive' } as const;

async function prepareRun(id: string, existingLines: number): Promise<number> {
  const dir = join(root, id);
  await mkdir(dir, { recursive: true });
  const path = join(dir, 'metrics.jsonl');
  const handle = await open(path, 'w');
  const chunk = 50_000;
  for (let start = 0; start < existingLines; start += chunk) {
    await handle.write(lines(start, Math.min(chunk, existingLines - start)));
  }
  await handle.close();
  // A long-running monitor has committed its offset near the end: point it 1,000 lines before the end
  // and tick once so the rolling window is primed the same way for both files.
  const size = (await stat(path)).size;
  const tailBytes = Buffer.byteLength(lines(existingLines - 1000, 1000));
  const { ino } = await stat(path, { bigint: true });
  await redis.hset(
    `${prefix}:monitor:${id}`,
    'cursor:metrics',
    JSON.stringify({ ino: ino.toString(), offset: size - tailBytes }),
  );
  await monitor.tick(id, meta(id), alive);
  return existingLines;
}

async function measureTicks(
  id: string,
  firstStep: number,
  rounds: number,
  newLines: number,
): Promise<number[]> {
  const path = join(root, id, 'metrics.jsonl');
  const times: number[] = [];
  let step = firstStep;
  for (let round = 0; round < rounds; round++) {
    await appendFile(path, lines(step, newLines));
    step += newLines;
    now += 30_000;
    const started = performance.now();
    await monitor.tick(id, meta(id), alive);
    times.push(performance.now() - started);
  }
  return times;
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;

try {
  const small = await prepareRun('small', 1_000);
  const large = await prepareRun('large', 1_000_000);
  // Interleave to share any machine noise fairly; warm up first.
  await measureTicks('small', small, 5, 100);
  await measureTicks('large', large, 5, 100);
  const smallTimes: number[] = [];
  const largeTimes: number[] = [];
  for (let round = 0; round < 6; round++) {
    smallTimes.push(...(await measureTicks('small', small + 500 + round * 500, 5, 100)));
    largeTimes.push(...(await measureTicks('large', large + 500 + round * 500, 5, 100)));
  }
  const tick1k = median(smallTimes);
  const tick1m = median(largeTimes);
  print(`tick_ms_1k_lines=${tick1k.toFixed(2)}`);
  print(`tick_ms_1m_lines=${tick1m.toFixed(2)}`);
  print(`tick_ratio_1m_vs_1k=${(tick1m / tick1k).toFixed(2)}`);

  // CPU per steady-state tick across many runs (30 new lines = 30 s at 1 step/s).
  const runCount = 100;
  const ids = Array.from({ length: runCount }, (_, index) => `cpu-${index}`);
  for (const id of ids) {
    await mkdir(join(root, id), { recursive: true });
    await appendFile(join(root, id, 'metrics.jsonl'), lines(0, 500));
    await monitor.tick(id, meta(id), alive);
  }
  /** CPU per tick over rounds [from, to) of 30 new lines for every run. */
  const cpuMsPerTickOver = async (from: number, to: number) => {
    let cpuMicros = 0;
    let ticks = 0;
    for (let round = from; round < to; round++) {
      for (const id of ids) await appendFile(join(root, id, 'metrics.jsonl'), lines(500 + round * 30, 30));
      now += 30_000;
      const before = process.cpuUsage();
      for (const id of ids) await monitor.tick(id, meta(id), alive);
      const used = process.cpuUsage(before);
      cpuMicros += used.user + used.system;
      ticks += ids.length;
    }
    return cpuMicros / 1000 / ticks;
  };
  const cpuMsPerTick = await cpuMsPerTickOver(0, 5);
  print(`tick_cpu_ms=${cpuMsPerTick.toFixed(3)}`);
  print(`monitored_runs_at_30s_per_core=${Math.floor((0.5 * 30_000) / cpuMsPerTick)}`);
  // The same ticks once the process has run a while (the five rounds above include the compiler's warm-up
  // right after the runs were primed): 20 more rounds, what a long-running monitor spends.
  print(`tick_cpu_ms_warm=${(await cpuMsPerTickOver(5, 25)).toFixed(3)}`);

  // An hour of a healthy run at 30 s ticks.
  await mkdir(join(root, 'hour'), { recursive: true });
  let incidents = 0;
  for (let tick = 0; tick < 120; tick++) {
    await appendFile(join(root, 'hour', 'metrics.jsonl'), lines(tick * 30, 30));
    now += 30_000;
    const result = await monitor.tick('hour', meta('hour'), alive);
    incidents += result.incidents.length;
    await monitor.ack(
      'hour',
      result.incidents.map((incident) => incident.id),
    );
  }
  print(`llm_calls_per_healthy_run_hour=${incidents}`);
} finally {
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
  await rm(root, { recursive: true, force: true });
}
