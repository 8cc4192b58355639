import type { RunOperations } from '../runs/operations/operation-types.js';
import type { RunQueries } from '../runs/run-queries.js';
import type { WebRunsSource } from './runs-api.js';

/** The runs API's view of the core: reads through `RunQueries`, changes through chat's operations. */
export function createWebRunsSource(parts: { runs: RunQueries; operations: RunOperations }): WebRunsSource {
  const { runs, operations } = parts;
  return {
    listRuns: () => runs.list(),
    findRun: (reference) => runs.find(reference),
    runDir: (runId) => runs.runDirectory(runId),
    // The same access check as chat (run-access.ts): requester, approver, or someone in the run's thread.
    change(change, runId, actor, threadId) {
      if (change === 'pause') return operations.pause(runId, actor, threadId, 'button');
      if (change === 'resume') return operations.resume(runId, actor, threadId, 'command');
      return operations.stop(runId, actor, threadId, 'button');
    },
  };
}
