import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSessionStore } from '../../src/agent/session-store.js';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import {
  type RecordedRequest,
  type ScriptedLlmServer,
  startScriptedOpenAi,
} from '../helpers/scripted-llm/index.js';

/** The user texts (`[name] text`) of an OpenAI-shaped request, in order. */
function userTexts(request: RecordedRequest): string[] {
  const messages = (request.body.messages ?? []) as Array<{ role: string; content: unknown }>;
  return messages.filter((message) => message.role === 'user').map((message) => String(message.content));
}

describe('per-thread serialisation', () => {
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  const inFlight = new Map<string, number>();
  const overlaps: string[] = [];

  beforeAll(async () => {
    llm = await startScriptedOpenAi();
    // Each answer takes a little while so that turns of different threads really run side by side.
    llm.setHandler(async (request) => {
      const thread = /thread-(\d)/.exec(request.lastUserText ?? '')?.[1] ?? '?';
      const now = (inFlight.get(thread) ?? 0) + 1;
      inFlight.set(thread, now);
      if (now > 1) overlaps.push(thread);
      await new Promise((resolve) => setTimeout(resolve, 40));
      inFlight.set(thread, (inFlight.get(thread) ?? 1) - 1);
      return { text: `ack thread-${thread}` };
    });
    shepherd = await startTestApp({
      environment: { SHEPHERD_LLM_BASE_URL: llm.url, SHEPHERD_TURN_CONCURRENCY: '8' },
    });
  });
  afterAll(async () => {
    await shepherd.stop();
    await llm.close();
  });

  it('delivers 50 concurrent messages in 5 threads exactly once, in order, with no overlapping turns', async () => {
    const threads: string[] = [];
    for (let thread = 0; thread < 5; thread += 1) {
      threads.push(await shepherd.mention(`thread-${thread} message-0`, `user${thread}`));
    }
    // 45 more arrive at once: each thread's messages are sent one after another, all threads interleaved.
    await Promise.all(
      threads.map(async (threadId, thread) => {
        for (let index = 1; index < 10; index += 1) {
          await shepherd.reply(threadId, `thread-${thread} message-${index}`, `user${thread}`);
        }
      }),
    );

    const sessions = createSessionStore({ redis: shepherd.app.redis, prefix: shepherd.prefix });
    const deadline = Date.now() + 30_000;
    for (const [thread, threadId] of threads.entries()) {
      const fullId = `web:ml-runs:${threadId}`;
      let texts: string[] = [];
      while (Date.now() < deadline) {
        const history = await sessions.load(fullId);
        texts = history.flatMap((message) => (message.role === 'user' ? [message.content] : []));
        if (texts.length >= 10 && (await shepherd.app.inbox.length(fullId)) === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const expected = Array.from({ length: 10 }, (_, index) =>
        index === 0 ? `@shepherd thread-${thread} message-0` : `thread-${thread} message-${index}`,
      );
      // Exactly once and in order: the session holds each message once, in posting order.
      expect(texts).toEqual(expected);
      const messages = await shepherd.messages(threadId);
      expect(botMessages(messages).length).toBeGreaterThan(0);
    }
    expect(overlaps).toEqual([]);
    // Every message reached the model exactly once as new input: the union of user texts equals all 50.
    // People's words reach the model inside their untrusted-text boundary (issue 10 item 7).
    const seen = new Set(
      llm.requests
        .flatMap(userTexts)
        .flatMap((text) => [...text.matchAll(/<(message-[0-9a-f]{12})[^>]*>\n([\s\S]*?)\n<\/\1>/g)])
        .map((match) => match[2]),
    );
    for (let thread = 0; thread < 5; thread += 1) {
      for (let index = 1; index < 10; index += 1) {
        expect(seen.has(`thread-${thread} message-${index}`), `thread-${thread} message-${index}`).toBe(true);
      }
    }
  });
});
