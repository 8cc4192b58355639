import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseMetricLine } from '../file-tail.js';
import { PYTHON_RUNTIME_DIR, RUN_FILES } from '../records/run-files.js';
import { chownTree, type RunUser } from '../run-as-user.js';

/**
 * The CPU pre-flight: before a GPU job is put on an approval card, run its script for a few steps on
 * this host with no GPUs, so a broken import or a shape error shows up before anyone approves GPU
 * hours. The helper's `log_metrics` ends the process cleanly after `steps` steps
 * (`SHEPHERD_PREFLIGHT=1`, `SHEPHERD_PREFLIGHT_STEPS=N`).
 */

interface PreflightOptions {
  python: string;
  /** The runs' environment (nothing here reads `process.env`). */
  environment: Readonly<Record<string, string | undefined>>;
  steps: number;
  timeoutS: number;
  /** `SHEPHERD_RUN_AS_USER`: the pre-flight runs as this user, never as the bot. */
  runAs?: RunUser | undefined;
  /** The `unshare --net` prefix (see `network-isolation.ts`) where it works here: no network. */
  isolation?: string[] | undefined;
}

/** Who ran the pre-flight and whether it had a network: the card says so. */
interface PreflightSandbox {
  user?: string;
  offline: boolean;
}

type PreflightResult = PreflightSandbox &
  (
    | {
        ok: true;
        steps: number;
        seconds: number;
        firstLoss?: number;
        lastLoss?: number;
        finishedEarly: boolean;
      }
    | { ok: false; steps: number; seconds: number; reason: string; output: string }
  );

/** Bot credentials and Shepherd's own settings never reach a pre-flight (it runs untrusted code). */
function preflightEnvironment(
  inherited: Readonly<Record<string, string | undefined>>,
  runDir: string,
  steps: number,
  config: Record<string, unknown> | undefined,
  runtime: string,
  runAs: RunUser | undefined,
): Record<string, string> {
  const environment: Record<string, string> = {};
  for (const [key, value] of Object.entries(inherited)) {
    if (value === undefined || /^(SHEPHERD_|SLACK_|DISCORD_|REDIS_)/.test(key)) continue;
    environment[key] = value;
  }
  return {
    ...environment,
    ...(runAs === undefined ? {} : { USER: runAs.name, LOGNAME: runAs.name, HOME: runAs.home ?? runDir }),
    SHEPHERD_RUN_DIR: runDir,
    SHEPHERD_RUN_ID: 'preflight',
    SHEPHERD_RUN_NAME: 'preflight',
    SHEPHERD_RUN_CONFIG: JSON.stringify(config ?? {}),
    SHEPHERD_PREFLIGHT: '1',
    SHEPHERD_PREFLIGHT_STEPS: String(steps),
    CUDA_VISIBLE_DEVICES: '',
    PYTHONPATH: inherited.PYTHONPATH ? `${runtime}${path.delimiter}${inherited.PYTHONPATH}` : runtime,
    PYTHONUNBUFFERED: '1',
    PYTHONDONTWRITEBYTECODE: '1',
  };
}

/** The end of the output, where a traceback is. */
function outputTail(text: string, maxLines = 15): string {
  const lines = text.trimEnd().split('\n');
  return lines.slice(-maxLines).join('\n').slice(-1500);
}

/**
 * The scratch directory: the script, and for a run user a readable copy of the helper (the bot's
 * install may be root-only); then everything is handed to that user.
 */
async function prepareScratch(directory: string, script: string, runAs: RunUser | undefined) {
  await writeFile(path.join(directory, RUN_FILES.script), script, 'utf8');
  const logFile = path.join(directory, RUN_FILES.output);
  await writeFile(logFile, '');
  if (runAs === undefined) return { runtime: PYTHON_RUNTIME_DIR, logFile };
  const runtime = path.join(directory, 'python-runtime');
  await cp(PYTHON_RUNTIME_DIR, runtime, {
    recursive: true,
    filter: (source) => !source.includes('__pycache__'),
  });
  await chownTree(directory, runAs);
  return { runtime, logFile };
}

type PreflightExit = { code: number | null; signal: NodeJS.Signals | null; timedOut: boolean; error?: Error };

/** Kill the whole process group: the script and anything it started (data loader workers). */
function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/** Spawns the script (as the run user, without network where possible) and waits for it or the timeout. */
function spawnPreflight(
  options: PreflightOptions,
  directory: string,
  environment: Record<string, string>,
  logFd: number,
): Promise<PreflightExit> {
  const script = [options.python, '-u', RUN_FILES.script];
  // With the unshare prefix, unshare itself drops to the run user (after leaving the network).
  const [command = options.python, ...args] =
    options.isolation === undefined ? script : [...options.isolation, ...script];
  const switchUser = options.isolation === undefined && options.runAs !== undefined;
  return new Promise((resolve) => {
    let timedOut = false;
    const child = spawn(command, args, {
      cwd: directory,
      env: environment,
      // Its own process group, so a timeout ends the script and anything it started.
      detached: true,
      stdio: ['ignore', logFd, logFd],
      ...(switchUser && options.runAs !== undefined
        ? { uid: options.runAs.uid, gid: options.runAs.gid }
        : {}),
    });
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child.pid);
    }, options.timeoutS * 1000);
    child.once('error', (error) => {
      clearTimeout(timer);
      resolve({ code: null, signal: null, timedOut, error });
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      killGroup(child.pid);
      resolve({ code, signal, timedOut });
    });
  });
}

async function readLosses(directory: string): Promise<{ steps: number; losses: number[] }> {
  const losses: number[] = [];
  let steps = 0;
  const metrics = await readFile(path.join(directory, RUN_FILES.metrics), 'utf8').catch(() => '');
  for (const line of metrics.split('\n')) {
    const record = parseMetricLine(line);
    if (record === undefined) continue;
    steps += 1;
    const loss = record.values.loss;
    if (loss !== undefined) losses.push(loss);
  }
  return { steps, losses };
}

export async function runPreflight(
  options: PreflightOptions,
  script: string,
  config?: Record<string, unknown>,
): Promise<PreflightResult> {
  const directory = await mkdtemp(path.join(tmpdir(), 'shepherd-preflight-'));
  const started = Date.now();
  const sandbox: PreflightSandbox = {
    offline: options.isolation !== undefined,
    ...(options.runAs === undefined ? {} : { user: options.runAs.name }),
  };
  try {
    const { runtime, logFile } = await prepareScratch(directory, script, options.runAs);
    const environment = preflightEnvironment(
      options.environment,
      directory,
      options.steps,
      config,
      runtime,
      options.runAs,
    );
    const logFd = openSync(logFile, 'a');
    const exit = await spawnPreflight(options, directory, environment, logFd).finally(() => closeSync(logFd));
    const seconds = (Date.now() - started) / 1000;
    const output = await readFile(logFile, 'utf8').catch(() => '');
    const { steps, losses } = await readLosses(directory);
    if (exit.error !== undefined) {
      const reason = `could not start ${options.python}: ${exit.error.message}`;
      return { ...sandbox, ok: false, steps, seconds, reason, output: '' };
    }
    if (exit.timedOut) {
      const reason = `did not reach ${options.steps} steps within ${options.timeoutS} s`;
      return { ...sandbox, ok: false, steps, seconds, reason, output: outputTail(output) };
    }
    if (exit.code !== 0) {
      const how = exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
      return { ...sandbox, ok: false, steps, seconds, reason: how, output: outputTail(output) };
    }
    const result: PreflightResult = {
      ...sandbox,
      ok: true,
      steps,
      seconds,
      finishedEarly: steps < options.steps,
    };
    if (losses.length > 0) {
      result.firstLoss = losses[0] as number;
      result.lastLoss = losses.at(-1) as number;
    }
    return result;
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}

/**
 * The card's line when the bot runs as root and no run user is set: agent-written code would run as
 * root, so it does not run at all before someone approves it.
 */
export const PREFLIGHT_REFUSED =
  'pre-flight refused: the bot runs as root and SHEPHERD_RUN_AS_USER is not set, so this unapproved script was not run. Read it before approving; set SHEPHERD_RUN_AS_USER to get pre-flights.';

/** "(as shepherd-runner, no network)": how the pre-flight was contained. */
function sandboxNote(result: PreflightSandbox): string {
  const parts = [
    ...(result.user === undefined ? [] : [`as ${result.user}`]),
    ...(result.offline ? ['no network'] : []),
  ];
  return parts.length === 0 ? '' : ` (${parts.join(', ')})`;
}

function formatLoss(value: number): string {
  return Number.isFinite(value) ? value.toFixed(2) : String(value);
}

/** The card's line: "pre-flight: 5 steps in 8 s, loss 2.31 → 2.05", or the failure with its output. */
export function describePreflight(result: PreflightResult): string {
  const seconds = `${Math.max(1, Math.round(result.seconds))} s`;
  if (result.ok) {
    const loss =
      result.firstLoss !== undefined && result.lastLoss !== undefined
        ? `, loss ${formatLoss(result.firstLoss)} → ${formatLoss(result.lastLoss)}`
        : result.steps === 0
          ? ' (no metrics logged: does the script call shepherd.log_metrics?)'
          : '';
    const early = result.finishedEarly && result.steps > 0 ? ' (the script finished on its own)' : '';
    return `pre-flight${sandboxNote(result)}: ${result.steps} step${result.steps === 1 ? '' : 's'} in ${seconds}${loss}${early}`;
  }
  const output = result.output === '' ? '' : `\n\`\`\`\n${result.output}\n\`\`\``;
  const offline = result.offline ? ' It had no network: a script that downloads data fails here.' : '';
  return `pre-flight FAILED on CPU${sandboxNote(result)}: the script ${result.reason} after ${result.steps} step${result.steps === 1 ? '' : 's'} (${seconds}). A GPU-only script may still work on GPUs; approve only if so.${offline}${output}`;
}
