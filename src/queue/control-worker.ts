import { type Job, Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { logQueueErrors, parseJobPayload } from './job-payload.js';
import { type ControlJob, controlJob, QUEUE_NAMES } from './jobs.js';

export type ControlHandlers = {
  [Kind in ControlJob['kind']]?: (job: Extract<ControlJob, { kind: Kind }>) => Promise<void>;
};

export function createControlQueue(connection: Redis, prefix: string, logger?: Logger): Queue {
  const queue = new Queue(QUEUE_NAMES.control, { connection, prefix });
  logQueueErrors(queue, logger, 'control queue');
  return queue;
}

/** Applies control jobs (approval decisions, alert buttons, the periodic run refresh). */
export function createControlWorker(options: {
  connection: Redis;
  prefix: string;
  handlers: ControlHandlers;
  logger: Logger;
  concurrency?: number;
}): Worker {
  const { logger } = options;
  const worker = new Worker(
    QUEUE_NAMES.control,
    async (job: Job) => {
      const data = parseJobPayload(controlJob, job.data, QUEUE_NAMES.control);
      const handler = options.handlers[data.kind] as ((job: ControlJob) => Promise<void>) | undefined;
      if (handler === undefined) {
        logger.warn({ kind: data.kind }, 'no handler for control job');
        return;
      }
      await handler(data);
    },
    { connection: options.connection, prefix: options.prefix, concurrency: options.concurrency ?? 4 },
  );
  worker.on('failed', (job, error) => {
    logger.error({ jobId: job?.id, kind: job?.data?.kind, err: error.message }, 'control job failed');
  });
  logQueueErrors(worker, logger, 'control worker');
  return worker;
}
