import type { Executor, ProcessState } from './executor.js';
import type { RunStore } from './records/run-store.js';
import type { RunMeta } from './records/run-types.js';

/**
 * The one door into runs/ for reads: other folders ask this, never the run store or the executor, so
 * how runs are kept (files, Redis) and polled (local, Slurm, watched) stays behind it.
 */
export interface RunsFacade {
  /** The record of one run by id; throws `RunError('unknown_run')` when there is none. */
  get(runId: string): Promise<RunMeta>;
  /** A run by id, name or unique prefix. */
  find(reference: string): Promise<RunMeta>;
  list(): Promise<RunMeta[]>;
  /** The run's directory (metrics, output log, checkpoints, archived scripts). */
  runDirectory(runId: string): string;
  /** The run's script (a version, or the current one). */
  readScript(runId: string, version?: number): Promise<string>;
  /** What the executor sees of the run's process now; undefined when it does not know the run. */
  processState(meta: RunMeta): Promise<ProcessState | undefined>;
  /** Hang dump: ask the run's process for its threads' stacks (into output.log); how, or undefined. */
  dumpStacks(meta: RunMeta): Promise<string | undefined>;
}

export function createRunsFacade(parts: { store: RunStore; executor: Executor }): RunsFacade {
  const { store, executor } = parts;
  return {
    get: (runId) => store.readMeta(runId),
    find: (reference) => store.findRun(reference),
    list: () => store.listRuns(),
    runDirectory: (runId) => store.runDir(runId),
    readScript: (runId, version) => store.readScript(runId, version),
    processState: async (meta) => (await executor.poll([meta])).get(meta.id),
    dumpStacks: async (meta) => executor.dumpStacks?.(meta),
  };
}
