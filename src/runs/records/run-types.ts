import type { BackendKind } from '../../config/backend-kinds.js';

/** Run statuses and the transitions the status machine allows. */
export const RUN_STATUSES = [
  'pending_approval',
  'queued',
  'running',
  /** Training exited 0 and the run's `--eval` command runs (same process tree, same GPUs). */
  'evaluating',
  'paused',
  'stopped',
  'completed',
  'failed',
  'rejected',
] as const;

export type RunStatus = (typeof RUN_STATUSES)[number];

export const TERMINAL_STATUSES: ReadonlySet<RunStatus> = new Set([
  'stopped',
  'completed',
  'failed',
  'rejected',
]);
/** Statuses whose run is watched by the monitor. */
export const ACTIVE_STATUSES: ReadonlySet<RunStatus> = new Set(['queued', 'running', 'evaluating']);

/** Statuses whose process is alive (training, or its evaluation after it). */
export function isLaunched(status: RunStatus): boolean {
  return status === 'running' || status === 'evaluating';
}

export const ALLOWED_TRANSITIONS: Readonly<Record<RunStatus, readonly RunStatus[]>> = {
  pending_approval: ['queued', 'rejected', 'stopped'],
  queued: ['running', 'stopped', 'failed', 'paused'],
  running: ['paused', 'stopped', 'completed', 'failed', 'queued', 'evaluating'],
  evaluating: ['stopped', 'completed', 'failed'],
  paused: ['queued', 'stopped', 'pending_approval'],
  stopped: [],
  completed: [],
  failed: ['pending_approval', 'queued'],
  rejected: [],
};

/** What a person can do to a run from a button: `resume` also covers a failed run taken up again. */
type RunAction = 'pause' | 'resume' | 'stop';

/** The actions that apply to a run in `status` (the playground's run page offers only these). */
export function runActionsFor(status: RunStatus): RunAction[] {
  const actions: RunAction[] = [];
  if (status === 'running' || status === 'queued') actions.push('pause');
  if (status === 'paused' || status === 'failed') actions.push('resume');
  if (ALLOWED_TRANSITIONS[status].includes('stopped')) actions.push('stop');
  return actions;
}

/** `meta.json` of a run directory. Always written atomically (temp file + rename). */
export interface RunMeta {
  schemaVersion: 1;
  id: string;
  name: string;
  threadId: string;
  requester: { id: string; name: string };
  status: RunStatus;
  /** Human-readable reason for the current status ("waiting for 2 GPUs, 1 free", sbatch error, …). */
  statusReason?: string;
  gpus: number;
  /** GPU indices currently held (local executor); empty when none are held. */
  gpuIndices: number[];
  maxHours: number;
  modelId?: string;
  config?: Record<string, unknown>;
  /** Extra command-line arguments for train.py (a sweep trial's `--key value` pairs). */
  args?: string[];
  /** Version number of the current `train.py` (1 for the first script). */
  scriptVersion: number;
  /** The backend the run goes to (`--on`); pid/pgid locally, `jobId` elsewhere. */
  executor: BackendKind;
  /** Container image (`--image`; Kubernetes, or a local run in a container). */
  image?: string;
  /** Hugging Face Jobs hardware flavour (`--flavor`). */
  flavor?: string;
  /** Where the backend puts the run, as cards and `status` say it ("Kubernetes namespace ml, queue a"). */
  placement?: string;
  /** What a person should read before approving ("checkpoints won't outlive the pod"). */
  placementNotes?: string[];
  /** The whole run's price per hour on its backend when created (cost estimates and `spend`). */
  hourlyUsd?: number;
  pid?: number;
  pgid?: number;
  /** Start time of the launched process (`/proc/<pid>/stat` field 22), so a reused pid is not mistaken for ours. */
  processStartTime?: string;
  jobId?: string;
  launchCount: number;
  /** When the current launch reaches its max hours (stored so the limit survives bot restarts). */
  deadlineAt?: string;
  /** The wall-time chain segment of the current launch (Slurm: hours above the partition's MaxTime). */
  segment?: { index: number; of: number };
  /** Set when Shepherd queues a chain's next segment; the launch consumes it. */
  nextSegment?: number;
  /** When the run last entered `queued` (FIFO order of the GPU queue). */
  queuedAt?: string;
  createdAt: string;
  updatedAt: string;
  startedAt?: string;
  endedAt?: string;
  exitCode?: number;
  exitSignal?: string;
  lastStep?: number;
  /** A command run: the argv started without a shell (instead of `python -u train.py`). */
  command?: string[];
  /** Absolute working directory of a command run (the workspace or a directory inside it). */
  cwd?: string;
  /** Absolute path of the `.py` file the command names; script edits and fixes go to it. */
  scriptPath?: string;
  /** Named environment from `SHEPHERD_ENVIRONMENTS` the run starts in. */
  environmentName?: string;
  /**
   * Set while Shepherd itself ends the current launch (pause, stop, a fix, the time limit): the process or job
   * ending meanwhile (a cancelled HF job, a SIGTERM) is what was asked for, not a crash. Cleared by the next
   * status change.
   */
  stopRequested?: 'pause' | 'stop';
  /** Nodes (`sbatch --nodes`, an Indexed Job's completions on Kubernetes); 1 when absent. */
  nodes?: number;
  /** Automatic relaunches after infrastructure failures (auto-relaunch.ts), oldest first. */
  autoRelaunches?: AutoRelaunchRecord[];
  /**
   * Hours the run already ran under its current approval before this launch (automatic relaunches share
   * one `--hours` budget); cleared by a new approval.
   */
  priorHours?: number;
  /** A fork (`fork <run>`): the run it came from and the checkpoint it resumes from (null: none recorded). */
  forkOf?: ForkOrigin;
  /** Set for a run Shepherd watches but did not launch (a hand-submitted Slurm job or a local log + pid). */
  watch?: WatchSource;
  /** `--logdir DIR`: absolute, inside the workspace; the monitor reads TensorBoard event files there. */
  logDir?: string;
  /** `--eval "<command>"`: run in the run directory after training exits 0 (status `evaluating`). */
  evalCommand?: string;
  /** How the evaluation went, recorded when the run ended. */
  evaluation?: EvaluationRecord;
  /** The final model directory the script named with `shepherd.save_model`, recorded when the run ended. */
  model?: SavedModel;
  /** Pushes to the Hub, oldest first. */
  hubPushes?: HubPush[];
}

export interface EvaluationRecord {
  status: 'passed' | 'failed';
  exitCode?: number;
  /** Numbers from `shepherd.log_eval` and printed eval dicts, last value of each name. */
  results: Record<string, number>;
  startedAt?: string;
  endedAt?: string;
}

export interface SavedModel {
  /** Absolute path of the model directory. */
  path: string;
  /** What the script said about it (base_model, datasets, library, license, tags, …). */
  info: Record<string, unknown>;
  step?: number;
  savedAt: string;
  /** Where the directory is when not on Shepherd's host (`HF job <id>`): it cannot be pushed from here. */
  location?: string;
}

export interface HubPush {
  repoId: string;
  url: string;
  commit: string;
  private: boolean;
  at: string;
  requester: { id: string; name: string };
  approver: { id: string; name: string };
}

/** Where a fork came from; `checkpoint` is the parent's path as its script saved it. */
interface ForkOrigin {
  runId: string;
  runName: string;
  step: number;
  checkpoint: string | null;
}

/** One automatic relaunch: what ended the launch and where the next one resumed. */
export interface AutoRelaunchRecord {
  at: string;
  /** The launch that ended. */
  launch: number;
  /** "killed at step 1,200 (SIGKILL, no stop requested)". */
  cause: string;
  /** The step the relaunch resumed from; null = from scratch. */
  from: number | null;
}

type WatchSource =
  | { source: 'slurm'; logPath: string }
  /** A Job someone else created (`watch k8s:<namespace>/<job>`); its pod log is followed into output.log. */
  | { source: 'kubernetes'; namespace: string; job: string }
  /** An HF job started elsewhere (`watch hf:<job id>`). */
  | { source: 'hfjobs'; jobId: string; namespace?: string }
  | { source: 'log'; logPath: string; pid?: number; pidStartTime?: string };
