import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Job, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { freePort } from '../helpers/free-port.js';
import { TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

/*
 * Issue 10 item 14: a malformed job is a final error (no retries), and a Redis outage is logged, not a
 * crash or an "Unhandled error event", in a real `src/app/main.ts` process.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function finalState(queue: Queue, id: string, timeoutMs = 20_000): Promise<Job> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const job = await Job.fromId(queue, id);
    if (job !== undefined && (await job.getState()) === 'failed' && job.finishedOn !== undefined) return job;
    await sleep(100);
  }
  throw new Error(`job ${id} never failed for good`);
}

describe('malformed jobs fail once, for good', () => {
  let shepherd: TestApp;
  const queues: Queue[] = [];
  beforeAll(async () => {
    shepherd = await startTestApp();
  });
  afterAll(async () => {
    await Promise.all(queues.map((queue) => queue.close()));
    await shepherd.stop();
  });

  const retried = { attempts: 4, backoff: { type: 'fixed', delay: 200 } } as const;

  it.each([
    ['turns', { v: 1, threadId: 42 }],
    ['turns', { v: 1, threadId: 'no-such-platform:channel:thread' }],
    ['control', { v: 1, kind: 'approval-decision', approvalId: 'ap_x' }],
    ['notify', { v: 1, op: 'post', threadId: 'garbage-thread', text: 'hello' }],
    ['notify', { v: 2, op: 'post', threadId: 'web:c:m1', text: 'hello' }],
  ])('%s job %j', async (name, data) => {
    const queue = new Queue(name, { connection: shepherd.app.redis, prefix: shepherd.prefix });
    queues.push(queue);
    const job = await queue.add('malformed', data, { ...retried, removeOnFail: false });
    const failed = await finalState(queue, String(job.id));
    expect(failed.attemptsMade).toBe(1);
    expect(failed.failedReason).toMatch(/malformed/);
  });
});

describe('a Redis outage under a real bot process', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'shepherd-outage-'));
  let redisServer: ChildProcess | undefined;
  let bot: ChildProcess | undefined;

  const startRedis = async (port: number) => {
    const child = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      {
        stdio: 'ignore',
      },
    );
    const probe = new Redis(`redis://127.0.0.1:${port}`, { lazyConnect: true, retryStrategy: () => 200 });
    probe.on('error', () => undefined);
    for (let attempt = 0; attempt < 50; attempt += 1) {
      if (
        await probe.ping().then(
          () => true,
          () => false,
        )
      )
        break;
      await sleep(100);
    }
    probe.disconnect();
    return child;
  };
  const killPid = async (child: ChildProcess | undefined, signal: NodeJS.Signals) => {
    if (child?.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    process.kill(child.pid, signal);
    await exited;
  };

  afterAll(async () => {
    await killPid(bot, 'SIGKILL');
    await killPid(redisServer, 'SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('logs the outage, keeps running, and answers again once Redis is back', async () => {
    expect(TEST_REDIS_URL).toBeTruthy();
    const port = await freePort();
    redisServer = await startRedis(port);
    const output: string[] = [];
    bot = spawn(process.execPath, ['--import', 'tsx', 'src/app/main.ts'], {
      cwd: process.cwd(),
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: process.env.HOME ?? '/tmp',
        REDIS_URL: `redis://127.0.0.1:${port}`,
        SHEPHERD_QUEUE_PREFIX: uniquePrefix('outage'),
        SHEPHERD_PORT: '0',
        SHEPHERD_DATA_DIR: dataDir,
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_LLM_BASE_URL: 'http://127.0.0.1:9/v1',
        SHEPHERD_LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    bot.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    bot.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    const deadline = Date.now() + 30_000;
    let url: string | undefined;
    while (url === undefined && Date.now() < deadline) {
      url = /"url":"(http:\/\/[^"]+)"/.exec(output.join(''))?.[1];
      await sleep(100);
    }
    expect(url, output.join('')).toBeDefined();
    await expect.poll(() => output.join('').includes('shepherd started'), { timeout: 30_000 }).toBe(true);

    // Pull Redis away for a while (only the redis-server this test started).
    await killPid(redisServer, 'SIGKILL');
    await sleep(5000);
    expect(bot.exitCode, output.join('')).toBeNull();
    expect(bot.signalCode).toBeNull();
    const logged = output.join('');
    expect(logged).not.toContain('Unhandled error event');
    expect(logged).toMatch(/redis (connection )?error/);

    redisServer = await startRedis(port);
    // Back in business: a plain command gets its answer through the queues.
    const posted = await fetch(`${url}/api/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ channel: 'ml-runs', user: 'alice', text: '@shepherd runs' }),
    });
    expect(posted.status).toBe(202);
    const { threadId } = (await posted.json()) as { threadId: string };
    await expect
      .poll(
        async () => {
          const response = await fetch(`${url}/api/threads/${threadId}/messages`);
          const body = (await response.json()) as { messages: Array<{ user: string; text: string }> };
          return body.messages.some(
            (message) => message.user === 'shepherd' && /No training runs/.test(message.text),
          );
        },
        { timeout: 30_000, interval: 250 },
      )
      .toBe(true);
    expect(bot.exitCode).toBeNull();
  }, 90_000);
});
