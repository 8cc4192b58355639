import { type Job, UnrecoverableError, Worker, type WorkerOptions } from 'bullmq';
import type { z } from 'zod';
import { BotError } from '../errors.js';
import type { Logger } from '../logger.js';
import { logQueueErrors, parseJobPayload } from './job-payload.js';
import type { QueueName } from './jobs.js';

/**
 * The one way Shepherd builds a BullMQ worker. For every queue it:
 * - parses `job.data` with the queue's schema; a payload that does not parse fails at once
 *   (UnrecoverableError) instead of spending its retries;
 * - attaches an `'error'` listener (without one a Redis hiccup crashes the process);
 * - logs `'failed'` the same way: `{queue, jobId, name, attempt, final, ...describe(data), err}`;
 * - maps typed errors to BullMQ outcomes: a `BotError` with `retryable: false` becomes an
 *   UnrecoverableError (no attempt can help); anything else is retried per the job's options.
 */
interface JobWorkerOptions<Data> {
  connection: WorkerOptions['connection'];
  prefix: string;
  logger: Logger;
  concurrency: number;
  /** Log fields that identify a job (thread, run, kind); read from the raw data, which may be malformed. */
  describe?: (data: Partial<Data>) => Record<string, unknown>;
  /** Other BullMQ worker options (lock duration, backoff strategy, retention). */
  workerOptions?: Omit<WorkerOptions, 'connection' | 'prefix' | 'concurrency'>;
}

type JobHandler<Data, Result> = (data: Data, job: Job, token?: string) => Promise<Result>;

/** Whether no further attempt can help: a non-retryable typed error. */
export function isFinalError(error: unknown): error is BotError {
  return error instanceof BotError && !error.retryable;
}

export function createJobWorker<Data, Result>(
  queue: QueueName,
  schema: z.ZodType<Data>,
  handler: JobHandler<Data, Result>,
  options: JobWorkerOptions<Data>,
): Worker {
  const { logger } = options;
  const worker = new Worker(
    queue,
    async (job: Job, token?: string) => {
      const data = parseJobPayload(schema, job.data, queue);
      try {
        return await handler(data, job, token);
      } catch (error) {
        if (isFinalError(error)) {
          // BullMQ only knows UnrecoverableError; the typed code rides along for the 'failed' log line.
          throw Object.assign(new UnrecoverableError(`${error.code}: ${error.message}`), {
            code: error.code,
          });
        }
        throw error;
      }
    },
    {
      ...options.workerOptions,
      connection: options.connection,
      prefix: options.prefix,
      concurrency: options.concurrency,
    },
  );
  logQueueErrors(worker, logger, `${queue} worker`);
  worker.on('failed', (job, error) => {
    const attempts = job?.opts.attempts ?? 1;
    const final = job === undefined || error instanceof UnrecoverableError || job.attemptsMade >= attempts;
    const raw = (job?.data ?? {}) as Partial<Data>;
    const fields = {
      queue,
      jobId: job?.id,
      name: job?.name,
      attempt: job?.attemptsMade,
      final,
      ...safeDescribe(options.describe, raw),
      // The typed code says why (e.g. Slack's `channel_not_found`), which the message may not.
      ...codeOf(error),
      err: error,
    };
    if (final) logger.error(fields, `${queue} job failed`);
    else logger.warn(fields, `${queue} job failed; will retry`);
  });
  return worker;
}

function safeDescribe<Data>(
  describe: ((data: Partial<Data>) => Record<string, unknown>) | undefined,
  data: Partial<Data>,
): Record<string, unknown> {
  if (describe === undefined || typeof data !== 'object' || data === null) return {};
  try {
    return describe(data);
  } catch {
    return {};
  }
}

/** The typed code a failure carries (a BotError, or the UnrecoverableError made from one), for the log line. */
function codeOf(error: Error): { code?: string } {
  const code: unknown = (error as Error & { code?: unknown }).code;
  return typeof code === 'string' ? { code } : {};
}
