import { Redis } from 'ioredis';
import { type CheckOutcome, errorText, outcome, PROBE_TIMEOUT_MS } from './doctor-types.js';

function infoField(info: string, field: string): string | undefined {
  return new RegExp(`^${field}:(.*)$`, 'm').exec(info)?.[1]?.trim();
}

/** Redis answers, and is set up the way BullMQ needs it (noeviction) and keeps data (AOF). */
export async function checkRedis(url: string): Promise<CheckOutcome[]> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: PROBE_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    const info = await redis.info('server');
    const version = infoField(info, 'redis_version') ?? 'unknown';
    const results = [outcome('redis', 'ok', `Redis ${version} at ${url}`)];
    const policy = await redis
      .config('GET', 'maxmemory-policy')
      .then((reply) => String((reply as string[])[1] ?? 'unknown'))
      .catch(() => 'unknown (CONFIG is disabled)');
    results.push(
      policy === 'noeviction'
        ? outcome('redis policy', 'ok', 'maxmemory-policy noeviction')
        : outcome(
            'redis policy',
            'warn',
            `maxmemory-policy ${policy}`,
            'set maxmemory-policy noeviction, or Redis may evict queued jobs under memory pressure',
          ),
    );
    const persistence = await redis.info('persistence');
    const aof = infoField(persistence, 'aof_enabled') === '1';
    results.push(
      aof
        ? outcome('redis aof', 'ok', 'append-only file on')
        : outcome(
            'redis aof',
            'warn',
            'append-only file off: a Redis restart loses threads, sessions and approvals',
            'start Redis with --appendonly yes --appendfsync everysec',
          ),
    );
    return results;
  } catch (error) {
    return [
      outcome('redis', 'fail', `cannot reach ${url}: ${errorText(error)}`, 'start Redis or fix REDIS_URL'),
    ];
  } finally {
    redis.disconnect();
  }
}
