import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { encodeThreadId } from '../../src/bot/chat-adapter.js';
import { botMessages, startTestApp } from '../helpers/app-harness.js';
import { inboxMessage } from '../helpers/inbox-items.js';
import { removeTree } from '../helpers/processes.js';
import { deleteKeysWithPrefix, uniquePrefix } from '../helpers/redis.js';
import { startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

describe('inbox sweeper', () => {
  it('answers a message whose wake-up request was lost (a dispatcher took it and died)', async () => {
    const llm = await startScriptedOpenAi({ fallback: { text: 'found you anyway' } });
    const prefix = uniquePrefix('sweep');
    const dataDir = mkdtempSync(join(tmpdir(), 'shepherd-sweep-'));
    const shared = { prefix, dataDir, keepState: true, environment: { SHEPHERD_LLM_BASE_URL: llm.url } };
    try {
      // Role `bot`: no turn worker yet, so no dispatcher takes the request before the test does.
      const acking = await startTestApp({
        ...shared,
        environment: { ...shared.environment, SHEPHERD_ROLE: 'bot' },
      });
      const root = await acking.post({ channel: 'ml-runs', user: 'alice', text: 'no mention here' });
      const rootId = String(root.body.threadId);
      const threadId = encodeThreadId({ platform: 'web', channel: 'ml-runs', thread: rootId });
      const result = await acking.app.inbox.accept(
        threadId,
        inboxMessage('lost-1', '@shepherd is anyone there?'),
        { addressed: true, deliveryKey: 'web:lost-1' },
      );
      expect(result).toBe('accepted');
      // What a dispatcher that dies after taking the request leaves: the inbox item, no request, no job.
      const taken = await acking.app.redis.lpop(`${prefix}:turn-wake`, 100);
      expect(taken?.map((entry) => JSON.parse(entry) as unknown)).toEqual([[threadId, 'lost-1']]);
      await acking.stop();

      const worker = await startTestApp(shared);
      try {
        expect(await worker.app.turnQueue.getWaitingCount()).toBe(0);
        const messages = await worker.waitForMessages(
          rootId,
          (all) => botMessages(all).some((message) => message.text === 'found you anyway'),
          20_000,
        );
        expect(botMessages(messages)).toHaveLength(1);
        expect(llm.requests).toHaveLength(1);
      } finally {
        await worker.stop();
      }
    } finally {
      await deleteKeysWithPrefix(prefix);
      removeTree(dataDir);
      await llm.close();
    }
  });
});
