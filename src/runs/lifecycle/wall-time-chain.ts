import type { GpuAllocator } from '../gpu-allocator.js';
import type { RunStore } from '../records/run-store.js';
import type { RunMeta } from '../records/run-types.js';
import { lastStepOf, readResume } from '../run-reports.js';
import type { RunLauncher } from './run-launcher.js';
import type { RunTransitions } from './run-transitions.js';

/**
 * The next segment of a wall-time chain (Slurm runs whose hours exceed the partition's MaxTime; see
 * slurm-chain.ts). Shepherd submits segment k+1 only after segment k ended at its time limit, through the
 * ordinary launch path, under the run's approval: no new card, the same `resume.json`, and a segment
 * that crashed is reported as a crash rather than followed by the next one.
 */
export function createWallTimeChain(options: {
  store: RunStore;
  allocator: GpuAllocator;
  transitions: RunTransitions;
  launcher: RunLauncher;
}) {
  const { store, allocator, transitions, launcher } = options;

  /** Caller holds the lock; `meta` ended at its time limit. Undefined when it is not a chain with segments left. */
  async function continueChain(meta: RunMeta): Promise<RunMeta | undefined> {
    const segment = meta.segment;
    if (segment === undefined || segment.index >= segment.of) return undefined;
    await allocator.release(meta.id);
    const next = segment.index + 1;
    const resume = await readResume(store, meta.id);
    const from = resume?.step == null ? 'from scratch (no checkpoint yet)' : `from step ${resume.step}`;
    const queued = await transitions.setStatus(meta, 'queued', {
      by: 'system',
      reason: `wall-time chain: segment ${segment.index} of ${segment.of} reached its time limit`,
      statusReason: `segment ${next} of ${segment.of} is being submitted`,
      patch: { gpuIndices: [], nextSegment: next, ...(await lastStepOf(store, meta)) },
    });
    await transitions.emit(
      'run-waiting',
      queued,
      `${meta.name}: segment ${segment.index} of ${segment.of} reached the partition's time limit; submitting segment ${next} of ${segment.of} under the same approval, resuming ${from}`,
    );
    return launcher.launchQueued(queued, 'system');
  }

  return { continueChain };
}
