import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createScriptRunner, type ScriptRunner } from '../../src/redis/connection.js';
import { createScriptGate } from '../../src/redis/script-gate.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { freePort, startOwnRedis, stopOwnRedis } from '../ops/redis-process.js';

/*
 * The acking connection's script gate, on a real Redis through the real ioredis client: a burst of script
 * calls shares socket writes (counted on the client's own socket), and every call still gets its own
 * answer, in the order the calls were made.
 */

/** Appends ARGV[1] to the list KEYS[1] and answers the list's length; 'bad' is refused with ERR_BAD. */
const APPEND_SCRIPT = `
if ARGV[1] == 'bad' then return redis.error_reply('ERR_BAD refused') end
return redis.call('RPUSH', KEYS[1], ARGV[1])
`;

describe('script gate', () => {
  const prefix = uniquePrefix('script-gate');
  let redis: Redis;
  let listKey: string;

  beforeAll(async () => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    await redis.ping();
  });
  beforeEach(() => {
    listKey = `${prefix}:list:${randomBytes(4).toString('hex')}`;
  });
  afterEach(() => vi.restoreAllMocks());
  afterAll(async () => {
    await deleteKeysWithPrefix(prefix);
    redis.disconnect();
  });

  /**
   * Counts the writes the client's socket makes from now on: `_write` and `_writev` are where a Node stream
   * hands data to the system, one call each, however many `write`s were corked together before.
   */
  function countWrites(): () => number {
    const single = vi.spyOn(redis.stream as unknown as { _write: () => void }, '_write');
    const vectored = vi.spyOn(redis.stream as unknown as { _writev: () => void }, '_writev');
    return () => single.mock.calls.length + vectored.mock.calls.length;
  }

  /** A gate's runner of the append script, which Redis has already run once (so it sends EVALSHA). */
  async function warmedGate(): Promise<ScriptRunner> {
    const run = createScriptGate(redis)(APPEND_SCRIPT);
    await run([listKey], ['warm-up']);
    return run;
  }

  /** Makes one call per value at once (as a burst of posts does) and waits for all their answers. */
  function burst(run: ScriptRunner, values: string[]): Promise<PromiseSettledResult<unknown>[]> {
    return Promise.allSettled(values.map((value) => run([listKey], [value])));
  }

  const numbered = (count: number) => Array.from({ length: count }, (_, index) => String(index));

  it('sends a call made alone at once, in a write of its own', async () => {
    const run = await warmedGate();
    const writes = countWrites();
    const answer = run([listKey], ['alone']);
    // Written before the caller yields: the gate adds no wait to a call made alone.
    expect(writes()).toBe(1);
    expect(await answer).toBe(2);
  });

  it('sends a burst in two writes where plain runners make one per call, answers in order', async () => {
    const gated = await warmedGate();
    let writes = countWrites();
    const results = await burst(gated, numbered(30));
    // The first call goes out alone; the 29 made while it was out share the next write.
    expect(writes()).toBe(2);
    expect(results.map((result) => (result.status === 'fulfilled' ? result.value : result.reason))).toEqual(
      Array.from({ length: 30 }, (_, index) => index + 2),
    );
    expect(await redis.lrange(listKey, 1, -1)).toEqual(numbered(30));

    vi.restoreAllMocks();
    writes = countWrites();
    await burst(createScriptRunner(redis, APPEND_SCRIPT), numbered(30));
    expect(writes()).toBe(30);
  });

  it('keeps a batch to 256 calls', async () => {
    const run = await warmedGate();
    const writes = countWrites();
    const results = await burst(run, numbered(600));
    // One alone, then 599 queued: 256 + 256 + 87.
    expect(writes()).toBe(4);
    expect(results.every((result) => result.status === 'fulfilled')).toBe(true);
    expect(await redis.lrange(listKey, 1, -1)).toEqual(numbered(600));
  });

  it('refuses only the call Redis refused', async () => {
    const run = await warmedGate();
    const results = await burst(run, ['a', 'b', 'bad', 'c']);
    expect(results.map((result) => result.status)).toEqual([
      'fulfilled',
      'fulfilled',
      'rejected',
      'fulfilled',
    ]);
    const refused = results[2];
    expect(refused?.status === 'rejected' && String(refused.reason)).toContain('ERR_BAD refused');
    expect(await redis.lrange(listKey, 0, -1)).toEqual(['warm-up', 'a', 'b', 'c']);
  });

  describe('on a Redis of its own (restarted and flushed)', () => {
    let port: number;
    let server: ChildProcess;
    let client: Redis;

    beforeAll(async () => {
      port = await freePort();
      server = await startOwnRedis(port);
      client = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: null, retryStrategy: () => 50 });
      client.on('error', () => undefined);
      await client.ping();
    });
    afterAll(async () => {
      client.disconnect();
      await stopOwnRedis(server);
    });

    /** Calls and NOSCRIPT failures of EVAL and EVALSHA on this server since it started. */
    async function scriptStats() {
      const info = await client.info('commandstats');
      const field = (command: string, name: string) =>
        Number(new RegExp(`cmdstat_${command}:.*?${name}=(\\d+)`).exec(info)?.[1] ?? '0');
      return {
        eval: field('eval', 'calls'),
        evalsha: field('evalsha', 'calls'),
        evalshaFailed: field('evalsha', 'failed_calls'),
      };
    }

    it('sends a script in full until Redis has run it, and again after a restart', async () => {
      const run = createScriptGate(client)(APPEND_SCRIPT);
      expect(await run(['list'], ['one'])).toBe(1);
      expect(await run(['list'], ['two'])).toBe(2);
      expect(await scriptStats()).toEqual({ eval: 1, evalsha: 1, evalshaFailed: 0 });

      await stopOwnRedis(server);
      const ready = new Promise((resolve) => client.once('ready', resolve));
      server = await startOwnRedis(port);
      await ready;
      const results = await Promise.all(numbered(5).map((value) => run(['list'], [value])));
      // A new, empty server: no call met NOSCRIPT, and the burst kept its order.
      expect(results).toEqual([1, 2, 3, 4, 5]);
      expect(await client.lrange('list', 0, -1)).toEqual(numbered(5));
      expect((await scriptStats()).evalshaFailed).toBe(0);
    });

    it('keeps the calls made while Redis is down and sends them, in order, once it is back', async () => {
      const run = createScriptGate(client)(APPEND_SCRIPT);
      await run(['outage'], ['before']);
      await stopOwnRedis(server);
      // The first waits in ioredis's offline queue, the rest behind it in the gate.
      const answers = numbered(10).map((value) => run(['outage'], [value]));
      const ready = new Promise((resolve) => client.once('ready', resolve));
      server = await startOwnRedis(port);
      await ready;
      // A new, empty server: the list starts again, with every call made during the outage, in order.
      expect(await Promise.all(answers)).toEqual(Array.from({ length: 10 }, (_, index) => index + 1));
      expect(await client.lrange('outage', 0, -1)).toEqual(numbered(10));
    });

    it('sends calls again in full after a SCRIPT FLUSH, alone and in a batch, in order', async () => {
      await client.del('flushed');
      const run = createScriptGate(client)(APPEND_SCRIPT);
      await run(['flushed'], ['loaded']);
      await client.script('FLUSH');
      expect(await run(['flushed'], ['alone'])).toBe(2);
      await client.script('FLUSH');
      const results = await Promise.all(numbered(5).map((value) => run(['flushed'], [value])));
      expect(results).toEqual([3, 4, 5, 6, 7]);
      expect(await client.lrange('flushed', 0, -1)).toEqual(['loaded', 'alone', ...numbered(5)]);
    });
  });
});
