import type { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Notifier } from '../bot/notifier.js';
import type { ChartRequest } from '../charts/metrics-chart.js';
import type { Config } from '../config/config.js';
import type { Logger } from '../logger.js';
import type { ProcessState } from '../runs/executor.js';
import { ACTIVE_STATUSES, ALLOWED_TRANSITIONS, type RunMeta } from '../runs/records/run-types.js';
import type { RunQueries } from '../runs/run-queries.js';
import type { TrackerLinks } from '../runs/tracker-links.js';
import { createMonitorScheduler, type MonitorScheduler } from './monitor-scheduler.js';
import type { IncidentSink, Monitor, TickResult } from './monitor-types.js';
import {
  createMonitorWorker,
  createTickHandler,
  createWakeHandler,
  type TickOutcome,
} from './monitor-worker.js';
import { createRunWakeups, type DirectoryWatch } from './run-wakeups.js';
import type { Incident } from './types.js';

/**
 * How long a run that may come back (paused, or failed and open to a fix) keeps its monitor state and
 * alert rules after its last tick: a fix asked for days later still sees the curves; then they expire.
 */
export const MONITOR_KEEP_AFTER_END_MS = 7 * 24 * 3600 * 1000;

/**
 * Keeps one monitor job scheduler per active run and runs the ticks: a run gets its scheduler when it
 * starts, keeps it for one last tick after it ends (so the crash or finish is read), then loses it, and
 * its monitor keys are deleted (a run that cannot come back) or given a TTL (one that can).
 */
export function createRunWatcher(options: {
  config: Config;
  redis: Redis;
  prefix: string;
  monitor: Monitor;
  runs: RunQueries;
  alerts: IncidentSink;
  notifier: Notifier;
  postChart: (request: ChartRequest) => Promise<string>;
  /** A tick found the run's first tracker links (they go onto its started card). */
  onTrackerLinks?: (runId: string, links: TrackerLinks) => Promise<void>;
  /** After a run's last tick: other per-run keys go too (`keepMs` 0) or get a TTL. */
  onRetired?: (runId: string, keepMs: number) => Promise<void>;
  logger: Logger;
  /** Tests count or replace the file watches. */
  watchDirectory?: DirectoryWatch;
}) {
  const { redis, prefix, logger, config } = options;
  const scheduler: MonitorScheduler = createMonitorScheduler({
    connection: redis,
    prefix,
    intervalS: config.monitor.intervalS,
    logger,
  });
  const progressKey = (runId: string) => `${prefix}:progress-chart:${runId}`;
  // Runs watched since they started and not yet given their final tick (which reads the crash or the
  // finish). Kept in Redis so a run that ended while the bot was down still gets its alert, once.
  const watchedKey = `${prefix}:monitor-watched`;
  // Set by createWorker: a process without a monitor worker does not watch files.
  let tickRun: ((runId: string) => Promise<TickOutcome>) | undefined;
  let wakeHandler: ReturnType<typeof createWakeHandler> | undefined;
  const wakeups = createRunWakeups({
    evaluate: async (runId, files) =>
      wakeHandler === undefined ? 'done' : wakeHandler.wakeRun(runId, files),
    maxEvalsPerS: config.monitor.maxEvalsPerS,
    logger: logger.child({ component: 'monitor-wakeups' }),
    ...(options.watchDirectory === undefined ? {} : { watchDirectory: options.watchDirectory }),
  });
  const follow = (runId: string) => {
    if (tickRun !== undefined) wakeups.follow(runId, options.runs.runDirectory(runId));
  };
  const forget = async (runId: string) => {
    wakeups.release(runId);
    wakeHandler?.forget(runId);
    await scheduler.stop(runId);
    await redis.srem(watchedKey, runId);
  };

  async function loadRun(runId: string): Promise<RunMeta | undefined> {
    try {
      return await options.runs.get(runId);
    } catch {
      return undefined;
    }
  }

  async function pollProcess(meta: RunMeta): Promise<ProcessState> {
    if (meta.status === 'queued' || meta.status === 'pending_approval') return { kind: 'pending' };
    return (
      (await options.runs.processState(meta)) ?? {
        kind: 'unknown',
        reason: 'the executor does not know this run',
      }
    );
  }

  async function maybePostProgress(meta: RunMeta): Promise<void> {
    const everyMs = config.monitor.progressEveryMin * 60_000;
    if (everyMs <= 0 || meta.status !== 'running') return;
    // SET NX with the period as TTL: one progress chart per period, whichever worker ticks first.
    const due = await redis.set(progressKey(meta.id), '1', 'PX', everyMs, 'NX');
    if (due !== 'OK') return;
    await options.postChart({ run: meta.id, threadId: meta.threadId }).catch((error: unknown) => {
      logger.warn({ runId: meta.id, err: error }, 'progress chart failed');
    });
  }

  /** The owner of a run's monitor keys lets them go once the run's last tick has read its last lines. */
  async function retire(meta: RunMeta): Promise<void> {
    const final = ALLOWED_TRANSITIONS[meta.status].length === 0;
    const keepMs = final ? 0 : MONITOR_KEEP_AFTER_END_MS;
    if (final) await options.monitor.forget(meta.id);
    else await options.monitor.retire(meta.id, keepMs);
    await options.onRetired?.(meta.id, keepMs);
  }

  return {
    scheduler,
    wakeups,
    /** Starts watching a run (on `run-started`). */
    async watch(runId: string): Promise<void> {
      // A (re)launch: the next wake-up reads the run's record afresh (its launch count, its start).
      wakeHandler?.forget(runId);
      await redis.sadd(watchedKey, runId);
      await scheduler.start(runId);
      follow(runId);
    },
    /** After a restart: schedulers for the active runs and for runs that ended without a final tick. */
    async sync(runs: RunMeta[]): Promise<void> {
      const active = runs.filter((meta) => ACTIVE_STATUSES.has(meta.status)).map((meta) => meta.id);
      if (active.length > 0) await redis.sadd(watchedKey, ...active);
      const known = new Set(runs.map((meta) => meta.id));
      const watched = await redis.smembers(watchedKey);
      const gone = watched.filter((runId) => !known.has(runId));
      if (gone.length > 0) await redis.srem(watchedKey, ...gone);
      const wanted = new Set([...active, ...watched.filter((runId) => known.has(runId))]);
      const { added, removed } = await scheduler.sync(wanted);
      if (added.length > 0 || removed.length > 0)
        logger.info({ added, removed }, 'monitor schedulers synced');
    },
    createWorker(): Worker {
      const workerOptions = {
        connection: redis,
        prefix,
        monitor: options.monitor,
        loadRun,
        pollProcess,
        logger: logger.child({ component: 'monitor' }),
        onIncident: async (incident: Incident, meta: RunMeta) => {
          await options.alerts.onIncident(incident, meta);
        },
        onMalformed: async (_runId: string, note: string, meta: RunMeta) => {
          await options.notifier.post(meta.threadId, `${meta.name}: ${note}`);
        },
        onMissingRun: async (runId: string) => {
          await forget(runId);
          await options.monitor.forget(runId);
          await options.onRetired?.(runId, 0);
        },
        onTick: async (result: TickResult, meta: RunMeta) => {
          if (result.links !== undefined)
            await options.onTrackerLinks?.(meta.id, result.links).catch((error: unknown) => {
              logger.warn({ runId: meta.id, err: error }, 'could not put the tracker links on the run card');
            });
          if (!ACTIVE_STATUSES.has(meta.status) && !result.backlog) {
            // This was the last tick after the run ended or paused: it has read the final lines.
            await forget(meta.id);
            await retire(meta);
            return;
          }
          if (!ACTIVE_STATUSES.has(meta.status)) return;
          // Every process with a monitor worker watches the runs it ticks (after a restart, or a run started
          // by another process); the lease keeps their evaluations one at a time.
          follow(meta.id);
          await maybePostProgress(meta);
        },
      };
      tickRun = createTickHandler(workerOptions);
      wakeHandler = createWakeHandler({
        ...workerOptions,
        tickRun,
        // The timer ticks every interval; a hold that outlives one and a half (its ticks land on another
        // process) gets its full tick from the wake-up instead.
        tickDueMs: config.monitor.intervalS * 1500,
        onLinks: async (runId, links) => {
          await options.onTrackerLinks?.(runId, links).catch((error: unknown) => {
            logger.warn({ runId, err: error }, 'could not put the tracker links on the run card');
          });
        },
      });
      const worker = createMonitorWorker(workerOptions, tickRun);
      // Wake-ups are evaluations too: they end with the worker, before the app closes the executors (an
      // evaluation polls its run, and a poll after that could start a log follower no one stops).
      const closeWorker = worker.close.bind(worker);
      worker.close = async (force?: boolean) => {
        await wakeups.close();
        await options.monitor.endHolds();
        await closeWorker(force);
      };
      return worker;
    },
    close: async () => {
      await wakeups.close();
      await options.monitor.endHolds();
      await scheduler.close();
    },
  };
}
