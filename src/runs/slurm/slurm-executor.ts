import { chmod, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Config } from '../../config/config.js';
import { definedOnly } from '../../defined-only.js';
import { RunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { containerMounts } from '../container-argv.js';
import type {
  ClusterInfo,
  Executor,
  LaunchRequest,
  LaunchResult,
  Placement,
  PlacementRequest,
  ProcessState,
} from '../executor.js';
import { applyEnvironment } from '../named-environments.js';
import { RUN_FILES } from '../records/run-files.js';
import type { RunMeta } from '../records/run-types.js';
import { hoursLeft } from '../time-limit.js';
import { slurmClusterInfo } from './slurm-cluster-info.js';
import { type CommandResult, createRunCommand, type RunCommand } from './slurm-command.js';
import { renderJobScript, SLURM_JOB_SCRIPT } from './slurm-job-script.js';
import {
  formatTimeLimit,
  isFinalState,
  mapSlurmState,
  parseSacct,
  parseSbatchOutput,
  parseSqueue,
  type SacctRow,
  SQUEUE_FORMAT,
  type SqueueRow,
  shortenSlurmError,
} from './slurm-parse.js';
import { markWallTimeEnds, planWallTime } from './slurm-wall-time.js';

/** Directory holding `shepherd.py`; put on the job's PYTHONPATH (same runtime helper as locally). */
const DEFAULT_RUNTIME_DIR = fileURLToPath(new URL('../python/', import.meta.url));
/** Job ids per squeue/sacct call; far above any team's active runs, but keeps argv bounded. */
const IDS_PER_CALL = 1000;

interface SlurmExecutorOptions {
  config: Pick<Config, 'slurm' | 'runs' | 'workspace'>;
  logger: Logger;
  /** Runs `sbatch`, `squeue`, `sacct`, `scancel`, `scontrol`; defaults to `execFile` (never a shell). */
  runCommand?: RunCommand;
  /** Environment of the Slurm CLI when `runCommand` is not given (e.g. to set `SLURM_CONF`). */
  environment?: Readonly<Record<string, string | undefined>>;
  /** Directory with `shepherd.py` for the job's PYTHONPATH; must be readable from the compute nodes. */
  runtimeDir?: string;
  /** How often `terminate` re-checks a job that was signalled. */
  terminatePollMs?: number;
  /** How long `terminate` waits for a job after the final `scancel` before giving up. */
  cancelWaitMs?: number;
  /** A run's directory, where `poll` reads finish.json to tell a stop on the wall-time signal from a finish. */
  runDir?: (runId: string) => string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function chunks<T>(items: readonly T[], size: number): T[][] {
  const result: T[][] = [];
  for (let start = 0; start < items.length; start += size) result.push(items.slice(start, start + size));
  return result;
}

/** `--output` takes a filename pattern: a literal `%` must be doubled. */
function outputPattern(file: string): string {
  return file.replaceAll('%', '%%');
}

/** The `sbatch` options for a run's job; the batch script itself comes last. */
function sbatchArgs(
  meta: RunMeta,
  runDir: string,
  scriptPath: string,
  slurm: Config['slurm'],
  wallTime: { hours: number; sbatchArgs: string[] },
): string[] {
  const args = ['--parsable', `--job-name=${meta.name}`];
  if (meta.nodes !== undefined) args.push(`--nodes=${meta.nodes}`);
  if (meta.gpus > 0) {
    args.push(slurm.gpuFlag === 'gpus' ? `--gpus=${meta.gpus}` : `--gres=gpu:${meta.gpus}`);
  }
  args.push(
    // One segment of a wall-time chain, and never more than the run's hours left after earlier launches.
    `--time=${formatTimeLimit(Math.min(wallTime.hours, hoursLeft(meta)))}`,
    `--output=${outputPattern(path.join(runDir, RUN_FILES.output))}`,
    '--open-mode=append',
    `--chdir=${runDir}`,
  );
  // `--export` splits on commas (values with one are set by the batch script, which also prepends PYTHONPATH).
  const exported = [`SHEPHERD_RUN_DIR=${runDir}`, `SHEPHERD_RUN_ID=${meta.id}`];
  args.push(`--export=${['ALL', ...exported.filter((item) => !item.includes(','))].join(',')}`);
  if (slurm.partition !== undefined) args.push(`--partition=${slurm.partition}`);
  if (slurm.account !== undefined) args.push(`--account=${slurm.account}`);
  args.push(...wallTime.sbatchArgs, ...slurm.extraArgs, scriptPath);
  return args;
}

/**
 * Executor that submits runs as Slurm batch jobs. Slurm allocates the GPUs (`allocatesGpus: true`);
 * state comes from one `squeue` per poll (plus one `sacct` for jobs that ended), so the monitor's cost
 * does not grow with the number of runs.
 */
export function createSlurmExecutor(options: SlurmExecutorOptions): Executor {
  const { config, logger } = options;
  const run = options.runCommand ?? createRunCommand(options.environment);
  const runtimeDir = options.runtimeDir ?? DEFAULT_RUNTIME_DIR;
  const terminatePollMs = options.terminatePollMs ?? 500;
  const cancelWaitMs = options.cancelWaitMs ?? 120_000;
  /** `accounting` = slurmdbd answers `sacct`; `completion` = only the jobcomp log (`sacct -c`). */
  let sacctMode: 'accounting' | 'completion' | undefined;

  function failure(command: string, result: CommandResult): RunError {
    return new RunError(
      'slurm_command_failed',
      `${command} failed (exit ${result.exitCode}): ${shortenSlurmError(result.stderr || result.stdout)}`,
    );
  }

  /** `--time` and the warning signal of the job (slurm-wall-time.ts); the helper learns the signal's name. */
  async function wallTimeOf(meta: RunMeta, signalled: boolean, environment: Record<string, string>) {
    const { stopGraceS: graceS } = config.runs;
    const plan = await planWallTime({
      run,
      meta,
      partition: config.slurm.partition,
      graceS,
      signalled,
      logger,
    });
    if (plan.jobScript.ignoreSignal !== undefined)
      environment.SHEPHERD_STOP_SIGNAL = plan.jobScript.ignoreSignal;
    return plan;
  }

  async function launch(request: LaunchRequest): Promise<LaunchResult> {
    const { meta, runDir } = request;
    await rm(path.join(runDir, RUN_FILES.finish), { force: true });
    const scriptPath = path.join(runDir, SLURM_JOB_SCRIPT);
    const environment: Record<string, string> = {
      SHEPHERD_RUN_DIR: runDir,
      SHEPHERD_RUN_ID: meta.id,
      SHEPHERD_RUN_NAME: meta.name,
      SHEPHERD_RUN_CONFIG: JSON.stringify(meta.config ?? {}),
    };
    const spec =
      meta.environmentName === undefined ? undefined : config.runs.environments?.[meta.environmentName];
    if (meta.environmentName !== undefined && spec === undefined) {
      throw new RunError(
        'unknown_environment',
        `environment ${meta.environmentName} is no longer configured`,
      );
    }
    const applied = applyEnvironment(meta.command ?? [config.runs.python, '-u', RUN_FILES.script], spec);
    Object.assign(environment, applied.variables);
    const srun = meta.command !== undefined || (meta.nodes ?? 1) > 1;
    // `B:USR1` reaches the batch shell: only a script that `exec`s Python (no srun, container or eval) warns.
    const wallTime = await wallTimeOf(meta, !srun && !applied.container && !meta.evalCommand, environment);
    await writeFile(
      scriptPath,
      renderJobScript({
        python: config.runs.python,
        script: RUN_FILES.script,
        launchNumber: meta.launchCount,
        scriptVersion: meta.scriptVersion,
        runtimeDir,
        environment,
        ...(meta.command === undefined && spec === undefined ? {} : { command: applied.argv }),
        ...definedOnly({ cwd: meta.cwd, evalCommand: meta.evalCommand }),
        ...(meta.args === undefined || meta.args.length === 0 ? {} : { args: meta.args }),
        srun,
        ...wallTime.jobScript,
        pathPrefix: applied.pathPrefix,
        ...(applied.container === undefined
          ? {}
          : {
              container: {
                image: applied.container,
                mode: config.slurm.container ?? 'apptainer',
                gpus: meta.gpus > 0,
                // The same paths inside: logs, metrics and checkpoints, the code, the helper (read-only).
                mounts: containerMounts([
                  { path: runDir },
                  { path: config.workspace },
                  { path: runtimeDir, readOnly: true },
                  ...(meta.cwd === undefined ? [] : [{ path: meta.cwd }]),
                ]),
              },
            }),
      }),
      'utf8',
    );
    await chmod(scriptPath, 0o755);

    const args = sbatchArgs(meta, runDir, scriptPath, config.slurm, wallTime);
    const result = await run('sbatch', args, { cwd: runDir });
    if (result.exitCode !== 0) {
      throw new RunError(
        'slurm_submit_failed',
        `sbatch: ${shortenSlurmError(result.stderr || result.stdout)}`,
      );
    }
    const parsed = parseSbatchOutput(result.stdout);
    if (parsed === undefined) {
      throw new RunError(
        'slurm_submit_failed',
        `sbatch printed no job id: ${shortenSlurmError(result.stdout || result.stderr)}`,
      );
    }
    logger.info(
      { runId: meta.id, jobId: parsed.jobId, cluster: parsed.cluster, gpus: meta.gpus },
      'run submitted to Slurm',
    );
    return { jobId: parsed.jobId, ...wallTime.launch };
  }

  async function squeueRows(jobIds: string[]): Promise<SqueueRow[]> {
    const rows: SqueueRow[] = [];
    for (const batch of chunks(jobIds, IDS_PER_CALL)) {
      const result = await run('squeue', ['-h', '-t', 'all', '-j', batch.join(','), ...SQUEUE_FORMAT]);
      if (result.exitCode !== 0) {
        // A single id Slurm has already purged is an error to squeue; it just means "not listed".
        if (/Invalid job id/i.test(result.stderr)) continue;
        throw failure('squeue', result);
      }
      rows.push(...parseSqueue(result.stdout));
    }
    return rows;
  }

  async function sacctOnce(jobIds: string[], mode: 'accounting' | 'completion'): Promise<CommandResult> {
    const args = ['-X', '-n', '-P', '-j', jobIds.join(','), '-o', 'JobID,State,ExitCode'];
    return run('sacct', mode === 'completion' ? ['-c', ...args] : args);
  }

  /**
   * Final states from accounting, or from the job-completion log when accounting is off. Polls run
   * concurrently, so the fallback is decided by the mode this call used, not by the shared `sacctMode`
   * (another poll may have switched it while this one waited).
   */
  async function sacctRows(jobIds: string[]): Promise<SacctRow[]> {
    const rows: SacctRow[] = [];
    for (const batch of chunks(jobIds, IDS_PER_CALL)) {
      const mode = sacctMode ?? 'accounting';
      let result = await sacctOnce(batch, mode);
      if (
        result.exitCode !== 0 &&
        mode === 'accounting' &&
        /accounting storage is disabled/i.test(result.stderr)
      ) {
        if (sacctMode !== 'completion') {
          logger.info('Slurm accounting is off; reading final job states with sacct -c (jobcomp)');
        }
        sacctMode = 'completion';
        result = await sacctOnce(batch, 'completion');
      }
      if (result.exitCode !== 0) throw failure('sacct', result);
      sacctMode ??= mode;
      rows.push(...parseSacct(result.stdout));
    }
    return rows;
  }

  async function poll(runs: RunMeta[]): Promise<Map<string, ProcessState>> {
    const states = new Map<string, ProcessState>();
    const submitted = runs.filter((meta) => meta.jobId !== undefined);
    for (const meta of runs) {
      if (meta.jobId === undefined)
        states.set(meta.id, { kind: 'unknown', reason: 'run has no Slurm job id' });
    }
    if (submitted.length === 0) return states;

    const queue = new Map(
      (await squeueRows([...new Set(submitted.map((meta) => meta.jobId ?? ''))])).map((row) => [
        row.jobId,
        row,
      ]),
    );
    // Jobs that ended (or already left squeue after MinJobAge) need sacct for their exit code.
    const ended = submitted.filter((meta) => {
      const row = queue.get(meta.jobId ?? '');
      return row === undefined || isFinalState(row.state);
    });
    const finals =
      ended.length === 0
        ? new Map<string, SacctRow>()
        : new Map(
            (await sacctRows([...new Set(ended.map((meta) => meta.jobId ?? ''))])).map((row) => [
              row.jobId,
              row,
            ]),
          );

    for (const meta of submitted) {
      const jobId = meta.jobId ?? '';
      const final = finals.get(jobId);
      const row = queue.get(jobId);
      if (final !== undefined && isFinalState(final.state)) {
        states.set(meta.id, mapSlurmState(final.state, { exitCode: final.exitCode, signal: final.signal }));
      } else if (row !== undefined) {
        states.set(meta.id, mapSlurmState(row.state, { reason: row.reason, restarts: row.restarts }));
      } else {
        states.set(meta.id, {
          kind: 'unknown',
          reason: `Slurm has no record of job ${jobId} (not in squeue or sacct)`,
        });
      }
    }
    await markWallTimeEnds(states, submitted, options.runDir);
    return states;
  }

  async function stateOf(meta: RunMeta): Promise<ProcessState> {
    return (await poll([meta])).get(meta.id) ?? { kind: 'unknown', reason: 'not polled' };
  }

  /** Poll until the job is over; `undefined` when it is still there after `timeoutMs`. */
  async function waitForEnd(meta: RunMeta, timeoutMs: number): Promise<ProcessState | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const state = await stateOf(meta);
      if (state.kind !== 'alive' && state.kind !== 'pending') return state;
      if (Date.now() >= deadline) return undefined;
      await sleep(Math.min(terminatePollMs, Math.max(0, deadline - Date.now())));
    }
  }

  async function scancel(args: string[]): Promise<void> {
    const result = await run('scancel', args);
    // Cancelling a job that just ended is fine; anything else is reported.
    if (result.exitCode !== 0 && !/already completing or completed|Invalid job id/i.test(result.stderr)) {
      throw failure('scancel', result);
    }
  }

  async function terminate(
    meta: RunMeta,
    terminateOptions: { graceMs: number; reason: 'pause' | 'stop' },
  ): Promise<ProcessState> {
    const jobId = meta.jobId;
    if (jobId === undefined) return { kind: 'unknown', reason: 'run has no Slurm job id' };
    const before = await stateOf(meta);
    if (before.kind === 'pending') {
      // Never started (or requeued): nothing to checkpoint, just take it out of the queue.
      await scancel([jobId]);
      await waitForEnd(meta, cancelWaitMs);
      return { kind: 'signaled', signal: 'SIGTERM' };
    }
    if (before.kind !== 'alive') return before;

    logger.info({ runId: meta.id, jobId, reason: terminateOptions.reason }, 'sending SIGTERM to Slurm job');
    // --full: signal the batch step too (that is where train.py runs), not only srun steps.
    await scancel(['--signal=TERM', '--full', jobId]);
    const ended = await waitForEnd(meta, terminateOptions.graceMs);
    if (ended !== undefined) {
      const exitCode = ended.kind === 'exited' || ended.kind === 'signaled' ? ended.exitCode : undefined;
      return exitCode === undefined
        ? { kind: 'signaled', signal: 'SIGTERM' }
        : { kind: 'signaled', signal: 'SIGTERM', exitCode };
    }
    logger.warn({ runId: meta.id, jobId }, 'Slurm job ignored SIGTERM for the grace period; cancelling it');
    await scancel([jobId]);
    if ((await waitForEnd(meta, cancelWaitMs)) === undefined) {
      throw new RunError(
        'terminate_failed',
        `Slurm job ${jobId} of run ${meta.name} is still there after scancel`,
      );
    }
    return { kind: 'signaled', signal: 'SIGKILL', exitCode: 137 };
  }

  const clusterInfo = (): Promise<ClusterInfo> => slurmClusterInfo(run, config.slurm.partition, failure);

  async function placement(request: PlacementRequest): Promise<Placement> {
    const { partition, account } = config.slurm;
    const parts = [
      ...(partition === undefined ? [] : [`partition ${partition}`]),
      ...(account === undefined ? [] : [`account ${account}`]),
    ];
    return {
      description: parts.length === 0 ? 'Slurm' : `Slurm ${parts.join(', ')}`,
      hourlyUsd: request.gpus * Math.max(1, request.nodes ?? 1) * config.slurm.gpuHourUsd,
    };
  }

  return { kind: 'slurm', allocatesGpus: true, launch, poll, terminate, clusterInfo, placement };
}
