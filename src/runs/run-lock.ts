import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { RunError } from '../errors.js';

/**
 * A per-run Redis lock with a token, so state changes of one run are serialised across bot and worker
 * processes. The TTL is renewed while the holder works (a pause can wait a whole grace period) and the
 * lock is released only by its holder.
 */

const RELEASE_SCRIPT = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`;
const RENEW_SCRIPT = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0`;

export interface RunLock {
  /**
   * Run `work` holding the lock of `name`. Waits up to `waitMs` for it (0 = try once); throws
   * `run_busy` when it cannot be had.
   */
  withLock<T>(name: string, work: () => Promise<T>, options?: { waitMs?: number }): Promise<T>;
}

export function createRunLock(options: { redis: Redis; prefix: string; ttlMs?: number }): RunLock {
  const ttlMs = options.ttlMs ?? 15_000;
  const keyOf = (name: string) => `${options.prefix}:lock:run:${name}`;

  async function acquire(key: string, token: string, waitMs: number): Promise<boolean> {
    const deadline = Date.now() + waitMs;
    let delay = 20;
    for (;;) {
      const result = await options.redis.set(key, token, 'PX', ttlMs, 'NX');
      if (result === 'OK') return true;
      if (Date.now() >= deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, delay + Math.random() * delay));
      delay = Math.min(delay * 2, 250);
    }
  }

  async function withLock<T>(name: string, work: () => Promise<T>, lockOptions: { waitMs?: number } = {}) {
    const key = keyOf(name);
    const token = randomBytes(12).toString('hex');
    if (!(await acquire(key, token, lockOptions.waitMs ?? 120_000))) {
      throw new RunError('run_busy', `run ${name} is busy with another change; try again in a moment`);
    }
    const renew = setInterval(
      () => {
        options.redis.eval(RENEW_SCRIPT, 1, key, token, String(ttlMs)).catch(() => undefined);
      },
      Math.max(ttlMs / 3, 100),
    );
    try {
      return await work();
    } finally {
      clearInterval(renew);
      await options.redis.eval(RELEASE_SCRIPT, 1, key, token).catch(() => undefined);
    }
  }

  return { withLock };
}
