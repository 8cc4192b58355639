import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import {
  type ScriptedLlmServer,
  startScriptedAnthropic,
  startScriptedOpenAi,
} from '../helpers/scripted-llm/index.js';

const providers = [
  { name: 'openai', start: startScriptedOpenAi },
  { name: 'anthropic', start: startScriptedAnthropic },
] as const;

for (const provider of providers) {
  describe(`thread → queue → agent → thread (${provider.name})`, () => {
    let llm: ScriptedLlmServer;
    let shepherd: TestApp;

    beforeAll(async () => {
      llm = await provider.start();
      shepherd = await startTestApp({
        environment: {
          SHEPHERD_LLM_PROVIDER: provider.name,
          SHEPHERD_LLM_BASE_URL: llm.url,
          SHEPHERD_LLM_MAX_RETRIES: '2',
        },
      });
    });
    afterAll(async () => {
      await shepherd.stop();
      await llm.close();
    });

    it('answers a mention in the thread the mention opened, and sees who said what', async () => {
      llm.enqueue({ text: 'Hello Alice, I can launch and watch training runs.' });
      const threadId = await shepherd.mention('hi, what can you do?');
      const messages = await shepherd.waitForMessages(threadId, (all) =>
        botMessages(all).some((message) => message.text.includes('Hello Alice')),
      );
      expect(messages[0]?.user).toBe('alice');
      const request = llm.requests.at(-1);
      // Who said it, then what they said inside a boundary the text cannot close (issue 10 item 7).
      const said = (author: string, text: string) =>
        new RegExp(
          `\\[${author}\\] <message-[0-9a-f]{12}>\\\\n${text.replace(/[?]/g, '\\?')}\\\\n</message-`,
        );
      expect(JSON.stringify(request?.body)).toMatch(said('alice', '@shepherd hi, what can you do?'));

      // A teammate replies in the thread without mentioning the bot: the thread is a shared session.
      llm.enqueue({ text: 'Sure Carol, nothing is running yet.' });
      await shepherd.reply(threadId, 'how is it going?', 'carol');
      await shepherd.waitForMessages(threadId, (all) =>
        botMessages(all).some((m) => m.text.includes('Sure Carol')),
      );
      const second = JSON.stringify(llm.requests.at(-1)?.body);
      expect(second).toMatch(said('alice', '@shepherd hi, what can you do?'));
      expect(second).toMatch(said('carol', 'how is it going?'));
    });

    it('runs a tool and gives its result back to the model', async () => {
      llm.enqueue(
        { toolCalls: [{ name: 'help', arguments: {} }] },
        { text: 'I looked it up: I launch runs.' },
      );
      const before = llm.requests.length;
      const threadId = await shepherd.mention('use your help tool');
      await shepherd.waitForMessages(threadId, (all) =>
        botMessages(all).some((m) => m.text.includes('I looked it up')),
      );
      const followUp = JSON.stringify(llm.requests[before + 1]?.body);
      expect(followUp).toMatch(/approv/i); // the help tool's text reached the model as a tool result
    });

    it('returns invalid tool arguments to the model as an error it can recover from', async () => {
      llm.enqueue(
        { toolCalls: [{ name: 'help', arguments: '{"topic": 42' }] },
        { text: 'Sorry, my tool call was malformed; here is the answer anyway.' },
      );
      const before = llm.requests.length;
      const threadId = await shepherd.mention('break your tool call');
      await shepherd.waitForMessages(threadId, (all) =>
        botMessages(all).some((m) => m.text.includes('malformed')),
      );
      const followUp = JSON.stringify(llm.requests[before + 1]?.body);
      expect(followUp).toMatch(/invalid|not valid JSON|error/i);
    });

    it('retries a 500 from the model and then answers', async () => {
      llm.enqueue({ status: 500 }, { text: 'Recovered after a hiccup.' });
      const before = llm.requests.length;
      const threadId = await shepherd.mention('are you there?');
      await shepherd.waitForMessages(threadId, (all) =>
        botMessages(all).some((m) => m.text.includes('Recovered')),
      );
      expect(llm.requests.length - before).toBe(2);
    });

    it('says plainly in the thread when the model stays down', async () => {
      llm.enqueue({ status: 503 }, { status: 503 }, { status: 503 });
      const threadId = await shepherd.mention('anyone home?');
      const messages = await shepherd.waitForMessages(threadId, (all) =>
        botMessages(all).some((m) => /model endpoint is unavailable/i.test(m.text)),
      );
      const reply = botMessages(messages).find((m) => /unavailable/i.test(m.text));
      expect(reply?.text).toMatch(/Plain commands still work/);
    });
  });
}

describe('plain commands without the model', () => {
  it('answers help even when the model endpoint refuses connections', async () => {
    const shepherd = await startTestApp({ environment: { SHEPHERD_LLM_BASE_URL: 'http://127.0.0.1:9/v1' } });
    try {
      const threadId = await shepherd.mention('help');
      const messages = await shepherd.waitForMessages(threadId, (all) => botMessages(all).length > 0);
      expect(botMessages(messages)[0]?.text).toMatch(/pause/);
    } finally {
      await shepherd.stop();
    }
  });
});
