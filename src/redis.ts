import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Logger } from './logger.js';

/** A Redis connection fit for BullMQ workers (blocking commands need `maxRetriesPerRequest: null`). */
export function createRedis(url: string, options: { lazy?: boolean; logger?: Logger } = {}): Redis {
  const client = new Redis(url, {
    maxRetriesPerRequest: null,
    lazyConnect: options.lazy ?? false,
  });
  // Without a listener ioredis prints "Unhandled error event" for every reconnect attempt during an outage.
  client.on('error', (error: Error) => {
    if (options.logger !== undefined) options.logger.warn({ err: error }, 'redis connection error');
    else process.stderr.write(`shepherd: redis connection error: ${error.message}\n`);
  });
  return client;
}

/** Run a Lua script by SHA, loading it on the first NOSCRIPT (e.g. after a Redis restart). */
export function createScriptRunner(redis: Redis, script: string) {
  const sha = createHash('sha1').update(script).digest('hex');
  return async (keys: string[], args: (string | number)[]): Promise<unknown> => {
    try {
      return await redis.evalsha(sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (error instanceof Error && error.message.startsWith('NOSCRIPT')) {
        return await redis.eval(script, keys.length, ...keys, ...args);
      }
      throw error;
    }
  };
}
