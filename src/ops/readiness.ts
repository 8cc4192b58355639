import type { Worker } from 'bullmq';
import type { Redis } from 'ioredis';

interface CheckResult {
  ok: boolean;
  detail?: string;
}

interface ReadinessCheck {
  /** What the JSON names, e.g. `redis`, `worker:turns`, `adapter:slack`. */
  name: string;
  run(): Promise<CheckResult> | CheckResult;
}

interface ReadinessReport {
  ready: boolean;
  checks: Record<string, CheckResult>;
}

/** A check never hangs the probe: a Redis that is down queues commands until it comes back. */
const CHECK_TIMEOUT_MS = 1000;

async function bounded(check: ReadinessCheck): Promise<CheckResult> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<CheckResult>((resolve) => {
    timer = setTimeout(
      () => resolve({ ok: false, detail: `no answer in ${CHECK_TIMEOUT_MS} ms` }),
      CHECK_TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([Promise.resolve().then(() => check.run()), timeout]);
  } catch (error) {
    return { ok: false, detail: error instanceof Error ? error.message : String(error) };
  } finally {
    clearTimeout(timer);
  }
}

export function createReadiness() {
  const checks: ReadinessCheck[] = [];
  return {
    add(check: ReadinessCheck): void {
      const existing = checks.findIndex((entry) => entry.name === check.name);
      if (existing >= 0) checks.splice(existing, 1);
      checks.push(check);
    },
    remove(namePrefix: string): void {
      for (let index = checks.length - 1; index >= 0; index -= 1) {
        if (checks[index]?.name.startsWith(namePrefix)) checks.splice(index, 1);
      }
    },
    async report(): Promise<ReadinessReport> {
      const results = await Promise.all(
        checks.map(async (check) => [check.name, await bounded(check)] as const),
      );
      return { ready: results.every(([, result]) => result.ok), checks: Object.fromEntries(results) };
    },
  };
}

export type Readiness = ReturnType<typeof createReadiness>;

export function redisCheck(redis: Redis): ReadinessCheck {
  return {
    name: 'redis',
    async run() {
      // Without this, a ping would sit in the offline queue until the server comes back.
      if (redis.status !== 'ready') return { ok: false, detail: `connection ${redis.status}` };
      const answer = await redis.ping();
      return answer === 'PONG' ? { ok: true } : { ok: false, detail: `ping answered ${answer}` };
    },
  };
}

export function workerCheck(worker: Worker): ReadinessCheck {
  return {
    name: `worker:${worker.name}`,
    run: () => (worker.isRunning() ? { ok: true } : { ok: false, detail: 'not running' }),
  };
}
