import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApprovalStore } from '../../src/approvals/approval-store.js';
import { createRunCardLinks } from '../../src/approvals/run-card-links.js';
import type { Card } from '../../src/bot/chat-adapter.js';
import { createLogger } from '../../src/logger.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

/*
 * The started card gets the run's tracker links once, whichever comes first: the links (the monitor found
 * them before the approval's control job settled) or the settled approval. Real Redis; the notifier is
 * the port, recorded.
 */

describe('tracker links on the started card', () => {
  const prefix = uniquePrefix('run-card-links');
  let redis: Redis;
  const edits: Array<{ messageId: string; card: Card }> = [];
  const notifier = {
    async updateCard(_threadId: string, messageId: string, card: Card) {
      edits.push({ messageId, card });
    },
  };
  beforeAll(() => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  });
  afterAll(async () => {
    await deleteKeysWithPrefix(prefix);
    redis.disconnect();
  });

  async function approvedStart(runId: string, kind: 'start' | 'sweep' = 'start') {
    const store = createApprovalStore({ redis, prefix, notifier });
    const approval = await store.create(
      {
        kind,
        runId,
        runName: runId,
        threadId: 't1',
        requester: { id: 'u1', name: 'alice' },
        gpus: 0,
        maxHours: 1,
        costUsd: 0,
        scriptExcerpt: '',
        origin: 'command',
      },
      60_000,
      new Date(),
    );
    await store.setCardMessage(approval.id, `m-${runId}`);
    await store.decide(approval.id, {
      decision: 'approved',
      user: { id: 'u2', name: 'bob' },
      at: new Date().toISOString(),
      auto: false,
    });
    const links = createRunCardLinks({ redis, prefix, store, notifier, logger: createLogger('silent') });
    return { approvalId: approval.id, links };
  }
  const wandb = { wandb: 'https://wandb.ai/team/proj/runs/abc123' };
  const editsOf = (runId: string) => edits.filter((edit) => edit.messageId === `m-${runId}`);

  it('settled first, then links: the card is edited once, still resolved', async () => {
    const { approvalId, links } = await approvedStart('r1');
    await links.settled(approvalId);
    expect(editsOf('r1')).toHaveLength(0);
    await links.show('r1', wandb);
    await links.show('r1', { ...wandb, tensorboard: 'tensorboard --logdir runs' });
    expect(editsOf('r1')).toHaveLength(1);
    expect(editsOf('r1')[0]?.card.fields).toContainEqual({ label: 'W&B', value: wandb.wandb });
    expect(editsOf('r1')[0]?.card.resolved).toMatch(/^Approved by bob/);
    expect(editsOf('r1')[0]?.card.actions).toBeUndefined();
  });

  it('links first (found before the approval settled): the settling edits the card', async () => {
    const { approvalId, links } = await approvedStart('r2');
    await links.show('r2', wandb);
    expect(editsOf('r2')).toHaveLength(0);
    await links.settled(approvalId);
    await links.settled(approvalId);
    expect(editsOf('r2')).toHaveLength(1);
    expect(editsOf('r2')[0]?.card.fields).toContainEqual({ label: 'W&B', value: wandb.wandb });
  });

  it("a sweep's card is not a run's started card", async () => {
    const { approvalId, links } = await approvedStart('s1', 'sweep');
    await links.settled(approvalId);
    await links.show('s1', wandb);
    expect(editsOf('s1')).toHaveLength(0);
  });
});
