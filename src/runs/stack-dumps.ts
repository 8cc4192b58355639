import { execFile } from 'node:child_process';
import { appendFile, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../logger.js';
import { processGroupMembers, readProcessStat } from './process-table.js';
import { RUN_FILES } from './records/run-files.js';
import type { RunMeta } from './records/run-types.js';

/**
 * Hang dumps of a local run: every thread's Python stack goes into the run's output.log, where the monitor
 * reads it. A process that imported the helper registered `faulthandler` on SIGUSR2 and wrote its pid to
 * `.shepherd/stack-signal.jsonl`; only those pids get the signal (SIGUSR2 would kill any other process).
 * Without the helper, `py-spy dump --pid` is used when py-spy is installed, and its output is appended.
 */

/** `py-spy dump --pid <pid>`: its output, or undefined when py-spy is absent or failed. */
export type PySpy = (pid: number) => Promise<string | undefined>;

/** Processes dumped with py-spy at most per request (a data loader may have many workers). */
const MAX_PY_SPY_PROCESSES = 4;

/** py-spy from the runs' PATH; undefined output (and no error) when it is not installed. */
export function createPySpy(environment: Readonly<Record<string, string | undefined>>): PySpy {
  return (pid) =>
    new Promise((resolve) => {
      execFile(
        'py-spy',
        ['dump', '--pid', String(pid)],
        { env: environment, timeout: 30_000, encoding: 'utf8' },
        (error, stdout) => resolve(error === null && stdout.trim() !== '' ? stdout : undefined),
      );
    });
}

async function helperPids(runDir: string): Promise<number[]> {
  let text: string;
  try {
    text = await readFile(path.join(runDir, RUN_FILES.stackSignal), 'utf8');
  } catch {
    return [];
  }
  const pids = new Set<number>();
  for (const line of text.split('\n')) {
    const match = /"pid":\s*(\d+)/.exec(line);
    if (match?.[1] !== undefined) pids.add(Number(match[1]));
  }
  return [...pids];
}

/**
 * Ask a local run's processes for their stacks. Returns how (for the alert and the log), or undefined when
 * nothing can dump them: a run in a container (its pids live in another namespace), no helper and no py-spy.
 */
export async function dumpLocalStacks(
  meta: RunMeta,
  runDir: string,
  options: { pySpy?: PySpy | undefined; logger: Logger },
): Promise<string | undefined> {
  const pgid = meta.pgid ?? meta.pid;
  if (pgid === undefined || meta.image !== undefined) return undefined;
  const inRun = (pid: number) => {
    const stat = readProcessStat(pid);
    return stat !== undefined && stat.pgid === pgid && stat.state !== 'Z' && stat.state !== 'X';
  };
  const signalled: number[] = [];
  for (const pid of (await helperPids(runDir)).filter(inRun)) {
    try {
      process.kill(pid, 'SIGUSR2');
      signalled.push(pid);
    } catch (error) {
      options.logger.warn({ runId: meta.id, pid, err: error }, 'could not send SIGUSR2 for a stack dump');
    }
  }
  if (signalled.length > 0) return `faulthandler (SIGUSR2 to pid ${signalled.join(', ')})`;
  if (options.pySpy === undefined) return undefined;
  const dumped: number[] = [];
  for (const pid of processGroupMembers(pgid).slice(0, MAX_PY_SPY_PROCESSES)) {
    const text = await options.pySpy(pid);
    if (text === undefined) continue;
    await appendFile(
      path.join(runDir, RUN_FILES.output),
      `[shepherd] py-spy dump --pid ${pid}\n${text.endsWith('\n') ? text : `${text}\n`}`,
    );
    dumped.push(pid);
  }
  return dumped.length > 0 ? `py-spy (pid ${dumped.join(', ')})` : undefined;
}
