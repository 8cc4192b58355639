import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { Logger } from '../../logger.js';
import type { ProcessState } from '../executor.js';
import { RUN_FILES } from '../records/run-files.js';
import type { RunMeta } from '../records/run-types.js';
import { parsePartitionMaxMinutes, planSegment, type SegmentPlan } from './slurm-chain.js';
import type { RunCommand } from './slurm-command.js';

/**
 * Wall time on Slurm: each job's `--time` (the run's hours, or one segment of a chain when they exceed the
 * partition's MaxTime), the warning signal before the limit (`--signal=B:USR1@<grace>`), and reading a
 * job that ended on that warning as a time-limit end rather than a finish.
 */

/** The signal Slurm sends before the limit; the helper runs its stop callbacks on it (SHEPHERD_STOP_SIGNAL). */
const WALL_TIME_SIGNAL = 'USR1';

interface WallTimePlan {
  /** `--time` of this job. */
  hours: number;
  /** The chain segment this job is; absent when the run fits in one job. */
  segment?: SegmentPlan;
  /** Extra sbatch options (the warning signal). */
  sbatchArgs: string[];
  /** For the batch script: the signal to ignore through `exec` (the helper takes it). */
  jobScript: { ignoreSignal?: string };
  /** For the launch result: the segment, when this job is one. */
  launch: { segment?: { index: number; of: number } };
}

/** The partition's MaxTime in minutes, or undefined (unlimited, or scontrol did not answer: no chain). */
async function partitionMaxMinutes(
  run: RunCommand,
  partition: string | undefined,
  logger: Logger,
): Promise<number | undefined> {
  const result = await run('scontrol', [
    'show',
    'partition',
    '-o',
    ...(partition === undefined ? [] : [partition]),
  ]);
  if (result.exitCode !== 0) {
    logger.warn(
      { partition, stderr: result.stderr.trim() },
      'could not read the partition MaxTime; no wall-time chain',
    );
    return undefined;
  }
  return parsePartitionMaxMinutes(result.stdout, partition);
}

/**
 * `--time` and the warning signal of a run's next job. `signalled`: the job's process is Python started by
 * `exec` (no srun, no container), so the signal reaches the helper; it is ignored through `exec` otherwise.
 */
export async function planWallTime(input: {
  run: RunCommand;
  meta: RunMeta;
  partition: string | undefined;
  graceS: number;
  signalled: boolean;
  logger: Logger;
}): Promise<WallTimePlan> {
  const maxMinutes = await partitionMaxMinutes(input.run, input.partition, input.logger);
  const segment = planSegment(input.meta.maxHours, maxMinutes, input.meta.nextSegment ?? 1);
  const graceS = Math.min(Math.round(input.graceS), 65_535);
  const hours = segment?.hours ?? input.meta.maxHours;
  // Slurm sends the warning up to ~30 s early (its limit check period): a job shorter than twice the grace
  // would be cut short by it, so it gets none and ends at its limit as before.
  const warned = input.signalled && graceS >= 1 && graceS * 2 <= hours * 3600;
  const signalArgs = warned ? [`--signal=B:${WALL_TIME_SIGNAL}@${graceS}`] : [];
  const plan: WallTimePlan = {
    hours,
    sbatchArgs: signalArgs,
    jobScript: signalArgs.length > 0 ? { ignoreSignal: WALL_TIME_SIGNAL } : {},
    launch: segment === undefined ? {} : { segment: { index: segment.index, of: segment.of } },
  };
  if (segment !== undefined) plan.segment = segment;
  return plan;
}

const finishSchema = z.object({ wallTime: z.boolean().optional() }).loose();

/**
 * A job that exited 0 because the helper stopped on the warning signal (finish.json says `wallTime`)
 * ended at its time limit: it becomes the same `timeout` ending as a job Slurm ended with TIMEOUT.
 */
export async function markWallTimeEnds(
  states: Map<string, ProcessState>,
  runs: readonly RunMeta[],
  runDir: ((runId: string) => string) | undefined,
): Promise<void> {
  if (runDir === undefined) return;
  for (const meta of runs) {
    const state = states.get(meta.id);
    if (state?.kind !== 'exited' || state.exitCode !== 0 || state.crashClass !== undefined) continue;
    let text: string;
    try {
      text = await readFile(path.join(runDir(meta.id), RUN_FILES.finish), 'utf8');
    } catch {
      continue;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      continue;
    }
    if (finishSchema.safeParse(value).data?.wallTime === true) {
      states.set(meta.id, {
        kind: 'signaled',
        signal: `SIG${WALL_TIME_SIGNAL}`,
        exitCode: 0,
        crashClass: 'timeout',
      });
    }
  }
}
