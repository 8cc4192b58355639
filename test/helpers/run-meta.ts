import type { RunMeta } from '../../src/runs/records/run-types.js';

/** A running local run's record for monitor tests; `overrides` sets what a test cares about. */
export function testRunMeta(id: string, overrides: Partial<RunMeta> = {}): RunMeta {
  const at = overrides.createdAt ?? new Date().toISOString();
  return {
    schemaVersion: 1,
    id,
    name: `run-${id}`,
    threadId: 'web:c:t',
    requester: { id: 'u', name: 'u' },
    status: 'running',
    gpus: 0,
    gpuIndices: [],
    maxHours: 1,
    scriptVersion: 1,
    executor: 'local',
    launchCount: 1,
    createdAt: at,
    updatedAt: at,
    startedAt: at,
    ...overrides,
  };
}
