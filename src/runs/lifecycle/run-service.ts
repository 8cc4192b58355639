import type { Redis } from 'ioredis';
import type { Config } from '../../config/config.js';
import { definedOnly } from '../../defined-only.js';
import type { Logger } from '../../logger.js';
import type { BackendRouter } from '../backend-router.js';
import type { GpuAllocator } from '../gpu-allocator.js';
import type { AuditLog } from '../records/audit-log.js';
import type { RunStore } from '../records/run-store.js';
import type { HubPush, RunMeta } from '../records/run-types.js';
import { createAutoRelaunch } from './auto-relaunch.js';
import { createRunActions, type RunActions } from './run-actions.js';
import { type AdoptRequest, type CreateRunRequest, createRunCreation } from './run-creation.js';
import { createRunEndings, type ReconcileReport } from './run-endings.js';
import type { RunEventHandler } from './run-events.js';
import { createRunLauncher } from './run-launcher.js';
import { createRunLock } from './run-lock.js';
import type { RunRevisions } from './run-revision.js';
import { createRunTransitions } from './run-transitions.js';

export type { Actor } from '../records/audit-log.js';
export type { CreateRunRequest } from './run-creation.js';

/** The run lifecycle: creating and adopting runs and the actions on them (`RunActions`); reads are `RunQueries`. */
export interface RunService extends RunActions, RunRevisions {
  /** Registers a watched run as `running` and emits `run-started` (the monitor starts ticking it). */
  adopt(request: AdoptRequest): Promise<RunMeta>;
  /** New run in `pending_approval`. Throws `invalid_run` / `gpus_unavailable` with a sentence for the user. */
  createRun(request: CreateRunRequest): Promise<RunMeta>;
  /** Moves a paused or failed run to another backend (`resume --on`); refused for an unconfigured one. */
  moveToBackend(run: string, on: string): Promise<RunMeta>;
  /** Poll running runs, apply their ends, then start queued runs whose GPUs are free (FIFO). */
  refresh(run?: string): Promise<RunMeta[]>;
  /** At start-up: free stale GPU claims, re-attach alive runs, finalise dead ones, re-schedule the queue. */
  reconcile(): Promise<ReconcileReport>;
  /** Records a finished push of the run's model to the Hub (`status` shows its URL). */
  recordHubPush(runId: string, push: HubPush): Promise<RunMeta>;
}

interface RunServiceOptions {
  config: Config;
  redis: Redis;
  prefix: string;
  executor: BackendRouter;
  allocator: GpuAllocator;
  store: RunStore;
  audit: AuditLog;
  logger: Logger;
  clock?: () => Date;
  onEvent?: RunEventHandler;
  /** Runs just before each launch (see checkpoint-history); returns a note for the thread. */
  beforeLaunch?: (meta: RunMeta) => Promise<string | undefined>;
  /** Called once a launch is running, not awaited (the reproducibility record). */
  afterLaunch?: (meta: RunMeta) => void;
  /** Chooses, pins and names the checkpoint an automatic relaunch resumes from (checkpoint-history). */
  prepareRelaunch?: (runId: string) => Promise<{ from: number | null }>;
  /** Runs once a run reached an end it cannot leave (stopped, completed, rejected): clean-up. */
  onTerminal?: (meta: RunMeta) => Promise<void>;
}

/**
 * The run life cycle behind chat commands and workers, composed from pieces split by responsibility: new and
 * adopted runs (run-creation), user actions on a run (run-actions), state transitions + locking
 * (run-transitions), launching and the GPU queue (run-launcher) and endings/refresh/reconcile (run-endings).
 * It changes runs; reading them is `RunQueries` (run-queries.ts).
 */
export function createRunService(options: RunServiceOptions): RunService {
  const { store, audit, executor, allocator, logger } = options;
  const now = options.clock ?? (() => new Date());
  const graceMs = options.config.runs.stopGraceS * 1000;
  const lock = createRunLock({ redis: options.redis, prefix: options.prefix });
  // A user action may wait for a pause that is itself waiting out the grace period.
  const userWaitMs = graceMs + 30_000;
  const transitions = createRunTransitions({
    store,
    audit,
    lock,
    logger,
    now,
    userWaitMs,
    onEvent: options.onEvent,
    onTerminal: options.onTerminal,
  });
  const launcher = createRunLauncher({
    config: options.config,
    store,
    executor,
    allocator,
    transitions,
    graceMs,
    ...definedOnly({ beforeLaunch: options.beforeLaunch, afterLaunch: options.afterLaunch }),
  });
  const retries = options.config.runs.autoRetries;
  const relaunch =
    retries === 0
      ? undefined
      : createAutoRelaunch({
          store,
          allocator,
          transitions,
          launcher,
          logger,
          retries,
          ...definedOnly({ prepareRelaunch: options.prepareRelaunch }),
        });
  const endings = createRunEndings({
    store,
    executor,
    allocator,
    logger,
    transitions,
    launcher,
    graceMs,
    ...definedOnly({ relaunch }),
  });
  const creation = createRunCreation({
    config: options.config,
    store,
    audit,
    executor,
    allocator,
    lock,
    transitions,
  });
  const actions = createRunActions({ store, audit, allocator, transitions, launcher, endings });

  return {
    ...creation,
    ...actions,
    refresh: endings.refresh,
    reconcile: endings.reconcile,
    recordHubPush: (runId, push) =>
      transitions.withRun(runId, (meta) =>
        transitions.writeQuietly(meta, { hubPushes: [...(meta.hubPushes ?? []), push] }),
      ),
  };
}
