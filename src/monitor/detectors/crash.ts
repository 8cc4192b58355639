import type { ExecutorCrashClass, ProcessState } from '../../runs/executor.js';
import { infrastructureCause, NCCL_TIMEOUT } from '../../runs/infrastructure-ending.js';
import { retryLines } from '../../runs/lifecycle/auto-relaunch.js';
import type { RunMeta } from '../../runs/records/run-types.js';
import { redactSecrets } from '../../text/redact.js';

/** Why a run crashed: from its traceback and exit, or from the executor's verdict (Slurm). */
export type CrashClass =
  | 'cuda_oom'
  | 'host_oom_kill'
  | 'nccl_timeout'
  | 'missing_module'
  | 'syntax_error'
  | 'file_not_found'
  | ExecutorCrashClass
  | 'other';

/** Crash detection: a non-zero exit or an unexpected signal, with the last traceback and a class. */

export interface CrashFinding {
  crashClass: CrashClass;
  exitCode?: number;
  signal?: string;
  traceback: string;
  /** Short human label of the class ("CUDA out of memory"). */
  label: string;
  /**
   * An infrastructure failure after every automatic relaunch was spent: one line per retry. Such a crash
   * is not triaged (a code fix cannot help).
   */
  retries?: string[];
}

const MAX_TRACEBACK_CHARS = 1500;

const CRASH_LABELS: Record<CrashClass, string> = {
  cuda_oom: 'CUDA out of memory',
  host_oom_kill: 'killed (exit 137 / SIGKILL), most likely the host ran out of memory',
  nccl_timeout: 'NCCL / distributed timeout',
  missing_module: 'missing Python module',
  syntax_error: 'syntax error in the script',
  file_not_found: 'file not found',
  timeout: 'time limit reached',
  out_of_memory: 'out of memory (killed by the scheduler)',
  node_fail: 'node failure',
  preempted: 'preempted by the scheduler',
  cancelled: 'cancelled by the scheduler',
  other: 'crashed',
};

const TEXT_CLASSES: Array<[CrashClass, RegExp]> = [
  ['cuda_oom', /CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|HIP out of memory/],
  ['nccl_timeout', NCCL_TIMEOUT],
  ['missing_module', /ModuleNotFoundError|ImportError: No module named/],
  ['syntax_error', /\b(?:SyntaxError|IndentationError|TabError)\b/],
  ['file_not_found', /FileNotFoundError|No such file or directory/],
];

/** The last Python traceback in a log tail (or its last lines when there is none), redacted and bounded. */
export function extractTraceback(logTail: string, maxChars: number = MAX_TRACEBACK_CHARS): string {
  const start = logTail.lastIndexOf('Traceback (most recent call last):');
  let text =
    start === -1 ? logTail.trimEnd().split('\n').slice(-15).join('\n') : logTail.slice(start).trimEnd();
  text = redactSecrets(text);
  if (text.length <= maxChars) return text;
  // The exception line is at the end: keep the header line and the last part.
  const firstLine = text.slice(0, text.indexOf('\n') + 1);
  const keep = maxChars - firstLine.length - 2;
  return keep > 200 ? `${firstLine}…\n${text.slice(-keep)}` : `…${text.slice(-(maxChars - 1))}`;
}

/** Classify a crash from the executor's verdict, the exit status and the traceback text. */
export function classifyCrash(state: ProcessState, traceback: string): CrashClass {
  if ((state.kind === 'exited' || state.kind === 'signaled') && state.crashClass !== undefined) {
    return state.crashClass;
  }
  for (const [crashClass, pattern] of TEXT_CLASSES) if (pattern.test(traceback)) return crashClass;
  if (state.kind === 'exited' && state.exitCode === 137) return 'host_oom_kill';
  if (state.kind === 'signaled' && (state.signal === 'SIGKILL' || state.exitCode === 137))
    return 'host_oom_kill';
  return 'other';
}

/**
 * A crash is a non-zero exit or a signal we did not send. When the run is being paused or stopped by a
 * person, its SIGTERM/SIGKILL ending is expected and not a crash.
 */
export function detectCrash(
  meta: RunMeta,
  state: ProcessState,
  logTail: string,
  now: number = Date.now(),
): CrashFinding | undefined {
  // A queued run has no process of its own yet: what ended is the previous launch, stopped by Shepherd
  // for a fix or a relaunch (SIGTERM), not a crash.
  if (meta.status === 'paused' || meta.status === 'stopped' || meta.status === 'queued') return undefined;
  // Shepherd is ending this launch itself (pause, stop, a fix): its end is no crash.
  if (meta.stopRequested !== undefined) return undefined;
  // A wall-time chain's segment ending at its limit is the chain going on (or pausing), said in the thread.
  if (meta.segment !== undefined && 'crashClass' in state && state.crashClass === 'timeout') return undefined;
  if (state.kind === 'exited') {
    if (state.exitCode === 0 && state.crashClass === undefined) return undefined;
  } else if (state.kind !== 'signaled') {
    return undefined;
  }
  const startedAt = meta.startedAt === undefined ? now : Date.parse(meta.startedAt);
  const infrastructure = infrastructureCause({ meta, state, logTail, ranMs: now - startedAt });
  // The infrastructure's doing: run-endings relaunches it or records the failure first (auto-relaunch.ts);
  // the crash is raised only once the run has failed, so a relaunched ending raises nothing.
  if (infrastructure !== undefined && meta.status === 'running') return undefined;
  const traceback = extractTraceback(logTail);
  const crashClass = classifyCrash(state, traceback);
  const finding: CrashFinding = { crashClass, traceback, label: CRASH_LABELS[crashClass] };
  if (state.exitCode !== undefined) finding.exitCode = state.exitCode;
  if (state.kind === 'signaled') finding.signal = state.signal;
  const used = meta.autoRelaunches ?? [];
  if (infrastructure !== undefined && used.length > 0) finding.retries = retryLines(used, used.length);
  return finding;
}
