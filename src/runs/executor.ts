import type { RunMeta } from './run-types.js';

/**
 * The executor seam: where a run's process actually lives. The local executor runs a process group on
 * this host; a cluster executor (Slurm, Kubernetes) submits jobs. Tools, approvals and the monitor only
 * talk to this interface, so adding an engine never touches them.
 */

/** What the executor knows about a run's process or job right now. */
export type ProcessState =
  | { kind: 'pending'; reason?: string }
  | { kind: 'alive' }
  | { kind: 'exited'; exitCode: number; crashClass?: ExecutorCrashClass }
  | { kind: 'signaled'; signal: string; exitCode?: number; crashClass?: ExecutorCrashClass }
  | { kind: 'unknown'; reason?: string };

/** Crash classes only the executor can know (a scheduler's verdict rather than a traceback). */
export type ExecutorCrashClass = 'timeout' | 'out_of_memory' | 'node_fail' | 'preempted' | 'cancelled';

export interface LaunchRequest {
  meta: RunMeta;
  /** Absolute run directory (`$SHEPHERD_DATA_DIR/runs/<id>`). */
  runDir: string;
  /** GPU indices granted by the local allocator (empty on CPU or when the executor allocates itself). */
  gpuIndices: number[];
}

export interface LaunchResult {
  pid?: number;
  pgid?: number;
  /** Local executor: the process start time, stored in meta to survive pid reuse. */
  processStartTime?: string;
  jobId?: string;
  /** When the launch hits its max hours (local executor; Slurm enforces `--time` itself). */
  deadlineAt?: string;
}

export interface ClusterInfo {
  executor: string;
  nodes?: Array<{ name: string; state: string; gpusTotal: number; gpusAllocated: number }>;
  gpusTotal: number;
  gpusFree: number;
  queueLength?: number;
  hostLoad?: number[];
  notes?: string[];
}

export interface Executor {
  readonly kind: 'local' | 'slurm';
  /** True when the executor allocates GPUs itself (Slurm); false when the local allocator must. */
  readonly allocatesGpus: boolean;
  launch(request: LaunchRequest): Promise<LaunchResult>;
  /** State of many runs in one batched call (one `squeue` for Slurm). Keyed by run id. */
  poll(runs: RunMeta[]): Promise<Map<string, ProcessState>>;
  /**
   * Ask the run to save a checkpoint and end (SIGTERM / `scancel --signal=TERM`), then force it after
   * `graceMs`. Resolves once the process or job is gone.
   */
  terminate(meta: RunMeta, options: { graceMs: number; reason: 'pause' | 'stop' }): Promise<ProcessState>;
  clusterInfo(): Promise<ClusterInfo>;
}
