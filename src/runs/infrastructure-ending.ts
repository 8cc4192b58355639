import type { ProcessState } from './executor.js';
import type { RunMeta } from './records/run-types.js';

/**
 * Which endings of a launch are the infrastructure's fault rather than the script's: a kill nobody in
 * Shepherd asked for (the kernel's OOM killer, a lost node), a scheduler's node failure, preemption or
 * requeue, a Kubernetes eviction, and the tracebacks of a broken interconnect or GPU. Those are relaunched
 * automatically (auto-relaunch.ts); everything else (a Python exception, CUDA out of memory, a NaN) goes to
 * triage. Pure: run-endings decides with it, and the monitor holds its crash alert back for it.
 */

type InfrastructureKind =
  | 'killed'
  | 'node_fail'
  | 'preempted'
  | 'requeued'
  | 'nccl_timeout'
  | 'ecc_error'
  | 'illegal_memory_access'
  | 'rendezvous_reset';

export interface InfrastructureCause {
  kind: InfrastructureKind;
  /** What happened, as the thread says it: "node lost", "NCCL timeout". */
  label: string;
  /** The evidence: "SIGKILL, no stop requested", "Slurm NODE_FAIL". */
  detail: string;
}

/** NCCL / distributed timeouts, shared with the monitor's crash classes (detectors/crash.ts). */
export const NCCL_TIMEOUT =
  /Watchdog caught collective operation timeout|NCCL[^\n]*(?:timeout|timed out)|ProcessGroupNCCL[^\n]*Timeout|DistBackendError|DistNetworkError|torch\.distributed[^\n]*timed out/i;

/** Out of GPU memory: the script's own doing (batch size), never retried. */
const CUDA_OOM = /CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|HIP out of memory/;

/** A bad memory access is a hardware fault only after the launch trained a while: earlier it is a bug. */
const ILLEGAL_ACCESS_MIN_HEALTHY_MS = 60 * 60_000;

const TEXT_CAUSES: Array<{ kind: InfrastructureKind; pattern: RegExp; label: string; detail: string }> = [
  { kind: 'nccl_timeout', pattern: NCCL_TIMEOUT, label: 'NCCL timeout', detail: 'collective timed out' },
  {
    kind: 'ecc_error',
    pattern: /uncorrectable ECC error/i,
    label: 'GPU memory error',
    detail: 'CUDA error: uncorrectable ECC',
  },
  {
    kind: 'rendezvous_reset',
    pattern:
      /(?:rendezvous|c10d|TCPStore)[\s\S]{0,400}Connection reset|Connection reset[\s\S]{0,400}(?:rendezvous|c10d|TCPStore)/i,
    label: 'rendezvous connection lost',
    detail: 'Connection reset in the rendezvous',
  },
];

const ILLEGAL_ACCESS = /an illegal memory access was encountered/i;

interface EndingInput {
  meta: RunMeta;
  state: ProcessState;
  /** The end of output.log (the last traceback is read from it). */
  logTail: string;
  /** How long the launch ran before it ended, when known. */
  ranMs?: number;
}

/** The last traceback of a log tail, or its last lines: what the ending's text classes are read from. */
function lastTraceback(logTail: string): string {
  const start = logTail.lastIndexOf('Traceback (most recent call last):');
  return start === -1 ? logTail.split('\n').slice(-40).join('\n') : logTail.slice(start);
}

const SCHEDULERS: Readonly<Record<RunMeta['executor'], string>> = {
  local: 'the host',
  slurm: 'Slurm',
  kubernetes: 'Kubernetes',
  hfjobs: 'HF Jobs',
};

function fromExecutor(meta: RunMeta, state: ProcessState): InfrastructureCause | undefined {
  const where = SCHEDULERS[meta.executor];
  if (state.kind === 'pending' && state.requeued === true) {
    return { kind: 'requeued', label: 'requeued by the cluster', detail: `${where} requeued the job` };
  }
  if (state.kind !== 'exited' && state.kind !== 'signaled') return undefined;
  const said = state.kind === 'exited' && state.reason !== undefined ? `: ${state.reason}` : '';
  if (state.crashClass === 'node_fail') {
    return { kind: 'node_fail', label: 'node lost', detail: `${where} reports a node failure${said}` };
  }
  if (state.crashClass === 'preempted') {
    return { kind: 'preempted', label: 'preempted', detail: `${where} preempted the job${said}` };
  }
  return undefined;
}

function fromText(input: EndingInput, traceback: string): InfrastructureCause | undefined {
  for (const cause of TEXT_CAUSES) {
    if (cause.pattern.test(traceback)) return { kind: cause.kind, label: cause.label, detail: cause.detail };
  }
  if (ILLEGAL_ACCESS.test(traceback) && (input.ranMs ?? 0) >= ILLEGAL_ACCESS_MIN_HEALTHY_MS) {
    return {
      kind: 'illegal_memory_access',
      label: 'GPU fault',
      detail: 'an illegal memory access after hours of healthy steps',
    };
  }
  return undefined;
}

/**
 * Why the infrastructure ended this launch, or undefined when the ending is the script's own (or one
 * Shepherd asked for, or a run Shepherd only watches and cannot relaunch).
 */
export function infrastructureCause(input: EndingInput): InfrastructureCause | undefined {
  const { meta, state } = input;
  if (meta.watch !== undefined || meta.stopRequested !== undefined) return undefined;
  const scheduler = fromExecutor(meta, state);
  if (scheduler !== undefined) return scheduler;
  if (state.kind !== 'exited' && state.kind !== 'signaled') return undefined;
  // A scheduler's own verdict that is not infrastructure (time limit, its OOM kill, a cancel) stands.
  if (state.crashClass !== undefined) return undefined;
  if (state.kind === 'exited' && state.exitCode === 0) return undefined;
  // output.log holds every launch: only this launch's lines say why it ended.
  const header = input.logTail.lastIndexOf(`=== launch ${meta.launchCount} at `);
  const traceback = lastTraceback(header === -1 ? input.logTail : input.logTail.slice(header));
  if (CUDA_OOM.test(traceback)) return undefined;
  const killed =
    (state.kind === 'signaled' && (state.signal === 'SIGKILL' || state.signal === 'SIGBUS')) ||
    (state.kind === 'exited' && (state.exitCode === 137 || state.exitCode === 135));
  if (killed) {
    const signal = state.kind === 'signaled' ? state.signal : state.exitCode === 137 ? 'SIGKILL' : 'SIGBUS';
    return { kind: 'killed', label: 'killed', detail: `${signal}, no stop requested` };
  }
  return fromText(input, traceback);
}
