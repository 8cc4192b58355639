/**
 * Turn overhead: from the moment a message's turn is enqueued to the moment the turn's LLM request
 * arrives at a scripted OpenAI-compatible server, on an idle queue. Prints:
 *  turn_overhead_p50_ms / turn_overhead_p90_ms — t0 taken right before the inbox accept (the message
 *    already stored, exactly as the inbound handler does; the accept queues the wake-up request that the
 *    turn worker's dispatcher makes into the turn job), t1 the scripted server's arrival time of that
 *    turn's request (goal p50 ≤ 5 ms);
 *  turn_overhead_http_p50_ms / _p90_ms — the same, with t0 just before the playground `POST /api/messages`
 *    (includes the HTTP round trip, message store and inbox accept).
 * Everything (Shepherd with role `all`, the scripted LLM) runs in this one process on real Redis; each
 * sample is a new thread, sent only once the previous turn has finished and the queues are idle.
 * Run: npx tsx bench/spine-turn-overhead.ts  (needs Redis at REDIS_URL or 127.0.0.1:6379)
 *  turn_pickup_p50_ms / turn_runner_p50_ms / turn_llm_client_p50_ms — where the time goes: accept → the
 *    turn was picked up (the app's `onTurnPickup`: the dispatcher's BLMPOP wake-up, then, on an idle
 *    worker, the direct turn's start, or on a busy one the job's add and the worker's pick-up); picked up →
 *    the provider starts its HTTP call (one round trip for the thread lock, the batch and the turn's reads:
 *    session, model, summary, LLM spend; then the command check and the prompt); provider call → request
 *    arrived (SDK + HTTP, and the scripted server reading and parsing the ~30 kB body in this same process).
 * Env: BENCH_TURN_SAMPLES (default 200), BENCH_TURN_HTTP_SAMPLES (default 100).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp } from '../src/app/app.js';
import { encodeThreadId } from '../src/bot/chat-adapter.js';
import { createWebStore } from '../src/bot/web/web-store.js';
import { loadConfig } from '../src/config/config.js';
import { createLogger } from '../src/logger.js';
import { startScriptedOpenAi } from '../test/helpers/scripted-llm/index.js';
import { note, print, quantile } from './lib/output.js';
import { benchRedisUrl, deleteKeysWithPrefix } from './lib/redis-keys.js';

const samples = Number(process.env.BENCH_TURN_SAMPLES ?? '200');
const httpSamples = Number(process.env.BENCH_TURN_HTTP_SAMPLES ?? '100');
const warmup = 20;
const prefix = `bench-turn-${process.pid}`;
const dataDir = mkdtempSync(join(tmpdir(), 'shepherd-bench-turn-'));
const channel = 'bench';

const llm = await startScriptedOpenAi();
// Resolves the waiter registered for a probe's marker when its request arrives.
const arrivals = new Map<string, (receivedAt: number) => void>();
llm.setHandler((request) => {
  const marker = /probe-\w+/.exec(request.lastUserText ?? '')?.[0];
  if (marker !== undefined) arrivals.get(marker)?.(request.receivedAt);
  return { text: 'ok' };
});

const config = loadConfig({
  REDIS_URL: benchRedisUrl,
  SHEPHERD_QUEUE_PREFIX: prefix,
  SHEPHERD_PORT: '0',
  SHEPHERD_DATA_DIR: dataDir,
  SHEPHERD_LOG_LEVEL: 'warn',
  SHEPHERD_LLM_BASE_URL: llm.url,
  SHEPHERD_LLM_MAX_RETRIES: '0',
});
let lastLlmCallAt = 0;
/** When each thread's turn was last picked up. */
const pickedUpAt = new Map<string, number>();
const app = await createApp(config, createLogger(config.logLevel), {
  onLlmCall: () => {
    lastLlmCallAt = Date.now();
  },
  onTurnPickup: (threadId) => pickedUpAt.set(threadId, Date.now()),
});
const store = createWebStore({ redis: app.redis, prefix });

function arrival(marker: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no LLM request for ${marker} within 10 s`)), 10_000);
    arrivals.set(marker, (receivedAt) => {
      clearTimeout(timer);
      arrivals.delete(marker);
      resolve(receivedAt);
    });
  });
}

/** Whether a turn still holds some thread's lock (a direct turn has no job to count). */
async function turnLockHeld(): Promise<boolean> {
  let cursor = '0';
  do {
    const [next, keys] = await app.redis.scan(cursor, 'MATCH', `${prefix}:turn-lock:*`, 'COUNT', 1000);
    if (keys.length > 0) return true;
    cursor = next;
  } while (cursor !== '0');
  return false;
}

/** Waits until no turn job is waiting or running and no turn holds a lock, then a little more for its tail. */
async function settle(): Promise<void> {
  for (let attempt = 0; attempt < 500; attempt++) {
    const counts = await app.turnQueue.getJobCounts('active', 'waiting', 'delayed', 'prioritized');
    if (Object.values(counts).every((count) => count === 0) && !(await turnLockHeld())) break;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await new Promise((resolve) => setTimeout(resolve, 30));
}

const pickups: number[] = [];
const runnerTimes: number[] = [];
const sdkTimes: number[] = [];

/** One probe through the inbound path; t0 right before the inbox accept that wakes the turn. */
async function probeDirect(label: string): Promise<number> {
  const marker = `probe-${label}`;
  const text = `@shepherd ${marker}`;
  const stored = await store.createMessage({ channel, user: 'alice', text });
  const threadId = encodeThreadId({ platform: 'web', channel, thread: stored.threadId });
  const arrived = arrival(marker);
  const t0 = Date.now();
  const accepted = await app.inbox.accept(
    threadId,
    {
      type: 'message',
      messageId: stored.id,
      deliveryId: stored.id,
      user: { id: 'alice', name: 'alice' },
      text,
      addressed: true,
      receivedAt: stored.ts,
    },
    { addressed: true, deliveryKey: `web:${stored.id}` },
  );
  if (accepted !== 'accepted') throw new Error(`inbox refused ${marker}: ${accepted}`);
  const t1 = await arrived;
  // Split the overhead at the moment the turn was picked up (a direct turn's start or a job's pick-up).
  const pickedUp = pickedUpAt.get(threadId);
  pickedUpAt.delete(threadId);
  if (pickedUp !== undefined) {
    pickups.push(pickedUp - t0);
    runnerTimes.push(lastLlmCallAt - pickedUp);
    sdkTimes.push(t1 - lastLlmCallAt);
  }
  return t1 - t0;
}

/** One probe through the playground HTTP API; t0 right before the POST. */
async function probeHttp(index: number): Promise<number> {
  const marker = `probe-h${index}`;
  const arrived = arrival(marker);
  const t0 = Date.now();
  const response = await fetch(`${app.playground.address().url}/api/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ channel, user: 'alice', text: `@shepherd ${marker}` }),
  });
  if (response.status !== 202) throw new Error(`POST answered ${response.status}`);
  await response.arrayBuffer();
  return (await arrived) - t0;
}

let failed = false;
try {
  await app.start();
  for (let index = 0; index < warmup; index++) {
    await probeDirect(`w${index}`);
    await settle();
  }
  const direct: number[] = [];
  for (let index = 0; index < samples; index++) {
    direct.push(await probeDirect(`d${index}`));
    await settle();
  }
  const http: number[] = [];
  for (let index = 0; index < httpSamples; index++) {
    http.push(await probeHttp(index));
    await settle();
  }
  note(`direct: min ${Math.min(...direct)} ms, max ${Math.max(...direct)} ms over ${direct.length} turns`);
  print('turn_overhead_p50_ms', quantile(direct, 0.5));
  print('turn_overhead_p90_ms', quantile(direct, 0.9));
  print('turn_pickup_p50_ms', quantile(pickups.slice(warmup), 0.5));
  print('turn_runner_p50_ms', quantile(runnerTimes.slice(warmup), 0.5));
  print('turn_llm_client_p50_ms', quantile(sdkTimes.slice(warmup), 0.5));
  print('turn_overhead_http_p50_ms', quantile(http, 0.5));
  print('turn_overhead_http_p90_ms', quantile(http, 0.9));
} catch (error) {
  failed = true;
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
} finally {
  await app.stop();
  await llm.close();
  const deleted = await deleteKeysWithPrefix(prefix);
  note(`deleted ${deleted} keys under ${prefix}:`);
  rmSync(dataDir, { recursive: true, force: true });
}
// Some library handles (timers, sockets) outlive app.stop(); a benchmark just ends.
process.exit(failed ? 1 : 0);
