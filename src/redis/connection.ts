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

/**
 * ioredis 6 types `replyMapping` as a class parameter (`Redis<'legacy'>`): an options object that may carry
 * it as `undefined` does not fit the constructor under `exactOptionalPropertyTypes`. We keep the default
 * (legacy, v5 reply shapes, which BullMQ and our scripts read), so the key is left out of the type.
 */
type ConnectionOptions = Omit<RedisOptions, 'replyMapping'>;

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
export function redisConnectionOptions(settings: RedisConnectionSettings): ConnectionOptions {
  const url = new URL(settings.redisUrl);
  const options: ConnectionOptions = {};
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
    // The probe's own command is the check: no INFO ready check before it.
    enableReadyCheck: false,
  });
  client.on('error', () => undefined);
  return client;
}

/**
 * Connects a probe, failing with the reason the connection closed. ioredis 6 opens with `HELLO 3`
 * (carrying AUTH when there are credentials) and treats its refusal as fatal: NOAUTH, WRONGPASS or a
 * TLS certificate error arrives only as an 'error' event, and `connect()` rejects with a bare
 * "Connection is closed.". A user with a wrong or missing password must read the first, not the second.
 */
export async function connectProbe(client: Redis): Promise<void> {
  let reason: unknown;
  const keepFirst = (error: unknown) => {
    reason ??= error;
  };
  client.on('error', keepFirst);
  try {
    await client.connect();
  } catch (error) {
    throw reason ?? error;
  } finally {
    client.off('error', keepFirst);
  }
}

/** Redis refused the credentials (or their absence), as opposed to not answering at all. */
export function isAuthRefusal(error: unknown): boolean {
  return error instanceof Error && /^(NOAUTH|WRONGPASS|NOPERM)\b/.test(error.message);
}

/** A Redis URL fit to print: the password is a secret. */
export function redisUrlWithoutPassword(text: string): string {
  const url = new URL(text);
  if (url.password !== '') url.password = '***';
  return url.toString();
}

/**
 * Why a Redis does not answer PING with these settings, or undefined when it does. (Start-up and the CLI
 * ask before anything connects.)
 */
export async function redisRefusal(
  settings: RedisConnectionSettings,
  connectTimeout = 3000,
): Promise<Error | undefined> {
  let client: Redis | undefined;
  try {
    client = createProbeRedis(settings, connectTimeout);
    await connectProbe(client);
    const reply = await client.ping();
    return reply === 'PONG' ? undefined : new Error(`PING answered ${JSON.stringify(reply)}`);
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  } finally {
    client?.disconnect();
  }
}

/** Does a Redis answer PING with these settings? */
export async function redisAnswers(
  settings: RedisConnectionSettings,
  connectTimeout = 3000,
): Promise<boolean> {
  return (await redisRefusal(settings, connectTimeout)) === undefined;
}

/** The SHA-1 Redis names a script by. */
export const scriptSha = (script: string) => createHash('sha1').update(script).digest('hex');

/** Each script's calls sent on their own (`createScriptGate` batches them instead). */
export const plainScriptRunners =
  (redis: Redis): ScriptRunners =>
  (script) =>
    createScriptRunner(redis, script);

/** Runs one Lua script with its keys and arguments and resolves with Redis's reply. */
export type ScriptRunner = (keys: string[], args: (string | number)[]) => Promise<unknown>;

/** Makes a `ScriptRunner` for a script (each module names its own scripts). */
export type ScriptRunners = (script: string) => ScriptRunner;

/** Run a Lua script by SHA, loading it on the first NOSCRIPT (e.g. after a Redis restart). */
export function createScriptRunner(redis: Redis, script: string): ScriptRunner {
  const sha = scriptSha(script);
  return async (keys, args) => {
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
