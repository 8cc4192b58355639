import { BACKEND_LABELS } from '../../config/backend-kinds.js';
import type { Config } from '../../config/config.js';
import { errorMessage } from '../../errors.js';
import { type BackendRouter, backendOf } from '../backend-router.js';
import type { Executor, ProcessState } from '../executor.js';
import type { GpuAllocator } from '../gpu-allocator.js';
import type { Actor } from '../records/audit-log.js';
import type { RunStore } from '../records/run-store.js';
import type { RunMeta } from '../records/run-types.js';
import { describeGpus, plural } from './run-events.js';
import type { RunTransitions } from './run-transitions.js';

interface LaunchOptions {
  /** The thread's line for this launch instead of "is running on …" (an automatic relaunch says why). */
  announce?: string;
}

export interface RunLauncher {
  /** Start a queued run: take its GPUs (unless the executor allocates), launch, mark running. Caller holds the lock. */
  launchQueued(meta: RunMeta, by: Actor, options?: LaunchOptions): Promise<RunMeta>;
  /** Start queued runs in FIFO order when their GPUs are free (a smaller later run may start first). */
  scheduleQueued(runs: RunMeta[]): Promise<RunMeta[]>;
  /** Terminate a running run and release its GPUs. Returns the final process state. */
  terminateRun(meta: RunMeta, reason: 'pause' | 'stop'): Promise<ProcessState>;
}

interface RunLauncherOptions {
  config: Config;
  store: RunStore;
  executor: BackendRouter;
  allocator: GpuAllocator;
  transitions: RunTransitions;
  graceMs: number;
  /**
   * Runs just before each launch (an approved fix points resume.json at a healthy checkpoint); what it
   * returns is added to the thread's "is running" line (where the launch resumes from).
   */
  beforeLaunch?: (meta: RunMeta) => Promise<string | undefined>;
  /** Called once a launch is running, not awaited (the reproducibility record; see launch-capture). */
  afterLaunch?: (meta: RunMeta) => void;
}

/** Launching runs and the GPU queue: allocate, launch, wait for GPUs, start queued runs FIFO, terminate. */
export function createRunLauncher(options: RunLauncherOptions): RunLauncher {
  const { store, executor, allocator, transitions, graceMs } = options;
  const { now, emit, setStatus, writeQuietly, tryWithRun } = transitions;

  async function launchQueued(meta: RunMeta, by: Actor, launchOptions: LaunchOptions = {}): Promise<RunMeta> {
    let indices: number[] = [];
    const backend = executor.executorFor(meta);
    if (!backend.allocatesGpus && meta.gpus > 0) {
      const allocation = await allocator.allocate(meta.id, meta.gpus);
      if (!allocation.ok) {
        const reason = `waiting for ${plural(meta.gpus, 'GPU')}, ${allocation.free} free`;
        if (meta.statusReason === reason) return meta;
        const waiting = await writeQuietly(meta, { statusReason: reason });
        const said = launchOptions.announce === undefined ? meta.name : `${launchOptions.announce}; it`;
        await emit('run-waiting', waiting, `${said} is queued: ${reason}`);
        return waiting;
      }
      indices = allocation.indices;
    }
    const launching: RunMeta = { ...meta, launchCount: meta.launchCount + 1, gpuIndices: indices };
    // Taken before the spawn: every line the new process writes is stamped later than this, which is how
    // the monitor tells the new launch's lines from the old one's (a slow spawn must not blur the two).
    const startedAt = now().toISOString();
    let handle: Awaited<ReturnType<Executor['launch']>>;
    let note: string | undefined;
    try {
      note = await options.beforeLaunch?.(launching);
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
      patch: { ...handle, startedAt },
      clear: [
        'exitCode',
        'exitSignal',
        'endedAt',
        'pid',
        'pgid',
        'processStartTime',
        'jobId',
        'deadlineAt',
        'segment',
        'nextSegment',
      ].filter((key) => !(key in handle)) as Array<keyof RunMeta>,
    });
    options.afterLaunch?.(running);
    const where = backend.allocatesGpus
      ? `on ${meta.placement ?? BACKEND_LABELS[backendOf(meta)].title}${meta.gpus > 0 ? ` with ${plural(meta.gpus, 'GPU')}` : ''}`
      : `on ${describeGpus(indices)}`;
    const segment =
      handle.segment === undefined ? '' : `, segment ${handle.segment.index} of ${handle.segment.of}`;
    const started =
      launchOptions.announce ?? `${meta.name} is running ${where} (script v${meta.scriptVersion}${segment})`;
    await emit('run-started', running, note === undefined ? started : `${started}; ${note}`);
    return running;
  }

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

  async function terminateRun(meta: RunMeta, reason: 'pause' | 'stop'): Promise<ProcessState> {
    // Written first, so a monitor tick that sees the process end during the grace period knows it was asked for.
    // The caller's next status write (from its own copy of the meta) drops the mark again.
    await writeQuietly(meta, { stopRequested: reason });
    let state: ProcessState;
    try {
      state = await executor.terminate(meta, { graceMs, reason });
    } catch (error) {
      // The launch goes on: its crash must be reported again.
      await writeQuietly(meta, {});
      throw error;
    }
    await allocator.release(meta.id);
    return state;
  }

  return { launchQueued, scheduleQueued, terminateRun };
}
