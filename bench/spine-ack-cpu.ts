/**
 * CPU per ack: the same `POST /api/messages` mentions as bench/spine-ack.ts, but counted in CPU time
 * rather than latency, which on a shared two-core machine moves with everyone else's load. Each server
 * (the bare `node:http` one and Shepherd with `SHEPHERD_ROLE=bot`) gets a closed-loop run of
 * autocannon; the CPU its process used (user + system, from /proc) is divided by the 2xx answers.
 * Redis commands per ack come from `INFO commandstats` before and after Shepherd's run (the server's
 * totals, so other clients of a shared Redis inflate them; run on a private Redis for exact figures).
 *
 * Prints `ack_cpu_us_bare`, `ack_cpu_us_shepherd`, `ack_cpu_ratio` (bare ÷ Shepherd: the capacity ratio
 * a CPU-bound server would reach if nothing else ran), `ack_redis_scripts_per_ack` (EVALSHA/EVAL calls:
 * the store script with the inbox accept in it), `ack_redis_script_us_per_ack` (Redis time in them),
 * `ack_turn_jobs_per_ack` (BullMQ jobs the acking process added: 0, the turn workers' dispatcher adds
 * them) and `ack_wake_requests_per_ack` (wake-up requests the accepts queued: 1).
 *
 * Run: npx tsx bench/spine-ack-cpu.ts (Linux; Redis at REDIS_URL or 127.0.0.1:6379).
 * Env: BENCH_ACK_DURATION_S (default 5), BENCH_ACK_CONNECTIONS (default 50).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { runAutocannon } from './lib/autocannon.js';
import { note, print } from './lib/output.js';
import { cpuSeconds, freePort, type StartedChild, startNodeChild, waitForHttp } from './lib/processes.js';
import { benchRedisUrl, deleteKeysWithPrefix } from './lib/redis-keys.js';

const durationS = Number(process.env.BENCH_ACK_DURATION_S ?? '5');
const connections = Number(process.env.BENCH_ACK_CONNECTIONS ?? '50');
const body = JSON.stringify({ channel: 'bench', user: 'loadgen', text: '@shepherd ack benchmark ping' });

const prefix = `bench-ack-cpu-${process.pid}`;
const dataDir = mkdtempSync(join(tmpdir(), 'shepherd-bench-ack-cpu-'));
const children: StartedChild[] = [];

/** `INFO commandstats` as command → {calls, usec}. */
async function commandStats(redis: Redis): Promise<Map<string, { calls: number; usec: number }>> {
  const stats = new Map<string, { calls: number; usec: number }>();
  for (const line of (await redis.info('commandstats')).split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim());
    if (match !== null) stats.set(match[1] ?? '', { calls: Number(match[2]), usec: Number(match[3]) });
  }
  return stats;
}

async function start(script: string, environment: Record<string, string | undefined>, probe: string) {
  const child = startNodeChild(script, { PATH: process.env.PATH, ...environment });
  children.push(child);
  const url = `http://127.0.0.1:${environment.PORT ?? environment.SHEPHERD_PORT}`;
  await waitForHttp(`${url}${probe}`, child);
  const pid = child.child.pid;
  if (pid === undefined) throw new Error(`${script} has no pid`);
  return { url, pid };
}

/**
 * CPU µs per 2xx answer over one closed-loop run (after a warm-up), and every 2xx answer of both (the
 * Redis counters span the warm-up too).
 */
async function cpuPerAck(
  label: string,
  server: { url: string; pid: number },
): Promise<{ microseconds: number; answered: number }> {
  const target = { url: `${server.url}/api/messages`, connections, body };
  const warmUp = await runAutocannon({ ...target, durationS: 2 });
  const before = cpuSeconds(server.pid);
  const result = await runAutocannon({ ...target, durationS });
  const used = cpuSeconds(server.pid) - before;
  const failed = result.non2xx + result.errors + result.timeouts;
  note(`${label}: ${result['2xx']} ok, ${failed} failed, ${used.toFixed(2)} CPU s`);
  if (result['2xx'] === 0 || failed > result['2xx'] * 0.01) throw new Error(`${label}: too many failures`);
  return { microseconds: (used * 1e6) / result['2xx'], answered: warmUp['2xx'] + result['2xx'] };
}

const redis = new Redis(benchRedisUrl, { maxRetriesPerRequest: null });
try {
  const barePort = String(await freePort());
  const bare = await start('bench/lib/bare-server.ts', { PORT: barePort }, '/loop-delay');
  const shepherdPort = String(await freePort());
  const shepherd = await start(
    'src/app/main.ts',
    {
      REDIS_URL: benchRedisUrl,
      SHEPHERD_ROLE: 'bot',
      SHEPHERD_PORT: shepherdPort,
      SHEPHERD_QUEUE_PREFIX: prefix,
      SHEPHERD_DATA_DIR: dataDir,
      SHEPHERD_LOG_LEVEL: 'warn',
      SHEPHERD_LLM_BASE_URL: 'http://127.0.0.1:9/v1',
    },
    '/api/channels',
  );
  const bareUs = (await cpuPerAck('bare', bare)).microseconds;
  const statsBefore = await commandStats(redis);
  const jobsBefore = await redis.llen(`${prefix}:turns:wait`);
  const wakeBefore = await redis.llen(`${prefix}:turn-wake`);
  const shepherdRun = await cpuPerAck('shepherd', shepherd);
  const shepherdUs = shepherdRun.microseconds;
  // Let the last in-flight requests land.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const statsAfter = await commandStats(redis);
  // No turn worker (so no dispatcher) runs in role `bot`: every job or request the acks made is still there.
  const acks = shepherdRun.answered;
  const jobs = (await redis.llen(`${prefix}:turns:wait`)) - jobsBefore;
  const wakeRequests = (await redis.llen(`${prefix}:turn-wake`)) - wakeBefore;
  let scripts = 0;
  let scriptUsec = 0;
  for (const name of ['evalsha', 'eval']) {
    const before = statsBefore.get(name) ?? { calls: 0, usec: 0 };
    const after = statsAfter.get(name) ?? before;
    scripts += after.calls - before.calls;
    scriptUsec += after.usec - before.usec;
  }
  print('ack_cpu_us_bare', bareUs);
  print('ack_cpu_us_shepherd', shepherdUs);
  print('ack_cpu_ratio', bareUs / shepherdUs);
  print('ack_redis_scripts_per_ack', scripts / acks);
  print('ack_redis_script_us_per_ack', scriptUsec / acks);
  print('ack_turn_jobs_per_ack', jobs / acks);
  print('ack_wake_requests_per_ack', wakeRequests / acks);
} finally {
  redis.disconnect();
  for (const child of children) await child.stop();
  const deleted = await deleteKeysWithPrefix(prefix);
  note(`deleted ${deleted} keys under ${prefix}:`);
  rmSync(dataDir, { recursive: true, force: true });
}
