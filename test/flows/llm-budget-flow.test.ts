/**
 * Issue 24, the LLM budget, through the playground with the scripted OpenAI-compatible LLM (which reports
 * 10 input and 5 output tokens per answer): at 100,000 $/Mtok both ways one answer costs $1.50, so with a
 * $5 cap the thread is warned at 50 %, 80 % and 100 % (each once), then refused without an LLM call; a
 * non-approver cannot raise the cap, an approver's `budget +5` lets the thread go on; `session` and
 * `spend --llm` show the spend; the keys it writes all expire.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { THREAD_KEEP_S } from '../../src/agent/session-store.js';
import { llmSpendKeys } from '../../src/spend/llm-ledger.js';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

const texts = (messages: PlaygroundMessage[]) => botMessages(messages).map((message) => message.text);
const warnings = (messages: PlaygroundMessage[]) =>
  texts(messages).filter((text) => text.startsWith('LLM budget:'));

describe('the LLM budget of a thread (playground, scripted LLM)', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;

  beforeAll(async () => {
    llm = await startScriptedOpenAi({
      fallback: (request) => ({ text: `answer to: ${request.lastUserText}` }),
    });
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_LLM_MODEL: 'metered-model',
        SHEPHERD_LLM_PRICES: 'metered-model=100000/100000',
        SHEPHERD_LLM_BUDGET_USD_THREAD: '5',
        SHEPHERD_APPROVERS: 'bob',
      },
    });
  });
  afterAll(async () => {
    await shepherd?.stop();
    await llm?.close();
  });

  it('warns at 50, 80 and 100 %, refuses past the cap, and an approver’s raise lets the thread go on', async () => {
    const threadId = await shepherd.mention('question 1', 'alice');
    await shepherd.waitForMessages(threadId, (all) => texts(all).some((text) => text.includes('question 1')));
    expect(warnings(await shepherd.messages(threadId))).toEqual([]);

    for (const [turn, expected] of [
      [2, ['50 %']],
      [3, ['50 %', '80 %']],
      [4, ['50 %', '80 %', '100 %']],
    ] as const) {
      await shepherd.reply(threadId, `@shepherd question ${turn}`, 'alice');
      const all = await shepherd.waitForMessages(
        threadId,
        (messages) =>
          texts(messages).some((text) => text.includes(`question ${turn}`)) &&
          warnings(messages).length === expected.length,
      );
      expect(warnings(all).map((text) => /\((\d+ %)\)/.exec(text)?.[1])).toEqual(expected);
    }
    const last = warnings(await shepherd.messages(threadId)).at(-1) ?? '';
    expect(last).toContain('$6.00 of its $5.00 LLM budget');
    expect(last).toContain('@shepherd budget +5');
    const callsBefore = llm.requests.length;
    expect(callsBefore).toBe(4);

    // Past the cap: refused with a clear message, and the model is not asked.
    await shepherd.reply(threadId, '@shepherd question 5', 'alice');
    await shepherd.waitForMessages(threadId, (all) =>
      texts(all).some((text) => text.startsWith('This thread has used $6.00 of its $5.00 LLM budget')),
    );
    expect(llm.requests.length).toBe(callsBefore);

    // A non-approver cannot raise the cap; the session shows the spend.
    await shepherd.reply(threadId, '@shepherd budget +5', 'alice');
    await shepherd.waitForMessages(threadId, (all) =>
      texts(all).some((text) => text.startsWith('Only approvers (bob) can raise')),
    );
    await shepherd.reply(threadId, '@shepherd session', 'alice');
    const session = await shepherd.waitForMessages(threadId, (all) =>
      texts(all).some((text) => text.includes('LLM spend:')),
    );
    expect(texts(session).find((text) => text.includes('LLM spend:'))).toContain(
      'LLM spend: $6.00 of $5.00 (4 calls, 40 tokens in, 20 out).',
    );
    await shepherd.reply(threadId, '@shepherd question 6', 'alice');
    await shepherd.waitForMessages(
      threadId,
      (all) => texts(all).filter((text) => text.startsWith('This thread has used')).length === 2,
    );
    expect(llm.requests.length).toBe(callsBefore);

    await shepherd.reply(threadId, '@shepherd budget +5', 'bob');
    await shepherd.waitForMessages(threadId, (all) =>
      texts(all).some((text) => text.startsWith("bob raised this thread's LLM budget by $5.00 to $10.00")),
    );
    await shepherd.reply(threadId, '@shepherd question 7', 'alice');
    await shepherd.waitForMessages(threadId, (all) =>
      texts(all).some((text) => text.includes('answer to:') && text.includes('question 7')),
    );
    expect(llm.requests.length).toBe(callsBefore + 1);
    // 7.50 of 10: the 50 % of the new cap was passed before the raise, so no new warning.
    expect(warnings(await shepherd.messages(threadId))).toHaveLength(3);

    // `spend --llm`: by person and by thread; every key written expires.
    const other = await shepherd.mention('spend --llm', 'carol');
    const report = await shepherd.waitForMessages(other, (all) =>
      texts(all).some((text) => text.startsWith('LLM spend over today')),
    );
    const answer = texts(report).find((text) => text.startsWith('LLM spend over today')) ?? '';
    expect(answer).toContain('$7.50 in all');
    expect(answer).toMatch(/alice\s+50\s+25\s+\$7\.50/);
    expect(answer).toContain(`web:ml-runs:${threadId}`);
    const keys = llmSpendKeys(shepherd.prefix);
    const threadTtl = await shepherd.app.redis.ttl(keys.thread(`web:ml-runs:${threadId}`));
    expect(threadTtl).toBeGreaterThan(0);
    expect(threadTtl).toBeLessThanOrEqual(THREAD_KEEP_S);
    const dayTtl = await shepherd.app.redis.ttl(keys.day(new Date().toISOString().slice(0, 10)));
    expect(dayTtl).toBeGreaterThan(0);
  }, 120_000);
});

describe('the LLM budget of a person per day (playground, scripted LLM)', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;

  beforeAll(async () => {
    llm = await startScriptedOpenAi({
      fallback: (request) => ({ text: `answer to: ${request.lastUserText}` }),
    });
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_LLM_MODEL: 'metered-model',
        SHEPHERD_LLM_PRICES: 'metered-model=100000/100000',
        SHEPHERD_LLM_BUDGET_USD_PERSON_DAY: '2',
      },
    });
  });
  afterAll(async () => {
    await shepherd?.stop();
    await llm?.close();
  });

  it('counts a person across threads and refuses their turns past the daily cap, not other people’s', async () => {
    const first = await shepherd.mention('question A', 'dave');
    await shepherd.waitForMessages(first, (all) => texts(all).some((text) => text.includes('question A')));
    const second = await shepherd.mention('question B', 'dave');
    await shepherd.waitForMessages(second, (all) => texts(all).some((text) => text.includes('question B')));
    expect(llm.requests).toHaveLength(2);

    // $3.00 today across two threads: past dave's $2 cap, in any thread.
    const third = await shepherd.mention('question C', 'dave');
    const refused = await shepherd.waitForMessages(third, (all) => texts(all).length > 0);
    expect(texts(refused)[0]).toBe(
      'dave, you have used $3.00 of your $2.00 daily LLM budget (UTC day), so I am not starting an agent turn for you; it resets at 00:00 UTC. Plain commands still work.',
    );
    expect(llm.requests).toHaveLength(2);

    const other = await shepherd.mention('question D', 'erin');
    await shepherd.waitForMessages(other, (all) => texts(all).some((text) => text.includes('question D')));
    expect(llm.requests).toHaveLength(3);
  }, 120_000);
});
