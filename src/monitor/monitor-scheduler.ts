import { type ConnectionOptions, Queue } from 'bullmq';
import type { Logger } from '../logger.js';
import { logQueueErrors } from '../queue/job-payload.js';
import { JOBS, QUEUE_NAMES, schedule } from '../queue/jobs.js';

const SCHEDULER_PREFIX = 'monitor:';

function monitorSchedulerId(runId: string): string {
  return `${SCHEDULER_PREFIX}${runId}`;
}

export function createMonitorScheduler(options: {
  connection: ConnectionOptions;
  prefix: string;
  intervalS: number;
  logger?: Logger;
}) {
  const queue = new Queue(QUEUE_NAMES.monitor, { connection: options.connection, prefix: options.prefix });
  logQueueErrors(queue, options.logger, 'monitor queue');
  const every = Math.max(1, Math.round(options.intervalS * 1000));

  async function listRunIds(): Promise<string[]> {
    const runIds: string[] = [];
    const pageSize = 500;
    for (let start = 0; ; start += pageSize) {
      const page = await queue.getJobSchedulers(start, start + pageSize - 1, true);
      for (const scheduler of page) {
        const id = scheduler.key;
        if (id.startsWith(SCHEDULER_PREFIX)) runIds.push(id.slice(SCHEDULER_PREFIX.length));
      }
      if (page.length < pageSize) break;
    }
    return runIds;
  }

  return {
    queue,
    /** Create (or update) the run's scheduler; idempotent. */
    async start(runId: string): Promise<void> {
      await schedule(queue, monitorSchedulerId(runId), { every }, JOBS.monitorTick, { v: 1, runId });
    },
    /** Remove the run's scheduler; true when one existed. */
    async stop(runId: string): Promise<boolean> {
      return queue.removeJobScheduler(monitorSchedulerId(runId));
    },
    /** Run ids that currently have a scheduler. */
    listRunIds,
    /** Make the schedulers match the active runs: add the missing ones, remove the stale ones. */
    async sync(activeRunIds: Iterable<string>): Promise<{ added: string[]; removed: string[] }> {
      const wanted = new Set(activeRunIds);
      const existing = new Set(await listRunIds());
      const added: string[] = [];
      const removed: string[] = [];
      for (const runId of wanted) {
        if (!existing.has(runId)) {
          await this.start(runId);
          added.push(runId);
        }
      }
      for (const runId of existing) {
        if (!wanted.has(runId)) {
          await this.stop(runId);
          removed.push(runId);
        }
      }
      return { added, removed };
    },
    async close(): Promise<void> {
      await queue.close();
    },
  };
}

export type MonitorScheduler = ReturnType<typeof createMonitorScheduler>;
