import type { Redis } from 'ioredis';
import {
  connectProbe,
  createProbeRedis,
  isAuthRefusal,
  type RedisConnectionSettings,
  redisUrlWithoutPassword,
} from '../redis/connection.js';
import { type CheckOutcome, errorText, outcome, PROBE_TIMEOUT_MS } from './doctor-types.js';

function infoField(info: string, field: string): string | undefined {
  return new RegExp(`^${field}:(.*)$`, 'm').exec(info)?.[1]?.trim();
}

/**
 * Does this Redis answer a connection with no credentials? Then any local process (a run) can read and
 * forge decisions: warn.
 */
async function checkAuthRequired(settings: RedisConnectionSettings, usesCredentials: boolean) {
  const anonymous = createProbeRedis(settings, PROBE_TIMEOUT_MS, { anonymous: true });
  try {
    await connectProbe(anonymous);
    await anonymous.ping();
    return outcome(
      'redis auth',
      'warn',
      usesCredentials
        ? 'Redis also answers connections without a password'
        : 'Redis answers without a password: any local process, a run included, can reach it',
      'require a password (requirepass, or an ACL user in REDIS_URL and `default off`), or let `npm start` run the embedded Redis',
    );
  } catch (error) {
    return isAuthRefusal(error)
      ? outcome('redis auth', 'ok', 'Redis refuses connections without a password (NOAUTH)')
      : outcome('redis auth', 'skip', `could not probe without credentials: ${errorText(error)}`);
  } finally {
    anonymous.disconnect();
  }
}

/** Redis answers, and is set up the way BullMQ needs it (noeviction), keeps data (AOF) and needs a password. */
export async function checkRedis(settings: RedisConnectionSettings): Promise<CheckOutcome[]> {
  const sentinel = settings.redisSentinel;
  const url =
    sentinel === undefined
      ? redisUrlWithoutPassword(settings.redisUrl)
      : `the primary of ${sentinel.name} (sentinels ${sentinel.sentinels.map(({ host, port }) => `${host}:${port}`).join(',')})`;
  let redis: Redis;
  try {
    redis = createProbeRedis(settings, PROBE_TIMEOUT_MS);
  } catch (error) {
    return [
      outcome('redis', 'fail', errorText(error), "run doctor as the bot's user, or fix REDIS_TLS_CA_FILE"),
    ];
  }
  try {
    // Why a connection closed (a TLS certificate, NOAUTH, WRONGPASS) comes from connectProbe, not "closed".
    await connectProbe(redis);
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
    const usesCredentials = redis.options.password !== undefined && redis.options.password !== '';
    results.push(await checkAuthRequired(settings, usesCredentials));
    return results;
  } catch (error) {
    return [
      outcome(
        'redis',
        'fail',
        `cannot reach ${url}: ${errorText(error)}`,
        isAuthRefusal(error)
          ? 'Redis refused the credentials: fix the user and password in REDIS_URL'
          : 'start Redis or fix REDIS_URL',
      ),
    ];
  } finally {
    redis.disconnect();
  }
}
