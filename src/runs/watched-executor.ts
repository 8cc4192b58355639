import { open } from 'node:fs/promises';
import { RunError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { ClusterInfo, Executor, LaunchRequest, LaunchResult, ProcessState } from './executor.js';
import { hasProcFs, readProcessStat } from './process-table.js';
import type { RunMeta } from './records/run-types.js';

/**
 * Runs Shepherd watches but did not launch. A hand-submitted Slurm job is polled by a Slurm executor in
 * the same batched `squeue` as launched runs; a local log + pid is alive while the pid (with the start
 * time seen when the watch began) lives, and when it is gone the log's last lines say finished or crashed.
 * Everything else goes to the deployment's executor unchanged.
 */

const TAIL_BYTES = 16 * 1024;
const CRASH_TEXT =
  /Traceback \(most recent call last\)|^\s*\w*(?:Error|Exception)\b[^\n]*$|Segmentation fault|core dumped|^Killed$|CUDA out of memory|Aborted/m;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The last lines of a log (up to 16 KiB), or '' when it cannot be read. */
async function readLogTail(file: string, bytes = TAIL_BYTES): Promise<string> {
  try {
    const handle = await open(file, 'r');
    try {
      const { size } = await handle.stat();
      const start = Math.max(0, size - bytes);
      const buffer = Buffer.alloc(size - start);
      await handle.read(buffer, 0, buffer.length, start);
      return buffer.toString('utf8');
    } finally {
      await handle.close();
    }
  } catch {
    return '';
  }
}

/** How a watched process ended, judged from its log: a traceback or error in the last lines is a crash. */
export function endingFromLog(tail: string): ProcessState {
  const last = tail.trimEnd().split('\n').slice(-30).join('\n');
  return CRASH_TEXT.test(last) ? { kind: 'exited', exitCode: 1 } : { kind: 'exited', exitCode: 0 };
}

/** Is the watched pid still the process we started watching? */
function watchedPidAlive(pid: number, startTime: string | undefined): boolean {
  if (!hasProcFs()) {
    try {
      process.kill(pid, 0);
      return true;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'EPERM';
    }
  }
  const stat = readProcessStat(pid);
  if (stat === undefined || stat.state === 'Z' || stat.state === 'X') return false;
  return startTime === undefined || stat.startTime === startTime;
}

export function createWatchAwareExecutor(options: {
  inner: Executor;
  /** Polls and cancels hand-submitted Slurm jobs when the deployment's executor is not Slurm. */
  slurm?: () => Executor;
  logger: Logger;
}): Executor {
  const { inner, logger } = options;
  let slurmExecutor: Executor | undefined;
  const slurmFor = (): Executor => {
    if (inner.kind === 'slurm') return inner;
    slurmExecutor ??= options.slurm?.();
    if (slurmExecutor === undefined) throw new RunError('slurm_unavailable', 'Slurm is not configured here');
    return slurmExecutor;
  };

  async function logState(meta: RunMeta): Promise<ProcessState> {
    const watch = meta.watch;
    if (watch?.source !== 'log') return { kind: 'unknown' };
    if (watch.pid === undefined) return { kind: 'alive' };
    if (watchedPidAlive(watch.pid, watch.pidStartTime)) return { kind: 'alive' };
    return endingFromLog(await readLogTail(watch.logPath));
  }

  async function poll(runs: RunMeta[]): Promise<Map<string, ProcessState>> {
    const states = new Map<string, ProcessState>();
    const logRuns = runs.filter((meta) => meta.watch?.source === 'log');
    const slurmRuns = runs.filter((meta) => meta.watch?.source === 'slurm');
    const own = runs.filter((meta) => meta.watch === undefined);
    // One batched poll: launched runs and watched Slurm jobs share it when the executor is Slurm.
    const batched = inner.kind === 'slurm' ? [...own, ...slurmRuns] : own;
    if (batched.length > 0) for (const [id, state] of await inner.poll(batched)) states.set(id, state);
    if (inner.kind !== 'slurm' && slurmRuns.length > 0) {
      try {
        for (const [id, state] of await slurmFor().poll(slurmRuns)) states.set(id, state);
      } catch (error) {
        for (const meta of slurmRuns) states.set(meta.id, { kind: 'unknown', reason: String(error) });
      }
    }
    for (const meta of logRuns) states.set(meta.id, await logState(meta));
    return states;
  }

  async function terminate(
    meta: RunMeta,
    terminateOptions: { graceMs: number; reason: 'pause' | 'stop' },
  ): Promise<ProcessState> {
    if (meta.watch?.source === 'slurm') return slurmFor().terminate(meta, terminateOptions);
    if (meta.watch?.source !== 'log') return inner.terminate(meta, terminateOptions);
    const { pid, pidStartTime } = meta.watch;
    if (pid === undefined || !watchedPidAlive(pid, pidStartTime)) return logState(meta);
    logger.info({ runId: meta.id, pid }, 'sending SIGTERM to a watched process');
    const signal = (name: NodeJS.Signals) => {
      try {
        process.kill(pid, name);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
      }
    };
    signal('SIGTERM');
    const deadline = Date.now() + terminateOptions.graceMs;
    while (Date.now() < deadline && watchedPidAlive(pid, pidStartTime)) await sleep(100);
    if (!watchedPidAlive(pid, pidStartTime)) return { kind: 'signaled', signal: 'SIGTERM' };
    logger.warn(
      { runId: meta.id, pid },
      'watched process ignored SIGTERM for the grace period; sending SIGKILL',
    );
    signal('SIGKILL');
    return { kind: 'signaled', signal: 'SIGKILL', exitCode: 137 };
  }

  async function launch(request: LaunchRequest): Promise<LaunchResult> {
    if (request.meta.watch !== undefined) {
      throw new RunError('watched_run', `${request.meta.name} is watched: Shepherd does not launch it`);
    }
    return inner.launch(request);
  }

  return {
    kind: inner.kind,
    allocatesGpus: inner.allocatesGpus,
    launch,
    poll,
    terminate,
    clusterInfo: (): Promise<ClusterInfo> => inner.clusterInfo(),
    ...(inner.placement === undefined ? {} : { placement: inner.placement.bind(inner) }),
    // Only runs Shepherd launched: a watched process may not have the helper's SIGUSR2 handler.
    ...(inner.dumpStacks === undefined
      ? {}
      : {
          dumpStacks: async (meta: RunMeta) =>
            meta.watch === undefined ? inner.dumpStacks?.(meta) : undefined,
        }),
    ...(inner.close === undefined ? {} : { close: inner.close.bind(inner) }),
  };
}
