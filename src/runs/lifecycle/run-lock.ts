import type { Redis } from 'ioredis';
import { LeaseError, RunError } from '../../errors.js';
import { createLeases } from '../../redis/lease.js';

/**
 * A per-run lease (lease.ts), so state changes of one run are serialised across bot and worker
 * processes. The TTL is renewed while the holder works (a pause can wait a whole grace period) and the
 * lease is released only by its holder.
 */

export interface RunLock {
  /**
   * Run `work` holding the lock of `name`. Waits up to `waitMs` for it (0 = try once); throws
   * `run_busy` when it cannot be had.
   */
  withLock<T>(name: string, work: () => Promise<T>, options?: { waitMs?: number }): Promise<T>;
}

export function createRunLock(options: { redis: Redis; prefix: string; ttlMs?: number }): RunLock {
  const ttlMs = options.ttlMs ?? 15_000;
  const leases = createLeases(options.redis);

  async function withLock<T>(name: string, work: () => Promise<T>, lockOptions: { waitMs?: number } = {}) {
    const key = `${options.prefix}:lock:run:${name}`;
    try {
      return await leases.withLease(key, ttlMs, () => work(), {
        waitMs: lockOptions.waitMs ?? 120_000,
      });
    } catch (error) {
      // Only our own wait ran out; a busy error from inside `work` passes through as it is.
      if (error instanceof LeaseError && error.key === key) {
        throw new RunError('run_busy', `run ${name} is busy with another change; try again in a moment`, {
          cause: error,
        });
      }
      throw error;
    }
  }

  return { withLock };
}
