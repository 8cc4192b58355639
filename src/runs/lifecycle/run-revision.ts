import type { Config } from '../../config/config.js';
import { definedOnly } from '../../defined-only.js';
import { RunError } from '../../errors.js';
import type { BackendRouter } from '../backend-router.js';
import { backendOf } from '../backend-router.js';
import type { GpuAllocator } from '../gpu-allocator.js';
import type { Actor, AuditLog, RunRevisionValues } from '../records/audit-log.js';
import { looksLikeRunId, type RunStore, slugifyRunName } from '../records/run-store.js';
import { type RunMeta, TERMINAL_STATUSES } from '../records/run-types.js';
import { checkMaxHours } from '../time-limit.js';
import { plural } from './run-events.js';
import type { RunTransitions } from './run-transitions.js';

/**
 * A run's GPUs, hours and name changed by an approver on its card, before the approval is applied: checked
 * like a new run's (GPUs the backend can give, hours within `SHEPHERD_MAX_HOURS`, a free name), placed
 * again on its backend, and audited with the values before and after.
 */

type RunRevision = Partial<RunRevisionValues>;

export interface RunRevisions {
  /** The revision as it would be applied (the name slugified); throws `invalid_run` with a sentence. */
  checkRevision(run: string, revision: RunRevision): Promise<RunRevisionValues>;
  /** Applies it under the run lock (only before the run launches again) and audits before → after. */
  revise(run: string, revision: RunRevision, by: Actor, reason: string): Promise<RunMeta>;
}

interface RunRevisionOptions {
  config: Config;
  store: RunStore;
  audit: AuditLog;
  executor: BackendRouter;
  allocator: GpuAllocator;
  transitions: RunTransitions;
}

/** Runs an approval card may still be open for (GPUs change only while the run holds none). */
const REVISABLE = new Set(['pending_approval', 'paused', 'failed', 'queued', 'running']);

export function createRunRevisions(options: RunRevisionOptions): RunRevisions {
  const { config, store, audit, executor, allocator, transitions } = options;

  async function check(meta: RunMeta, revision: RunRevision): Promise<RunRevisionValues> {
    if (!REVISABLE.has(meta.status))
      throw new RunError('illegal_transition', `run ${meta.name} is ${meta.status}; it cannot be edited`);
    const gpus = revision.gpus ?? meta.gpus;
    if (!Number.isInteger(gpus) || gpus < 0)
      throw new RunError('invalid_run', `GPUs must be a whole number ≥ 0 (got ${String(gpus)})`);
    if (gpus !== meta.gpus && (meta.status === 'running' || meta.status === 'queued'))
      throw new RunError('invalid_run', `${meta.name} is ${meta.status}: its GPUs cannot change now`);
    const kind = backendOf(meta);
    const total = allocator.inventory.length;
    if (!executor.backend(kind).allocatesGpus && gpus > total)
      throw new RunError(
        'gpus_unavailable',
        `${plural(gpus, 'GPU')} asked for, but ${total === 0 ? 'this host has no GPUs (0 runs on CPU)' : `this host has ${total}`}`,
      );
    const maxHours = checkMaxHours(revision.maxHours ?? meta.maxHours, config.runs.maxHours);
    const name = revision.name === undefined ? meta.name : slugifyRunName(revision.name);
    if (name !== meta.name) {
      if (looksLikeRunId(name)) throw new RunError('invalid_run', `${name} looks like a run id; pick a name`);
      const taken = (await store.listRuns()).some(
        (other) => other.id !== meta.id && other.name === name && !TERMINAL_STATUSES.has(other.status),
      );
      if (taken) throw new RunError('invalid_run', `another run is already named ${name}`);
    }
    return { gpus, maxHours, name };
  }

  async function revise(run: string, revision: RunRevision, by: Actor, reason: string): Promise<RunMeta> {
    return transitions.withRun(run, async (meta) => {
      const after = await check(meta, revision);
      const before = { gpus: meta.gpus, maxHours: meta.maxHours, name: meta.name };
      if (after.gpus === before.gpus && after.maxHours === before.maxHours && after.name === before.name)
        return meta;
      const placement = await executor.placeOn(
        backendOf(meta),
        definedOnly({
          gpus: after.gpus,
          maxHours: after.maxHours,
          nodes: meta.nodes,
          image: meta.image,
          flavor: meta.flavor,
        }),
      );
      const revised = await transitions.writeQuietly(meta, {
        ...after,
        placement: placement.description,
        hourlyUsd: placement.hourlyUsd,
      });
      await audit.record({
        ts: revised.updatedAt,
        runId: meta.id,
        from: meta.status,
        to: meta.status,
        by,
        reason,
        edit: { before, after },
      });
      return revised;
    });
  }

  return {
    checkRevision: async (run, revision) => check(await store.findRun(run), revision),
    revise,
  };
}
