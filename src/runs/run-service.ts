import { symlink } from 'node:fs/promises';
import path from 'node:path';
import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import { definedOnly } from '../defined-only.js';
import { RunError } from '../errors.js';
import type { Logger } from '../logger.js';
import { type Actor, type AuditLog, assertTransition } from './audit-log.js';
import { refuseScriptEdit, syncWorkspaceScript, writeWorkspaceScript } from './command-script.js';
import type { Executor } from './executor.js';
import type { GpuAllocator } from './gpu-allocator.js';
import { estimateCostUsd } from './run-cost.js';
import { createRunEndings, type ReconcileReport } from './run-endings.js';
import { plural, type RunEventHandler } from './run-events.js';
import { RUN_FILES } from './run-files.js';
import { createRunLauncher } from './run-launcher.js';
import { createRunLock } from './run-lock.js';
import {
  type ClusterReport,
  createRunReports,
  lastStepOf,
  type RunStatusReport,
  readResume,
} from './run-reports.js';
import type { RunStore, ScriptUpdate } from './run-store.js';
import { createRunTransitions } from './run-transitions.js';
import type { RunMeta } from './run-types.js';
import { checkMaxHours } from './time-limit.js';

export type { Actor } from './audit-log.js';
export { endingOf, type ReconcileReport } from './run-endings.js';
export type { ClusterReport, ResumeInfo, RunStatusReport } from './run-reports.js';

export interface CreateRunRequest {
  name: string;
  /** Python source of train.py. */
  script: string;
  gpus: number;
  maxHours?: number;
  modelId?: string;
  config?: Record<string, unknown>;
  args?: string[];
  threadId: string;
  requester: { id: string; name: string };
  /** Command runs (the script is then the named `.py` file, or empty when the command names none). */
  launch?: RunLaunchFields;
}

/** How a run starts when it is not a plain `train.py`: see `RunMeta`. */
export type RunLaunchFields = Partial<
  Pick<RunMeta, 'command' | 'cwd' | 'scriptPath' | 'environmentName' | 'nodes'>
>;

/** A run Shepherd watches but did not launch: it starts `running` at once, no approval. */
export interface AdoptRequest {
  name: string;
  threadId: string;
  requester: { id: string; name: string };
  watch: NonNullable<RunMeta['watch']>;
  jobId?: string;
  maxHours: number;
  /** What the thread is told ("watching Slurm job 42 (train.out)"). */
  description: string;
}

export interface RunService {
  /** Registers a watched run as `running` and emits `run-started` (the monitor starts ticking it). */
  adopt(request: AdoptRequest): Promise<RunMeta>;
  /** New run in `pending_approval`. Throws `invalid_run` / `gpus_unavailable` with a sentence for the user. */
  createRun(request: CreateRunRequest): Promise<RunMeta>;
  /** `pending_approval → queued`, then launch (or wait for GPUs). A second approve throws `illegal_transition`. */
  approve(run: string, by: Actor): Promise<RunMeta>;
  reject(run: string, by: Actor, reason?: string): Promise<RunMeta>;
  /** `paused | failed → pending_approval`, when the approval layer wants a new decision before resuming. */
  requestApproval(run: string, by: Actor, reason?: string): Promise<RunMeta>;
  /** SIGTERM (checkpoint), release GPUs, `paused`. A queued run just leaves the queue. */
  pause(run: string, by: Actor): Promise<RunMeta>;
  /** `paused | failed → queued → running`, same script version, resume.json intact. */
  resume(run: string, by: Actor): Promise<RunMeta>;
  stop(run: string, by: Actor, reason?: string): Promise<RunMeta>;
  /** Archive train.py as train_v<n>.py and write the new one; does not restart. */
  updateScript(run: string, source: string, by: Actor, reason: string): Promise<ScriptUpdate>;
  /** Fully stop the old process (if any), then launch the current script (auto-fix after approval). */
  restartWithCurrentScript(run: string, by: Actor): Promise<RunMeta>;
  /** Poll running runs, apply their ends, then start queued runs whose GPUs are free (FIFO). */
  refresh(run?: string): Promise<RunMeta[]>;
  /** At start-up: free stale GPU claims, re-attach alive runs, finalise dead ones, re-schedule the queue. */
  reconcile(): Promise<ReconcileReport>;
  status(run: string): Promise<RunStatusReport>;
  clusterInfo(): Promise<ClusterReport>;
  findRun(run: string): Promise<RunMeta>;
  listRuns(): Promise<RunMeta[]>;
}

export interface RunServiceOptions {
  config: Config;
  redis: Redis;
  prefix: string;
  executor: Executor;
  allocator: GpuAllocator;
  store: RunStore;
  audit: AuditLog;
  logger: Logger;
  clock?: () => Date;
  onEvent?: RunEventHandler;
  /** Runs just before each launch (see checkpoint-history). */
  beforeLaunch?: (meta: RunMeta) => Promise<void>;
}

/**
 * The run life cycle behind chat commands and workers. User actions live here; the pieces they share are
 * split by responsibility: state transitions + locking (run-transitions), launching and the GPU queue
 * (run-launcher), endings/refresh/reconcile (run-endings) and read-only reports (run-reports).
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
  });
  const launcher = createRunLauncher({
    config: options.config,
    store,
    executor,
    allocator,
    transitions,
    graceMs,
    ...definedOnly({ beforeLaunch: options.beforeLaunch }),
  });
  const endings = createRunEndings({
    store,
    executor,
    allocator,
    logger,
    transitions,
    launcher,
    graceMs,
  });
  const reports = createRunReports({ store, executor, allocator });
  const { emit, setStatus, withRun } = transitions;
  const { launchQueued, terminateRun } = launcher;
  const { finishRun } = endings;

  async function createRun(request: CreateRunRequest): Promise<RunMeta> {
    if (typeof request.name !== 'string' || request.name.trim() === '') {
      throw new RunError('invalid_run', 'a run needs a name');
    }
    if (
      typeof request.script !== 'string' ||
      (request.script.trim() === '' && request.launch?.command === undefined)
    ) {
      throw new RunError('invalid_run', 'the training script is empty');
    }
    if (!Number.isInteger(request.gpus) || request.gpus < 0) {
      throw new RunError('invalid_run', `gpus must be a whole number ≥ 0 (got ${String(request.gpus)})`);
    }
    const maxHours = checkMaxHours(
      request.maxHours ?? options.config.runs.defaultMaxHours,
      options.config.runs.maxHours,
    );
    // The cost estimate must be a number too (no Infinity from a huge GPU count on a cluster).
    estimateCostUsd(request.gpus, maxHours, options.config.runs.gpuHourUsd);
    const total = allocator.inventory.length;
    if (!executor.allocatesGpus && request.gpus > total) {
      const has =
        total === 0 ? 'this host has no GPUs (use gpus: 0 to run on CPU)' : `this host has ${total}`;
      throw new RunError('gpus_unavailable', `asked for ${plural(request.gpus, 'GPU')} but ${has}`);
    }
    // Name uniqueness is a read-then-write over all runs: serialise creations across processes.
    const meta = await lock.withLock(
      '__create__',
      () =>
        store.createRun(
          {
            name: request.name,
            script: request.script,
            threadId: request.threadId,
            requester: request.requester,
            gpus: request.gpus,
            maxHours,
            executor: executor.kind,
            ...definedOnly({
              modelId: request.modelId,
              config: request.config,
              args: request.args,
              launch: request.launch,
            }),
          },
          now(),
        ),
      { waitMs: 30_000 },
    );
    await audit.record({
      ts: meta.createdAt,
      runId: meta.id,
      from: null,
      to: 'pending_approval',
      by: request.requester,
      reason: 'created',
    });
    await emit('run-status', meta, `${meta.name} created; waiting for approval`);
    return meta;
  }

  async function adopt(request: AdoptRequest): Promise<RunMeta> {
    const meta = await lock.withLock(
      '__create__',
      async () => {
        const created = await store.createRun(
          {
            name: request.name,
            script: '',
            threadId: request.threadId,
            requester: request.requester,
            gpus: 0,
            maxHours: request.maxHours,
            executor: request.watch.source === 'slurm' ? 'slurm' : 'local',
            launch: { watch: request.watch },
          },
          now(),
        );
        // The monitor, status and crash reports read `output.log`: for a watched run it is the job's own log.
        await symlink(request.watch.logPath, path.join(store.runDir(created.id), RUN_FILES.output));
        const at = now().toISOString();
        const running: RunMeta = {
          ...created,
          status: 'running',
          launchCount: 1,
          startedAt: at,
          updatedAt: at,
          ...definedOnly({ jobId: request.jobId }),
        };
        await store.writeMeta(running);
        return running;
      },
      { waitMs: 30_000 },
    );
    await audit.record({
      ts: meta.createdAt,
      runId: meta.id,
      from: null,
      to: 'running',
      by: request.requester,
      reason: `watch: ${request.description}`,
    });
    await emit('run-started', meta, `Watching ${meta.name}: ${request.description}`);
    return meta;
  }

  async function approve(run: string, by: Actor): Promise<RunMeta> {
    return withRun(run, async (meta) => {
      if (meta.status !== 'pending_approval') {
        throw new RunError(
          'illegal_transition',
          `run ${meta.name} is not waiting for approval (it is ${meta.status})`,
        );
      }
      const queued = await setStatus(meta, 'queued', { by, reason: 'approved' });
      return launchQueued(queued, by);
    });
  }

  async function reject(run: string, by: Actor, reason?: string): Promise<RunMeta> {
    return withRun(run, async (meta) => {
      const rejected = await setStatus(meta, 'rejected', {
        by,
        reason: reason ?? 'rejected',
        ...definedOnly({ statusReason: reason }),
        patch: { endedAt: now().toISOString() },
      });
      const who = by === 'system' ? 'Shepherd' : by.name;
      await emit('run-ended', rejected, `${meta.name} rejected by ${who}${reason ? `: ${reason}` : ''}`);
      return rejected;
    });
  }

  async function requestApproval(run: string, by: Actor, reason?: string): Promise<RunMeta> {
    return withRun(run, async (meta) => {
      const pending = await setStatus(meta, 'pending_approval', {
        by,
        reason: reason ?? 'approval requested',
        ...definedOnly({ statusReason: reason }),
      });
      await emit('run-status', pending, `${meta.name} is waiting for approval`);
      return pending;
    });
  }

  async function pause(run: string, by: Actor): Promise<RunMeta> {
    return withRun(run, async (meta) => {
      assertTransition(meta.status, 'paused', meta.name);
      if (meta.status === 'running') {
        const state = await terminateRun(meta, 'pause');
        // It finished by itself just before the signal: record that instead of a pause.
        if (state.kind === 'exited') return finishRun(meta, state);
      } else {
        await allocator.release(meta.id);
      }
      const resume = await readResume(store, meta.id);
      const paused = await setStatus(meta, 'paused', {
        by,
        reason: 'paused',
        patch: { gpuIndices: [], ...(await lastStepOf(store, meta)) },
      });
      const at = resume?.step == null ? '' : ` at step ${resume.step}`;
      const checkpoint = resume?.checkpoint == null ? '' : ` (checkpoint ${resume.checkpoint})`;
      await emit('run-paused', paused, `${meta.name} paused${at}${checkpoint}; its GPUs are free`);
      return paused;
    });
  }

  async function resume(run: string, by: Actor): Promise<RunMeta> {
    return withRun(run, async (meta) => {
      const queued = await setStatus(meta, 'queued', { by, reason: 'resumed' });
      return launchQueued(queued, by);
    });
  }

  async function stop(run: string, by: Actor, reason?: string): Promise<RunMeta> {
    return withRun(run, async (meta) => {
      assertTransition(meta.status, 'stopped', meta.name);
      if (meta.status === 'running') {
        const state = await terminateRun(meta, 'stop');
        if (state.kind === 'exited') return finishRun(meta, state);
      } else {
        await allocator.release(meta.id);
      }
      const stopped = await setStatus(meta, 'stopped', {
        by,
        reason: reason ?? 'stopped',
        ...definedOnly({ statusReason: reason }),
        patch: { gpuIndices: [], endedAt: now().toISOString(), ...(await lastStepOf(store, meta)) },
      });
      const who = by === 'system' ? 'Shepherd' : by.name;
      await emit('run-ended', stopped, `${meta.name} stopped by ${who}`);
      return stopped;
    });
  }

  async function updateScript(run: string, source: string, by: Actor, reason: string): Promise<ScriptUpdate> {
    if (typeof source !== 'string' || source.trim() === '') {
      throw new RunError('invalid_run', 'the new script is empty');
    }
    return withRun(run, async (meta) => {
      if (['stopped', 'completed', 'rejected'].includes(meta.status)) {
        throw new RunError('run_finished', `run ${meta.name} is ${meta.status}; start a new run instead`);
      }
      refuseScriptEdit(meta);
      await syncWorkspaceScript(meta, store.runDir(meta.id));
      const update = await store.updateScript(meta.id, source, now());
      await writeWorkspaceScript(meta, source);
      await audit.record({
        ts: update.meta.updatedAt,
        runId: meta.id,
        from: meta.status,
        to: meta.status,
        by,
        reason: `script v${update.meta.scriptVersion}: ${reason}`,
      });
      return update;
    });
  }

  async function restartWithCurrentScript(run: string, by: Actor): Promise<RunMeta> {
    return withRun(run, async (meta) => {
      let current = meta;
      if (meta.status === 'running') {
        const state = await terminateRun(meta, 'stop');
        current = await setStatus(meta, 'queued', {
          by,
          reason: `restart with script v${meta.scriptVersion} (old process ${state.kind})`,
          patch: { gpuIndices: [], ...(await lastStepOf(store, meta)) },
        });
      } else if (meta.status !== 'queued') {
        current = await setStatus(meta, 'queued', {
          by,
          reason: `restart with script v${meta.scriptVersion}`,
        });
      }
      return launchQueued(current, by);
    });
  }

  return {
    adopt,
    createRun,
    approve,
    reject,
    requestApproval,
    pause,
    resume,
    stop,
    updateScript,
    restartWithCurrentScript,
    refresh: endings.refresh,
    reconcile: endings.reconcile,
    status: reports.status,
    clusterInfo: reports.clusterInfo,
    findRun: (run) => store.findRun(run),
    listRuns: () => store.listRuns(),
  };
}
