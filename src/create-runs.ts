import path from 'node:path';
import type { Redis } from 'ioredis';
import type { Config } from './config.js';
import { definedOnly } from './defined-only.js';
import type { Logger } from './logger.js';
import { type AuditLog, createAuditLog } from './runs/audit-log.js';
import { type CheckpointHistory, createCheckpointHistory } from './runs/checkpoint-history.js';
import type { Executor } from './runs/executor.js';
import { createGpuAllocator, type GpuAllocator } from './runs/gpu-allocator.js';
import { detectGpus, type GpuInfo } from './runs/gpu-inventory.js';
import { createLocalExecutor } from './runs/local-executor.js';
import { lookupRunUser } from './runs/run-as-user.js';
import type { RunEventHandler } from './runs/run-events.js';
import { createRunService, type RunService } from './runs/run-service.js';
import { createRunStore, type RunStore } from './runs/run-store.js';
import { createRunsFacade, type RunsFacade } from './runs/runs-facade.js';
import { createSlurmExecutor } from './runs/slurm/slurm-executor.js';
import { createWatchAwareExecutor } from './runs/watched-executor.js';

/**
 * The runs core as the composition roots hold it. Other folders see it through `RunsFacade` (reads) and
 * `RunService`/`RunOperations` (changes); `store` and `executor` are for the roots and runs/ itself.
 */
export interface RunsRuntime extends RunsFacade {
  service: RunService;
  store: RunStore;
  audit: AuditLog;
  allocator: GpuAllocator;
  executor: Executor;
  gpus: GpuInfo[];
  /** Checkpoint history with health, and where approved fixes resume from. */
  checkpoints: CheckpointHistory;
}

/**
 * Wire the runs core from config: store, GPU inventory + allocator, audit log, executor (local unless
 * one is passed, e.g. the Slurm executor) and the run service. Call `service.reconcile()` once at start-up.
 */
export async function createRunsRuntime(options: {
  config: Config;
  redis: Redis;
  logger: Logger;
  /** Environment inherited by local runs (pass `process.env` from main). */
  environment: Readonly<Record<string, string | undefined>>;
  executor?: Executor;
  onEvent?: RunEventHandler;
  clock?: () => Date;
}): Promise<RunsRuntime> {
  const { config, redis, logger } = options;
  const prefix = config.queuePrefix;
  const store = createRunStore({ dataDir: config.dataDir, logger, redis, prefix });
  const gpus = await detectGpus({ configured: config.runs.gpus, logger });
  const allocator = createGpuAllocator({ redis, prefix, inventory: gpus.map((gpu) => gpu.index) });
  const audit = createAuditLog({ redis, prefix, runDir: store.runDir });
  if (options.executor !== undefined && config.runs.runAsUser !== undefined) {
    logger.warn('SHEPHERD_RUN_AS_USER applies to the local executor only; this executor ignores it');
  }
  const inner =
    options.executor ??
    createLocalExecutor({
      python: config.runs.python,
      runsDir: store.runsDir,
      environment: options.environment,
      gpuInventory: allocator.inventory,
      environments: config.runs.environments,
      graceS: config.runs.stopGraceS,
      logger,
      // A run in an image (`--image`, SHEPHERD_LOCAL_IMAGE) sees the workspace at the same path.
      workspace: path.resolve(config.workspace),
      container: config.runs.localContainer,
      ...(config.runs.runAsUser === undefined ? {} : { runAs: lookupRunUser(config.runs.runAsUser) }),
    });
  // Watched runs (a hand-submitted Slurm job, a local log + pid) are polled beside launched ones.
  const executor = createWatchAwareExecutor({
    inner,
    slurm: () =>
      createSlurmExecutor({
        config,
        logger: logger.child({ component: 'slurm' }),
        environment: { ...options.environment },
      }),
    logger,
  });
  const checkpoints = createCheckpointHistory({ redis, prefix, runDir: store.runDir });
  const service = createRunService({
    beforeLaunch: checkpoints.beforeLaunch,
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
    ...createRunsFacade({ store, executor }),
    service,
    store,
    audit,
    allocator,
    executor,
    gpus,
    checkpoints,
  };
}
