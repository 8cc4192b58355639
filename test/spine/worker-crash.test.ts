import { type ChildProcess, spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

/** A separate worker process (`SHEPHERD_ROLE=worker`) on the same Redis and prefix. */
function startWorkerProcess(prefix: string, dataDir: string, llmUrl: string): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', 'src/app/main.ts'], {
    cwd: process.cwd(),
    env: {
      ...process.env,
      REDIS_URL: TEST_REDIS_URL,
      SHEPHERD_ROLE: 'worker',
      SHEPHERD_QUEUE_PREFIX: prefix,
      SHEPHERD_DATA_DIR: dataDir,
      SHEPHERD_LLM_BASE_URL: llmUrl,
      SHEPHERD_LLM_MAX_RETRIES: '0',
      SHEPHERD_JOB_LOCK_MS: '2000',
      SHEPHERD_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

async function waitUntil(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('a worker killed mid-turn', () => {
  let llm: ScriptedLlmServer;
  let bot: TestApp;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    llm = await startScriptedOpenAi();
    // The first request never gets an answer: the worker that sent it is killed while waiting.
    llm.setHandler((request) =>
      llm.requests.indexOf(request) === 0 ? { hang: true } : { text: 'the final answer' },
    );
    bot = await startTestApp({
      environment: { SHEPHERD_ROLE: 'bot', SHEPHERD_LLM_BASE_URL: llm.url, SHEPHERD_JOB_LOCK_MS: '2000' },
    });
  });
  afterAll(async () => {
    for (const child of children)
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await bot.stop();
    await llm.close();
  });

  it('is replaced by a second worker and the message is answered once', async () => {
    const first = startWorkerProcess(bot.prefix, bot.dataDir, llm.url);
    children.push(first);
    const threadId = await bot.mention('please answer even if a worker dies');
    await waitUntil(() => llm.requests.length >= 1, 60_000, 'the first worker to call the model');

    const exited = new Promise((resolve) => first.once('exit', resolve));
    first.kill('SIGKILL');
    await exited;

    const second = startWorkerProcess(bot.prefix, bot.dataDir, llm.url);
    children.push(second);
    const messages = await bot.waitForMessages(
      threadId,
      (all) => botMessages(all).some((message) => message.text === 'the final answer'),
      60_000,
    );
    // Give a duplicate the chance to show up before asserting it did not.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const after = await bot.messages(threadId);
    expect(botMessages(after).filter((message) => message.text === 'the final answer')).toHaveLength(1);
    expect(botMessages(after)).toHaveLength(botMessages(messages).length);
    expect(llm.requests.length).toBe(2);
    // The killed turn ran directly (no job of its own); the sweeper's job, after the lock's lease, redid it.
    const jobs = await bot.app.turnQueue.getJobs(['completed', 'failed', 'waiting', 'active', 'delayed']);
    const keys = jobs.map((job) => Buffer.from((job.id ?? '').replace(/^turn-/, ''), 'base64url').toString());
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) expect(key).toMatch(/\|sweep-/);
    second.kill('SIGTERM');
  });
});
