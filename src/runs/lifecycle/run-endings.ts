import { RunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { BackendRouter } from '../backend-router.js';
import type { ProcessState } from '../executor.js';
import type { GpuAllocator } from '../gpu-allocator.js';
import type { RunStore } from '../records/run-store.js';
import { isLaunched, type RunMeta } from '../records/run-types.js';
import { completionPatch, evaluationStarted } from '../run-evaluation.js';
import { lastStepOf } from '../run-reports.js';
import { DEADLINE_SLACK_MS, formatHours, timeLimitMessage } from '../time-limit.js';
import type { AutoRelaunch } from './auto-relaunch.js';
import type { RunLauncher } from './run-launcher.js';
import type { RunTransitions } from './run-transitions.js';
import { createWallTimeChain } from './wall-time-chain.js';

export interface ReconcileReport {
  reattached: RunMeta[];
  finalized: RunMeta[];
  started: RunMeta[];
  releasedStale: string[];
}

type Ending = { status: 'completed' | 'failed'; exitCode?: number; exitSignal?: string; reason: string };

/** How a process that ended on its own maps onto the status machine. */
function endingOf(state: ProcessState): Ending {
  switch (state.kind) {
    case 'exited': {
      if (state.exitCode === 0) return { status: 'completed', exitCode: 0, reason: 'exited with code 0' };
      const crash = state.crashClass === undefined ? '' : ` (${state.crashClass})`;
      const said = state.reason === undefined ? '' : `: ${state.reason}`;
      return { status: 'failed', exitCode: state.exitCode, reason: `exit ${state.exitCode}${crash}${said}` };
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

export interface RunEndings {
  /**
   * Record how a running run ended; frees its GPUs. Caller holds the lock. `note` is added to the
   * reason (the automatic relaunches an infrastructure failure used up).
   */
  finishRun(meta: RunMeta, state: ProcessState, note?: string): Promise<RunMeta>;
  /** Poll running runs, apply their ends, then start queued runs whose GPUs are free (FIFO). */
  refresh(run?: string): Promise<RunMeta[]>;
  /** At start-up: free stale GPU claims, re-attach alive runs, finalise dead ones, re-schedule the queue. */
  reconcile(): Promise<ReconcileReport>;
}

interface RunEndingsOptions {
  store: RunStore;
  executor: BackendRouter;
  allocator: GpuAllocator;
  logger: Logger;
  transitions: RunTransitions;
  launcher: RunLauncher;
  graceMs: number;
  /** Relaunches after infrastructure failures (absent: every ending is recorded). */
  relaunch?: AutoRelaunch;
}

/** Noticing runs that ended on their own (polling, start-up reconciliation) and recording the ending. */
export function createRunEndings(options: RunEndingsOptions): RunEndings {
  const { store, executor, allocator, logger, transitions, launcher, graceMs } = options;
  const { now, emit, setStatus, tryWithRun } = transitions;
  const { scheduleQueued } = launcher;
  const chain = createWallTimeChain({ store, allocator, transitions, launcher });

  /** The run reached its max hours: it is paused (its checkpoint kept) and may be resumed. */
  async function pauseAtLimit(meta: RunMeta): Promise<RunMeta> {
    await allocator.release(meta.id);
    const message = timeLimitMessage(meta.name, meta.maxHours);
    const paused = await setStatus(meta, 'paused', {
      by: 'system',
      reason: `time limit of ${formatHours(meta.maxHours)} reached`,
      statusReason: `stopped at its ${formatHours(meta.maxHours)} limit`,
      patch: { gpuIndices: [], ...(await lastStepOf(store, meta)) },
    });
    await emit('run-time-limit', paused, message);
    return paused;
  }

  async function finishRun(meta: RunMeta, state: ProcessState, note?: string): Promise<RunMeta> {
    // A watched job's own scheduler limit is a plain failure: Shepherd cannot resume what it did not launch.
    const limited = (state.kind === 'signaled' || state.kind === 'exited') && state.crashClass === 'timeout';
    if (limited && meta.watch === undefined) {
      // A wall-time chain goes on with its next segment; otherwise (or after the last one) it pauses.
      return (await chain.continueChain(meta)) ?? pauseAtLimit(meta);
    }
    await allocator.release(meta.id);
    const ending = endingOf(state);
    if (note !== undefined) ending.reason = `${ending.reason}; ${note}`;
    const patch: Partial<RunMeta> = {
      gpuIndices: [],
      endedAt: now().toISOString(),
      ...(await lastStepOf(store, meta)),
    };
    const clear: Array<keyof RunMeta> = ['exitCode', 'exitSignal'];
    if (ending.exitCode !== undefined) patch.exitCode = ending.exitCode;
    if (ending.exitSignal !== undefined) patch.exitSignal = ending.exitSignal;
    // Training exited 0: what its evaluation said and which model it saved; an eval failure keeps `completed`.
    const completion =
      ending.status === 'completed' ? await completionPatch(store.runDir(meta.id), meta) : undefined;
    Object.assign(patch, completion?.patch);
    const ended = await setStatus(meta, ending.status, {
      by: 'system',
      reason: ending.reason,
      ...(ending.status === 'failed' ? { statusReason: ending.reason } : {}),
      patch,
      clear: clear.filter((key) => !(key in patch)),
    });
    const message =
      ending.status === 'completed'
        ? `${meta.name} completed${ended.lastStep === undefined ? '' : ` at step ${ended.lastStep}`}${completion?.note === undefined ? '' : `; ${completion.note}`}`
        : `${meta.name} failed (${ending.reason})`;
    await emit('run-ended', ended, message);
    return ended;
  }

  /**
   * A launch that ended on its own (or was requeued by its cluster): relaunched when the infrastructure
   * ended it and retries remain, else recorded. The one place that decides; caller holds the lock.
   */
  async function endOnItsOwn(meta: RunMeta, state: ProcessState): Promise<RunMeta> {
    const decision = (await options.relaunch?.consider(meta, state)) ?? { kind: 'none' };
    if (decision.kind === 'relaunched') return decision.meta;
    if (decision.kind === 'out_of_time') {
      if (state.kind === 'pending') await launcher.terminateRun(meta, 'stop');
      return pauseAtLimit(meta);
    }
    if (state.kind === 'pending') {
      // Requeued, but not Shepherd's to relaunch (a watched job): its cluster runs it again.
      if (decision.kind === 'none') return meta;
      // A requeued job with no retry left: Shepherd takes it out rather than let it rerun unannounced.
      await launcher.terminateRun(meta, 'stop');
    }
    return finishRun(meta, state, decision.kind === 'exhausted' ? decision.note : undefined);
  }

  /** Poll running runs; apply ends and pending reasons. */
  async function refreshRunning(runs: RunMeta[]): Promise<{ alive: RunMeta[]; ended: RunMeta[] }> {
    const running = runs.filter((meta) => isLaunched(meta.status));
    const alive: RunMeta[] = [];
    const ended: RunMeta[] = [];
    if (running.length === 0) return { alive, ended };
    const states = await executor.poll(running);
    for (const meta of running) {
      const state = states.get(meta.id);
      if (state === undefined) continue;
      if (state.kind === 'alive' && pastDeadline(meta)) {
        // The launcher enforces the limit itself; this catches a launcher that could not.
        const limited = await tryWithRun(meta.id, async (fresh) => {
          if (!isLaunched(fresh.status) || fresh.launchCount !== meta.launchCount) return undefined;
          logger.warn(
            { runId: meta.id, deadlineAt: meta.deadlineAt },
            'run is past its time limit; ending it',
          );
          await launcher.terminateRun(fresh, 'stop');
          return pauseAtLimit(fresh);
        });
        if (limited !== undefined) ended.push(limited);
        continue;
      }
      const requeued =
        state.kind === 'pending' &&
        state.requeued === true &&
        options.relaunch !== undefined &&
        meta.watch === undefined;
      if (state.kind === 'alive' || (state.kind === 'pending' && !requeued)) {
        alive.push(meta);
        if (await evaluationStarted(store.runDir(meta.id), meta)) {
          await startEvaluating(meta);
          continue;
        }
        const reason =
          state.kind === 'pending' ? (state.reason ?? 'waiting in the executor queue') : undefined;
        if (meta.statusReason === reason) continue;
        await tryWithRun(meta.id, async (fresh) => {
          if (!isLaunched(fresh.status) || fresh.launchCount !== meta.launchCount) return;
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
        if (!isLaunched(fresh.status) || fresh.launchCount !== meta.launchCount) return undefined;
        return endOnItsOwn(fresh, state);
      });
      // A relaunched run is running again: not an ending.
      if (result !== undefined && !isLaunched(result.status) && result.status !== 'queued')
        ended.push(result);
      else if (result !== undefined) alive.push(result);
    }
    return { alive, ended };
  }

  /** Training exited 0 and the launcher started the `--eval` command: the run is `evaluating`. */
  async function startEvaluating(meta: RunMeta): Promise<void> {
    await tryWithRun(meta.id, async (fresh) => {
      if (fresh.status !== 'running' || fresh.launchCount !== meta.launchCount) return;
      const evaluating = await setStatus(fresh, 'evaluating', {
        by: 'system',
        reason: 'training exited 0; evaluation started',
        patch: await lastStepOf(store, fresh),
      });
      await emit('run-status', evaluating, `${meta.name}: training finished; evaluating`);
    });
  }

  function pastDeadline(meta: RunMeta): boolean {
    if (meta.deadlineAt === undefined) return false;
    return now().getTime() > Date.parse(meta.deadlineAt) + graceMs + DEADLINE_SLACK_MS;
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
        if (!isLaunched(meta.status)) {
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

  return { finishRun, refresh, reconcile };
}
