import type { ConnectionOptions, Worker } from 'bullmq';
import { ServiceError } from '../errors.js';
import type { Logger } from '../logger.js';
import { createJobWorker } from '../queue/job-worker.js';
import { monitorTickJob, QUEUE_NAMES } from '../queue/jobs.js';
import type { ProcessState } from '../runs/executor.js';
import type { RunMeta } from '../runs/records/run-types.js';
import type { Monitor, TickResult } from './monitor.js';
import type { Incident } from './types.js';

/**
 * The worker of the `monitor` queue: for each tick job it loads the run, asks the executor for the process
 * state, runs the monitor tick and hands each incident to `onIncident` (which posts the card; the monitor
 * makes no LLM call). Delivered incidents are acknowledged; a failed delivery is retried on the next tick.
 */
interface MonitorWorkerOptions {
  connection: ConnectionOptions;
  prefix: string;
  monitor: Monitor;
  loadRun: (runId: string) => Promise<RunMeta | undefined>;
  pollProcess: (meta: RunMeta) => Promise<ProcessState>;
  onIncident: (incident: Incident, meta: RunMeta) => Promise<void>;
  onMalformed?: (runId: string, note: string, meta: RunMeta) => Promise<void>;
  /** Called when the run no longer exists (e.g. remove its scheduler). */
  onMissingRun?: (runId: string) => Promise<void>;
  /** Called after every tick (progress charts, metrics). */
  onTick?: (result: TickResult, meta: RunMeta) => Promise<void>;
  logger: Logger;
  concurrency?: number;
}

export type TickOutcome = { skipped: 'unknown run' | 'locked' } | { incidents: string[]; newPoints: number };

/**
 * One evaluation of a run, for the timer's jobs and for file wake-ups alike: the same cursor, the same pure
 * `evaluate`, the same lease (a second evaluation of the run at the same time reports `locked`).
 */
export function createTickHandler(
  options: Omit<MonitorWorkerOptions, 'connection' | 'prefix' | 'concurrency'>,
) {
  const { monitor, logger } = options;
  return async function tickRun(runId: string): Promise<TickOutcome> {
    let meta = await options.loadRun(runId);
    if (meta === undefined) {
      logger.warn({ runId }, 'monitor tick for an unknown run');
      await options.onMissingRun?.(runId);
      return { skipped: 'unknown run' };
    }
    let processState = await options.pollProcess(meta);
    // A poll can take a while (a remote backend): an ending it saw may be a stop Shepherd started meanwhile,
    // so the ending is judged against the run as it is now.
    if (processState.kind === 'exited' || processState.kind === 'signaled') {
      const polled = meta.launchCount;
      meta = (await options.loadRun(runId)) ?? meta;
      // Relaunched meanwhile (an automatic relaunch): that ending is handled; the new launch is what counts.
      if (meta.launchCount !== polled) processState = await options.pollProcess(meta);
    }
    const result = await monitor.tick(runId, meta, processState);
    if (result.skipped === true) return { skipped: 'locked' };
    if (result.malformed.note !== undefined && options.onMalformed !== undefined) {
      await options.onMalformed(runId, result.malformed.note, meta).catch((error: unknown) => {
        logger.error({ runId, err: error }, 'could not post the malformed-line note');
      });
    }
    const delivered: string[] = [];
    for (const incident of result.incidents) {
      try {
        await options.onIncident(incident, meta);
        delivered.push(incident.id);
      } catch (error) {
        // Another tick is posting it right now; it stays in the outbox until that one acknowledges it.
        if (error instanceof ServiceError && error.code === 'delivery_in_progress') continue;
        logger.error(
          { runId, incident: incident.id, err: error },
          'incident delivery failed; retrying next tick',
        );
      }
    }
    await monitor.ack(runId, delivered);
    await options.onTick?.(result, meta);
    return { incidents: delivered, newPoints: result.newPoints };
  };
}

export function createMonitorWorker(
  options: MonitorWorkerOptions,
  tickRun: (runId: string) => Promise<TickOutcome> = createTickHandler(options),
): Worker {
  return createJobWorker(QUEUE_NAMES.monitor, monitorTickJob, async ({ runId }) => tickRun(runId), {
    connection: options.connection,
    prefix: options.prefix,
    logger: options.logger,
    concurrency: options.concurrency ?? 8,
    describe: (data) => ({ runId: data.runId }),
    // Ticks are cheap and periodic: a failed one is simply superseded by the next.
    workerOptions: { removeOnComplete: { count: 100 }, removeOnFail: { count: 100 } },
  });
}
