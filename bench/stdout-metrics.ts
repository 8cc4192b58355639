/**
 * Metrics parsed from what a run prints (output.log, for scripts without the helper). Prints:
 *  stdout_parse_lines_per_s — lines per CPU-second through the printed-metrics parser over 1M mixed lines: Trainer dicts
 *    between tqdm redraws, eval dicts, JSON objects, the key/value progress styles, Lightning and Keras bars,
 *    and plain log lines that hold no metric (goal ≥ 500,000);
 *  stdout_tick_ms_1k_lines / stdout_tick_ms_1m_lines — median wall time of a monitor tick that reads 100 new
 *    printed lines appended to an output.log already holding 1k vs 1M lines (offset committed near the end,
 *    no metrics.jsonl), and stdout_tick_ratio_1m_vs_1k, their ratio (goal ≤ 1.5: the tick's cost must not
 *    grow with the log).
 * Run: npx tsx bench/stdout-metrics.ts  (needs Redis at REDIS_URL or 127.0.0.1:6379)
 */
import { appendFile, mkdir, mkdtemp, open, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createMonitor } from '../src/monitor/monitor.js';
import type { RunMeta } from '../src/runs/records/run-types.js';
import { createStdoutParser, createStdoutParseState } from '../src/runs/stdout-metrics/stdout-parser.js';
import { testRunMeta } from '../test/helpers/run-meta.js';

function print(line: string): void {
  process.stdout.write(`${line}\n`);
}

const loss = (step: number) => (3 / Math.sqrt(1 + step / 10)) * (1 + 0.01 * Math.sin(step * 1.37));

/** One printed line of a mixed log; `index` picks the kind, `step` the values. */
function mixedLine(index: number, step: number): string {
  const value = loss(step).toFixed(4);
  switch (index % 12) {
    case 0:
      return `\r ${step % 100}%|#####     | ${step}/1000000 [01:02<03:04, 9.81it/s]\r${' '.repeat(40)}\r{'loss': ${value}, 'grad_norm': 1.234, 'learning_rate': 5e-05, 'epoch': 0.42}`;
    case 1:
      return `{'eval_loss': ${value}, 'eval_runtime': 1.52, 'eval_samples_per_second': 210.3, 'epoch': 0.5}`;
    case 2:
      return `{"step": ${step}, "loss": ${value}, "lr": 0.0003, "tokens_per_s": 51234.5}`;
    case 3:
      return `step ${step} | loss ${value} | lr 3e-4 | grad_norm 1.02`;
    case 4:
      return `step=${step} loss=${value} lr=0.0003`;
    case 5:
      return `[step ${step}] loss: ${value}`;
    case 6:
      return `iter ${step}: loss ${value}, time 35.21ms, mfu 31.25%`;
    case 7:
      return `Epoch 1 Step ${step}: loss=${value}`;
    case 8:
      return `Epoch 3:  45%|████▌     | ${step % 1000}/1000 [00:01<00:01, 30.12it/s, loss=${value}, v_num=0]`;
    case 9:
      return `${step % 1000}/1000 [==============>...............] - ETA: 1s - loss: ${value} - accuracy: 0.8100`;
    case 10:
      return `2026-12-01 05:00:00,123 - INFO - trainer - Saving model checkpoint to out/checkpoint-${step}`;
    default:
      return `[rank0]: dataloader worker ${step % 8} fetched shard ${step % 97} of /data/train-${step % 13}.arrow`;
  }
}

function benchParse(): number {
  const total = 1_000_000;
  const batch = 10_000;
  const build = (start: number) => {
    const lines: string[] = [];
    for (let index = start; index < start + batch; index++) lines.push(mixedLine(index, index));
    return lines;
  };
  // Warm up on a separate state.
  const warm = createStdoutParser();
  warm.parseLines(build(0), createStdoutParseState());
  const parser = createStdoutParser();
  const state = createStdoutParseState();
  let points = 0;
  let cpuMicros = 0;
  let wallMs = 0;
  // Batches of 10k lines, the size of one tick's read: the input is built outside the measured time.
  for (let start = 0; start < total; start += batch) {
    const lines = build(start);
    const started = performance.now();
    const cpuBefore = process.cpuUsage();
    points += parser.parseLines(lines, state).points.length;
    const cpu = process.cpuUsage(cpuBefore);
    wallMs += performance.now() - started;
    cpuMicros += cpu.user + cpu.system;
  }
  // CPU time, not wall time: the parse is single-threaded and the machine is shared.
  const cpuSeconds = cpuMicros / 1e6;
  process.stderr.write(
    `# parsed ${total} lines into ${points} points: ${cpuSeconds.toFixed(2)} s CPU, ${(wallMs / 1000).toFixed(2)} s wall\n`,
  );
  return total / cpuSeconds;
}

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `bench-stdout-${process.pid}`;

function meta(id: string): RunMeta {
  return testRunMeta(id, { name: id, gpus: 1, gpuIndices: [0] });
}

function lines(from: number, count: number): string {
  let text = '';
  for (let index = from; index < from + count; index++) text += `${mixedLine(index, index)}\n`;
  return text;
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;

async function benchTick(): Promise<{ small: number; large: number }> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const root = await mkdtemp(join(tmpdir(), 'shepherd-bench-stdout-'));
  let now = 1_700_000_000_000;
  const monitor = createMonitor({ redis, prefix, runDir: (run) => join(root, run.id), clock: () => now });
  const alive = { kind: 'alive' } as const;

  async function prepareRun(id: string, existingLines: number): Promise<void> {
    const dir = join(root, id);
    await mkdir(dir, { recursive: true });
    const path = join(dir, 'output.log');
    const handle = await open(path, 'w');
    for (let start = 0; start < existingLines; start += 50_000) {
      await handle.write(lines(start, Math.min(50_000, existingLines - start)));
    }
    await handle.close();
    // A long-running monitor has committed its offset near the end: 1,000 lines before it.
    const size = (await stat(path)).size;
    const tailBytes = Buffer.byteLength(lines(existingLines - 1000, 1000));
    const { ino } = await stat(path, { bigint: true });
    await redis.hset(
      `${prefix}:monitor:${id}`,
      'cursor:log',
      JSON.stringify({ ino: ino.toString(), offset: size - tailBytes }),
    );
    await monitor.tick(id, meta(id), alive);
  }

  async function measure(id: string, firstLine: number, rounds: number): Promise<number[]> {
    const path = join(root, id, 'output.log');
    const times: number[] = [];
    let next = firstLine;
    for (let round = 0; round < rounds; round++) {
      await appendFile(path, lines(next, 100));
      next += 100;
      now += 30_000;
      const started = performance.now();
      await monitor.tick(id, meta(id), alive);
      times.push(performance.now() - started);
    }
    return times;
  }

  try {
    await prepareRun('small', 1_000);
    await prepareRun('large', 1_000_000);
    await measure('small', 1_000, 5);
    await measure('large', 1_000_000, 5);
    const small: number[] = [];
    const large: number[] = [];
    for (let round = 0; round < 6; round++) {
      small.push(...(await measure('small', 1_500 + round * 500, 5)));
      large.push(...(await measure('large', 1_000_500 + round * 500, 5)));
    }
    return { small: median(small), large: median(large) };
  } finally {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    await rm(root, { recursive: true, force: true });
  }
}

print(`stdout_parse_lines_per_s=${Math.round(benchParse())}`);
if (process.argv.includes('--parse-only')) process.exit(0);
const tick = await benchTick();
print(`stdout_tick_ms_1k_lines=${tick.small.toFixed(2)}`);
print(`stdout_tick_ms_1m_lines=${tick.large.toFixed(2)}`);
print(`stdout_tick_ratio_1m_vs_1k=${(tick.large / tick.small).toFixed(2)}`);
