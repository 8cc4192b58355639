import { describe, expect, it } from 'vitest';
import { createTurnRunner } from '../../src/agent/turn-runner.js';
import { createLogger } from '../../src/logger.js';
import type { Batch } from '../../src/queue/turn-inbox.js';

function harness(agentMs: number, progressEveryMs: number) {
  const posts: Array<{ key: string; text: string; at: number }> = [];
  const edits: Array<{ messageId: string; text: string; at: number }> = [];
  const processBatch = createTurnRunner({
    logger: createLogger('silent'),
    statusDelayMs: 200,
    loadHistory: async () => ({ history: [], state: undefined }),
    postOnce: async (key, _threadId, text) => {
      posts.push({ key, text, at: Date.now() });
      return { messageId: `m-${posts.length}` };
    },
    postedOnce: async () => undefined,
    edit: async (_threadId, messageId, text) => {
      edits.push({ messageId, text, at: Date.now() });
    },
    tryCommand: async () => undefined,
    runAgent: async ({ onProgress }) => {
      const end = Date.now() + agentMs;
      let round = 0;
      while (Date.now() < end) {
        onProgress(`running tool step-${round++}…`);
        await new Promise((resolve) => setTimeout(resolve, progressEveryMs));
      }
      return { reply: 'all done', newMessages: [{ role: 'assistant', content: 'all done' }] };
    },
    commit: async () => undefined,
  });
  const batch: Batch = {
    batchId: 'b1',
    count: 1,
    items: [
      {
        type: 'message',
        messageId: 'u1',
        deliveryId: 'u1',
        user: { id: 'a', name: 'alice' },
        text: 'go',
        addressed: true,
        receivedAt: 0,
      },
    ],
  };
  return { run: () => processBatch('web:c:t', batch), posts, edits };
}

describe('turn status line', () => {
  it('shows a slow turn’s progress in one message, edited at most about once a second, ending as the reply', async () => {
    const { run, posts, edits } = harness(2600, 40);
    await run();
    expect(posts).toHaveLength(1);
    expect(posts[0]?.key).toBe('b1:status');
    expect(edits.at(-1)).toMatchObject({ messageId: 'm-1', text: 'all done' });
    const progress = edits.slice(0, -1);
    expect(progress.length).toBeGreaterThanOrEqual(1);
    expect(progress.length).toBeLessThanOrEqual(3);
    for (let index = 1; index < progress.length; index += 1) {
      expect((progress[index]?.at ?? 0) - (progress[index - 1]?.at ?? 0)).toBeGreaterThanOrEqual(900);
    }
  });

  it('answers a quick turn without any status line', async () => {
    const { run, posts, edits } = harness(20, 5);
    await run();
    expect(posts).toEqual([expect.objectContaining({ key: 'b1:reply', text: 'all done' })]);
    expect(edits).toEqual([]);
  });
});
