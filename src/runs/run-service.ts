import { readFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import { errorMessage, RunError } from '../errors.js';
import type { Logger } from '../logger.js';
import { type Actor, type AuditLog, assertTransition } from './audit-log.js';
import type { ClusterInfo, Executor, ProcessState } from './executor.js';
import { type MetricRecord, readLastMetrics, tailLines } from './file-tail.js';
import type { GpuAllocator } from './gpu-allocator.js';
import {
  describeGpus,
  plural,
  type RunEvent,
  type RunEventHandler,
  type RunEventType,
} from './run-events.js';
import { createRunLock } from './run-lock.js';
import { RUN_FILES, type RunStore, type ScriptUpdate } from './run-store.js';
import type { RunMeta, RunStatus } from './run-types.js';

export type { Actor } from './audit-log.js';

export interface CreateRunRequest {
  name: string;
  /** Python source of train.py. */
  script: string;
  gpus: number;
  maxHours?: number;
  modelId?: string;
  config?: Record<string, unknown>;
  threadId: string;
  requester: { id: string; name: string };
}

export interface ResumeInfo {
  step: number | null;
  checkpoint: string | null;
  [key: string]: unknown;
}

export interface RunStatusReport {
  meta: RunMeta;
  /** Newest last; at most 5. */
  lastMetrics: MetricRecord[];
  /** Last ~20 lines of output.log. */
  logTail: string[];
  resume: ResumeInfo | undefined;
  /** Executor's view, for runs that have a process or job. */
  process?: ProcessState;
}

export interface ClusterReport extends ClusterInfo {
  gpusByRun: Array<{ runId: string; name: string; gpus: number; indices: number[] }>;
  hostLoad: number[];
}

export interface ReconcileReport {
  reattached: RunMeta[];
  finalized: RunMeta[];
  started: RunMeta[];
  releasedStale: string[];
}

export interface RunService {
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
}

type Ending = { status: 'completed' | 'failed'; exitCode?: number; exitSignal?: string; reason: string };

/** How a process that ended on its own maps onto the status machine. */
export function endingOf(state: ProcessState): Ending {
  switch (state.kind) {
    case 'exited': {
      if (state.exitCode === 0) return { status: 'completed', exitCode: 0, reason: 'exited with code 0' };
      const crash = state.crashClass === undefined ? '' : ` (${state.crashClass})`;
      return { status: 'failed', exitCode: state.exitCode, reason: `exit ${state.exitCode}${crash}` };
    }
    case 'signaled': {
      const ending: Ending = {
        status: 'failed',
        exitSignal: state.signal,
        reason:
          state.crashClass === 'timeout'
            ? 'time limit reached (timeout)'
            : state.crashClass !== undefined
              ? `killed by ${state.signal} (${state.crashClass})`
              : state.signal === 'SIGTERM'
                ? 'terminated by SIGTERM from outside Shepherd'
                : `killed by ${state.signal}`,
      };
      if (state.exitCode !== undefined) ending.exitCode = state.exitCode;
      return ending;
    }
    default:
      return {
        status: 'failed',
        reason: ('reason' in state ? state.reason : undefined) ?? 'process ended in an unknown way',
      };
  }
}

export function createRunService(options: RunServiceOptions): RunService {
  const { store, audit, executor, allocator, logger } = options;
  const now = options.clock ?? (() => new Date());
  const graceMs = options.config.runs.stopGraceS * 1000;
  const lock = createRunLock({ redis: options.redis, prefix: options.prefix });
  // A user action may wait for a pause that is itself waiting out the grace period.
  const userWaitMs = graceMs + 30_000;

  async function emit(type: RunEventType, meta: RunMeta, message: string): Promise<void> {
    if (options.onEvent === undefined) return;
    const event: RunEvent = { type, meta, message };
    try {
      await options.onEvent(event);
    } catch (error) {
      logger.warn({ err: error, runId: meta.id, type }, 'run event handler failed');
    }
  }

  async function setStatus(
    meta: RunMeta,
    to: RunStatus,
    change: {
      by: Actor;
      reason?: string;
      statusReason?: string;
      patch?: Partial<RunMeta>;
      clear?: Array<keyof RunMeta>;
    },
  ): Promise<RunMeta> {
    assertTransition(meta.status, to, meta.name);
    const at = now().toISOString();
    const next: RunMeta = { ...meta, ...change.patch, status: to, updatedAt: at };
    delete next.statusReason;
    for (const key of change.clear ?? []) delete next[key];
    if (change.statusReason !== undefined) next.statusReason = change.statusReason;
    if (to === 'queued') next.queuedAt = at;
    await store.writeMeta(next);
    await audit.record({
      ts: at,
      runId: meta.id,
      from: meta.status,
      to,
      by: change.by,
      ...(change.reason === undefined ? {} : { reason: change.reason }),
    });
    return next;
  }

  async function writeQuietly(meta: RunMeta, patch: Partial<RunMeta>): Promise<RunMeta> {
    const next: RunMeta = { ...meta, ...patch, updatedAt: now().toISOString() };
    await store.writeMeta(next);
    return next;
  }

  /** Resolve a reference, take the run lock, re-read the meta under it (compare-and-set), then work. */
  async function withRun<T>(
    reference: string,
    work: (meta: RunMeta) => Promise<T>,
    waitMs = userWaitMs,
  ): Promise<T> {
    const found = await store.findRun(reference);
    return lock.withLock(found.id, async () => work(await store.readMeta(found.id)), { waitMs });
  }

  /** Like `withRun` but skips a run another process is changing right now. */
  async function tryWithRun<T>(runId: string, work: (meta: RunMeta) => Promise<T>): Promise<T | undefined> {
    try {
      return await lock.withLock(runId, async () => work(await store.readMeta(runId)), { waitMs: 0 });
    } catch (error) {
      if (error instanceof RunError && error.code === 'run_busy') return undefined;
      throw error;
    }
  }

  async function readResume(runId: string): Promise<ResumeInfo | undefined> {
    try {
      const raw: unknown = JSON.parse(
        await readFile(path.join(store.runDir(runId), RUN_FILES.resume), 'utf8'),
      );
      if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
      const record = raw as Record<string, unknown>;
      return {
        ...record,
        step: typeof record.step === 'number' ? record.step : null,
        checkpoint: typeof record.checkpoint === 'string' ? record.checkpoint : null,
      };
    } catch {
      return undefined;
    }
  }

  async function lastStepOf(meta: RunMeta): Promise<Partial<RunMeta>> {
    const [last] = (await readLastMetrics(path.join(store.runDir(meta.id), RUN_FILES.metrics), 1)).slice(-1);
    return last?.step === undefined ? {} : { lastStep: last.step };
  }

  /** Start a queued run: take its GPUs (unless the executor allocates), launch, mark running. */
  async function launchQueued(meta: RunMeta, by: Actor): Promise<RunMeta> {
    let indices: number[] = [];
    if (!executor.allocatesGpus && meta.gpus > 0) {
      const allocation = await allocator.allocate(meta.id, meta.gpus);
      if (!allocation.ok) {
        const reason = `waiting for ${plural(meta.gpus, 'GPU')}, ${allocation.free} free`;
        if (meta.statusReason === reason) return meta;
        const waiting = await writeQuietly(meta, { statusReason: reason });
        await emit('run-waiting', waiting, `${meta.name} is queued: ${reason}`);
        return waiting;
      }
      indices = allocation.indices;
    }
    const launching: RunMeta = { ...meta, launchCount: meta.launchCount + 1, gpuIndices: indices };
    let handle: Awaited<ReturnType<Executor['launch']>>;
    try {
      handle = await executor.launch({ meta: launching, runDir: store.runDir(meta.id), gpuIndices: indices });
    } catch (error) {
      await allocator.release(meta.id);
      const reason = `launch failed: ${errorMessage(error)}`.slice(0, 500);
      const failed = await setStatus(launching, 'failed', {
        by: 'system',
        reason,
        statusReason: reason,
        patch: { gpuIndices: [], endedAt: now().toISOString() },
      });
      await emit('run-ended', failed, `${meta.name} could not start: ${reason}`);
      return failed;
    }
    const running = await setStatus(launching, 'running', {
      by,
      reason: `launch ${launching.launchCount}`,
      patch: { ...handle, startedAt: now().toISOString() },
      clear: ['exitCode', 'exitSignal', 'endedAt', 'pid', 'pgid', 'processStartTime', 'jobId'].filter(
        (key) => !(key in handle),
      ) as Array<keyof RunMeta>,
    });
    const where = executor.allocatesGpus
      ? `on ${options.config.runs.executor}${meta.gpus > 0 ? ` with ${plural(meta.gpus, 'GPU')}` : ''}`
      : `on ${describeGpus(indices)}`;
    await emit('run-started', running, `${meta.name} is running ${where} (script v${meta.scriptVersion})`);
    return running;
  }

  /** Record how a running run ended on its own; frees its GPUs. Caller holds the lock. */
  async function finishRun(meta: RunMeta, state: ProcessState): Promise<RunMeta> {
    await allocator.release(meta.id);
    const ending = endingOf(state);
    const patch: Partial<RunMeta> = {
      gpuIndices: [],
      endedAt: now().toISOString(),
      ...(await lastStepOf(meta)),
    };
    const clear: Array<keyof RunMeta> = ['exitCode', 'exitSignal'];
    if (ending.exitCode !== undefined) patch.exitCode = ending.exitCode;
    if (ending.exitSignal !== undefined) patch.exitSignal = ending.exitSignal;
    const ended = await setStatus(meta, ending.status, {
      by: 'system',
      reason: ending.reason,
      ...(ending.status === 'failed' ? { statusReason: ending.reason } : {}),
      patch,
      clear: clear.filter((key) => !(key in patch)),
    });
    const message =
      ending.status === 'completed'
        ? `${meta.name} completed${ended.lastStep === undefined ? '' : ` at step ${ended.lastStep}`}`
        : `${meta.name} failed (${ending.reason})`;
    await emit('run-ended', ended, message);
    return ended;
  }

  /** Terminate a running run and release its GPUs. Returns the final process state. */
  async function terminateRun(meta: RunMeta, reason: 'pause' | 'stop'): Promise<ProcessState> {
    const state = await executor.terminate(meta, { graceMs, reason });
    await allocator.release(meta.id);
    return state;
  }

  async function createRun(request: CreateRunRequest): Promise<RunMeta> {
    if (typeof request.name !== 'string' || request.name.trim() === '') {
      throw new RunError('invalid_run', 'a run needs a name');
    }
    if (typeof request.script !== 'string' || request.script.trim() === '') {
      throw new RunError('invalid_run', 'the training script is empty');
    }
    if (!Number.isInteger(request.gpus) || request.gpus < 0) {
      throw new RunError('invalid_run', `gpus must be a whole number ≥ 0 (got ${String(request.gpus)})`);
    }
    const maxHours = request.maxHours ?? options.config.runs.defaultMaxHours;
    if (!(Number.isFinite(maxHours) && maxHours > 0)) {
      throw new RunError('invalid_run', `max_hours must be a positive number (got ${String(maxHours)})`);
    }
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
            ...(request.modelId === undefined ? {} : { modelId: request.modelId }),
            ...(request.config === undefined ? {} : { config: request.config }),
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
        ...(reason === undefined ? {} : { statusReason: reason }),
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
        ...(reason === undefined ? {} : { statusReason: reason }),
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
      const resume = await readResume(meta.id);
      const paused = await setStatus(meta, 'paused', {
        by,
        reason: 'paused',
        patch: { gpuIndices: [], ...(await lastStepOf(meta)) },
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
        ...(reason === undefined ? {} : { statusReason: reason }),
        patch: { gpuIndices: [], endedAt: now().toISOString(), ...(await lastStepOf(meta)) },
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
      const update = await store.updateScript(meta.id, source, now());
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
          patch: { gpuIndices: [], ...(await lastStepOf(meta)) },
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

  /** Poll running runs; apply ends and pending reasons. */
  async function refreshRunning(runs: RunMeta[]): Promise<{ alive: RunMeta[]; ended: RunMeta[] }> {
    const running = runs.filter((meta) => meta.status === 'running');
    const alive: RunMeta[] = [];
    const ended: RunMeta[] = [];
    if (running.length === 0) return { alive, ended };
    const states = await executor.poll(running);
    for (const meta of running) {
      const state = states.get(meta.id);
      if (state === undefined) continue;
      if (state.kind === 'alive' || state.kind === 'pending') {
        alive.push(meta);
        const reason =
          state.kind === 'pending' ? (state.reason ?? 'waiting in the executor queue') : undefined;
        if (meta.statusReason === reason) continue;
        await tryWithRun(meta.id, async (fresh) => {
          if (fresh.status !== 'running' || fresh.launchCount !== meta.launchCount) return;
          const next = { ...fresh, updatedAt: now().toISOString() };
          delete next.statusReason;
          if (reason !== undefined) next.statusReason = reason;
          await store.writeMeta(next);
          if (reason !== undefined) await emit('run-waiting', next, `${meta.name}: ${reason}`);
        });
        continue;
      }
      const result = await tryWithRun(meta.id, async (fresh) => {
        // Someone paused/stopped/relaunched it meanwhile: their outcome stands.
        if (fresh.status !== 'running' || fresh.launchCount !== meta.launchCount) return undefined;
        return finishRun(fresh, state);
      });
      if (result !== undefined) ended.push(result);
    }
    return { alive, ended };
  }

  /** Start queued runs in FIFO order when their GPUs are free (a smaller later run may start first). */
  async function scheduleQueued(runs: RunMeta[]): Promise<RunMeta[]> {
    const queued = runs
      .filter((meta) => meta.status === 'queued')
      .sort((a, b) => (a.queuedAt ?? a.updatedAt).localeCompare(b.queuedAt ?? b.updatedAt));
    const started: RunMeta[] = [];
    for (const meta of queued) {
      const result = await tryWithRun(meta.id, async (fresh) =>
        fresh.status === 'queued' ? launchQueued(fresh, 'system') : undefined,
      );
      if (result?.status === 'running') started.push(result);
    }
    return started;
  }

  async function refresh(run?: string): Promise<RunMeta[]> {
    const runs = run === undefined ? await store.listRuns() : [await store.findRun(run)];
    const { ended } = await refreshRunning(runs);
    const queueSource = run === undefined || ended.length > 0 ? await store.listRuns() : runs;
    const started = await scheduleQueued(queueSource);
    return [...ended, ...started];
  }

  async function reconcile(): Promise<ReconcileReport> {
    const releasedStale: string[] = [];
    const owners = new Set((await allocator.owners()).values());
    for (const runId of owners) {
      await tryWithRun(runId, async (meta) => {
        if (meta.status !== 'running') {
          await allocator.release(runId);
          releasedStale.push(runId);
        }
      }).catch(async (error: unknown) => {
        if (error instanceof RunError && error.code === 'run_not_found') {
          await allocator.release(runId);
          releasedStale.push(runId);
          return;
        }
        throw error;
      });
    }
    const runs = await store.listRuns();
    const { alive, ended } = await refreshRunning(runs);
    const started = await scheduleQueued(await store.listRuns());
    logger.info(
      { reattached: alive.length, finalized: ended.length, started: started.length, releasedStale },
      'runs reconciled',
    );
    return { reattached: alive, finalized: ended, started, releasedStale };
  }

  async function status(run: string): Promise<RunStatusReport> {
    const meta = await store.findRun(run);
    const directory = store.runDir(meta.id);
    const [lastMetrics, logTail, resumeInfo] = await Promise.all([
      readLastMetrics(path.join(directory, RUN_FILES.metrics), 5),
      tailLines(path.join(directory, RUN_FILES.output), 20),
      readResume(meta.id),
    ]);
    const report: RunStatusReport = { meta, lastMetrics, logTail, resume: resumeInfo };
    if (meta.status === 'running') {
      const state = (await executor.poll([meta])).get(meta.id);
      if (state !== undefined) report.process = state;
    }
    return report;
  }

  async function clusterInfo(): Promise<ClusterReport> {
    const info = await executor.clusterInfo();
    const runs = await store.listRuns();
    const byId = new Map(runs.map((meta) => [meta.id, meta]));
    const gpusByRun: ClusterReport['gpusByRun'] = [];
    if (executor.allocatesGpus) {
      for (const meta of runs.filter((candidate) => candidate.status === 'running' && candidate.gpus > 0)) {
        gpusByRun.push({ runId: meta.id, name: meta.name, gpus: meta.gpus, indices: meta.gpuIndices });
      }
      return { ...info, gpusByRun, hostLoad: info.hostLoad ?? loadavg() };
    }
    const owners = await allocator.owners();
    const grouped = new Map<string, number[]>();
    for (const [index, runId] of owners) grouped.set(runId, [...(grouped.get(runId) ?? []), index]);
    for (const [runId, indices] of grouped) {
      const meta = byId.get(runId);
      indices.sort((a, b) => a - b);
      gpusByRun.push({ runId, name: meta?.name ?? runId, gpus: indices.length, indices });
    }
    const gpusTotal = allocator.inventory.length;
    const gpusFree = allocator.inventory.filter((index) => !owners.has(index)).length;
    return { ...info, gpusTotal, gpusFree, gpusByRun, hostLoad: loadavg() };
  }

  return {
    createRun,
    approve,
    reject,
    requestApproval,
    pause,
    resume,
    stop,
    updateScript,
    restartWithCurrentScript,
    refresh,
    reconcile,
    status,
    clusterInfo,
    findRun: (run) => store.findRun(run),
    listRuns: () => store.listRuns(),
  };
}
