/**
 * Ack path of the playground's `POST /api/messages`, side by side with a bare `node:http` server that
 * answers 202 and does nothing else. Both servers run in their own child process, and the load
 * generator (the autocannon CLI) in a third, so no two share an event loop.
 *
 * Shepherd runs with `SHEPHERD_ROLE=bot` (adapters + notify worker, no turn workers): that is the process
 * that acks in a scaled-out deployment, and it keeps agent turns from competing with the ack path for
 * the two cores. Each request is a top-level mention, so each one creates a message, starts a session and
 * enqueues one BullMQ turn job (the full ack path).
 *
 * Two phases, each server warmed up first:
 *  1. capacity — 200 connections as fast as they go: `ack_rps_*` (2xx/s) and `ack_capacity_ratio`
 *     (Shepherd ÷ bare, goal ≥ 0.3). A closed loop at saturation only measures queueing (latency ≈
 *     connections ÷ throughput), so its p99s are printed as `ack_p99_ms_saturated_*` for reference.
 *  2. latency — 200 open connections carrying one fixed offered rate that both servers sustain
 *     (`BENCH_ACK_RATE_FRACTION` of Shepherd's capacity, default 0.5), spread evenly in time by
 *     bench/lib/paced-load.ts (autocannon's `-R` sends bursts at each second), measured from each
 *     request's scheduled time after a few unmeasured seconds at the same rate: `ack_p99_ms_*` and
 *     `ack_p99_ratio` (goal ≤ 3). The servers take turns in rounds, and each p99 is over all of a
 *     server's rounds; `ack_paced_cpu_us_*` and `ack_paced_redis_cpu_us` are the CPU per ack meanwhile.
 *
 * Run: npx tsx bench/spine-ack.ts  (needs Redis at REDIS_URL or 127.0.0.1:6379)
 * Env: BENCH_ACK_DURATION_S (default 10: measured paced seconds per server, split over the rounds),
 * BENCH_ACK_CONNECTIONS (default 200), BENCH_ACK_RATE_FRACTION, BENCH_ACK_FIXED_RATE (requests/s instead of
 * the fraction, for A/B runs), BENCH_ACK_ROUNDS (default 3),
 * BENCH_ACK_PACED_WARMUP_S (default 3: seconds at the paced rate, unmeasured, before each paced round;
 * 0 measures the ramp from idle too),
 * BENCH_ACK_NODE_OPTIONS (NODE_OPTIONS for the Shepherd process only), BENCH_ACK_NODE_ARGS (node flags
 * for the Shepherd process, space-separated, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { type LoadResult, runAutocannon } from './lib/autocannon.js';
import { bareLoopDelayP99Ms, formatGc, gcBetween, scrapeMetrics } from './lib/loop-delay.js';
import { note, print, quantile } from './lib/output.js';
import { type PacedResult, runPacedLoad } from './lib/paced.js';
import { cpuSeconds, freePort, type StartedChild, startNodeChild, waitForHttp } from './lib/processes.js';
import { benchRedisUrl, deleteKeysWithPrefix, redisCpuSeconds } from './lib/redis-keys.js';

const durationS = Number(process.env.BENCH_ACK_DURATION_S ?? '10');
const connections = Number(process.env.BENCH_ACK_CONNECTIONS ?? '200');
const rateFraction = Number(process.env.BENCH_ACK_RATE_FRACTION ?? '0.5');
/** An offered rate (requests/s) for both paced runs instead of a fraction of capacity: for A/B runs. */
const fixedRate =
  process.env.BENCH_ACK_FIXED_RATE === undefined ? undefined : Number(process.env.BENCH_ACK_FIXED_RATE);
const warmupS = 3;
const pacedWarmUpS = Number(process.env.BENCH_ACK_PACED_WARMUP_S ?? '3');
/** Turns each server takes at the paced rate; each measures `BENCH_ACK_DURATION_S ÷ rounds` seconds. */
const rounds = Math.max(1, Number(process.env.BENCH_ACK_ROUNDS ?? '3'));
const body = JSON.stringify({ channel: 'bench', user: 'loadgen', text: '@shepherd ack benchmark ping' });

const prefix = `bench-ack-${process.pid}`;
const dataDir = mkdtempSync(join(tmpdir(), 'shepherd-bench-ack-'));
const children: StartedChild[] = [];
/** Reads Redis's own CPU time around each paced run. */
const statsRedis = new Redis(benchRedisUrl, { maxRetriesPerRequest: null });

/** A started server: its base URL and its process id (for its CPU time). */
interface Server {
  url: string;
  pid: number;
}

async function startBare(): Promise<Server> {
  const port = await freePort();
  const child = startNodeChild('bench/lib/bare-server.ts', { PATH: process.env.PATH, PORT: String(port) });
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(url, child);
  return { url, pid: child.child.pid ?? 0 };
}

async function startShepherd(): Promise<Server> {
  const port = await freePort();
  const child = startNodeChild(
    'src/app/main.ts',
    {
      PATH: process.env.PATH,
      REDIS_URL: benchRedisUrl,
      SHEPHERD_ROLE: 'bot',
      SHEPHERD_PORT: String(port),
      SHEPHERD_QUEUE_PREFIX: prefix,
      SHEPHERD_DATA_DIR: dataDir,
      SHEPHERD_LOG_LEVEL: 'warn',
      // Never reached on the ack path; set so nothing tries a real model.
      SHEPHERD_LLM_BASE_URL: 'http://127.0.0.1:9/v1',
      // For experiments with V8 flags (e.g. `--max-semi-space-size=64`); unset by default.
      ...(process.env.BENCH_ACK_NODE_OPTIONS === undefined
        ? {}
        : { NODE_OPTIONS: process.env.BENCH_ACK_NODE_OPTIONS }),
    },
    // For flags NODE_OPTIONS refuses, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` (a profile of the ack path).
    (process.env.BENCH_ACK_NODE_ARGS ?? '').split(' ').filter((argument) => argument !== ''),
  );
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/api/channels`, child);
  return { url, pid: child.child.pid ?? 0 };
}

function check(label: string, result: LoadResult): void {
  const failed = result.non2xx + result.errors + result.timeouts;
  note(
    `${label}: ${Math.round(result.okPerSecond)} ok/s, p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, ` +
      `${result['2xx']} ok, ${failed} failed`,
  );
  if (result['2xx'] === 0) throw new Error(`${label}: no request succeeded`);
  if (failed > result['2xx'] * 0.01)
    throw new Error(`${label}: ${failed} of ${result['2xx'] + failed} requests failed`);
}

async function load(label: string, url: string): Promise<LoadResult> {
  const result = await runAutocannon({ url: `${url}/api/messages`, connections, durationS, body });
  check(label, result);
  return result;
}

/** A paced run's latencies, with the CPU the server's process and Redis used per answered request (µs). */
type PacedRun = PacedResult & { serverCpuUs: number; redisCpuUs: number };

async function paced(label: string, server: Server, rate: number): Promise<PacedRun> {
  const [serverBefore, redisBefore] = [cpuSeconds(server.pid), await redisCpuSeconds(statsRedis)];
  const result = await runPacedLoad({
    url: `${server.url}/api/messages`,
    body,
    rate,
    connections,
    durationS: durationS / rounds,
    raw: true,
  });
  const perAck = (seconds: number) => (seconds * 1e6) / Math.max(1, result.ok);
  const serverCpuUs = perAck(cpuSeconds(server.pid) - serverBefore);
  const redisCpuUs = perAck((await redisCpuSeconds(statsRedis)) - redisBefore);
  note(
    `${label}: p50 ${result.p50.toFixed(2)} ms, p90 ${result.p90.toFixed(2)} ms, p99 ${result.p99.toFixed(2)} ms, ` +
      `max ${result.max.toFixed(1)} ms, ${result.ok} ok, ${result.failed} failed in ${result.elapsedS.toFixed(1)} s; ` +
      `sender late p99 ${result.sendLagP99.toFixed(2)} ms (max ${result.sendLagMax.toFixed(1)}), ` +
      `${result.slowWindows} of ${result.windows} 100-ms windows held a request over 50 ms; ` +
      `CPU per ack: server ${serverCpuUs.toFixed(0)} µs, Redis ${redisCpuUs.toFixed(0)} µs`,
  );
  if (result.failed > result.sent * 0.01)
    throw new Error(`${label}: ${result.failed} of ${result.sent} failed`);
  return { ...result, serverCpuUs, redisCpuUs };
}

/** One server's rounds taken together: quantiles of all their latencies, CPU per ack over all of them. */
function pooled(runs: PacedRun[]) {
  const latencies = runs.flatMap((run) => run.latencies ?? []);
  const answered = runs.reduce((sum, run) => sum + run.ok, 0);
  const weighted = (value: (run: PacedRun) => number) =>
    runs.reduce((sum, run) => sum + value(run) * run.ok, 0) / Math.max(1, answered);
  return {
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    serverCpuUs: weighted((run) => run.serverCpuUs),
    redisCpuUs: weighted((run) => run.redisCpuUs),
  };
}

async function pacedWarmUp(url: string, rate: number): Promise<void> {
  if (pacedWarmUpS <= 0) return;
  const result = await runPacedLoad({
    url: `${url}/api/messages`,
    body,
    rate,
    connections,
    durationS: pacedWarmUpS,
  });
  note(
    `  (paced warm-up: p99 ${result.p99.toFixed(1)} ms, ${result.slowWindows} of ${result.windows} windows over 50 ms)`,
  );
}

try {
  const bare = await startBare();
  const shepherd = await startShepherd();
  const [bareUrl, shepherdUrl] = [bare.url, shepherd.url];
  note(
    `bare ${bareUrl}, shepherd ${shepherdUrl} (prefix ${prefix}); ${connections} connections, ${durationS} s each`,
  );

  for (const [label, url] of [
    ['bare', bareUrl],
    ['shepherd', shepherdUrl],
  ] as const) {
    await runAutocannon({ url: `${url}/api/messages`, connections, durationS: warmupS, body });
    note(`${label} warmed up`);
  }

  const bareCapacity = await load('bare capacity', bareUrl);
  const shepherdCapacity = await load('shepherd capacity', shepherdUrl);
  const rate = fixedRate ?? Math.round(shepherdCapacity.okPerSecond * rateFraction);
  // The servers take turns, round by round, so a slow minute of the machine falls on both rather than on
  // whichever ran in it. Each turn starts with a few seconds at the paced rate, unmeasured: the server sat
  // idle while the other was measured, and the measured window is the steady state, not the ramp from idle.
  const bareRuns: PacedRun[] = [];
  const shepherdRuns: PacedRun[] = [];
  await bareLoopDelayP99Ms(bareUrl);
  // Scraping resets Shepherd's event-loop delay histogram, so the second scrape covers the paced rounds.
  const beforeScrape = await scrapeMetrics(shepherdUrl);
  for (let round = 1; round <= rounds; round += 1) {
    await pacedWarmUp(bareUrl, rate);
    bareRuns.push(await paced(`bare paced at ${rate}/s, round ${round}`, bare, rate));
    await pacedWarmUp(shepherdUrl, rate);
    shepherdRuns.push(await paced(`shepherd paced at ${rate}/s, round ${round}`, shepherd, rate));
  }
  const afterScrape = await scrapeMetrics(shepherdUrl);
  const bareLoopDelay = await bareLoopDelayP99Ms(bareUrl);
  const loopDelayMs = (afterScrape.get('shepherd_event_loop_lag_seconds') ?? Number.NaN) * 1000;
  const bareLatency = pooled(bareRuns);
  const shepherdLatency = pooled(shepherdRuns);
  note(
    `p99 ratio by round: ${shepherdRuns.map((run, index) => (run.p99 / (bareRuns[index]?.p99 ?? Number.NaN)).toFixed(2)).join(', ')}`,
  );
  note(`shepherd GC during the paced rounds: ${formatGc(gcBetween(beforeScrape, afterScrape))}`);
  note(
    `event-loop delay p99 during the paced rounds: shepherd ${loopDelayMs.toFixed(1)} ms, bare ${bareLoopDelay.toFixed(1)} ms`,
  );

  print('ack_p99_ms_bare', bareLatency.p99);
  print('ack_p99_ms_shepherd', shepherdLatency.p99);
  print('ack_p99_ratio', shepherdLatency.p99 / bareLatency.p99);
  print('ack_paced_cpu_us_bare', bareLatency.serverCpuUs);
  print('ack_paced_cpu_us_shepherd', shepherdLatency.serverCpuUs);
  print('ack_paced_redis_cpu_us', shepherdLatency.redisCpuUs);
  print('ack_p50_ms_bare', bareLatency.p50);
  print('ack_p50_ms_shepherd', shepherdLatency.p50);
  print('ack_fixed_rate_rps', rate);
  print('ack_rps_bare', bareCapacity.okPerSecond);
  print('ack_rps_shepherd', shepherdCapacity.okPerSecond);
  print('ack_capacity_ratio', shepherdCapacity.okPerSecond / bareCapacity.okPerSecond);
  print('event_loop_delay_p99_ms', loopDelayMs);
  print('event_loop_delay_p99_ms_bare', bareLoopDelay);
  print('ack_p99_ms_saturated_bare', bareCapacity.latency.p99);
  print('ack_p99_ms_saturated_shepherd', shepherdCapacity.latency.p99);
} finally {
  for (const child of children) await child.stop();
  statsRedis.disconnect();
  const deleted = await deleteKeysWithPrefix(prefix);
  note(`deleted ${deleted} keys under ${prefix}:`);
  rmSync(dataDir, { recursive: true, force: true });
}
