import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { Redis } from 'ioredis';
import { definedOnly } from './defined-only.js';
import { ServiceError } from './errors.js';
import type { Logger } from './logger.js';

async function answers(url: string): Promise<boolean> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

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
  ];
}

/**
 * Uses the Redis at `url` when it answers; otherwise, for a local URL, starts a `redis-server` found on
 * PATH (bound to 127.0.0.1, AOF persistence in `<dataDir>/redis`) as a child that ends with the bot.
 * Threads, sessions, approvals and GPU claims survive a restart of the bot and of that Redis.
 */
export async function ensureRedis(
  url: string,
  options: { dataDir: string; logger: Logger },
): Promise<{ url: string; pid?: number; stop(): Promise<void> }> {
  if (await answers(url)) return { url, stop: async () => undefined };
  const parsed = new URL(url);
  const local = ['127.0.0.1', 'localhost', '::1'].includes(parsed.hostname);
  const found = spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
  if (!local || !found) {
    throw new ServiceError(
      'redis_unavailable',
      `no Redis answers at ${url}${local ? ' and no redis-server was found on PATH' : ''}; set REDIS_URL`,
      { retryable: false },
    );
  }
  const port = parsed.port === '' ? '6379' : parsed.port;
  const directory = resolve(options.dataDir, 'redis');
  mkdirSync(directory, { recursive: true });
  const child: ChildProcess = spawn('redis-server', embeddedRedisArguments(port, directory), {
    stdio: 'ignore',
  });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  options.logger.info(
    { port, pid: child.pid, dir: directory },
    'no Redis answered; started a local redis-server (append-only file, fsync every second)',
  );
  for (let attempt = 0; attempt < 50; attempt += 1) {
    if (await answers(url)) break;
    await new Promise((done) => setTimeout(done, 100));
  }
  if (!(await answers(url))) {
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
