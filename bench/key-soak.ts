/**
 * Key soak (issue 26 §4): simulated hours of use on real Redis through the real monitor worker (BullMQ
 * schedulers, ticks, each run's final tick and the retirement of its keys) and the real session store.
 * Each hour starts and ends BENCH_SOAK_RUNS runs (completed, failed, stopped, paused in turn) and appends
 * BENCH_SOAK_MESSAGES messages to BENCH_SOAK_THREADS threads. Prints per hour the keys without a TTL (the
 * goal: flat once runs end), the keys with one (they go when their TTL does: 7 days for a run that may come
 * back, 90 days for an idle thread), Redis memory and this process's RSS.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createSessionStore } from '../src/agent/session-store.js';
import type { Notifier } from '../src/bot/notifier.js';
import { loadConfig } from '../src/config/config.js';
import { createLogger } from '../src/logger.js';
import { createAlertPolicyStore } from '../src/monitor/alerts/alert-policy.js';
import type { AlertService } from '../src/monitor/alerts/alert-service.js';
import { createMonitor } from '../src/monitor/monitor.js';
import { createRunWatcher } from '../src/monitor/watch-runs.js';
import type { RunMeta, RunStatus } from '../src/runs/records/run-types.js';
import type { RunQueries } from '../src/runs/run-queries.js';
import { note, print } from './lib/output.js';
import { benchRedisUrl, deleteKeysWithPrefix } from './lib/redis-keys.js';

const hours = Number(process.env.BENCH_SOAK_HOURS ?? 12);
const runsPerHour = Number(process.env.BENCH_SOAK_RUNS ?? 20);
const messagesPerHour = Number(process.env.BENCH_SOAK_MESSAGES ?? 200);
const threadCount = Number(process.env.BENCH_SOAK_THREADS ?? 30);
const ENDINGS: RunStatus[] = ['completed', 'failed', 'stopped', 'paused'];

const prefix = `bench-soak-${process.pid}`;
const redis = new Redis(benchRedisUrl, { maxRetriesPerRequest: null });
const root = await mkdtemp(join(tmpdir(), 'shepherd-soak-'));

async function countKeys(): Promise<{ persistent: number; expiring: number }> {
  let persistent = 0;
  let expiring = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      if ((await redis.pttl(key)) === -1) persistent++;
      else expiring++;
    }
  } while (cursor !== '0');
  return { persistent, expiring };
}

async function waitUntil(condition: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('soak: timed out waiting for the monitor');
    await new Promise((done) => setTimeout(done, 100));
  }
}

function meta(id: string, status: RunStatus): RunMeta {
  const at = new Date().toISOString();
  return {
    schemaVersion: 1,
    id,
    name: id,
    threadId: `web:soak:t${Number(id.slice(1)) % threadCount}`,
    requester: { id: 'u', name: 'u' },
    status,
    gpus: 0,
    gpuIndices: [],
    maxHours: 1,
    scriptVersion: 1,
    executor: 'local',
    launchCount: 1,
    createdAt: at,
    updatedAt: at,
    startedAt: at,
  };
}

const metas = new Map<string, RunMeta>();
const monitor = createMonitor({ redis, prefix, runDir: (run) => join(root, run.id) });
const policy = createAlertPolicyStore({ redis, prefix });
const sessions = createSessionStore({ redis, prefix });
const watcher = createRunWatcher({
  config: loadConfig({ SHEPHERD_QUEUE_PREFIX: prefix, SHEPHERD_MONITOR_INTERVAL_S: '0.2' }),
  redis,
  prefix,
  monitor,
  runs: {
    get: async (runId: string) => metas.get(runId),
    processState: async (run: RunMeta) =>
      run.status === 'running'
        ? { kind: 'alive' }
        : { kind: 'exited', exitCode: run.status === 'failed' ? 1 : 0 },
  } as unknown as RunQueries,
  alerts: { onIncident: async () => true } as unknown as AlertService,
  notifier: { post: async () => ({ messageId: 'm' }) } as unknown as Notifier,
  postChart: async () => 'chart',
  onRetired: (runId, keepMs) => policy.retire(runId, keepMs),
  logger: createLogger('silent'),
});
const worker = watcher.createWorker();
let runNumber = 0;
try {
  for (let hour = 1; hour <= hours; hour++) {
    const ids: string[] = [];
    for (let index = 0; index < runsPerHour; index++) {
      const runId = `r${runNumber++}`;
      ids.push(runId);
      await mkdir(join(root, runId));
      const lines = Array.from(
        { length: 200 },
        (_, step) => `{"step": ${step}, "loss": ${2 / (step + 1)}}\n`,
      );
      await writeFile(join(root, runId, 'metrics.jsonl'), lines.join(''));
      metas.set(runId, meta(runId, 'running'));
      await policy.mute(runId, 'plateau', { id: 'u', name: 'u' });
      await watcher.watch(runId);
    }
    for (let index = 0; index < messagesPerHour; index++) {
      const multi = redis.multi();
      sessions.appendInTransaction(multi, `web:soak:t${index % threadCount}`, [
        { role: 'user', author: 'alice', content: `message ${hour}.${index}` },
      ]);
      await multi.exec();
    }
    await waitUntil(async () => {
      for (const runId of ids) if ((await monitor.loadState(runId)).rolling.points < 200) return false;
      return true;
    }, 60_000);
    ids.forEach((runId, index) => {
      metas.set(runId, meta(runId, ENDINGS[index % ENDINGS.length] ?? 'completed'));
    });
    await waitUntil(async () => (await watcher.scheduler.listRunIds()).length === 0, 60_000);
    const keys = await countKeys();
    const memory = /used_memory:(\d+)/.exec(await redis.info('memory'))?.[1];
    note(`hour ${hour}: ${runNumber} runs ended so far`);
    print(`hour_${hour}_keys_without_ttl`, keys.persistent);
    print(`hour_${hour}_keys_with_ttl`, keys.expiring);
    print(`hour_${hour}_redis_used_memory_mb`, Number(memory ?? 0) / 1024 / 1024);
    print(`hour_${hour}_rss_mb`, process.memoryUsage().rss / 1024 / 1024);
  }
} finally {
  await worker.close();
  await watcher.close();
  redis.disconnect();
  await deleteKeysWithPrefix(prefix);
  await rm(root, { recursive: true, force: true });
}
