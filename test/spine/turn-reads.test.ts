import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionKeys } from '../../src/agent/session-store.js';
import { encodeThreadId } from '../../src/bot/chat-adapter.js';
import { llmSpendKeys } from '../../src/spend/llm-ledger.js';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { startMonitor } from '../helpers/redis-monitor.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

/*
 * What a turn reads before its first LLM call (the session, the thread's model, its summary, its LLM
 * spend) is read in the round trip that takes the thread's lock and claims the batch
 * (`turn_overhead_p50_ms`), and the turn uses what was read there. Seen on the wire with MONITOR.
 */
describe('a turn’s reads before its LLM call', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  let monitor: Socket;
  let seen: string[][] = [];

  beforeAll(async () => {
    llm = await startScriptedOpenAi({ fallback: { text: 'noted' } });
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_LLM_MODEL: 'default-model',
        SHEPHERD_LLM_MODELS: 'chosen-model',
      },
    });
    monitor = await startMonitor((args) => {
      if (args.some((arg) => arg.startsWith(`${shepherd.prefix}:`))) seen.push(args);
    });
  });
  afterAll(async () => {
    monitor.destroy();
    await shepherd.stop();
    await llm.close();
  });

  /** A thread with one answered turn, its keys, and a way to wait for its next answer. */
  async function answeredThread(text: string) {
    const root = await shepherd.mention(text);
    const threadId = encodeThreadId({ platform: 'web', channel: 'ml-runs', thread: root });
    const answers = async () =>
      (await shepherd.messages(root)).filter((message) => message.user === 'shepherd').length;
    await shepherd.waitForMessages(root, (all) => all.some((message) => message.user === 'shepherd'));
    const state = sessionKeys(shepherd.prefix);
    const keys = {
      session: state.history(threadId),
      model: state.model(threadId),
      summary: state.summary(threadId),
      spend: llmSpendKeys(shepherd.prefix).thread(threadId),
    };
    return { root, threadId, keys, answers };
  }

  it('reads them with the lock, in one round trip, and the turn uses them', async () => {
    const { root, threadId, keys, answers } = await answeredThread('first question');
    const redis = shepherd.app.redis;
    await redis.set(keys.model, 'chosen-model');
    await redis.set(
      keys.summary,
      JSON.stringify({ summary: 'the team trains resnet-50 on imagenet', messages: 4, updatedAt: 1 }),
    );
    // MONITOR lines arrive a moment after the command runs; let earlier ones drain first.
    await new Promise((resolve) => setTimeout(resolve, 150));
    seen = [];
    const requestsBefore = llm.requests.length;
    await shepherd.reply(root, '@shepherd and now?');
    await shepherd.waitForMessages(root, (all) => all.filter((m) => m.user === 'shepherd').length === 2);
    expect(await answers()).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 150));

    const lockAt = seen.findIndex((args) => args.includes(`${shepherd.prefix}:turn-lock:${threadId}`));
    // The provider counts each HTTP request on the wire right before sending it.
    const llmCallAt = seen.findIndex(
      (args, index) => index > lockAt && args.includes(`${shepherd.prefix}:llm-calls`),
    );
    expect(lockAt).toBeGreaterThanOrEqual(0);
    expect(llmCallAt).toBeGreaterThan(lockAt);
    const stateKeys = Object.values(keys);
    // The lock script names every key it reads …
    expect(seen[lockAt]).toEqual(expect.arrayContaining(stateKeys));
    // … and nothing between it and the LLM request reads them again.
    const between = seen.slice(lockAt + 1, llmCallAt);
    expect(between.filter((args) => args.some((arg) => stateKeys.includes(arg)))).toEqual([]);

    const request = llm.requests[requestsBefore];
    expect(request?.body.model).toBe('chosen-model');
    expect(JSON.stringify(request?.body.messages)).toContain('the team trains resnet-50 on imagenet');
    // The history read with the lock went out too: the first question and its answer.
    expect(JSON.stringify(request?.body.messages)).toContain('first question');
  });

  it('refuses a turn over its LLM budget from the spend read with the lock', async () => {
    const { root, keys, answers } = await answeredThread('spend check');
    await shepherd.app.redis.hset(keys.spend, { usd: '2', cap: '1' });
    const requestsBefore = llm.requests.length;
    await shepherd.reply(root, '@shepherd one more');
    const all = await shepherd.waitForMessages(
      root,
      (messages) => messages.filter((m) => m.user === 'shepherd').length === 2,
    );
    expect(await answers()).toBe(2);
    expect(all.at(-1)?.text).toContain('so I am not starting an agent turn');
    expect(llm.requests.length).toBe(requestsBefore);
  });
});
