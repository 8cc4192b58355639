import { type Job, Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { RunError, ServiceError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { createJobWorker } from '../../src/queue/job-worker.js';
import { controlJob, enqueue, JOBS, QUEUE_NAMES } from '../../src/queue/jobs.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

/* Issue 16 seam 2: one worker wrapper maps payloads and typed errors to BullMQ outcomes for every queue. */

const digest = { v: 1 as const, kind: 'digest' as const };

describe('createJobWorker', () => {
  const prefix = uniquePrefix('job-worker');
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  afterAll(async () => {
    redis.disconnect();
    await deleteKeysWithPrefix(prefix);
  });

  it('fails a final typed error and a bad payload at once, retries the rest, and refuses a wrong queue', async () => {
    const queue = new Queue(QUEUE_NAMES.control, { connection: redis, prefix });
    const events = new QueueEvents(QUEUE_NAMES.control, { connection: redis.duplicate(), prefix });
    await events.waitUntilReady();
    const calls: Record<string, number> = {};
    const worker = createJobWorker(
      QUEUE_NAMES.control,
      controlJob,
      async (data, job) => {
        const id = job.id ?? '';
        calls[id] = (calls[id] ?? 0) + 1;
        if (data.kind !== 'digest') return 'other';
        if (data.at === 'final') throw new RunError('run_not_found', 'no such run');
        if (data.at === 'flaky' && calls[id] < 3)
          throw new ServiceError('redis_unavailable', 'try again', { retryable: true });
        return 'ok';
      },
      { connection: redis, prefix, logger: createLogger('silent'), concurrency: 2 },
    );
    const retrying = { attempts: 3, backoff: { type: 'fixed', delay: 50 } };
    try {
      const settle = (job: Job) => job.waitUntilFinished(events, 15_000);
      const final = await enqueue(
        queue,
        JOBS.digest,
        { ...digest, at: 'final' },
        { jobId: 'final', ...retrying },
      );
      await expect(settle(final)).rejects.toThrow('run_not_found: no such run');
      expect(calls.final).toBe(1);

      const flaky = await enqueue(
        queue,
        JOBS.digest,
        { ...digest, at: 'flaky' },
        { jobId: 'flaky', ...retrying },
      );
      await expect(settle(flaky)).resolves.toBe('ok');
      expect(calls.flaky).toBe(3);

      const malformed = await queue.add(
        'digest',
        { v: 2, kind: 'digest' },
        { jobId: 'malformed', ...retrying },
      );
      await expect(settle(malformed)).rejects.toThrow('malformed control job');
      expect(calls.malformed).toBeUndefined();
      expect((await queue.getJob('malformed'))?.attemptsMade).toBe(1);

      await expect(enqueue(queue, JOBS.monitorTick, { v: 1, runId: 'r1' })).rejects.toThrow(
        'job for queue monitor added to queue control',
      );
      expect(worker.listenerCount('error')).toBeGreaterThan(0);
    } finally {
      await worker.close();
      await events.close();
      await queue.close();
    }
  });
});
