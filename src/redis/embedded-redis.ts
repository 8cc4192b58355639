import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { definedOnly } from '../defined-only.js';
import { ServiceError } from '../errors.js';
import type { Logger } from '../logger.js';
import {
  isAuthRefusal,
  type RedisConnectionSettings,
  redisAnswers,
  redisRefusal,
  redisUrlWithoutPassword,
} from './connection.js';

/** How the embedded Redis keeps its data: an append-only file, fsynced every second, in `<dataDir>/redis`. */
function embeddedRedisArguments(port: string, directory: string): string[] {
  return [
    '--port',
    port,
    '--bind',
    '127.0.0.1',
    '--dir',
    directory,
    '--appendonly',
    'yes',
    '--appendfsync',
    'everysec',
    // The AOF is the record; no RDB snapshots on the side.
    '--save',
    '',
    // The rest of the configuration (the password) comes on stdin, never in the process's arguments,
    // which every local user can read in /proc.
    '-',
  ];
}

/**
 * The embedded Redis's password: generated at its first start and kept in `<dataDir>/redis/password`,
 * mode 0600 in a 0700 directory, so only the bot's user (not a run under `SHEPHERD_RUN_AS_USER`) can
 * read it. The bot, its workers and `doctor` read it from there (`redisConnectionOptions`).
 */
function embeddedPassword(file: string, logger: Logger): string {
  const directory = dirname(file);
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  // A directory made by an older version (before the password) is closed too: it holds the AOF.
  chmodSync(directory, 0o700);
  try {
    writeFileSync(file, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
    logger.info({ file }, 'generated the embedded Redis password (mode 0600)');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    if ((statSync(file).mode & 0o077) !== 0) {
      chmodSync(file, 0o600);
      logger.warn({ file }, 'the embedded Redis password file was readable by others; set it to mode 0600');
    }
  }
  return readFileSync(file, 'utf8').trim();
}

/** Redis answered NOAUTH, WRONGPASS or NOPERM: say so, and where the credentials come from. */
function redisAuthError(settings: RedisConnectionSettings, refusal: Error): ServiceError {
  const url = new URL(settings.redisUrl);
  const source =
    settings.redisSentinel !== undefined || url.username !== '' || url.password !== ''
      ? 'check the user and password in REDIS_URL'
      : `set them in REDIS_URL (redis://user:password@host:port), or for the embedded Redis run as the bot's user, which reads ${settings.redisAuth.embeddedPasswordFile}`;
  return new ServiceError(
    'redis_unavailable',
    `Redis at ${redisUrlWithoutPassword(settings.redisUrl)} refuses the bot's credentials (${refusal.message}): ${source}`,
    { retryable: false, cause: refusal },
  );
}

/**
 * Uses the Redis at `redisUrl` when it answers; otherwise, for a local URL without credentials, starts a
 * `redis-server` found on PATH (bound to 127.0.0.1, password required, AOF persistence in
 * `<dataDir>/redis`) as a child that ends with the bot. Threads, sessions, approvals and GPU claims
 * survive a restart of the bot and of that Redis.
 */
export async function ensureRedis(
  settings: RedisConnectionSettings,
  options: { logger: Logger },
): Promise<{ url: string; pid?: number; stop(): Promise<void> }> {
  const url = settings.redisUrl;
  const refusal = await redisRefusal(settings);
  if (refusal === undefined) return { url, stop: async () => undefined };
  // A Redis that answers but refuses the credentials is the operator's to fix; starting another on its
  // port would only fail with a message that hides the cause.
  if (isAuthRefusal(refusal)) throw redisAuthError(settings, refusal);
  // Under Sentinel the servers are the operator's: starting a lone local one would split the data.
  if (settings.redisSentinel !== undefined) {
    const names = settings.redisSentinel.sentinels.map(({ host, port }) => `${host}:${port}`).join(',');
    throw new ServiceError(
      'redis_unavailable',
      `no primary for ${settings.redisSentinel.name} answers through the sentinels ${names}; check REDIS_SENTINELS and REDIS_SENTINEL_NAME`,
      { retryable: false },
    );
  }
  const parsed = new URL(url);
  const local =
    ['127.0.0.1', 'localhost', '::1'].includes(parsed.hostname) &&
    parsed.protocol === 'redis:' &&
    parsed.username === '' &&
    parsed.password === '';
  const found = spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
  if (!local || !found) {
    throw new ServiceError(
      'redis_unavailable',
      `no Redis answers at ${redisUrlWithoutPassword(url)} (${refusal.message})${local ? ' and no redis-server was found on PATH' : ''}; set REDIS_URL`,
      { retryable: false },
    );
  }
  const port = parsed.port === '' ? '6379' : parsed.port;
  const password = embeddedPassword(settings.redisAuth.embeddedPasswordFile, options.logger);
  const directory = dirname(settings.redisAuth.embeddedPasswordFile);
  const child: ChildProcess = spawn('redis-server', embeddedRedisArguments(port, directory), {
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  // A redis-server that exits at once (port taken) closes its stdin: that is reported below, not here.
  child.stdin?.on('error', () => undefined);
  child.stdin?.end(`requirepass ${password}\n`);
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  options.logger.info(
    { port, pid: child.pid, dir: directory },
    'no Redis answered; started a local redis-server (password required, append-only file, fsync every second)',
  );
  for (let attempt = 0; attempt < 50; attempt += 1) {
    if (await redisAnswers(settings)) break;
    await new Promise((done) => setTimeout(done, 100));
  }
  if (!(await redisAnswers(settings))) {
    if (child.exitCode === null) child.kill('SIGTERM');
    throw new ServiceError('redis_unavailable', `started redis-server but ${url} does not answer`, {
      retryable: false,
    });
  }
  return {
    url,
    ...definedOnly({ pid: child.pid }),
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
      // SIGTERM makes redis-server fsync the AOF and exit; wait for it so nothing is cut short.
      child.kill('SIGTERM');
      const timeout = new Promise<void>((done) => setTimeout(done, 10_000).unref());
      await Promise.race([exited, timeout]);
    },
  };
}
