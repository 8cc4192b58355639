/**
 * How many runs one core can watch when they are evaluated as their lines arrive (issue 27). Prints:
 *  monitored_runs_per_core — BENCH_RUNS runs (default 5,000, the goal itself) whose metrics.jsonl grows by one
 *    healthy line a second (written by a separate Python process, so writing costs this process nothing),
 *    each woken by its file watch and evaluated by the monitor's woken evaluation, `monitor.wake` (at most
 *    SHEPHERD_MONITOR_MAX_EVALS_PER_S = 2 a second; the timer's ticks, `tick_cpu_ms` per interval, come on top):
 *    runs ÷ (this process's CPU seconds per second). Goal ≥ 5,000 with no alert. Measured at the goal's scale
 *    because the cost per run falls as runs are added: with few runs each line wakes an idle process on its
 *    own (docs/benchmarks.md has the curve), so 300 runs extrapolated say less than 5,000 measured;
 *  cores_used — this process's CPU seconds per second over the window (≤ 1 means one core kept up);
 *  lines_written, lines_evaluated — what the writer wrote and the points the evaluations took in (equal when
 *    the monitor kept up; the last lines are waited for);
 *  wake_latency_p50_ms, wake_latency_p99_ms — from a run's file watch firing to its evaluation starting (the
 *    debounce of at most 2 a second included; the goal is about 200 ms), for lines written once every run
 *    is held;
 *  holds_taken_s — the cold start before that: from the first line until every run's first woken evaluation
 *    ended (it takes the run's lease and loads its state) (all runs start at once, as after a restart;
 *    the states the priming ticks left beyond the monitor's cache of 2,000 are read from Redis);
 *  heap_mib — the process's heap at the end of the busy window, with every run held;
 *  redis_cpu_share — Redis server CPU (INFO cpu) over the same window, as a share of one core;
 *  evaluations_per_s, evaluation_cpu_ms — what the window did, and the CPU of one evaluation;
 *  alerts — incidents raised over the window (must be 0: the runs are healthy);
 *  hold_end_cpu_ms_per_run — the commit that lets a run go once it has been quiet for 5 s (one per run);
 *  idle_cpu_ms_per_run_hour — the same runs watched while their files do not change, after that: what a
 *    quiet run costs between timer ticks (goal: nothing).
 * Run: npx tsx bench/monitored-runs.ts  (needs Redis at REDIS_URL or 127.0.0.1:6379, and python3)
 * Env: BENCH_RUNS (default 300), BENCH_SECONDS (default 20).
 */
import { spawn } from 'node:child_process';
import { appendFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createLogger } from '../src/logger.js';
import { createMonitor } from '../src/monitor/monitor.js';
import { createRunWakeups, type DirectoryWatch, watchWithFs } from '../src/monitor/run-wakeups.js';
import { testRunMeta } from '../test/helpers/run-meta.js';
import { note, print, quantile } from './lib/output.js';

const runCount = Number(process.env.BENCH_RUNS ?? '5000');
const seconds = Number(process.env.BENCH_SECONDS ?? '20');
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `bench-watched-${process.pid}`;
const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
const root = await mkdtemp(join(tmpdir(), 'shepherd-bench-watched-'));

function healthyLine(step: number): string {
  const loss = (3 / Math.sqrt(1 + step / 10)) * (1 + 0.01 * Math.sin(step * 1.37));
  return `{"step": ${step}, "loss": ${loss}, "lr": 0.0003, "grad_norm": ${1 + 0.1 * Math.cos(step)}}\n`;
}

/** One Python process appends a line a second to every run's file, spread evenly over the second. */
const WRITER = `import math, sys, time
root, count, seconds, first = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
files = [open(f"{root}/run-{i}/metrics.jsonl", "a", buffering=1) for i in range(count)]
start = time.time()
step = first
while time.time() - start < seconds:
    for i, handle in enumerate(files):
        loss = (3 / math.sqrt(1 + step / 10)) * (1 + 0.01 * math.sin(step * 1.37))
        handle.write('{"step": %d, "loss": %r, "lr": 0.0003, "grad_norm": %r}\\n' % (step, loss, 1 + 0.1 * math.cos(step)))
        target = start + (step - first) + (i + 1) / count
        pause = target - time.time()
        if pause > 0:
            time.sleep(pause)
    step += 1
print((step - first) * count)
`;

async function redisCpuSeconds(): Promise<number> {
  const info = await redis.info('cpu');
  const value = (name: string) => Number(new RegExp(`${name}:([0-9.]+)`).exec(info)?.[1] ?? 'NaN');
  return value('used_cpu_user') + value('used_cpu_sys');
}

const monitor = createMonitor({ redis, prefix, runDir: (run) => join(root, run.id) });
const metas = new Map(
  Array.from({ length: runCount }, (_, index) => {
    const id = `run-${index}`;
    return [id, testRunMeta(id, { name: id, gpus: 1, gpuIndices: [0] })] as const;
  }),
);
let evaluations = 0;
let alerts = 0;
let linesEvaluated = 0;
/** When each run's watch first fired since its last evaluation began. */
const firedAt = new Map<string, number>();
/** [when the watch fired, the wake latency], both ms. */
const latencies: Array<[number, number]> = [];
const firstEvaluated = new Set<string>();
let lastFirstEvaluationAt = 0;
/** The real watch (run-wakeups.ts), noting when a run's watch fires, for the latency. */
const watchNoting: DirectoryWatch = (directory, onChange) => {
  const runId = directory.slice(directory.lastIndexOf('/') + 1);
  return watchWithFs(directory, (fileName) => {
    if (!firedAt.has(runId)) firedAt.set(runId, performance.now());
    onChange(fileName);
  });
};
const wakeups = createRunWakeups({
  maxEvalsPerS: 2,
  logger: createLogger('silent'),
  watchDirectory: watchNoting,
  evaluate: async (runId, files) => {
    const fired = firedAt.get(runId);
    if (fired !== undefined) {
      const now = performance.now();
      latencies.push([fired, now - fired]);
      firedAt.delete(runId);
    }

    const meta = metas.get(runId);
    if (meta === undefined) return 'done';
    // The production wake-up path (watch-runs.ts → monitor.wake): the run held in memory, new points only.
    const result = await monitor.wake(runId, meta, files);
    if (result === 'locked') return 'locked';
    if (result === 'held-elsewhere') return 'done';
    if (!firstEvaluated.has(runId)) {
      firstEvaluated.add(runId);
      lastFirstEvaluationAt = performance.now();
    }
    evaluations += 1;
    linesEvaluated += result.newPoints;
    alerts += result.incidents.length;
    return 'done';
  },
});

async function window(durationS: number, writing: boolean) {
  const writer = writing
    ? spawn('python3', ['-c', WRITER, root, String(runCount), String(durationS), '500'], {
        stdio: ['ignore', 'pipe', 'inherit'],
      })
    : undefined;
  let written = '';
  writer?.stdout?.on('data', (chunk: Buffer) => {
    written += chunk.toString();
  });
  const startedAt = performance.now();
  const cpuBefore = process.cpuUsage();
  const redisBefore = await redisCpuSeconds();
  const evaluationsBefore = evaluations;
  if (writer === undefined) await new Promise((resolve) => setTimeout(resolve, durationS * 1000));
  else await new Promise((resolve) => writer.once('exit', resolve));
  // Let the last wake-ups finish before reading the clocks.
  await new Promise((resolve) => setTimeout(resolve, 600));
  const cpu = process.cpuUsage(cpuBefore);
  const wallS = (performance.now() - startedAt) / 1000;
  return {
    wallS,
    cpuS: (cpu.user + cpu.system) / 1e6,
    systemS: cpu.system / 1e6,
    redisCpuS: (await redisCpuSeconds()) - redisBefore,
    evaluations: evaluations - evaluationsBefore,
    linesWritten: Number(written.trim() || '0'),
    startedAt,
    heapMib: process.memoryUsage().heapUsed / 2 ** 20,
  };
}

try {
  note(`${runCount} runs, each primed with 500 lines`);
  for (const [id, meta] of metas) {
    await mkdir(join(root, id), { recursive: true });
    let text = '';
    for (let step = 0; step < 500; step++) text += healthyLine(step);
    await appendFile(join(root, id, 'metrics.jsonl'), text);
    await monitor.tick(id, meta, { kind: 'alive' });
    wakeups.follow(id, join(root, id));
  }
  note(`one line a second per run for ${seconds} s`);
  const busy = await window(seconds, true);
  const cpuPerS = busy.cpuS / busy.wallS;
  print('monitored_runs_per_core', runCount / cpuPerS);
  print('redis_cpu_share', busy.redisCpuS / busy.wallS);
  print('evaluations_per_s', busy.evaluations / busy.wallS);
  print('evaluation_cpu_ms', (busy.cpuS * 1000) / Math.max(1, busy.evaluations));
  print('alerts', alerts);
  print('cores_used', cpuPerS);
  // The last lines' evaluations may end after the window: wait for them (bounded) before comparing.
  for (let waited = 0; linesEvaluated < busy.linesWritten && waited < 50; waited++)
    await new Promise((resolve) => setTimeout(resolve, 100));
  print('lines_written', busy.linesWritten);
  print('lines_evaluated', linesEvaluated);
  // Lines written once every run was held: the cold start's backlog is `holds_taken_s`.
  const held = latencies.filter(([fired]) => fired > lastFirstEvaluationAt).map(([, latency]) => latency);
  print('wake_latency_p50_ms', quantile(held, 0.5));
  print('wake_latency_p99_ms', quantile(held, 0.99));
  print('holds_taken_s', (lastFirstEvaluationAt - busy.startedAt) / 1000);
  print('heap_mib', busy.heapMib);
  note(`of which system (kernel) CPU: ${((100 * busy.systemS) / busy.cpuS).toFixed(0)} %`);
  note('the same runs, files unchanged');
  // Wait out the wake-ups of the last lines first.
  for (let last = -1; last !== evaluations; ) {
    last = evaluations;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  // A held run is committed and let go 5 s after its last wake-up (monitor-holds.ts): that one commit per
  // quiet run is a cost of the busy period, measured apart so the idle window shows what a quiet run costs.
  const settling = await window(7, false);
  print('hold_end_cpu_ms_per_run', (settling.cpuS * 1000) / runCount);
  const idle = await window(Math.min(10, seconds), false);
  print('idle_cpu_ms_per_run_hour', ((idle.cpuS * 1000) / idle.wallS / runCount) * 3600);
  print('idle_evaluations', idle.evaluations);
} finally {
  await wakeups.close();
  await monitor.endHolds();
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
  await rm(root, { recursive: true, force: true });
}
