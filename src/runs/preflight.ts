import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseMetricLine } from './file-tail.js';
import { PYTHON_RUNTIME_DIR, RUN_FILES } from './run-files.js';

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
}

type PreflightResult =
  | {
      ok: true;
      steps: number;
      seconds: number;
      firstLoss?: number;
      lastLoss?: number;
      finishedEarly: boolean;
    }
  | { ok: false; steps: number; seconds: number; reason: string; output: string };

/** Bot credentials and Shepherd's own settings never reach a pre-flight (it runs untrusted code). */
function preflightEnvironment(
  inherited: Readonly<Record<string, string | undefined>>,
  runDir: string,
  steps: number,
  config: Record<string, unknown> | undefined,
): Record<string, string> {
  const environment: Record<string, string> = {};
  for (const [key, value] of Object.entries(inherited)) {
    if (value === undefined || /^(SHEPHERD_|SLACK_|DISCORD_|REDIS_URL$)/.test(key)) continue;
    environment[key] = value;
  }
  return {
    ...environment,
    SHEPHERD_RUN_DIR: runDir,
    SHEPHERD_RUN_ID: 'preflight',
    SHEPHERD_RUN_NAME: 'preflight',
    SHEPHERD_RUN_CONFIG: JSON.stringify(config ?? {}),
    SHEPHERD_PREFLIGHT: '1',
    SHEPHERD_PREFLIGHT_STEPS: String(steps),
    CUDA_VISIBLE_DEVICES: '',
    PYTHONPATH: inherited.PYTHONPATH
      ? `${PYTHON_RUNTIME_DIR}${path.delimiter}${inherited.PYTHONPATH}`
      : PYTHON_RUNTIME_DIR,
    PYTHONUNBUFFERED: '1',
    PYTHONDONTWRITEBYTECODE: '1',
  };
}

/** The end of the output, where a traceback is. */
function outputTail(text: string, maxLines = 15): string {
  const lines = text.trimEnd().split('\n');
  return lines.slice(-maxLines).join('\n').slice(-1500);
}

export async function runPreflight(
  options: PreflightOptions,
  script: string,
  config?: Record<string, unknown>,
): Promise<PreflightResult> {
  const directory = await mkdtemp(path.join(tmpdir(), 'shepherd-preflight-'));
  const started = Date.now();
  try {
    await writeFile(path.join(directory, RUN_FILES.script), script, 'utf8');
    const logFile = path.join(directory, RUN_FILES.output);
    const logFd = openSync(logFile, 'w');
    let timedOut = false;
    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>(
      (resolve) => {
        const child = spawn(options.python, ['-u', RUN_FILES.script], {
          cwd: directory,
          env: preflightEnvironment(options.environment, directory, options.steps, config),
          // Its own process group, so a timeout ends the script and anything it started.
          detached: true,
          stdio: ['ignore', logFd, logFd],
        });
        const timer = setTimeout(() => {
          timedOut = true;
          if (child.pid !== undefined) {
            try {
              process.kill(-child.pid, 'SIGKILL');
            } catch {
              // Already gone.
            }
          }
        }, options.timeoutS * 1000);
        child.once('error', (error) => {
          clearTimeout(timer);
          resolve({ code: null, signal: null, error });
        });
        child.once('exit', (code, signal) => {
          clearTimeout(timer);
          // Children the script left behind (data loader workers) go with it.
          if (child.pid !== undefined) {
            try {
              process.kill(-child.pid, 'SIGKILL');
            } catch {
              // None left.
            }
          }
          resolve({ code, signal });
        });
      },
    );
    closeSync(logFd);
    const seconds = (Date.now() - started) / 1000;
    const output = await readFile(logFile, 'utf8').catch(() => '');
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
    if (exit.error !== undefined) {
      return {
        ok: false,
        steps,
        seconds,
        reason: `could not start ${options.python}: ${exit.error.message}`,
        output: '',
      };
    }
    if (timedOut) {
      return {
        ok: false,
        steps,
        seconds,
        reason: `did not reach ${options.steps} steps within ${options.timeoutS} s`,
        output: outputTail(output),
      };
    }
    if (exit.code !== 0) {
      const how = exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
      return { ok: false, steps, seconds, reason: how, output: outputTail(output) };
    }
    const result: PreflightResult = { ok: true, steps, seconds, finishedEarly: steps < options.steps };
    if (losses.length > 0) {
      result.firstLoss = losses[0] as number;
      result.lastLoss = losses.at(-1) as number;
    }
    return result;
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
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
    return `pre-flight: ${result.steps} step${result.steps === 1 ? '' : 's'} in ${seconds}${loss}${early}`;
  }
  const output = result.output === '' ? '' : `\n\`\`\`\n${result.output}\n\`\`\``;
  return `pre-flight FAILED on CPU: the script ${result.reason} after ${result.steps} step${result.steps === 1 ? '' : 's'} (${seconds}). A GPU-only script may still work on GPUs; approve only if so.${output}`;
}
