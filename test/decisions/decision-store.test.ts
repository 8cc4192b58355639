import type { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Card } from '../../src/bot/chat-adapter.js';
import { createDecisionStore, type DecisionStore } from '../../src/decisions/decision-store.js';
import { DecisionRecordError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { createControlQueue, createControlWorker } from '../../src/queue/control-worker.js';
import { enqueue, JOBS } from '../../src/queue/jobs.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const THREAD = 'slack:C1:1700000000.000100';

const subjectSchema = z.object({
  threadId: z.string(),
  title: z.string(),
  cardMessageId: z.string().optional(),
});
type Subject = z.infer<typeof subjectSchema>;
const decisionSchema = z.object({ choice: z.enum(['yes', 'no']), user: z.string() });
type Choice = z.infer<typeof decisionSchema>;

interface Edit {
  messageId: string;
  card: Card;
}

describe('createDecisionStore', () => {
  const prefix = uniquePrefix('decision-store');
  const edits: Edit[] = [];
  let redis: Redis;
  let other: Redis;
  let first: DecisionStore<Subject, Choice>;
  let second: DecisionStore<Subject, Choice>;
  let queue: Queue;
  let worker: Worker | undefined;
  const invalid: DecisionRecordError[] = [];

  const store = (connection: Redis) =>
    createDecisionStore(
      { name: 'thing', subject: subjectSchema, decision: decisionSchema },
      {
        redis: connection,
        prefix,
        notifier: {
          updateCard: async (_threadId, messageId, card) => {
            edits.push({ messageId, card });
          },
        },
        onInvalid: (error) => invalid.push(error),
      },
    );

  beforeAll(() => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    other = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    // Two stores on two connections: two processes answering clicks on the same card.
    first = store(redis);
    second = store(other);
    queue = createControlQueue(redis, prefix);
  });
  afterAll(async () => {
    await worker?.close();
    await queue.close();
    await deleteKeysWithPrefix(prefix);
    redis.disconnect();
    other.disconnect();
  });

  it('lets exactly one of two concurrent clicks win and enqueues only the winner', async () => {
    await first.save('c1', { threadId: THREAD, title: 'race', cardMessageId: 'card-1' });
    const enqueued: Choice[] = [];
    const click = (decisions: DecisionStore<Subject, Choice>, choice: Choice) =>
      decisions.click('c1', {
        unknown: 'gone',
        choose: async () => ({ decision: choice }),
        lost: (winner) => `already ${winner.choice} by ${winner.user}`,
        enqueue: async (_subject, decision) => {
          enqueued.push(decision);
        },
      });
    const outcomes = await Promise.all([
      click(first, { choice: 'yes', user: 'ada' }),
      click(second, { choice: 'no', user: 'bob' }),
    ]);
    const accepted = outcomes.filter((outcome) => outcome.status === 'accepted');
    const resolved = outcomes.filter((outcome) => outcome.status === 'resolved');
    expect(accepted).toHaveLength(1);
    expect(resolved).toHaveLength(1);
    expect(enqueued).toHaveLength(1);
    const winner = enqueued[0] as Choice;
    expect(resolved[0]?.message).toBe(`already ${winner.choice} by ${winner.user}`);
    expect(await second.getDecision('c1')).toEqual(winner);
  });

  it('applies a decision once even when its control job is retried, and resolves the card', async () => {
    await first.save('c2', { threadId: THREAD, title: 'retried', cardMessageId: 'card-2' });
    expect((await first.decide('c2', { choice: 'yes', user: 'ada' })).won).toBe(true);
    let effects = 0;
    let afters = 0;
    worker = createControlWorker({
      connection: redis,
      prefix,
      logger: createLogger('silent'),
      handlers: {
        'approval-decision': async (job) => {
          await first.settle(job.approvalId, {
            effect: async (subject, decision) => {
              effects += 1;
              return `${subject.title}: ${decision.choice} (effect ${effects})`;
            },
            resolvedCard: (subject, _decision, outcome) => ({ title: subject.title, resolved: outcome }),
            after: async () => {
              afters += 1;
              // The first attempt dies after the effect and the card edit (a lost post, a crash).
              if (afters === 1) throw new Error('post failed after the effect');
            },
          });
        },
      },
    });
    const job = await enqueue(
      queue,
      JOBS.approvalDecision,
      {
        v: 1,
        kind: 'approval-decision',
        approvalId: 'c2',
        decision: 'approved',
        user: { id: 'a', name: 'ada' },
        threadId: THREAD,
        auto: false,
      },
      { attempts: 3, backoff: { type: 'fixed', delay: 50 } },
    );
    const deadline = Date.now() + 15_000;
    while ((await job.getState()) !== 'completed' && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(await job.getState()).toBe('completed');
    expect(afters).toBe(2);
    expect(effects).toBe(1);
    // Both attempts edit the card to the same resolved form, with the outcome of the one application.
    const cardEdits = edits.filter((edit) => edit.messageId === 'card-2');
    expect(cardEdits.map((edit) => edit.card)).toEqual([
      { title: 'retried', resolved: 'retried: yes (effect 1)' },
      { title: 'retried', resolved: 'retried: yes (effect 1)' },
    ]);
  });

  it('settles nothing before a decision is recorded', async () => {
    await first.save('c3', { threadId: THREAD, title: 'undecided' });
    let effects = 0;
    const settled = await first.settle('c3', {
      effect: async () => {
        effects += 1;
        return 'done';
      },
      resolvedCard: () => ({ title: 'never' }),
    });
    expect(settled).toBeUndefined();
    expect(effects).toBe(0);
  });

  it('reports a stored record that does not parse as a DecisionRecordError, and a click on it as unknown', async () => {
    await redis.set(`${prefix}:thing:bad-json`, '{not json', 'EX', 60);
    await redis.set(`${prefix}:thing:bad-shape`, JSON.stringify({ threadId: THREAD }), 'EX', 60);
    await expect(first.get('bad-json')).rejects.toMatchObject({
      name: 'DecisionRecordError',
      code: 'decision_record_invalid',
      retryable: false,
      key: `${prefix}:thing:bad-json`,
    });
    const error = await first.get('bad-shape').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(DecisionRecordError);
    expect((error as DecisionRecordError).message).toMatch(/does not match its schema/);
    await expect(
      first.settle('bad-shape', { effect: async () => 'never', resolvedCard: () => ({}) }),
    ).rejects.toBeInstanceOf(DecisionRecordError);

    const outcome = await first.click('bad-shape', {
      unknown: 'this thing no longer exists',
      choose: async () => ({ decision: { choice: 'yes', user: 'ada' } }),
      lost: () => 'lost',
      enqueue: async () => undefined,
    });
    expect(outcome).toEqual({ status: 'unknown', message: 'this thing no longer exists' });
    expect(invalid.map((entry) => entry.key)).toEqual([`${prefix}:thing:bad-shape`]);
    // Refused before anything was recorded.
    expect(await redis.exists(`${prefix}:thing-decision:bad-shape`)).toBe(0);
  });

  it('answers a refusal from choose without recording a decision', async () => {
    await first.save('c4', { threadId: THREAD, title: 'guarded' });
    const outcome = await first.click('c4', {
      unknown: 'gone',
      choose: async () => ({ status: 'forbidden', message: 'only approvers' }),
      lost: () => 'lost',
      enqueue: async () => undefined,
    });
    expect(outcome).toEqual({ status: 'forbidden', message: 'only approvers' });
    expect(await first.getDecision('c4')).toBeUndefined();
  });
});
