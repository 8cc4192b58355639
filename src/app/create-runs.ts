import path from 'node:path';
import type { Redis } from 'ioredis';
import type { BackendKind } from '../config/backend-kinds.js';
import type { Config } from '../config/config.js';
import { definedOnly } from '../defined-only.js';
import type { Logger } from '../logger.js';
import { type BackendRouter, createBackendRouter } from '../runs/backend-router.js';
import { type CheckpointHistory, createCheckpointHistory } from '../runs/checkpoints/checkpoint-history.js';
import type { Executor } from '../runs/executor.js';
import { createGpuAllocator, type GpuAllocator } from '../runs/gpu-allocator.js';
import { detectGpus, type GpuInfo } from '../runs/gpu-inventory.js';
import { createHfJobsExecutor } from '../runs/hfjobs/hfjobs-executor.js';
import { createRunSchedules } from '../runs/hfjobs/hfjobs-run-schedules.js';
import { createHfScheduledJobs } from '../runs/hfjobs/hfjobs-scheduled-jobs.js';
import { createKubernetesExecutor } from '../runs/kubernetes/kubernetes-executor.js';
import { createLaunchCapture } from '../runs/launch/launch-capture.js';
import { runEnvironmentSecrets } from '../runs/launch/process-environment.js';
import type { RunEventHandler } from '../runs/lifecycle/run-events.js';
import { createRunService, type RunService } from '../runs/lifecycle/run-service.js';
import { createLocalExecutor } from '../runs/local-executor.js';
import { localPlacement } from '../runs/local-launch-plan.js';
import type { RunSchedules } from '../runs/operations/operation-types.js';
import { type AuditLog, createAuditLog } from '../runs/records/audit-log.js';
import { PYTHON_RUNTIME_DIR } from '../runs/records/run-files.js';
import { createRunStore, type RunStore } from '../runs/records/run-store.js';
import { lookupRunUser } from '../runs/run-as-user.js';
import { createRunQueries, type RunQueries } from '../runs/run-queries.js';
import { createSlurmExecutor } from '../runs/slurm/slurm-executor.js';
import { createWatchAwareExecutor } from '../runs/watched-executor.js';
import { createHubRevisions, revisionsNamedIn } from '../tools/hub-revisions.js';

/**
 * The runs core as the composition roots hold it. Other folders see it through `RunQueries` (reads) and
 * `RunService`/`RunOperations` (changes); `store` and `executor` are for the roots and runs/ itself.
 */
export interface RunsRuntime extends RunQueries {
  service: RunService;
  store: RunStore;
  audit: AuditLog;
  allocator: GpuAllocator;
  executor: BackendRouter;
  gpus: GpuInfo[];
  /** Recurring jobs (HF Jobs' scheduler), when HF Jobs is a configured backend. */
  schedules: RunSchedules;
  /** Checkpoint history with health, and where approved fixes resume from. */
  checkpoints: CheckpointHistory;
  /** Waits for the launch records still being written, at most `waitMs` when given. */
  settleLaunchRecords(waitMs?: number): Promise<void>;
  /** On stop: waits at most `waitMs` for the launch records under way, then abandons the rest. */
  closeLaunchRecords(waitMs: number): Promise<void>;
}

/** Bound on a launch's environment probe (pip freeze, torch import, nvidia-smi); it never delays the start. */
const LAUNCH_PROBE_TIMEOUT_MS = 60_000;

/** What each launch records (`launch-records/`), probed with the run's own interpreter. */
function launchCaptureFor(
  config: Config,
  store: RunStore,
  inherited: Readonly<Record<string, string | undefined>>,
  logger: Logger,
  redis: Redis,
) {
  const revisions = createHubRevisions({ redis, prefix: config.queuePrefix });
  return createLaunchCapture({
    hubRevisions: async (threadId, text) => revisionsNamedIn(await revisions.list(threadId), text),
    runDir: store.runDir,
    python: config.runs.python,
    environments: config.runs.environments,
    inherited,
    container: config.localContainer,
    timeoutMs: LAUNCH_PROBE_TIMEOUT_MS,
    logger: logger.child({ component: 'launch-capture' }),
  });
}

/** An executor with its card description (the local executor knows nothing of prices). */
function withPlacement(executor: Executor, placement: NonNullable<Executor['placement']>): Executor {
  return { ...executor, placement };
}

/**
 * Every configured backend (`SHEPHERD_BACKENDS`), behind one router. Watched runs (a hand-submitted Slurm
 * job, a local log + pid) are polled beside launched ones; a watched Slurm job is followed even where Slurm
 * is not a configured backend.
 */
function createBackends(options: {
  config: Config;
  logger: Logger;
  store: RunStore;
  allocator: GpuAllocator;
  environment: Readonly<Record<string, string | undefined>>;
  injected: Executor | Executor[] | undefined;
}): BackendRouter {
  const { config, logger } = options;
  const injected = new Map(
    (Array.isArray(options.injected)
      ? options.injected
      : options.injected === undefined
        ? []
        : [options.injected]
    ).map((executor) => [executor.kind, executor] as const),
  );
  if (config.runs.runAsUser !== undefined && config.runs.backends.some((kind) => kind !== 'local')) {
    logger.warn('SHEPHERD_RUN_AS_USER applies to the local backend only; the other backends ignore it');
  }
  const slurm = () =>
    createWatchAwareExecutor({
      inner: createSlurmExecutor({
        config,
        logger: logger.child({ component: 'slurm' }),
        environment: { ...options.environment },
        runDir: options.store.runDir,
      }),
      logger,
    });
  const build = (kind: BackendKind): Executor => {
    const given = injected.get(kind);
    // Remote backends follow their own watched jobs; only local and Slurm take the watch wrapper.
    if (given !== undefined)
      return kind === 'local' || kind === 'slurm'
        ? createWatchAwareExecutor({ inner: given, logger })
        : given;
    switch (kind) {
      case 'local':
        return createWatchAwareExecutor({
          inner: withPlacement(
            createLocalExecutor({
              python: config.runs.python,
              runsDir: options.store.runsDir,
              environment: options.environment,
              gpuInventory: options.allocator.inventory,
              environments: config.runs.environments,
              graceS: config.runs.stopGraceS,
              logger,
              // A run in an image (`--image`, SHEPHERD_LOCAL_IMAGE) sees the workspace at the same path.
              workspace: path.resolve(config.workspace),
              container: config.localContainer,
              ...(config.runs.runAsUser === undefined ? {} : { runAs: lookupRunUser(config.runs.runAsUser) }),
            }),
            async (request) => localPlacement(request, config.localContainer, config.runs.gpuHourUsd),
          ),
          logger,
        });
      case 'slurm':
        return slurm();
      case 'kubernetes':
        return createKubernetesExecutor({
          settings: config.kubernetes,
          graceS: config.runs.stopGraceS,
          runDir: options.store.runDir,
          helperDir: PYTHON_RUNTIME_DIR,
          logger: logger.child({ component: 'kubernetes' }),
        });
      case 'hfjobs':
        return createHfJobsExecutor({
          settings: config.hfJobs,
          hub: { url: config.hub.url, token: config.hub.token },
          runDir: options.store.runDir,
          helperDir: PYTHON_RUNTIME_DIR,
          logger: logger.child({ component: 'hfjobs' }),
          // `SHEPHERD_RUN_ENV_<NAME>` reaches a job as an encrypted secret, as it reaches a local run as env.
          secrets: runEnvironmentSecrets(options.environment),
        });
    }
  };
  // Injected executors (tests) are the backends; otherwise each configured backend is built from config.
  const kinds = injected.size > 0 ? [...injected.keys()] : config.runs.backends;
  const defaultKind = injected.size > 0 ? (kinds[0] as BackendKind) : config.runs.executor;
  return createBackendRouter({
    backends: new Map(kinds.map((kind) => [kind, build(kind)])),
    defaultKind,
    watchOnly: { slurm },
    logger,
    gpuHourUsd: (kind) => {
      if (kind === 'slurm') return config.slurm.gpuHourUsd;
      if (kind === 'kubernetes') return config.kubernetes.gpuHourUsd;
      return config.runs.gpuHourUsd;
    },
  });
}

/**
 * Wire the runs core from config: store, GPU inventory + allocator, audit log, the backends (built from
 * config unless executors are passed) and the run service. Call `service.reconcile()` once at start-up.
 */
export async function createRunsRuntime(options: {
  config: Config;
  redis: Redis;
  logger: Logger;
  /** Environment inherited by local runs (pass `process.env` from main). */
  environment: Readonly<Record<string, string | undefined>>;
  /** Executors to use instead of building them from config (tests); each replaces its own backend. */
  executor?: Executor | Executor[];
  onEvent?: RunEventHandler;
  clock?: () => Date;
}): Promise<RunsRuntime> {
  const { config, redis, logger } = options;
  const prefix = config.queuePrefix;
  const store = createRunStore({ dataDir: config.dataDir, logger, redis, prefix });
  const gpus = await detectGpus({ configured: config.runs.gpus, logger });
  const allocator = createGpuAllocator({ redis, prefix, inventory: gpus.map((gpu) => gpu.index) });
  const audit = createAuditLog({ redis, prefix, runDir: store.runDir });
  const executor = createBackends({
    config,
    logger,
    store,
    allocator,
    environment: options.environment,
    injected: options.executor,
  });
  const checkpoints = createCheckpointHistory({
    redis,
    prefix,
    runDir: store.runDir,
    pinMaxBytes: Math.round(config.runs.pinMaxGb * 1e9),
  });
  const launchCapture = launchCaptureFor(config, store, options.environment, logger, redis);
  const service = createRunService({
    beforeLaunch: async (meta) => {
      await launchCapture.beforeSpawn(meta);
      return checkpoints.beforeLaunch(meta);
    },
    afterLaunch: launchCapture.capture,
    prepareRelaunch: checkpoints.prepareRelaunch,
    // Pinned checkpoints are only for resuming: nothing resumes a run that ended.
    onTerminal: (meta) => checkpoints.releasePins(meta.id),
    config,
    redis,
    prefix,
    executor,
    allocator,
    store,
    audit,
    logger,
    ...definedOnly({ clock: options.clock, onEvent: options.onEvent }),
  });
  return {
    ...createRunQueries({ store, executor, allocator }),
    service,
    store,
    audit,
    allocator,
    executor,
    gpus,
    checkpoints,
    settleLaunchRecords: (waitMs) => launchCapture.settle(waitMs),
    closeLaunchRecords: (waitMs) => launchCapture.close(waitMs),
    schedules: createRunSchedules({
      store,
      scheduled:
        executor.kinds.includes('hfjobs') && options.executor === undefined
          ? createHfScheduledJobs({
              settings: config.hfJobs,
              hub: { url: config.hub.url, token: config.hub.token },
              helperDir: PYTHON_RUNTIME_DIR,
              logger: logger.child({ component: 'hfjobs' }),
              secrets: runEnvironmentSecrets(options.environment),
            })
          : undefined,
    }),
  };
}
