/** The use-case layer's types, apart from its factory so its parts (launches, changes, forks, checks) import no cycle. */
import type { ChatUser } from '../../bot/chat-adapter.js';
import type { Environments } from '../../config/environments.js';
import type { CheckpointHistory } from '../checkpoints/checkpoint-history.js';
import type { PreparedCommand } from '../launch/command-launch.js';
import type { CreateRunRequest, RunService } from '../lifecycle/run-service.js';
import type { RunMeta } from '../records/run-types.js';
import type { RunQueries } from '../run-queries.js';
import type { ForkRequest } from './fork-config.js';
import type { RunAccess, RunChangeVia } from './run-access.js';
import type { RunApprovals } from './run-approvals.js';

/** A tool call that asked for the action (an agent's turn resumes on the decision). */
type ToolCallRecord = { name: string; input: unknown };

/** A run request plus who launched it and how (an agent tool call resumes its turn on decision). */
export interface LaunchInput extends CreateRunRequest {
  origin: 'agent' | 'command';
  toolCall?: ToolCallRecord;
  /** Named environment asked for (`--env`); the configured default applies when absent. */
  environment?: string;
  /** A command run, already checked against the workspace. */
  prepared?: PreparedCommand;
}

/** Flags shared by `run <file>` and `run -- <command>`. */
export interface RunFlags {
  gpus?: number;
  runName?: string;
  maxHours?: number;
  env?: string;
  cwd?: string;
  nodes?: number;
  /** `--on`: the backend as typed (`local`, `slurm`, `k8s`, `hf`). */
  on?: string;
  /** `--image`: the container image (Kubernetes; local runs in a container). */
  image?: string;
  /** `--flavor`: the HF Jobs hardware flavour. */
  flavor?: string;
  /** `--eval "<command>"`: run in the run directory after training exits 0. */
  evalCommand?: string;
  /** `--logdir DIR`: where the run's TensorBoard event files are (inside the workspace). */
  logdir?: string;
}

/** The use-case layer over runs: what commands, agent tools and alert buttons may do to runs. */
export interface RunOperations {
  launch(input: LaunchInput): Promise<string>;
  list(): Promise<string>;
  /** `full`: with the reproducibility record of the newest launch (`status <run> --full`). */
  status(reference: string, view?: { full?: boolean }): Promise<string>;
  pause(reference: string, actor: ChatUser, threadId: string, via: RunChangeVia): Promise<string>;
  resume(
    reference: string,
    actor: ChatUser,
    threadId: string,
    origin: 'agent' | 'command',
    toolCall?: ToolCallRecord,
    /** `--on`: resume on another configured backend. */
    where?: { on?: string },
  ): Promise<string>;
  stop(reference: string, actor: ChatUser, threadId: string, via: RunChangeVia): Promise<string>;
  updateScript(
    reference: string,
    script: string,
    reason: string,
    actor: ChatUser,
    threadId: string,
    origin: 'agent' | 'command' | 'monitor',
    toolCall?: ToolCallRecord,
  ): Promise<{ text: string; diff: string }>;
  cluster(): Promise<string>;
  runWorkspaceScript(path: string, flags: RunFlags, threadId: string, actor: ChatUser): Promise<string>;
  /** `fork <run> …`: a new run from a checkpoint of the old one, with changed settings, behind a card. */
  fork(reference: string, request: ForkRequest, actor: ChatUser, threadId: string): Promise<string>;
  /** `schedule <run> --cron "…"`: an approval card for a recurring HF job. */
  schedule(reference: string, cron: string, actor: ChatUser, threadId: string): Promise<string>;
  runCommand(
    argv: string[],
    flags: RunFlags,
    threadId: string,
    actor: ChatUser,
    from?: { origin: 'agent' | 'command'; toolCall?: ToolCallRecord },
  ): Promise<string>;
}

/** Recurring jobs on a backend's scheduler (HF Jobs: `src/runs/hfjobs/hfjobs-run-schedules.ts`). */
export interface RunSchedules {
  /** What the approval card needs; refuses a run not launched on HF Jobs, or a malformed cron, before any card. */
  prepare(reference: string, cron: string): Promise<{ meta: RunMeta; cron: string; script: string }>;
  /** Applies an approved card: creates the recurring job. */
  create(runId: string, cron: string): Promise<string>;
  /** Lines for `runs`: what is scheduled (empty when nothing is, or schedules are not configured). */
  listLines(): Promise<string[]>;
}

export interface RunOperationsOptions {
  /** Changes: the run life cycle. */
  runs: RunService;
  /** Reads: records, status, scripts, run directories. */
  queries: RunQueries;
  /** Recurring jobs (`schedule <run> --cron`); absent: refused. */
  schedules?: RunSchedules;
  approvals: RunApprovals;
  workspace: string;
  /** Who may pause, resume, stop or edit a run (absent: anyone, as before; tests of the bare core). */
  access?: RunAccess;
  /** `SHEPHERD_MAX_HOURS`: a resume of a run above it is refused before any card. */
  maxHours?: number;
  /** Checks a proposed script; resolves an error text or undefined when it compiles. */
  checkSyntax?: (source: string) => Promise<string | undefined>;
  /** The CPU pre-flight (when enabled): resolves the line the approval card shows. */
  preflight?: (
    source: string,
    config?: Record<string, unknown>,
    onStart?: () => Promise<void>,
  ) => Promise<string>;
  /** Posts into a thread (a script that does not compile is reported there, whoever asked). */
  notify?: (threadId: string, text: string) => Promise<void>;
  /** The agent's latest memory estimate in this thread for this model, shown on its launch card. */
  memoryEstimate?: (threadId: string, modelId: string | undefined) => Promise<string | undefined>;
  /** The thread's latest dataset format check (`inspect_dataset` with a method), shown on its launch card. */
  datasetCheck?: (threadId: string) => Promise<string | undefined>;
  /** `SHEPHERD_ENVIRONMENTS` and `SHEPHERD_DEFAULT_ENV`. */
  environments?: Environments;
  /** What training processes inherit (scrubbed; `SHEPHERD_RUN_ENV_*` as their names): tracker warnings. */
  runEnvironment?: Readonly<Record<string, string | undefined>>;
  defaultEnvironment?: string | undefined;
  /** `SHEPHERD_PYTHON`, for `run <script.py> --cwd DIR` (a command run of that script). */
  python?: string;
  /** Checkpoint histories: where a fork starts (absent: forks are refused). */
  checkpoints?: Pick<CheckpointHistory, 'list'>;
  /** Stopping a watched run asks for a confirmation button first; this posts it. */
  confirmStop?: (meta: RunMeta, actor: ChatUser) => Promise<string>;
}
