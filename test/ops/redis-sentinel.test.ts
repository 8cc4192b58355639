import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkRedis } from '../../src/cli/check-redis.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/logger.js';
import { redisAnswers } from '../../src/redis/connection.js';
import { ensureRedis } from '../../src/redis/embedded-redis.js';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { approvalCard } from '../helpers/flow.js';
import { freePort } from '../helpers/free-port.js';
import { removeTree } from '../helpers/processes.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { type SentinelCluster, startSentinelCluster, waitUntil } from '../helpers/sentinel-cluster.js';

/** Healthy steps until the test creates `trigger`, then NaN (ends by itself after 2 min). */
const steadyScript = (trigger: string) => `import math, os, time, shepherd
for step in range(1, 600):
    bad = os.path.exists(${JSON.stringify(trigger)})
    shepherd.log_metrics(step=step, loss=float("nan") if bad else 2.0 / math.sqrt(step))
    time.sleep(0.2)
shepherd.finish()
`;

const QUICK_SCRIPT = `import shepherd
for step in range(1, 6):
    shepherd.log_metrics(step=step, loss=1.0 / step)
shepherd.finish()
`;

/*
 * Issue 26 §3: Redis behind Sentinel. The primary is killed with SIGKILL while posts keep coming; the
 * sentinels promote the replica and every connection (the bot's, BullMQ's queues, workers and
 * QueueEvents) follows it. Every post is answered exactly once, an approval clicked twice during the
 * failover starts its run once, and a run that goes on through it still gets its alert.
 */
describe('Redis Sentinel failover', () => {
  let cluster: SentinelCluster;
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  let workspace: string;

  beforeAll(async () => {
    workspace = mkdtempSync(join(tmpdir(), 'shepherd-sentinel-runs-'));
    writeFileSync(join(workspace, 'steady.py'), steadyScript(join(workspace, 'nan_now')));
    writeFileSync(join(workspace, 'quick.py'), QUICK_SCRIPT);
    cluster = await startSentinelCluster();
    llm = await startScriptedOpenAi({
      fallback: (request) => ({ text: `answer to ${/post-\d+/.exec(request.lastUserText ?? '')?.[0]}` }),
    });
    shepherd = await startTestApp({
      environment: {
        // Only the credentials of REDIS_URL count under Sentinel; the host is the sentinels' answer.
        REDIS_URL: `redis://127.0.0.1:${cluster.primaryPort}`,
        REDIS_SENTINELS: cluster.sentinelList,
        REDIS_SENTINEL_NAME: cluster.name,
        SHEPHERD_LLM_PROVIDER: 'openai',
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: workspace,
        SHEPHERD_APPROVERS: 'bob,carol',
      },
    });
  }, 90_000);

  afterAll(async () => {
    try {
      // A bot that cannot stop (its Redis gone for good) must not leave the test's servers running.
      const stopped = shepherd?.stop();
      const timeout = new Promise((resolve) => setTimeout(resolve, 40_000).unref());
      await Promise.race([stopped, timeout]);
    } finally {
      await llm?.close();
      await cluster?.stop();
      removeTree(workspace);
    }
  }, 60_000);

  it('doctor reaches the primary through the sentinels', async () => {
    const outcomes = await checkRedis(shepherd.config);
    expect(outcomes[0]).toMatchObject({ status: 'ok' });
    expect(JSON.stringify(outcomes[0])).toContain(`the primary of ${cluster.name}`);
  });

  it('answers every post once, applies an approval clicked during the failover once, and still alerts on a run', async () => {
    const threads = new Map<string, Promise<string>>();
    let next = 0;
    const post = () => {
      const token = `post-${next++}`;
      threads.set(token, shepherd.mention(`please answer ${token}`));
    };
    for (let count = 0; count < 3; count += 1) post();
    await Promise.all(threads.values());
    expect(await cluster.currentPrimaryPort()).toBe(cluster.primaryPort);

    // A run that goes on through the failover, and a card that is approved during it.
    const steadyThread = await shepherd.mention('run steady.py --gpus 0');
    const { card: steadyCard, approve: steadyApprove } = await approvalCard(shepherd, steadyThread);
    expect((await shepherd.click(steadyThread, steadyCard.id, steadyApprove, 'bob')).status).toBe(200);
    await shepherd.waitForMessages(steadyThread, (all) => botSaid(all, /steady is running/) === 1, 60_000);
    const quickThread = await shepherd.mention('run quick.py --gpus 0');
    const { card: quickCard, approve: quickApprove } = await approvalCard(shepherd, quickThread);
    // Writes the replica has not received are lost with the primary (docs/operations.md): make sure
    // everything so far reached it, so that what the test checks is the failover, not that window.
    await cluster.waitForReplica();

    cluster.primary.kill('SIGKILL');
    // Two approvers click while no primary answers; the clicks wait for the promoted replica.
    const clicks = [
      shepherd.click(quickThread, quickCard.id, quickApprove, 'bob'),
      shepherd.click(quickThread, quickCard.id, quickApprove, 'carol'),
    ];
    // Keep posting, without waiting on earlier posts, until the sentinels have promoted the replica.
    const failedOver = waitUntil(
      'the sentinels to promote the replica',
      async () => (await cluster.currentPrimaryPort()) === cluster.replicaPort,
      40_000,
    );
    let promoted = false;
    void failedOver.then(() => {
      promoted = true;
    });
    while (!promoted) {
      post();
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    await failedOver;
    for (let count = 0; count < 3; count += 1) post();
    // The running run goes bad only now: its alert must come through the promoted replica.
    writeFileSync(join(workspace, 'nan_now'), '');

    // The first decision wins; the second click is told the card is already decided.
    const statuses = (await Promise.all(clicks)).map((click) => click.status);
    expect(statuses.sort()).toEqual([200, 409]);
    const answered = async (token: string, threadId: string) =>
      (await shepherd.messages(threadId)).filter(
        (message) => message.user === 'shepherd' && message.text.includes(`answer to ${token}`),
      ).length;
    const ids = new Map<string, string>();
    for (const [token, thread] of threads) ids.set(token, await thread);
    const seen = () => llm.requests.map((request) => /post-\d+/.exec(request.lastUserText ?? '')?.[0]);
    for (const [token, threadId] of ids) {
      await waitUntil(
        `an answer to ${token}`,
        async () => (await answered(token, threadId)) >= 1,
        60_000,
      ).catch((error: Error) => {
        throw new Error(`${error.message} (in thread ${threadId}; the model saw ${seen().join(' ')})`);
      });
    }
    const alerts = (all: PlaygroundMessage[]) =>
      botMessages(all).filter((message) => message.card?.actions?.some((a) => a.label === 'Acknowledge'));
    const steady = await shepherd.waitForMessages(steadyThread, (all) => alerts(all).length > 0, 60_000);
    expect(JSON.stringify(alerts(steady)[0]?.card)).toMatch(/NaN/i);
    const quick = await shepherd.waitForMessages(
      quickThread,
      (all) => botSaid(all, /quick finished/) > 0,
      60_000,
    );

    // Doubles would come from a turn or a decision retried after the failover: by now all have finished.
    for (const [token, threadId] of ids) {
      const bot = botMessages(await shepherd.messages(threadId));
      expect({ token, answers: await answered(token, threadId), bot: bot.length }).toEqual({
        token,
        answers: 1,
        bot: 1,
      });
    }
    expect(ids.size).toBeGreaterThan(6);
    expect(botSaid(quick, /quick is running/)).toBe(1);
    expect(alerts(await shepherd.messages(steadyThread))).toHaveLength(1);
  }, 180_000);
});

function botSaid(messages: PlaygroundMessage[], pattern: RegExp): number {
  return botMessages(messages).filter((message) =>
    pattern.test(`${message.text} ${message.card?.title ?? ''}`),
  ).length;
}

describe('Sentinel configuration', () => {
  it('parses the sentinels and refuses half a configuration', () => {
    const config = loadConfig({
      REDIS_SENTINELS: '10.0.0.1:26379, sentinel-b:26380,[::1]:26381',
      REDIS_SENTINEL_NAME: 'shepherd',
      REDIS_SENTINEL_PASSWORD: 'sentinel-secret',
    });
    expect(config.redisSentinel).toEqual({
      sentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: 'sentinel-b', port: 26380 },
        { host: '::1', port: 26381 },
      ],
      name: 'shepherd',
      password: 'sentinel-secret',
    });
    expect(loadConfig({}).redisSentinel).toBeUndefined();
    expect(() => loadConfig({ REDIS_SENTINELS: '10.0.0.1:26379' })).toThrow(/REDIS_SENTINEL_NAME: set it/);
    expect(() => loadConfig({ REDIS_SENTINEL_NAME: 'shepherd' })).toThrow(/REDIS_SENTINELS: set it/);
    expect(() => loadConfig({ REDIS_SENTINELS: '10.0.0.1', REDIS_SENTINEL_NAME: 'x' })).toThrow(
      /REDIS_SENTINELS="10.0.0.1": expected host:port/,
    );
    expect(() => loadConfig({ REDIS_SENTINEL_PASSWORD: 'p' })).toThrow(
      /REDIS_SENTINEL_PASSWORD: set only with REDIS_SENTINELS/,
    );
  });

  it('never starts the embedded Redis when no primary answers through the sentinels', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'shepherd-sentinel-data-'));
    try {
      // A loopback URL with nothing on it: without Sentinel this would start a redis-server there.
      const redisPort = await freePort();
      const config = loadConfig({
        REDIS_URL: `redis://127.0.0.1:${redisPort}`,
        REDIS_SENTINELS: `127.0.0.1:${await freePort()}`,
        REDIS_SENTINEL_NAME: 'nobody',
        SHEPHERD_DATA_DIR: dataDir,
      });
      const started = ensureRedis(config, { logger: createLogger('silent') });
      // Should it start a server after all, end it (by its own stop) before failing.
      await started.then((redis) => redis.stop()).catch(() => undefined);
      await expect(started).rejects.toThrow(
        /no primary for nobody answers through the sentinels 127\.0\.0\.1:\d+/,
      );
      const plain = loadConfig({ REDIS_URL: `redis://127.0.0.1:${redisPort}`, SHEPHERD_DATA_DIR: dataDir });
      expect(await redisAnswers(plain, 500)).toBe(false);
    } finally {
      removeTree(dataDir);
    }
  });
});
