import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { TURN_ATTEMPTS } from '../../src/queue/jobs.js';
import { type Batch, createTurnInbox, turnInboxKeys } from '../../src/queue/turn-inbox.js';
import { createTurnQueue, createTurnWorker } from '../../src/queue/turn-worker.js';
import { botMessages, startTestApp } from '../helpers/app-harness.js';
import { inboxMessage } from '../helpers/inbox-items.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { until } from '../helpers/until.js';

/** A promise a turn waits on until the test releases it. */
function gated(): { gate: Promise<void>; release: () => void } {
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  return { gate, release };
}

/**
 * A woken thread's turn runs directly in an idle turn worker, without a BullMQ job; the guarantees of a
 * job turn stay: one turn per thread, retries with the attempts left, close waits for it.
 */
describe('direct turns', () => {
  const base = uniquePrefix('direct');
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  afterAll(async () => {
    redis.disconnect();
    await deleteKeysWithPrefix(base);
  });

  type Process = (threadId: string, batch: Batch) => Promise<void>;

  function setup(name: string, process: Process, workers = 1, concurrency = 4) {
    const prefix = `${base}-${name}`;
    const inbox = createTurnInbox({ redis, prefix });
    const queue = createTurnQueue(redis, prefix, createLogger('silent'));
    const finished: number[] = [];
    const dropped: Batch[] = [];
    const started = Array.from({ length: workers }, () =>
      createTurnWorker({
        connection: redis,
        queue,
        prefix,
        inbox,
        lockedReads: () => [],
        logger: createLogger('silent'),
        concurrency,
        lockMs: 3000,
        processBatch: (threadId, batch) => process(threadId, batch),
        onBatchDropped: async (_threadId, batch) => {
          dropped.push(batch);
        },
        onDirectTurnFinished: (duration) => finished.push(duration),
      }),
    );
    const accept = (threadId: string, id: string, text = id) =>
      inbox.accept(threadId, inboxMessage(id, text), { addressed: true, deliveryKey: `web:${id}` });
    const close = async () => {
      await Promise.all(started.map((worker) => worker.close()));
      await queue.obliterate({ force: true });
      await queue.close();
    };
    return { prefix, inbox, queue, workers: started, finished, dropped, accept, close };
  }

  const allJobs = (queue: ReturnType<typeof createTurnQueue>) =>
    queue.getJobs(['waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized']);

  it('answers a mention through the scripted LLM without adding a turn job', async () => {
    const llm = await startScriptedOpenAi();
    llm.setHandler(() => ({ text: 'answered directly' }));
    const app = await startTestApp({ environment: { SHEPHERD_LLM_BASE_URL: llm.url } });
    try {
      const threadId = await app.mention('hello there');
      await app.waitForMessages(threadId, (all) =>
        botMessages(all).some((message) => message.text === 'answered directly'),
      );
      expect(await allJobs(app.app.turnQueue)).toEqual([]);
      expect(llm.requests).toHaveLength(1);
      // Counted as a turn like a job's (observe-workers.ts counts those).
      const scrape = await fetch(`${app.url}/metrics`).then((response) => response.text());
      expect(scrape).toMatch(/shepherd_turn_duration_seconds_count\S* 1\b/);
    } finally {
      await app.stop();
      await llm.close();
    }
  });

  it('falls back to a turn job when the thread is locked, and runs it once the lock is free', async () => {
    const turns: string[][] = [];
    const context = setup('locked', async (threadId, batch) => {
      turns.push(batch.items.map((item) => item.text));
      await context.inbox.commitBatch(threadId, batch);
    });
    const threadId = 'web:locked:t1';
    const lockKey = turnInboxKeys(context.prefix).lock(threadId);
    try {
      await redis.set(lockKey, 'someone-else', 'PX', 60_000);
      await context.accept(threadId, 'l1', 'while locked');
      await until(async () => (await allJobs(context.queue)).length === 1, 'the fallback job');
      expect(turns).toEqual([]);
      await redis.del(lockKey);
      await until(() => turns.length === 1, 'the job turn');
      expect(turns).toEqual([['while locked']]);
      expect(context.finished).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('retries a failed direct turn as a job with the attempts left, on the same batch', async () => {
    const batchIds: string[] = [];
    const context = setup('retry', async (threadId, batch) => {
      batchIds.push(batch.batchId);
      if (batchIds.length === 1) throw new Error('model hiccup');
      await context.inbox.commitBatch(threadId, batch);
    });
    const threadId = 'web:retry:t1';
    try {
      await context.accept(threadId, 'r1');
      await until(() => batchIds.length === 2, 'the retry', 10_000);
      await until(async () => (await context.inbox.length(threadId)) === 0, 'the commit');
      expect(batchIds[1]).toBe(batchIds[0]);
      const [retry, ...others] = await allJobs(context.queue);
      expect(others).toEqual([]);
      expect(retry?.opts.attempts).toBe(TURN_ATTEMPTS - 1);
      expect(context.finished).toHaveLength(1);
    } finally {
      await context.close();
    }
  });

  it('drops a batch after the same number of attempts as a job turn', { timeout: 30_000 }, async () => {
    let calls = 0;
    const context = setup('poison', async () => {
      calls += 1;
      throw new Error('always fails');
    });
    try {
      // Received "in the future" so the sweeper (5 s) adds no wake-up of its own during the 7.5 s of backoff.
      await context.inbox.accept(
        'web:poison:t1',
        { ...inboxMessage('p1', 'poison'), receivedAt: Date.now() + 60_000 },
        { addressed: true, deliveryKey: 'web:p1' },
      );
      await until(() => context.dropped.length === 1, 'the batch to be dropped', 20_000);
      expect(calls).toBe(TURN_ATTEMPTS);
      expect(await context.inbox.length('web:poison:t1')).toBe(0);
    } finally {
      await context.close();
    }
  });

  it('keeps one turn at a time per thread across two workers, each message handled once', async () => {
    let running = 0;
    let most = 0;
    const seen: string[] = [];
    const context = setup(
      'serial',
      async (threadId, batch) => {
        running += 1;
        most = Math.max(most, running);
        await new Promise((resolve) => setTimeout(resolve, 20));
        seen.push(...batch.items.map((item) => item.text));
        running -= 1;
        await context.inbox.commitBatch(threadId, batch);
      },
      2,
    );
    const threadId = 'web:serial:t1';
    const sent = Array.from({ length: 20 }, (_, index) => `s${index}`);
    try {
      for (const id of sent) {
        await context.accept(threadId, id);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      await until(() => seen.length >= sent.length, 'every message', 15_000);
      await until(async () => (await context.inbox.length(threadId)) === 0, 'an empty inbox');
      expect(most).toBe(1);
      expect([...seen].sort()).toEqual([...sent].sort());
      expect(context.finished.length).toBeGreaterThan(0);
    } finally {
      await context.close();
    }
  });

  it('runs no more turns at once than the concurrency, direct turns and job turns together', async () => {
    let running = 0;
    let most = 0;
    const handled: string[] = [];
    const { gate, release } = gated();
    const context = setup(
      'room',
      async (threadId, batch) => {
        running += 1;
        most = Math.max(most, running);
        if (threadId.endsWith('t1')) await gate;
        handled.push(threadId);
        running -= 1;
        await context.inbox.commitBatch(threadId, batch);
      },
      1,
      1,
    );
    try {
      await context.accept('web:room:t1', 'a1');
      await until(() => running === 1, 'the direct turn to start');
      // The only slot is taken by the direct turn: the second thread's wake-up becomes a job, and the job
      // must wait for the slot instead of running beside the direct turn.
      await context.accept('web:room:t2', 'b1');
      await until(async () => (await allJobs(context.queue)).length === 1, "the second thread's job");
      // Taken by the worker: it either ran beside the direct turn or was put back to wait for the slot.
      await until(
        async () => handled.length > 0 || (await context.queue.getDelayedCount()) > 0,
        'the job to be taken',
      );
      expect(handled).toEqual([]);
      release();
      await until(() => handled.length === 2, 'both turns');
      expect(handled).toEqual(['web:room:t1', 'web:room:t2']);
      expect(most).toBe(1);
    } finally {
      release();
      await context.close();
    }
  });

  it('waits on close for a direct turn in flight', async () => {
    const { gate, release } = gated();
    let started = false;
    let committed = false;
    const context = setup('close', async (threadId, batch) => {
      started = true;
      await gate;
      await context.inbox.commitBatch(threadId, batch);
      committed = true;
    });
    await context.accept('web:close:t1', 'c1');
    await until(() => started, 'the turn to start');
    let closed = false;
    const closing = Promise.all(context.workers.map((worker) => worker.close())).then(() => {
      closed = true;
    });
    // The turn is held at the gate: close must still be waiting for it.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(closed).toBe(false);
    release();
    await closing;
    expect(committed).toBe(true);
    expect(await context.inbox.length('web:close:t1')).toBe(0);
    expect(await redis.exists(turnInboxKeys(context.prefix).lock('web:close:t1'))).toBe(0);
    await context.queue.obliterate({ force: true });
    await context.queue.close();
  });
});
