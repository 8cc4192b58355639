import { randomUUID } from 'node:crypto';
import type { ChainableCommander, Redis } from 'ioredis';
import { LeaseError } from '../errors.js';

/**
 * One Redis lease for every "only one of us at a time" section (a run's state change, a monitor tick, a
 * sweep update): `SET NX PX` with a random token, so renew and release act only for the holder. A lease
 * that expired and was taken over is the new holder's: the old holder's renew and release become no-ops
 * (compare-and-pexpire, compare-and-delete in one Lua step each).
 */

const RELEASE_SCRIPT = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`;
// Take the lease and, when taken, read hash fields in the same step (a monitor tick: lease + cursors);
// when held, say by whom (its token), so a caller can tell a long hold from a short tick.
const ACQUIRE_READING_SCRIPT = `if redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then return {1, redis.call('hmget', KEYS[2], unpack(ARGV, 3))} end return {0, redis.call('get', KEYS[1]) or ''}`;
const RENEW_SCRIPT = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0`;

/** Retry delays while waiting for a lease: doubling from the first to the cap, with jitter. */
const FIRST_RETRY_MS = 20;
const MAX_RETRY_MS = 250;

export interface Lease {
  readonly key: string;
  readonly token: string;
  /** The TTL it was taken with (what `renew` extends to by default). */
  readonly ttlMs: number;
  /** Extend the lease to `ttlMs` from now (default: the TTL it was taken with); false when no longer held. */
  renew(ttlMs?: number): Promise<boolean>;
  /** Give the lease up; false when it was no longer ours (expired, maybe taken over). */
  release(): Promise<boolean>;
  /** Queue the release on a transaction, so the last write and the release share one round trip. */
  releaseIn(transaction: ChainableCommander): void;
}

interface AcquireOptions {
  /** How long to wait for a held lease (0 = try once). Default 0. */
  waitMs?: number;
}

interface WithLeaseOptions extends AcquireOptions {
  /** Renew every third of the TTL while `work` runs (a long change outlives one TTL). Default true. */
  renew?: boolean;
}

export interface Leases {
  /** Take the lease on `key` for `ttlMs`, waiting up to `waitMs`; throws `LeaseError` (`lease_busy`). */
  acquire(key: string, ttlMs: number, options?: AcquireOptions): Promise<Lease>;
  /** Take the lease once, or `undefined` when someone else holds it. */
  tryAcquire(key: string, ttlMs: number): Promise<Lease | undefined>;
  /**
   * `tryAcquire`, and when taken also `HMGET hashKey fields` in the same round trip (one Lua step: the
   * fields are read under the lease). When not taken: the holder's token (`tokenPrefix` marks a kind of
   * holder, e.g. the monitor's long holds).
   */
  tryAcquireReading(
    key: string,
    ttlMs: number,
    hashKey: string,
    fields: readonly string[],
    tokenPrefix?: string,
  ): Promise<{ lease: Lease; values: Array<string | null> } | { holder: string }>;
  /** Renew many leases in one round trip (each to its own TTL); one boolean each: still held. */
  renewAll(leases: readonly Lease[]): Promise<boolean[]>;
  /** Run `work` holding the lease on `key`, then release it (also when `work` throws). */
  withLease<T>(
    key: string,
    ttlMs: number,
    work: (lease: Lease) => Promise<T>,
    options?: WithLeaseOptions,
  ): Promise<T>;
}

export function createLeases(redis: Redis): Leases {
  function leaseOf(key: string, token: string, ttlMs: number): Lease {
    return {
      key,
      token,
      ttlMs,
      async renew(renewTtlMs = ttlMs) {
        return (await redis.eval(RENEW_SCRIPT, 1, key, token, String(renewTtlMs))) === 1;
      },
      async release() {
        return (await redis.eval(RELEASE_SCRIPT, 1, key, token)) === 1;
      },
      releaseIn(transaction) {
        transaction.eval(RELEASE_SCRIPT, 1, key, token);
      },
    };
  }

  async function tryAcquireReading(
    key: string,
    ttlMs: number,
    hashKey: string,
    fields: readonly string[],
    tokenPrefix = '',
  ) {
    if (fields.length === 0) throw new Error('tryAcquireReading needs at least one field');
    // randomUUID draws from a cached pool: randomBytes cost a call into the entropy source per tick.
    const token = `${tokenPrefix}${randomUUID()}`;
    const [taken, values] = (await redis.eval(
      ACQUIRE_READING_SCRIPT,
      2,
      key,
      hashKey,
      token,
      ttlMs,
      ...fields,
    )) as [1, Array<string | null>] | [0, string];
    return taken === 1 ? { lease: leaseOf(key, token, ttlMs), values } : { holder: values };
  }

  async function renewAll(leases: readonly Lease[]): Promise<boolean[]> {
    if (leases.length === 0) return [];
    const pipeline = redis.pipeline();
    for (const lease of leases) pipeline.eval(RENEW_SCRIPT, 1, lease.key, lease.token, String(lease.ttlMs));
    const results = (await pipeline.exec()) ?? [];
    return leases.map((_, index) => results[index]?.[1] === 1);
  }

  async function tryAcquire(key: string, ttlMs: number): Promise<Lease | undefined> {
    const token = randomUUID();
    const result = await redis.set(key, token, 'PX', ttlMs, 'NX');
    return result === 'OK' ? leaseOf(key, token, ttlMs) : undefined;
  }

  async function acquire(key: string, ttlMs: number, options: AcquireOptions = {}): Promise<Lease> {
    const waitMs = options.waitMs ?? 0;
    const deadline = Date.now() + waitMs;
    let delay = FIRST_RETRY_MS;
    for (;;) {
      const lease = await tryAcquire(key, ttlMs);
      if (lease !== undefined) return lease;
      const left = deadline - Date.now();
      if (left <= 0) throw new LeaseError(key, `${key} is held by someone else (waited ${waitMs} ms)`);
      const pause = Math.min(delay + Math.random() * delay, left);
      await new Promise((resolve) => setTimeout(resolve, pause));
      delay = Math.min(delay * 2, MAX_RETRY_MS);
    }
  }

  async function withLease<T>(
    key: string,
    ttlMs: number,
    work: (lease: Lease) => Promise<T>,
    options: WithLeaseOptions = {},
  ): Promise<T> {
    const lease = await acquire(key, ttlMs, options);
    const renewal =
      options.renew === false
        ? undefined
        : setInterval(
            () => {
              // A failed renew is retried on the next interval; the TTL still covers two more tries.
              lease.renew().catch(() => undefined);
            },
            Math.max(ttlMs / 3, 100),
          );
    try {
      return await work(lease);
    } finally {
      if (renewal !== undefined) clearInterval(renewal);
      // A lease we cannot release (Redis away) simply expires.
      await lease.release().catch(() => undefined);
    }
  }

  return { acquire, tryAcquire, tryAcquireReading, renewAll, withLease };
}
