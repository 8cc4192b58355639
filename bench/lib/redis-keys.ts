import { Redis } from 'ioredis';

export const benchRedisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Deletes every key under `<prefix>:` (a benchmark's own queue prefix) and returns how many. */
export async function deleteKeysWithPrefix(prefix: string): Promise<number> {
  const redis = new Redis(benchRedisUrl, { maxRetriesPerRequest: null });
  let deleted = 0;
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) deleted += await redis.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
  return deleted;
}

/** The Redis server's own CPU seconds so far (`INFO cpu`: user + system, every client's work). */
export async function redisCpuSeconds(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (name: string) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return field('used_cpu_user') + field('used_cpu_sys');
}
