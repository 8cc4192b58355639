import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Redis, type RedisOptions } from 'ioredis';
import { isLoopbackName } from '../config/security.js';
import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';

/** What every connection needs to reach Redis: the URL and the settings beside it (`src/config/redis-auth.ts`). */
export interface RedisConnectionSettings {
  redisUrl: string;
  /** Sentinel: the primary is the one these sentinels name for `name` (`src/config/redis-auth.ts`). */
  redisSentinel?:
    | { sentinels: Array<{ host: string; port: number }>; name: string; password?: string | undefined }
    | undefined;
  redisAuth: { tlsCaFile?: string | undefined; embeddedPasswordFile: string };
}

/** The embedded Redis's password, or undefined before it ever started (no file). */
function readEmbeddedPassword(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim() || undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    throw new ConfigError(
      `cannot read the embedded Redis password ${file} (${code ?? String(error)}): run as the bot's user`,
      { cause: error },
    );
  }
}

/**
 * The ioredis options every connection shares (the bot's clients, BullMQ queues, workers and
 * QueueEvents, which duplicate them, and `doctor`): the CA of a `rediss://` server, and for a loopback
 * URL without credentials the embedded Redis's password from the data directory. Credentials in the
 * URL (`redis://user:pass@…`, ACL users) are ioredis's own. With Sentinel the URL's host and port are
 * ignored: ioredis asks the sentinels for the primary, and again after every disconnect (a failover).
 */
export function redisConnectionOptions(settings: RedisConnectionSettings): RedisOptions {
  const url = new URL(settings.redisUrl);
  const options: RedisOptions = {};
  const caFile = settings.redisAuth.tlsCaFile;
  if (url.protocol === 'rediss:' && caFile !== undefined) {
    try {
      options.tls = { ca: readFileSync(caFile) };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? String(error);
      throw new ConfigError(`REDIS_TLS_CA_FILE=${JSON.stringify(caFile)}: cannot read the file (${code})`, {
        cause: error,
      });
    }
  }
  const sentinel = settings.redisSentinel;
  if (sentinel !== undefined) {
    options.sentinels = sentinel.sentinels;
    options.name = sentinel.name;
    if (sentinel.password !== undefined) options.sentinelPassword = sentinel.password;
    // No `failoverDetector`: its +switch-master handler disconnects the connector even while the client
    // is already reconnecting after the primary died, which aborts that connect and ends the client for
    // good ("Connection is closed." on every command; seen in the failover test). A demoted primary that
    // is still up answers writes with READONLY instead: reconnect (asking the sentinels again) and resend.
    options.reconnectOnError = (error) => (error.message.startsWith('READONLY') ? 2 : false);
    if (url.protocol === 'rediss:') options.enableTLSForSentinelMode = true;
    return options;
  }
  if (url.username === '' && url.password === '' && isLoopbackName(url.hostname)) {
    const password = readEmbeddedPassword(settings.redisAuth.embeddedPasswordFile);
    if (password !== undefined) options.password = password;
  }
  return options;
}

/** A Redis connection fit for BullMQ workers (blocking commands need `maxRetriesPerRequest: null`). */
export function createRedis(
  settings: RedisConnectionSettings,
  options: { lazy?: boolean; logger?: Logger } = {},
): Redis {
  const client = new Redis(settings.redisUrl, {
    ...redisConnectionOptions(settings),
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

/**
 * A one-shot connection for probes (start-up, `doctor`, the CLI): no retries, no offline queue.
 * `anonymous` drops every credential, to see whether Redis answers without one.
 */
export function createProbeRedis(
  settings: RedisConnectionSettings,
  connectTimeout: number,
  options: { anonymous?: boolean } = {},
): Redis {
  const url = new URL(settings.redisUrl);
  const connection = redisConnectionOptions(settings);
  if (options.anonymous === true) {
    url.username = '';
    url.password = '';
    delete connection.password;
  }
  const client = new Redis(url.toString(), {
    ...connection,
    lazyConnect: true,
    connectTimeout,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    sentinelRetryStrategy: () => null,
    enableOfflineQueue: false,
    // The probe's own command is the check; ioredis's INFO ready check would turn NOAUTH into a bare
    // "Connection is closed".
    enableReadyCheck: false,
  });
  client.on('error', () => undefined);
  return client;
}

/** Does a Redis answer PING with these settings? (Start-up and the CLI ask before anything connects.) */
export async function redisAnswers(
  settings: RedisConnectionSettings,
  connectTimeout = 3000,
): Promise<boolean> {
  let client: Redis | undefined;
  try {
    client = createProbeRedis(settings, connectTimeout);
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client?.disconnect();
  }
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
