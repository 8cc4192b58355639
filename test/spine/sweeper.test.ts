import { describe, expect, it } from 'vitest';
import { encodeThreadId } from '../../src/bot/chat-adapter.js';
import { botMessages, startTestApp } from '../helpers/app-harness.js';
import { startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

describe('inbox sweeper', () => {
  it('answers a message whose turn job was never added (the accepting process died first)', async () => {
    const llm = await startScriptedOpenAi({ fallback: { text: 'found you anyway' } });
    const shepherd = await startTestApp({ environment: { SHEPHERD_LLM_BASE_URL: llm.url } });
    try {
      // A thread root in the playground, then the message recorded in the inbox exactly as the inbound
      // handler does — but without the wake-up job.
      const root = await shepherd.post({ channel: 'ml-runs', user: 'alice', text: 'no mention here' });
      const rootId = String(root.body.threadId);
      const threadId = encodeThreadId({ platform: 'web', channel: 'ml-runs', thread: rootId });
      const result = await shepherd.app.inbox.accept(
        threadId,
        {
          type: 'message',
          messageId: 'lost-1',
          deliveryId: 'lost-1',
          user: { id: 'alice', name: 'alice' },
          text: '@shepherd is anyone there?',
          addressed: true,
          receivedAt: Date.now(),
        },
        { addressed: true, deliveryKey: 'web:lost-1' },
      );
      expect(result).toBe('accepted');
      const messages = await shepherd.waitForMessages(
        rootId,
        (all) => botMessages(all).some((message) => message.text === 'found you anyway'),
        20_000,
      );
      expect(botMessages(messages)).toHaveLength(1);
      expect(llm.requests).toHaveLength(1);
    } finally {
      await shepherd.stop();
      await llm.close();
    }
  });
});
