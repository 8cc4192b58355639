import type { ConnectionOptions, Worker } from 'bullmq';
import { ServiceError } from '../errors.js';
import type { Logger } from '../logger.js';
import { createJobWorker } from '../queue/job-worker.js';
import { monitorTickJob, QUEUE_NAMES } from '../queue/jobs.js';
import type { ProcessState } from '../runs/executor.js';
import type { RunMeta } from '../runs/records/run-types.js';
import type { TrackerLinks } from '../runs/tracker-links.js';
import type { Monitor, TickResult } from './monitor-types.js';
import type { Incident } from './types.js';
import type { WokenFiles } from './woken-files.js';

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
    const delivered = await deliver(options, runId, meta, {
      incidents: result.incidents,
      malformedNote: result.malformed.note,
    });
    await options.onTick?.(result, meta);
    return { incidents: delivered, newPoints: result.newPoints };
  };
}

/** Posts the malformed-line note and the incidents, and acknowledges those delivered. */
async function deliver(
  options: Pick<MonitorWorkerOptions, 'monitor' | 'logger' | 'onIncident' | 'onMalformed'>,
  runId: string,
  meta: RunMeta,
  result: { incidents: Incident[]; malformedNote?: string | undefined },
): Promise<string[]> {
  const { monitor, logger } = options;
  if (result.malformedNote !== undefined && options.onMalformed !== undefined) {
    await options.onMalformed(runId, result.malformedNote, meta).catch((error: unknown) => {
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
  return delivered;
}

/** A run's meta is read again for wake-ups at most this often (a relaunch reaches them within it). */
const META_REFRESH_MS = 5_000;

/**
 * A file wake-up: the woken evaluation (monitor.wake: new points only, on the run held in memory) and the
 * delivery of what it raised. A hold that outlived `tickDueMs` (the timer's ticks land on another process)
 * gets a full tick here, so the time-based detectors still run.
 */
export function createWakeHandler(
  options: Omit<MonitorWorkerOptions, 'connection' | 'prefix' | 'concurrency'> & {
    tickRun: (runId: string) => Promise<TickOutcome>;
    tickDueMs: number;
    onLinks?: (runId: string, links: TrackerLinks) => Promise<void>;
    clock?: () => number;
  },
) {
  const clock = options.clock ?? Date.now;
  const metas = new Map<string, { meta: RunMeta; at: number }>();
  return {
    async wakeRun(runId: string, files?: WokenFiles): Promise<'done' | 'locked'> {
      let known = metas.get(runId);
      if (known === undefined || clock() - known.at >= META_REFRESH_MS) {
        const meta = await options.loadRun(runId);
        if (meta === undefined) return 'done';
        known = { meta, at: clock() };
        metas.set(runId, known);
      }
      const { meta } = known;
      const result = await options.monitor.wake(runId, meta, files);
      if (result === 'locked') return 'locked';
      // Another process holds the run for its wake-ups: it saw the same line.
      if (result === 'held-elsewhere') return 'done';
      await deliver(options, runId, meta, result);
      if (result.links !== undefined) await options.onLinks?.(runId, result.links);
      if (result.heldForMs >= options.tickDueMs) await options.tickRun(runId);
      return 'done';
    },
    /** The run is no longer followed. */
    forget(runId: string): void {
      metas.delete(runId);
    },
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
