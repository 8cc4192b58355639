import type { BackendRouter } from './backend-router.js';
import type { ProcessState } from './executor.js';
import type { GpuAllocator } from './gpu-allocator.js';
import type { RunStore } from './records/run-store.js';
import type { RunMeta } from './records/run-types.js';
import {
  type ClusterReport,
  createRunReports,
  type ResumeInfo,
  type RunStatusReport,
  readResume,
} from './run-reports.js';

/**
 * The one door into runs/ for reads: other folders ask this, never the run store, the executor or the
 * run service, so how runs are kept (files, Redis) and polled (local, Slurm, watched) stays behind it.
 * Changes go through `RunService` (lifecycle/) and `RunOperations` (operations/); neither is a reader.
 */
export interface RunQueries {
  /** The record of one run by id; throws `RunError('unknown_run')` when there is none. */
  get(runId: string): Promise<RunMeta>;
  /** A run by id, name or unique prefix; throws `run_not_found` listing the known runs. */
  find(reference: string): Promise<RunMeta>;
  /** All runs, newest first. */
  list(): Promise<RunMeta[]>;
  /** The runs started from one thread, newest first. */
  inThread(threadId: string): Promise<RunMeta[]>;
  /** What `status` shows: the record, last metrics, log tail, resume point, the executor's view. */
  status(reference: string): Promise<RunStatusReport>;
  /** What `cluster` shows: each backend's capacity and the GPUs each run holds. */
  clusterInfo(): Promise<ClusterReport>;
  /** The run's directory (metrics, output log, checkpoints, archived scripts). */
  runDirectory(runId: string): string;
  /** The run's script (a version, or the current one). */
  readScript(runId: string, version?: number): Promise<string>;
  /** The run's resume.json as the training script wrote it; undefined when missing or not an object. */
  readResume(runId: string): Promise<ResumeInfo | undefined>;
  /** What the executor sees of the run's process now; undefined when it does not know the run. */
  processState(meta: RunMeta): Promise<ProcessState | undefined>;
  /** Hang dump: ask the run's process for its threads' stacks (into output.log); how, or undefined. */
  dumpStacks(meta: RunMeta): Promise<string | undefined>;
}

export function createRunQueries(parts: {
  store: RunStore;
  executor: BackendRouter;
  allocator: GpuAllocator;
}): RunQueries {
  const { store, executor } = parts;
  const reports = createRunReports(parts);
  return {
    get: (runId) => store.readMeta(runId),
    find: (reference) => store.findRun(reference),
    list: () => store.listRuns(),
    inThread: async (threadId) => (await store.listRuns()).filter((meta) => meta.threadId === threadId),
    status: (reference) => reports.status(reference),
    clusterInfo: () => reports.clusterInfo(),
    runDirectory: (runId) => store.runDir(runId),
    readScript: (runId, version) => store.readScript(runId, version),
    readResume: (runId) => readResume(store, runId),
    processState: async (meta) => (await executor.poll([meta])).get(meta.id),
    dumpStacks: async (meta) => executor.dumpStacks?.(meta),
  };
}
