import type { Job, Worker } from 'bullmq';
import { QUEUE_NAMES } from '../queue/jobs.js';
import type { OpsMetrics } from './ops-metrics.js';

function platformOf(job: Job): string {
  const threadId: unknown = (job.data as { threadId?: unknown } | undefined)?.threadId;
  if (typeof threadId !== 'string') return 'unknown';
  return threadId.split(':', 1)[0] || 'unknown';
}

function seconds(from: number | undefined, to: number | undefined): number | undefined {
  if (from === undefined || to === undefined) return undefined;
  return (to - from) / 1000;
}

/**
 * Derives turn, notify and approval series from the workers' own job events, so the services that do
 * the work need no metrics code. Each process counts the jobs its own workers ran.
 */
export function observeWorker(worker: Worker, metrics: OpsMetrics): void {
  if (worker.name === QUEUE_NAMES.turns) {
    const onDone = (job: Job | undefined) => {
      if (job === undefined) return;
      const duration = seconds(job.processedOn, job.finishedOn ?? Date.now());
      const pickup = seconds(job.timestamp, job.processedOn);
      if (duration !== undefined && pickup !== undefined) metrics.turnFinished(duration, pickup);
    };
    worker.on('completed', onDone);
    worker.on('failed', onDone);
    return;
  }
  if (worker.name === QUEUE_NAMES.notify) {
    worker.on('completed', (job) => metrics.notify(platformOf(job), 'ok'));
    worker.on('failed', (job) => {
      if (job === undefined) return;
      const attempts = job.opts.attempts ?? 1;
      metrics.notify(platformOf(job), job.attemptsMade < attempts ? 'retry' : 'failed');
    });
    return;
  }
  if (worker.name === QUEUE_NAMES.control) {
    worker.on('completed', (job) => {
      if (job.name !== 'approval-decision') return;
      const data = job.data as { decision?: unknown; auto?: unknown };
      if (typeof data.decision !== 'string') return;
      metrics.approval(data.auto === true && data.decision === 'approved' ? 'auto_approved' : data.decision);
    });
  }
}
