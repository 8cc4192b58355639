import type { BackendKind } from '../config/backend-kinds.js';
import type { RunMeta } from './records/run-types.js';

/** What a backend needs to say where a run would go and what it costs, before the run exists. */
export type PlacementRequest = Pick<RunMeta, 'gpus' | 'maxHours'> &
  Partial<Pick<RunMeta, 'nodes' | 'image' | 'flavor'>>;

/** Where a run goes, as cards and `status` show it. */
export interface Placement {
  /** "Kubernetes namespace ml, queue team-a", "HF Jobs a10g-small ($1.05/h)", "Slurm partition gpu". */
  description: string;
  /** Price of the whole run per hour on this backend (all its GPUs), for cost estimates and `spend`. */
  hourlyUsd: number;
  /** Warnings a person should read before approving ("checkpoints won't outlive the pod"). */
  notes?: string[];
}

/**
 * The executor seam: where a run's process actually lives. The local executor runs a process group on
 * this host; a cluster executor (Slurm, Kubernetes) submits jobs. Tools, approvals and the monitor only
 * talk to this interface, so adding an engine never touches them.
 */

/** What the executor knows about a run's process or job right now. */
export type ProcessState =
  /** `requeued`: the cluster killed the job's processes and put it back in its queue (a requeue). */
  | { kind: 'pending'; reason?: string; requeued?: boolean }
  | { kind: 'alive' }
  /** `reason`: what the backend says ended it when the exit code alone does not ("ImagePullBackOff: …"). */
  | { kind: 'exited'; exitCode: number; crashClass?: ExecutorCrashClass; reason?: string }
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
  /** A wall-time chain's segment this launch is (Slurm, when the hours exceed the partition's MaxTime). */
  segment?: { index: number; of: number };
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
  readonly kind: BackendKind;
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
  /**
   * Where a run would go and its hourly price. Throws a `RunError` with a sentence for the user when the
   * request cannot run here (an unknown HF flavour, no image configured). Absent: the router describes it
   * from config (GPUs × `SHEPHERD_GPU_HOUR_USD`).
   */
  placement?(request: PlacementRequest): Promise<Placement>;
  /**
   * Hang dump: ask the run's live process for every thread's stack, written into its output.log. Returns
   * how it was asked ("faulthandler (SIGUSR2 to pid 12)", "py-spy (pid 12)"), or undefined when this run
   * cannot be dumped (no helper and no py-spy, a container, a remote backend).
   */
  dumpStacks?(meta: RunMeta): Promise<string | undefined>;
  /** Stops this process's background work (log followers); jobs keep running. */
  close?(): Promise<void>;
}
