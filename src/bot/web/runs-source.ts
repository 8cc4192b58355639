import type { Features } from '../../features.js';
import type { WebRunsSource } from './runs-api.js';

/** The runs API's view of the core: reads from the run service and store, changes through chat's operations. */
export function createWebRunsSource(features: Features): WebRunsSource {
  const { runs, operations } = features;
  return {
    listRuns: () => runs.service.listRuns(),
    findRun: (reference) => runs.service.findRun(reference),
    runDir: (runId) => runs.store.runDir(runId),
    // The same access check as chat (run-access.ts): requester, approver, or someone in the run's thread.
    change(change, runId, actor, threadId) {
      if (change === 'pause') return operations.pause(runId, actor, threadId, 'button');
      if (change === 'resume') return operations.resume(runId, actor, threadId, 'command');
      return operations.stop(runId, actor, threadId, 'button');
    },
  };
}
