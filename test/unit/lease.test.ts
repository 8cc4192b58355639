import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseError } from '../../src/errors.js';
import { createLeases, type Leases } from '../../src/redis/lease.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('lease (real Redis)', () => {
  const prefix = uniquePrefix('lease');
  let redis: Redis;
  let other: Redis;
  let leases: Leases;
  let otherLeases: Leases;

  beforeAll(() => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    // A second connection plays the other process.
    other = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    leases = createLeases(redis);
    otherLeases = createLeases(other);
  });
  afterAll(async () => {
    await deleteKeysWithPrefix(prefix);
    redis.disconnect();
    other.disconnect();
  });

  it('lets one of two contenders in at a time', async () => {
    const key = `${prefix}:exclusive`;
    let inside = 0;
    let maxInside = 0;
    const order: string[] = [];
    const contender = (who: string, pool: Leases) =>
      pool.withLease(
        key,
        5_000,
        async () => {
          inside++;
          maxInside = Math.max(maxInside, inside);
          order.push(`${who}-in`);
          await sleep(80);
          order.push(`${who}-out`);
          inside--;
        },
        { waitMs: 5_000 },
      );
    await Promise.all([contender('a', leases), contender('b', otherLeases), contender('c', leases)]);
    expect(maxInside).toBe(1);
    expect(order).toHaveLength(6);
    // Each section ends before the next begins.
    for (let index = 0; index < 6; index += 2) {
      expect(order[index]?.replace('-in', '')).toBe(order[index + 1]?.replace('-out', ''));
    }
    expect(await redis.exists(key)).toBe(0);
  });

  it('is released only by its holder', async () => {
    const key = `${prefix}:holder`;
    const lease = await leases.acquire(key, 5_000);
    expect(await otherLeases.tryAcquire(key, 5_000)).toBeUndefined();
    expect(await redis.get(key)).toBe(lease.token);
    expect(await lease.release()).toBe(true);
    const next = await otherLeases.tryAcquire(key, 5_000);
    if (next === undefined) throw new Error('the released lease should be free');
    // The first holder's stale handle neither releases nor renews the new holder's lease.
    expect(await lease.release()).toBe(false);
    expect(await lease.renew()).toBe(false);
    expect(await redis.get(key)).toBe(next.token);
    expect(await next.release()).toBe(true);
    expect(await redis.exists(key)).toBe(0);
  });

  it('lets an expired lease be taken over, and the old holder cannot renew or release the new one', async () => {
    const key = `${prefix}:expired`;
    const old = await leases.acquire(key, 100);
    await sleep(200);
    const taker = await otherLeases.acquire(key, 5_000);
    expect(taker.token).not.toBe(old.token);
    expect(await old.release()).toBe(false);
    expect(await old.renew(10_000)).toBe(false);
    expect(await redis.get(key)).toBe(taker.token);
    expect(await redis.pttl(key)).toBeLessThanOrEqual(5_000);
    expect(await taker.release()).toBe(true);
    expect(await redis.exists(key)).toBe(0);
  });

  it('extends the lease on renew', async () => {
    const key = `${prefix}:renew`;
    const lease = await leases.acquire(key, 300);
    expect(await lease.renew(10_000)).toBe(true);
    expect(await redis.pttl(key)).toBeGreaterThan(5_000);
    await sleep(400);
    // Without the renew the lease would be gone by now.
    expect(await otherLeases.tryAcquire(key, 1_000)).toBeUndefined();
    expect(await lease.renew()).toBe(true);
    expect(await redis.pttl(key)).toBeLessThanOrEqual(300);
    await lease.release();
  });

  it('keeps renewing while withLease work outlives the TTL', async () => {
    const key = `${prefix}:long-work`;
    const result = await leases.withLease(key, 300, async () => {
      await sleep(900);
      // Three TTLs later the lease is still ours.
      return otherLeases.tryAcquire(key, 1_000);
    });
    expect(result).toBeUndefined();
    expect(await redis.exists(key)).toBe(0);
  });

  it('gives up after waitMs with a typed lease_busy error', async () => {
    const key = `${prefix}:busy`;
    const lease = await leases.acquire(key, 10_000);
    const started = Date.now();
    const error = await otherLeases.acquire(key, 1_000, { waitMs: 300 }).catch((caught: unknown) => caught);
    const waited = Date.now() - started;
    expect(error).toBeInstanceOf(LeaseError);
    expect(error).toMatchObject({ name: 'LeaseError', code: 'lease_busy', retryable: true, key });
    expect(waited).toBeGreaterThanOrEqual(280);
    expect(waited).toBeLessThan(2_000);
    // The holder's lease is untouched.
    expect(await redis.get(key)).toBe(lease.token);
    await lease.release();
  });

  it('releases when the work throws', async () => {
    const key = `${prefix}:throws`;
    await expect(
      leases.withLease(key, 5_000, async () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await redis.exists(key)).toBe(0);
  });

  it('reads hash fields with the lease in one step, and releases inside the holder transaction', async () => {
    const key = `${prefix}:reading`;
    const hash = `${prefix}:reading-hash`;
    await redis.hset(hash, { a: '1', c: '3' });
    const taken = await leases.tryAcquireReading(key, 5_000, hash, ['a', 'b', 'c'], 'hold.');
    if (!('lease' in taken)) throw new Error('the lease was free');
    expect(taken.values).toEqual(['1', null, '3']);
    expect(taken.lease.token.startsWith('hold.')).toBe(true);
    // Held: the other process gets nothing, not even the fields, only who holds it.
    expect(await otherLeases.tryAcquireReading(key, 5_000, hash, ['a'])).toEqual({
      holder: taken.lease.token,
    });
    const transaction = redis.multi().hset(hash, 'b', '2');
    taken.lease.releaseIn(transaction);
    const results = await transaction.exec();
    expect(results?.at(-1)).toEqual([null, 1]);
    expect(await redis.exists(key)).toBe(0);
    expect(await redis.hget(hash, 'b')).toBe('2');
    expect(await otherLeases.tryAcquireReading(key, 5_000, hash, ['b'])).toMatchObject({ values: ['2'] });
  });

  it('renews many leases in one round trip, and says which are no longer held', async () => {
    const kept = await leases.acquire(`${prefix}:many-a`, 1_000);
    const lost = await leases.acquire(`${prefix}:many-b`, 1_000);
    await redis.set(`${prefix}:many-b`, 'someone else');
    expect(await leases.renewAll([kept, lost])).toEqual([true, false]);
    expect(await redis.pttl(`${prefix}:many-a`)).toBeGreaterThan(0);
    expect(await redis.get(`${prefix}:many-b`)).toBe('someone else');
  });
});
