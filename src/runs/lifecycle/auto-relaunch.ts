import path from 'node:path';
import type { Logger } from '../../logger.js';
import type { ProcessState } from '../executor.js';
import { readTail } from '../file-tail.js';
import type { GpuAllocator } from '../gpu-allocator.js';
import { type InfrastructureCause, infrastructureCause } from '../infrastructure-ending.js';
import { RUN_FILES } from '../records/run-files.js';
import type { RunStore } from '../records/run-store.js';
import type { AutoRelaunchRecord, RunMeta } from '../records/run-types.js';
import { lastStepOf } from '../run-reports.js';
import type { RunLauncher } from './run-launcher.js';
import type { RunTransitions } from './run-transitions.js';

/**
 * Automatic relaunch after an infrastructure failure (infrastructure-ending.ts says which endings are).
 * run-endings asks here, under the run lock and only for a launch that ended on its own, before it
 * records the ending — so the decision is taken once, whichever worker polls first, and the monitor holds
 * its crash alert back until the run is either running again or failed. No LLM call and no new approval:
 * the approval covered this run, and its `--hours` budget counts every launch (`priorHours`).
 */

/** What run-endings does with a launch that ended on its own. */
type RelaunchDecision =
  | { kind: 'relaunched'; meta: RunMeta }
  /** Infrastructure again, with no retry left: fail, saying so. */
  | { kind: 'exhausted'; note: string }
  /** The run's hours are spent: it stops at its limit, as a launch that reached its deadline does. */
  | { kind: 'out_of_time' }
  /** Not the infrastructure's doing, or relaunches are off: record the ending as usual. */
  | { kind: 'none' };

export interface AutoRelaunch {
  /** Caller holds the run lock and has checked that `meta` is the running launch that ended. */
  consider(meta: RunMeta, state: ProcessState): Promise<RelaunchDecision>;
}

interface AutoRelaunchOptions {
  store: RunStore;
  allocator: GpuAllocator;
  transitions: RunTransitions;
  launcher: RunLauncher;
  logger: Logger;
  /** `SHEPHERD_AUTO_RETRIES`: relaunches per run (run-service builds none when it is 0). */
  retries: number;
  /** Chooses, pins and names in resume.json the checkpoint the relaunch starts from (checkpoint-history). */
  prepareRelaunch?: (runId: string) => Promise<{ from: number | null }>;
}

/** Less than this left of the run's hours is not worth a relaunch. */
const MIN_HOURS_LEFT = 1 / 60;
const LOG_TAIL_BYTES = 64 * 1024;

const formatStep = (step: number) => step.toLocaleString('en-US');

/** "killed at step 1,200 (SIGKILL, no stop requested)". */
function describeEnding(cause: InfrastructureCause, step: number | undefined): string {
  return `${cause.label}${step === undefined ? '' : ` at step ${formatStep(step)}`} (${cause.detail})`;
}

const fromText = (from: number | null) => (from === null ? 'from scratch' : `from step ${formatStep(from)}`);

/** One line per earlier retry, for the failure that ends them. */
export function retryLines(records: readonly AutoRelaunchRecord[], retries: number): string[] {
  return records.map(
    (record, index) =>
      `retry ${index + 1} of ${retries}: ${record.cause}; relaunched ${fromText(record.from)}`,
  );
}

export function createAutoRelaunch(options: AutoRelaunchOptions): AutoRelaunch {
  const { store, allocator, transitions, launcher, logger, retries } = options;
  const { now, setStatus } = transitions;

  async function causeOf(meta: RunMeta, state: ProcessState, ranMs: number) {
    const logTail = await readTail(path.join(store.runDir(meta.id), RUN_FILES.output), LOG_TAIL_BYTES);
    return infrastructureCause({ meta, state, logTail, ranMs });
  }

  async function relaunch(
    meta: RunMeta,
    state: ProcessState,
    what: string,
    patch: Partial<RunMeta>,
  ): Promise<RunMeta> {
    // A requeued Slurm job would run again on its own, from whatever it saved last: take it out first.
    if (state.kind === 'pending') await launcher.terminateRun(meta, 'stop');
    await allocator.release(meta.id);
    const { from } = (await options.prepareRelaunch?.(meta.id)) ?? { from: null };
    const used = meta.autoRelaunches ?? [];
    const retry = used.length + 1;
    const record: AutoRelaunchRecord = {
      at: now().toISOString(),
      launch: meta.launchCount,
      cause: what,
      from,
    };
    const queued = await setStatus(meta, 'queued', {
      by: 'system',
      reason: `automatic relaunch ${retry} of ${retries}: ${what}; ${fromText(from)}`,
      patch: { ...patch, gpuIndices: [], autoRelaunches: [...used, record] },
      clear: ['pid', 'pgid', 'processStartTime', 'jobId', 'deadlineAt'],
    });
    logger.info({ runId: meta.id, retry, from, cause: what }, 'relaunching after an infrastructure failure');
    return launcher.launchQueued(queued, 'system', {
      announce: `${meta.name}: ${what}; relaunched ${fromText(from)}, retry ${retry} of ${retries}`,
    });
  }

  async function consider(meta: RunMeta, state: ProcessState): Promise<RelaunchDecision> {
    const startedAt = meta.startedAt === undefined ? Number.NaN : Date.parse(meta.startedAt);
    const ranMs = Number.isFinite(startedAt) ? Math.max(0, now().getTime() - startedAt) : 0;
    const cause = await causeOf(meta, state, ranMs);
    if (cause === undefined) return { kind: 'none' };
    const { lastStep } = await lastStepOf(store, meta);
    const what = describeEnding(cause, lastStep);
    const used = meta.autoRelaunches ?? [];
    if (used.length >= retries) {
      return {
        kind: 'exhausted',
        note: `no automatic relaunch left: ${retryLines(used, retries).join('; ')}`,
      };
    }
    const priorHours = (meta.priorHours ?? 0) + ranMs / 3_600_000;
    if (meta.maxHours - priorHours < MIN_HOURS_LEFT) return { kind: 'out_of_time' };
    const patch: Partial<RunMeta> = { priorHours, ...(lastStep === undefined ? {} : { lastStep }) };
    return { kind: 'relaunched', meta: await relaunch(meta, state, what, patch) };
  }

  return { consider };
}
