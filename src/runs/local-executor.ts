import { execFile, spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { chmod, cp, readdir, readFile, rm } from 'node:fs/promises';
import { loadavg } from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import type { Environments } from '../config/environments.js';
import { RunError } from '../errors.js';
import type { Logger } from '../logger.js';
import { containerName, engineRemoveArgv } from './container-argv.js';
import type { ClusterInfo, Executor, LaunchRequest, LaunchResult, ProcessState } from './executor.js';
import {
  engineLaunch,
  engineOf,
  type LocalContainerSettings,
  type LocalLaunchPlan,
  launchEnvironment,
  localLaunchPlan,
} from './local-launch-plan.js';
import {
  groupExistsBySignal,
  hasProcFs,
  killDescendants,
  liveProcessGroups,
  readProcessStat,
} from './process-table.js';
import { PYTHON_RUNTIME_DIR, RUN_FILES } from './records/run-files.js';
import { appendRunFile } from './records/run-store.js';
import type { RunMeta } from './records/run-types.js';
import { chownTree, type RunUser } from './run-as-user.js';
import { createPySpy, dumpLocalStacks, type PySpy } from './stack-dumps.js';
import { hoursLeft } from './time-limit.js';

const LAUNCHER_FILE = 'shepherd_launcher.py';

/** Copy a directory tree where any user can read it (directories 0755, files 0644); returns the copy. */
async function readableCopy(from: string, to: string): Promise<string> {
  await cp(from, to, { recursive: true, force: true, filter: (source) => !source.includes('__pycache__') });
  const open = async (directory: string): Promise<void> => {
    await chmod(directory, 0o755);
    for (const entry of await readdir(directory, { withFileTypes: true })) {
      const target = path.join(directory, entry.name);
      if (entry.isDirectory()) await open(target);
      else await chmod(target, 0o644);
    }
  };
  await open(to);
  return to;
}

const exitStatusSchema = z.object({
  launch: z.number().int(),
  exitCode: z.number().int().nullable(),
  signal: z.string().nullable(),
  terminated: z.boolean(),
  /** The launcher ended the run at its time limit. */
  timeLimit: z.boolean().optional(),
});
type ExitStatus = z.infer<typeof exitStatusSchema>;

interface LocalExecutorOptions {
  /** `runs.python` from config. */
  python: string;
  /** Absolute runs directory (`RunStore.runsDir`). */
  runsDir: string;
  /** Environment every run inherits (the caller passes `process.env`; nothing here reads it). */
  environment: Readonly<Record<string, string | undefined>>;
  /** Host GPU indices, for `clusterInfo`. */
  gpuInventory: readonly number[];
  /** Named environments (`SHEPHERD_ENVIRONMENTS`) a run may ask for. */
  environments?: Environments;
  /** Seconds between SIGTERM and SIGKILL when the launcher enforces the time limit. */
  graceS?: number;
  logger: Logger;
  /** `SHEPHERD_RUN_AS_USER`, resolved: runs start as this user (the bot runs as root). */
  runAs?: RunUser;
  /** `SHEPHERD_WORKSPACE`: mounted into a run's container beside the run directory and the helper. */
  workspace?: string;
  /** `config.localContainer`: runs with an image go into a Docker/Podman container. */
  container?: LocalContainerSettings;
  /** Runs a container engine command (`podman rm -f …`); defaults to `execFile` in the runs' environment. */
  runEngine?: (argv: readonly string[]) => Promise<{ exitCode: number; output: string }>;
  /** `py-spy dump` for hang dumps of scripts without the helper; defaults to py-spy on the runs' PATH. */
  pySpy?: PySpy;
}

function defaultRunEngine(
  environment: Readonly<Record<string, string | undefined>>,
): (argv: readonly string[]) => Promise<{ exitCode: number; output: string }> {
  return (argv) =>
    new Promise((resolve) => {
      const [command = '', ...rest] = argv;
      execFile(
        command,
        rest,
        { env: environment, timeout: 60_000, encoding: 'utf8' },
        (error, stdout, stderr) => {
          const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
          resolve({ exitCode: code, output: `${stdout}${stderr}`.trim() });
        },
      );
    });
}

/** Turn a recorded exit status into the executor's vocabulary. SIGTERM received ⇒ "stopped by us". */
function exitStatusToState(status: ExitStatus): ProcessState {
  if (status.timeLimit === true) {
    const state: ProcessState = { kind: 'signaled', signal: 'SIGTERM', crashClass: 'timeout' };
    if (status.exitCode !== null) state.exitCode = status.exitCode;
    return state;
  }
  if (status.terminated) {
    const state: ProcessState = { kind: 'signaled', signal: 'SIGTERM' };
    if (status.exitCode !== null) state.exitCode = status.exitCode;
    return state;
  }
  if (status.signal !== null) {
    const state: ProcessState = { kind: 'signaled', signal: status.signal };
    if (status.signal === 'SIGKILL') state.exitCode = 137;
    return state;
  }
  return { kind: 'exited', exitCode: status.exitCode ?? 1 };
}

function gpuLabel(indices: readonly number[]): string {
  return indices.length === 0 ? 'cpu' : `gpus ${indices.join(',')}`;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs a training script as a local process group: `python -S -u shepherd_launcher.py N train.py`, which
 * starts `python -u train.py` and writes `exit_status.json` when it ends.
 */
export function createLocalExecutor(options: LocalExecutorOptions): Executor {
  const procAvailable = hasProcFs();
  const runDirOf = (runId: string) => path.join(options.runsDir, runId);
  // The run user may not be able to read the bot's install (a root-only checkout): it gets a readable
  // copy of the launcher and helper beside the run directories, made once.
  let runtimeDir: Promise<string> | undefined;
  const runtimeFor = (runAs: RunUser | undefined): Promise<string> => {
    if (runAs === undefined) return Promise.resolve(PYTHON_RUNTIME_DIR);
    runtimeDir ??= readableCopy(
      PYTHON_RUNTIME_DIR,
      path.join(path.dirname(options.runsDir), 'python-runtime'),
    );
    return runtimeDir;
  };

  async function readExitStatus(runId: string): Promise<ExitStatus | undefined> {
    try {
      const text = await readFile(path.join(runDirOf(runId), RUN_FILES.exitStatus), 'utf8');
      const parsed = exitStatusSchema.safeParse(JSON.parse(text));
      return parsed.success ? parsed.data : undefined;
    } catch {
      return undefined;
    }
  }

  /** Is the run's process group still there (and really ours)? */
  function groupAlive(meta: RunMeta, groups: Set<number> | undefined): boolean {
    const pgid = meta.pgid ?? meta.pid;
    if (pgid === undefined) return false;
    if (!procAvailable || groups === undefined) return groupExistsBySignal(pgid);
    const leader = readProcessStat(pgid);
    if (
      leader !== undefined &&
      meta.processStartTime !== undefined &&
      leader.startTime !== meta.processStartTime
    ) {
      // The pid now belongs to another process: our group is gone.
      return false;
    }
    return groups.has(pgid);
  }

  async function stateOf(meta: RunMeta, groups: Set<number> | undefined): Promise<ProcessState> {
    const status = await readExitStatus(meta.id);
    if (status !== undefined && status.launch === meta.launchCount) return exitStatusToState(status);
    if (meta.pid === undefined) return { kind: 'unknown', reason: 'run was never launched' };
    if (groupAlive(meta, groups)) return { kind: 'alive' };
    // The exit status may have landed between the two checks.
    const late = await readExitStatus(meta.id);
    if (late !== undefined && late.launch === meta.launchCount) return exitStatusToState(late);
    return { kind: 'unknown', reason: 'process is gone without an exit record (killed with its launcher?)' };
  }

  const runEngine = options.runEngine ?? defaultRunEngine(options.environment);

  /** Remove a run's container if there is one (best effort: "no such container" is the usual answer). */
  async function removeContainer(remove: readonly string[], runId: string): Promise<void> {
    const result = await runEngine(remove);
    if (result.exitCode !== 0 && !/no such container/i.test(result.output)) {
      options.logger.warn({ runId, output: result.output }, 'could not remove the run container');
    }
  }

  /** The launcher's words after its deadline and grace: none for train.py, else cwd [--container rm] -- argv. */
  async function commandWords(
    request: LaunchRequest,
    runtime: string,
    plan: LocalLaunchPlan,
    env: Record<string, string>,
  ) {
    if (plan.argv === undefined) return { words: [], inContainer: false };
    if (plan.engine === undefined) return { words: [plan.cwd, '--', ...plan.argv], inContainer: false };
    const inside = engineLaunch({
      engine: plan.engine,
      plan: { ...plan, argv: plan.argv },
      meta: request.meta,
      runDir: request.runDir,
      workspace: options.workspace,
      runtimeDir: runtime,
      gpuIndices: request.gpuIndices,
      runAs: options.runAs,
      environment: env,
    });
    // A container left by a launch that was killed outright would hold the name (and maybe the GPUs).
    await removeContainer(inside.remove, request.meta.id);
    return {
      words: [plan.cwd, '--container', JSON.stringify(inside.remove), '--', ...inside.argv],
      inContainer: true,
    };
  }

  async function launch(request: LaunchRequest): Promise<LaunchResult> {
    const { meta, runDir, gpuIndices } = request;
    const launchNumber = meta.launchCount;
    const runtime = await runtimeFor(options.runAs);
    const plan = localLaunchPlan({
      meta,
      runDir,
      python: options.python,
      environments: options.environments ?? {},
      gpuIndices,
      runtimeDir: runtime,
      workspace: options.workspace,
      container: options.container,
    });
    await rm(path.join(runDir, RUN_FILES.exitStatus), { force: true });
    await rm(path.join(runDir, RUN_FILES.finish), { force: true });
    const where = `${gpuLabel(gpuIndices)}${meta.environmentName === undefined ? '' : `, env ${meta.environmentName}`}${plan.engine === undefined ? '' : `, ${plan.engine.engine} image ${plan.engine.image}`}`;
    await appendRunFile(
      runDir,
      RUN_FILES.output,
      `=== launch ${launchNumber} at ${new Date().toISOString()} (${meta.command === undefined ? `script v${meta.scriptVersion}` : 'command'}, ${where}) ===`,
    );
    const environment = launchEnvironment(options.environment, request, runtime, plan);
    const { words, inContainer } = await commandWords(request, runtime, plan, environment);
    // In a container the launcher stays with the bot's user, which can reach the engine; the run user
    // is the container's `--user`.
    const runAs = inContainer ? undefined : options.runAs;
    if (runAs !== undefined) {
      Object.assign(environment, { USER: runAs.name, LOGNAME: runAs.name, HOME: runAs.home ?? runDir });
    }
    if (options.runAs !== undefined) await chownTree(runDir, options.runAs);
    // The log is opened in append mode and handed to the child: nothing ever truncates it.
    const logFd = openSync(path.join(runDir, RUN_FILES.output), 'a');
    // The deadline travels with the launcher, which enforces it even while the bot is down.
    const deadlineMs = Date.now() + hoursLeft(meta) * 3600 * 1000;
    const launcherArguments = [
      // No site-packages for the launcher (it is stdlib only): its start-up sits between the Approve click
      // and the script's first line, and `site` (every .pth file) is much of it. The script keeps its own.
      '-S',
      '-u',
      path.join(runtime, LAUNCHER_FILE),
      String(launchNumber),
      plan.argv === undefined ? RUN_FILES.script : '--command',
      (deadlineMs / 1000).toFixed(3),
      String(options.graceS ?? 60),
      // A command (or a script in a named environment or an image) runs as argv in its working directory.
      ...words,
    ];
    try {
      const child = spawn(options.python, launcherArguments, {
        cwd: runDir,
        env: environment,
        detached: true,
        stdio: ['ignore', logFd, logFd],
        ...(runAs === undefined ? {} : { uid: runAs.uid, gid: runAs.gid }),
      });
      const pid = await new Promise<number>((resolve, reject) => {
        child.once('spawn', () => {
          if (child.pid === undefined) reject(new Error('spawn returned no pid'));
          else resolve(child.pid);
        });
        child.once('error', reject);
      }).catch((error: unknown) => {
        throw new RunError('launch_failed', `could not start ${options.python}: ${String(error)}`, {
          cause: error,
        });
      });
      // Libuv still reaps the child when it exits; unref so a long run never keeps this process up.
      child.unref();
      child.on('error', (error) => options.logger.warn({ err: error, runId: meta.id }, 'run process error'));
      const result: LaunchResult = { pid, pgid: pid, deadlineAt: new Date(deadlineMs).toISOString() };
      const stat = procAvailable ? readProcessStat(pid) : undefined;
      if (stat !== undefined) result.processStartTime = stat.startTime;
      options.logger.info({ runId: meta.id, pid, gpus: gpuIndices, inContainer }, 'run launched');
      return result;
    } finally {
      closeSync(logFd);
    }
  }

  async function poll(runs: RunMeta[]): Promise<Map<string, ProcessState>> {
    const groups = procAvailable ? liveProcessGroups() : undefined;
    const states = new Map<string, ProcessState>();
    for (const meta of runs) states.set(meta.id, await stateOf(meta, groups));
    return states;
  }

  async function waitForGroupGone(meta: RunMeta, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (!groupAlive(meta, procAvailable ? liveProcessGroups() : undefined)) return true;
      if (Date.now() >= deadline) return false;
      await sleep(100);
    }
  }

  function signalGroup(meta: RunMeta, signal: NodeJS.Signals): void {
    const pgid = meta.pgid ?? meta.pid;
    if (pgid === undefined) return;
    try {
      process.kill(-pgid, signal);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  }

  async function terminate(
    meta: RunMeta,
    terminateOptions: { graceMs: number; reason: 'pause' | 'stop' },
  ): Promise<ProcessState> {
    const before = await stateOf(meta, procAvailable ? liveProcessGroups() : undefined);
    if (before.kind !== 'alive') return before;
    options.logger.info({ runId: meta.id, reason: terminateOptions.reason }, 'sending SIGTERM to run');
    signalGroup(meta, 'SIGTERM');
    let killed = false;
    if (!(await waitForGroupGone(meta, terminateOptions.graceMs))) {
      options.logger.warn({ runId: meta.id }, 'run ignored SIGTERM for the grace period; sending SIGKILL');
      // A container is not below the launcher (Docker's lives under its daemon): the engine ends it.
      const engine = engineOf(meta, options.container);
      if (engine !== undefined)
        await removeContainer(engineRemoveArgv(engine, containerName(meta.id)), meta.id);
      // The launcher is a subreaper: while it lives, every descendant (setsid ones too) is below it, so
      // end them first, then the group with the launcher.
      const launcherPid = meta.pgid ?? meta.pid;
      if (procAvailable && launcherPid !== undefined && groupAlive(meta, liveProcessGroups())) {
        await killDescendants(launcherPid);
      }
      signalGroup(meta, 'SIGKILL');
      killed = true;
      if (!(await waitForGroupGone(meta, 10_000))) {
        throw new RunError(
          'terminate_failed',
          `process group ${meta.pgid} of run ${meta.name} survived SIGKILL`,
        );
      }
    }
    const status = await readExitStatus(meta.id);
    if (status !== undefined && status.launch === meta.launchCount) return exitStatusToState(status);
    return killed
      ? { kind: 'signaled', signal: 'SIGKILL', exitCode: 137 }
      : { kind: 'signaled', signal: 'SIGTERM' };
  }

  async function clusterInfo(): Promise<ClusterInfo> {
    return {
      executor: 'local',
      gpusTotal: options.gpuInventory.length,
      gpusFree: options.gpuInventory.length,
      hostLoad: loadavg(),
    };
  }

  const pySpy = options.pySpy ?? createPySpy(options.environment);
  const dumpStacks = (meta: RunMeta) =>
    dumpLocalStacks(meta, runDirOf(meta.id), { pySpy, logger: options.logger });
  return { kind: 'local', allocatesGpus: false, launch, poll, terminate, clusterInfo, dumpStacks };
}
