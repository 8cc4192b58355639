import { Queue, type Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { logQueueErrors } from './job-payload.js';
import { createJobWorker } from './job-worker.js';
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
  return createJobWorker(
    QUEUE_NAMES.control,
    controlJob,
    async (data) => {
      const handler = options.handlers[data.kind] as ((job: ControlJob) => Promise<void>) | undefined;
      if (handler === undefined) {
        logger.warn({ kind: data.kind }, 'no handler for control job');
        return;
      }
      await handler(data);
    },
    {
      connection: options.connection,
      prefix: options.prefix,
      logger,
      concurrency: options.concurrency ?? 4,
      describe: (data) => ({ kind: data.kind }),
    },
  );
}

/** Several features may handle one kind (the periodic refresh): their handlers run in the given order. */
export function mergeControlHandlers(list: readonly ControlHandlers[]): ControlHandlers {
  const byKind = new Map<string, Array<(job: ControlJob) => Promise<void>>>();
  for (const handlers of list) {
    for (const [kind, handler] of Object.entries(handlers)) {
      if (handler === undefined) continue;
      byKind.set(kind, [...(byKind.get(kind) ?? []), handler as (job: ControlJob) => Promise<void>]);
    }
  }
  const merged: Record<string, (job: ControlJob) => Promise<void>> = {};
  for (const [kind, handlers] of byKind) {
    merged[kind] = async (job) => {
      for (const handler of handlers) await handler(job);
    };
  }
  return merged as ControlHandlers;
}
