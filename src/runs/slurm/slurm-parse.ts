import { constants as osConstants } from 'node:os';
import type { ExecutorCrashClass, ProcessState } from '../executor.js';

/*
 * Pure parsers for Slurm's CLI output and the mapping of Slurm job states onto `ProcessState`.
 * No I/O here: everything is unit-tested against real output captured from a Slurm 22.05 cluster.
 */

/** squeue's output format: `|`-separated job id, state, pending reason and restart count (requeues). */
export const SQUEUE_FORMAT = ['-O', 'JobID:|,State:|,Reason:|,RestartCnt:|'] as const;

/** One row of `squeue -h -t all -j IDS -O 'JobID:|,State:|,Reason:|,RestartCnt:|'` (or `-o '%i|%T|%r'`). */
export interface SqueueRow {
  jobId: string;
  state: string;
  reason: string;
  /** How often the cluster requeued the job (absent from the short format). */
  restarts?: number;
}

/** One row of `sacct -X -n -P -o JobID,State,ExitCode` (or `sacct -c …`). */
export interface SacctRow {
  jobId: string;
  /** First word only: `CANCELLED by 0` → `CANCELLED`. */
  state: string;
  /** From `ExitCode=code:signal`. */
  exitCode: number | undefined;
  signal: number | undefined;
}

/** Parse `squeue` lines of `|`-separated job id, state, reason and restart count; malformed lines are skipped. */
export function parseSqueue(output: string): SqueueRow[] {
  const rows: SqueueRow[] = [];
  for (const line of output.split('\n')) {
    const [jobId, state, reason, restarts] = line
      .trim()
      .split('|')
      .map((field) => field.trim());
    if (jobId === undefined || jobId === '' || state === undefined || state === '') continue;
    const row: SqueueRow = { jobId, state: state.toUpperCase(), reason: reason ?? '' };
    if (restarts !== undefined && /^\d+$/.test(restarts)) row.restarts = Number(restarts);
    rows.push(row);
  }
  return rows;
}

/** Parse `sacct -P -o JobID,State,ExitCode` lines. A job listed twice (requeued) keeps its last row. */
export function parseSacct(output: string): SacctRow[] {
  const byId = new Map<string, SacctRow>();
  for (const line of output.split('\n')) {
    const [jobId, rawState, rawExit] = line.trim().split('|');
    if (jobId === undefined || jobId === '' || rawState === undefined || rawState === '') continue;
    const state = (rawState.split(/\s+/)[0] ?? '').toUpperCase();
    const match = /^(\d+):(\d+)$/.exec(rawExit ?? '');
    byId.set(jobId, {
      jobId,
      state,
      exitCode: match?.[1] === undefined ? undefined : Number(match[1]),
      signal: match?.[2] === undefined ? undefined : Number(match[2]),
    });
  }
  return [...byId.values()];
}

/** `sbatch --parsable` prints `id` or `id;cluster`. */
export function parseSbatchOutput(output: string): { jobId: string; cluster?: string } | undefined {
  const line = output
    .split('\n')
    .map((text) => text.trim())
    .find((text) => /^\d+(;\S+)?$/.test(text));
  if (line === undefined) return undefined;
  const [jobId = '', cluster] = line.split(';');
  return cluster === undefined ? { jobId } : { jobId, cluster };
}

/** `--time` from max hours: `D-HH:MM:SS`, rounded up to whole minutes (Slurm's resolution), at least 1 minute. */
/** The `--time` of a job: the hours the run has left under its approval (time-limit.ts). */
export function formatTimeLimit(maxHours: number): string {
  const totalMinutes = Math.max(1, Math.ceil(maxHours * 60 - 1e-9));
  const days = Math.floor(totalMinutes / 1440);
  const hours = Math.floor((totalMinutes % 1440) / 60);
  const minutes = totalMinutes % 60;
  const pad = (value: number) => String(value).padStart(2, '0');
  return `${days}-${pad(hours)}:${pad(minutes)}:00`;
}

/** Slurm's error text without the `sbatch: error:` noise, on one line, at most `limit` characters. */
export function shortenSlurmError(stderr: string, limit = 300): string {
  const text = stderr
    .split('\n')
    .map((line) => line.replace(/^\s*[a-z]+: error:\s*/i, '').trim())
    .filter((line) => line.length > 0)
    .filter((line, index, lines) => lines.indexOf(line) === index)
    .join('; ');
  if (text === '') return 'no message from Slurm';
  return text.length <= limit ? text : `${text.slice(0, limit - 1)}…`;
}

/** Pending reasons people understand; unknown reasons are shown as Slurm spells them. */
const PENDING_REASONS: Readonly<Record<string, string>> = {
  Resources: 'waiting for resources',
  Priority: 'waiting for higher-priority jobs',
  None: 'waiting to be scheduled',
  BeginTime: 'waiting for its start time',
  Dependency: 'waiting for a dependency',
  JobHeldUser: 'held by a user',
  JobHeldAdmin: 'held by an administrator',
  ReqNodeNotAvail: 'waiting for a node that is not available',
  PartitionDown: 'waiting: the partition is down',
  PartitionInactive: 'waiting: the partition is inactive',
  PartitionTimeLimit: 'waiting: the time limit is above the partition limit',
  PartitionNodeLimit: 'waiting: the node count is above the partition limit',
  NodeDown: 'waiting: a node is down',
  Reservation: 'waiting for a reservation',
  Licenses: 'waiting for licenses',
  Prolog: 'running the prolog',
};

/** "queued on Slurm: waiting for resources" for `Resources`; limits keep their Slurm name. */
export function describePendingReason(reason: string): string {
  const trimmed = reason.trim();
  const known = PENDING_REASONS[trimmed];
  if (known !== undefined) return `queued on Slurm: ${known}`;
  if (/^(QOS|Assoc)/.test(trimmed)) return `queued on Slurm: waiting for a limit (${trimmed})`;
  if (trimmed === '' || trimmed === '(null)') return 'queued on Slurm: waiting to be scheduled';
  return `queued on Slurm: ${trimmed}`;
}

/** States in which the job's processes run (or are being set up / torn down). */
const ALIVE_STATES = new Set(['RUNNING', 'CONFIGURING', 'COMPLETING', 'SIGNALING', 'STAGE_OUT', 'RESIZING']);
/** States in which the job waits (it may run again). */
const WAITING_STATES: Readonly<Record<string, string>> = {
  SUSPENDED: 'suspended on Slurm',
  STOPPED: 'stopped on Slurm (SIGSTOP)',
  REQUEUED: 'requeued on Slurm',
  REQUEUE_FED: 'requeued on Slurm',
  REQUEUE_HOLD: 'requeued and held on Slurm',
  SPECIAL_EXIT: 'requeued and held on Slurm after a special exit',
  RESV_DEL_HOLD: 'held on Slurm: its reservation was deleted',
};
/** Scheduler verdicts the monitor reports as crash classes. */
const CRASH_STATES: Readonly<Record<string, ExecutorCrashClass>> = {
  TIMEOUT: 'timeout',
  DEADLINE: 'timeout',
  OUT_OF_MEMORY: 'out_of_memory',
  NODE_FAIL: 'node_fail',
  BOOT_FAIL: 'node_fail',
  PREEMPTED: 'preempted',
  CANCELLED: 'cancelled',
  REVOKED: 'cancelled',
};
/** The signal a crash state implies when Slurm reports none. */
const CRASH_DEFAULT_SIGNAL: Readonly<Record<ExecutorCrashClass, string>> = {
  timeout: 'SIGTERM',
  out_of_memory: 'SIGKILL',
  node_fail: 'SIGKILL',
  preempted: 'SIGTERM',
  cancelled: 'SIGTERM',
};

/** States in which the job is over. */
const FINAL_STATES: ReadonlySet<string> = new Set(['COMPLETED', 'FAILED', ...Object.keys(CRASH_STATES)]);

export function isFinalState(state: string): boolean {
  return FINAL_STATES.has(state.toUpperCase());
}

function signalName(signal: number): string {
  const entry = Object.entries(osConstants.signals).find(([, number]) => number === signal);
  return entry?.[0] ?? `signal ${signal}`;
}

/**
 * Map a Slurm job state (+ pending reason or exit code) onto the executor's `ProcessState`.
 * Final states need the exit code from `sacct`; with none known, a FAILED job reports exit code 1.
 */
export function mapSlurmState(
  rawState: string,
  detail: {
    reason?: string;
    exitCode?: number | undefined;
    signal?: number | undefined;
    restarts?: number | undefined;
  } = {},
): ProcessState {
  const state = (rawState.split(/\s+/)[0] ?? '').toUpperCase().replace(/\+$/, '');
  // Waiting again after it ran: the cluster requeued it (a failed node, `scontrol requeue`), killing its processes.
  const requeued = (detail.restarts ?? 0) > 0 || state.startsWith('REQUEUE');
  if (state === 'PENDING') {
    const pending = { kind: 'pending' as const, reason: describePendingReason(detail.reason ?? '') };
    return requeued ? { ...pending, reason: 'requeued on Slurm', requeued } : pending;
  }
  if (ALIVE_STATES.has(state)) return { kind: 'alive' };
  const waiting = WAITING_STATES[state];
  if (waiting !== undefined)
    return requeued ? { kind: 'pending', reason: waiting, requeued } : { kind: 'pending', reason: waiting };
  const hasSignal = detail.signal !== undefined && detail.signal > 0;
  if (state === 'COMPLETED') return { kind: 'exited', exitCode: detail.exitCode ?? 0 };
  if (state === 'FAILED') {
    if (hasSignal && detail.signal !== undefined) {
      return { kind: 'signaled', signal: signalName(detail.signal), exitCode: 128 + detail.signal };
    }
    // FAILED with 0:0 happens when the batch script could not even start (bad --chdir, missing file).
    return {
      kind: 'exited',
      exitCode: detail.exitCode === undefined || detail.exitCode === 0 ? 1 : detail.exitCode,
    };
  }
  const crashClass = CRASH_STATES[state];
  if (crashClass !== undefined) {
    const signal =
      hasSignal && detail.signal !== undefined ? signalName(detail.signal) : CRASH_DEFAULT_SIGNAL[crashClass];
    const result: ProcessState = { kind: 'signaled', signal, crashClass };
    if (detail.exitCode !== undefined && detail.exitCode !== 0) result.exitCode = detail.exitCode;
    else if (hasSignal && detail.signal !== undefined) result.exitCode = 128 + detail.signal;
    return result;
  }
  return { kind: 'unknown', reason: `Slurm job state ${rawState || '(empty)'}` };
}

/** One node from `scontrol show node -d -o`. */
interface SlurmNode {
  name: string;
  state: string;
  partitions: string[];
  gpusTotal: number;
  gpusAllocated: number;
}

/** Count GPUs in a gres string like `gpu:2`, `gpu:a100:4(S:0-1)`, `gpu:0,gpu:tesla:1(IDX:0)`. */
export function countGpus(gres: string): number {
  let total = 0;
  // Split on commas that start a new gres entry, not those inside "(IDX:0,2)".
  for (const entry of gres.split(/,(?![^(]*\))/)) {
    const match = /^gpu(?::[^:(]+)?:(\d+)/.exec(entry.trim());
    if (match?.[1] !== undefined) total += Number(match[1]);
  }
  return total;
}

/** Parse `scontrol show node -d -o` (one node a line, `Key=Value` words). */
export function parseScontrolNodes(output: string): SlurmNode[] {
  const nodes: SlurmNode[] = [];
  for (const line of output.split('\n')) {
    const fields = new Map<string, string>();
    for (const word of line.trim().split(/\s+/)) {
      const equals = word.indexOf('=');
      if (equals > 0) fields.set(word.slice(0, equals), word.slice(equals + 1));
    }
    const name = fields.get('NodeName');
    if (name === undefined) continue;
    const allocTres = /gres\/gpu=(\d+)/.exec(fields.get('AllocTRES') ?? '');
    const gresUsed = fields.get('GresUsed');
    nodes.push({
      name,
      state: fields.get('State') ?? 'UNKNOWN',
      partitions: (fields.get('Partitions') ?? '').split(',').filter((part) => part.length > 0),
      gpusTotal: countGpus(fields.get('Gres') ?? ''),
      gpusAllocated:
        gresUsed !== undefined
          ? countGpus(gresUsed)
          : allocTres?.[1] === undefined
            ? 0
            : Number(allocTres[1]),
    });
  }
  return nodes;
}

/** A node whose GPUs cannot be given to new jobs (down, drained, failing, powered off). */
export function nodeUnavailable(state: string): boolean {
  return /DOWN|DRAIN|FAIL|NOT_RESPONDING|MAINT|FUTURE|\*/i.test(state);
}
