import { definedOnly } from '../../defined-only.js';
import { RunError } from '../../errors.js';
import { backendOf } from '../backend-router.js';
import type { GpuAllocator } from '../gpu-allocator.js';
import { refuseScriptEdit, syncWorkspaceScript, writeWorkspaceScript } from '../launch/command-script.js';
import { type Actor, type AuditLog, assertTransition } from '../records/audit-log.js';
import type { RunStore, ScriptUpdate } from '../records/run-store.js';
import { isLaunched, type RunMeta } from '../records/run-types.js';
import { lastStepOf, readResume } from '../run-reports.js';
import type { RunEndings } from './run-endings.js';
import type { RunLauncher } from './run-launcher.js';
import type { RunTransitions } from './run-transitions.js';

/** What people (and Shepherd) do to an existing run; each works under the run's lock. Part of `RunService`. */
export interface RunActions {
  /** `pending_approval → queued`, then launch (or wait for GPUs). A second approve throws `illegal_transition`. */
  approve(run: string, by: Actor): Promise<RunMeta>;
  reject(run: string, by: Actor, reason?: string): Promise<RunMeta>;
  /** `paused | failed → pending_approval`, when the approval layer wants a new decision before resuming. */
  requestApproval(run: string, by: Actor, reason?: string): Promise<RunMeta>;
  /** SIGTERM (checkpoint), release GPUs, `paused`. A queued run just leaves the queue. */
  pause(run: string, by: Actor): Promise<RunMeta>;
  /** `paused | failed → queued → running`, same script version, resume.json intact. */
  resume(run: string, by: Actor): Promise<RunMeta>;
  stop(run: string, by: Actor, reason?: string): Promise<RunMeta>;
  /** Archive train.py as train_v<n>.py and write the new one; does not restart. */
  updateScript(run: string, source: string, by: Actor, reason: string): Promise<ScriptUpdate>;
  /** Fully stop the old process (if any), then launch the current script (auto-fix after approval). */
  restartWithCurrentScript(run: string, by: Actor): Promise<RunMeta>;
}

interface RunActionsOptions {
  store: RunStore;
  audit: AuditLog;
  allocator: GpuAllocator;
  transitions: RunTransitions;
  launcher: RunLauncher;
  endings: RunEndings;
}

export function createRunActions(options: RunActionsOptions): RunActions {
  const { store, audit, allocator } = options;
  const { emit, setStatus, withRun, now } = options.transitions;
  const { launchQueued, terminateRun } = options.launcher;
  const { finishRun } = options.endings;

  async function approve(run: string, by: Actor): Promise<RunMeta> {
    return withRun(run, async (meta) => {
      if (meta.status !== 'pending_approval') {
        throw new RunError(
          'illegal_transition',
          `run ${meta.name} is not waiting for approval (it is ${meta.status})`,
        );
      }
      const queued = await setStatus(meta, 'queued', { by, reason: 'approved' });
      return launchQueued(queued, by);
    });
  }

  async function reject(run: string, by: Actor, reason?: string): Promise<RunMeta> {
    return withRun(run, async (meta) => {
      const rejected = await setStatus(meta, 'rejected', {
        by,
        reason: reason ?? 'rejected',
        ...definedOnly({ statusReason: reason }),
        patch: { endedAt: now().toISOString() },
      });
      const who = by === 'system' ? 'Shepherd' : by.name;
      await emit('run-ended', rejected, `${meta.name} rejected by ${who}${reason ? `: ${reason}` : ''}`);
      return rejected;
    });
  }

  async function requestApproval(run: string, by: Actor, reason?: string): Promise<RunMeta> {
    return withRun(run, async (meta) => {
      const pending = await setStatus(meta, 'pending_approval', {
        by,
        reason: reason ?? 'approval requested',
        ...definedOnly({ statusReason: reason }),
      });
      await emit('run-status', pending, `${meta.name} is waiting for approval`);
      return pending;
    });
  }

  async function pause(run: string, by: Actor): Promise<RunMeta> {
    return withRun(run, async (meta) => {
      assertTransition(meta.status, 'paused', meta.name);
      if (meta.status === 'running') {
        const state = await terminateRun(meta, 'pause');
        // It finished by itself just before the signal: record that instead of a pause.
        if (state.kind === 'exited') return finishRun(meta, state);
      } else {
        await allocator.release(meta.id);
      }
      const resume = await readResume(store, meta.id);
      const paused = await setStatus(meta, 'paused', {
        by,
        reason: 'paused',
        patch: { gpuIndices: [], ...(await lastStepOf(store, meta)) },
      });
      const at = resume?.step == null ? '' : ` at step ${resume.step}`;
      const checkpoint = resume?.checkpoint == null ? '' : ` (checkpoint ${resume.checkpoint})`;
      await emit('run-paused', paused, `${meta.name} paused${at}${checkpoint}; its GPUs are free`);
      return paused;
    });
  }

  async function resume(run: string, by: Actor): Promise<RunMeta> {
    return withRun(run, async (meta) => {
      const queued = await setStatus(meta, 'queued', { by, reason: 'resumed' });
      return launchQueued(queued, by);
    });
  }

  async function stop(run: string, by: Actor, reason?: string): Promise<RunMeta> {
    return withRun(run, async (meta) => {
      assertTransition(meta.status, 'stopped', meta.name);
      if (isLaunched(meta.status)) {
        const state = await terminateRun(meta, 'stop');
        if (state.kind === 'exited') return finishRun(meta, state);
      } else {
        // A paused Kubernetes run is a suspended Job that still exists: stopping deletes it (and its pods).
        if (meta.status === 'paused' && backendOf(meta) === 'kubernetes') await terminateRun(meta, 'stop');
        await allocator.release(meta.id);
      }
      const stopped = await setStatus(meta, 'stopped', {
        by,
        reason: reason ?? 'stopped',
        ...definedOnly({ statusReason: reason }),
        patch: { gpuIndices: [], endedAt: now().toISOString(), ...(await lastStepOf(store, meta)) },
      });
      const who = by === 'system' ? 'Shepherd' : by.name;
      await emit('run-ended', stopped, `${meta.name} stopped by ${who}`);
      return stopped;
    });
  }

  async function updateScript(run: string, source: string, by: Actor, reason: string): Promise<ScriptUpdate> {
    if (typeof source !== 'string' || source.trim() === '') {
      throw new RunError('invalid_run', 'the new script is empty');
    }
    return withRun(run, async (meta) => {
      if (['stopped', 'completed', 'rejected'].includes(meta.status)) {
        throw new RunError('run_finished', `run ${meta.name} is ${meta.status}; start a new run instead`);
      }
      refuseScriptEdit(meta);
      await syncWorkspaceScript(meta, store.runDir(meta.id));
      const update = await store.updateScript(meta.id, source, now());
      await writeWorkspaceScript(meta, source);
      await audit.record({
        ts: update.meta.updatedAt,
        runId: meta.id,
        from: meta.status,
        to: meta.status,
        by,
        reason: `script v${update.meta.scriptVersion}: ${reason}`,
      });
      return update;
    });
  }

  async function restartWithCurrentScript(run: string, by: Actor): Promise<RunMeta> {
    return withRun(run, async (meta) => {
      let current = meta;
      if (meta.status === 'running') {
        const state = await terminateRun(meta, 'stop');
        current = await setStatus(meta, 'queued', {
          by,
          reason: `restart with script v${meta.scriptVersion} (old process ${state.kind})`,
          patch: { gpuIndices: [], ...(await lastStepOf(store, meta)) },
        });
      } else if (meta.status !== 'queued') {
        current = await setStatus(meta, 'queued', {
          by,
          reason: `restart with script v${meta.scriptVersion}`,
        });
      }
      return launchQueued(current, by);
    });
  }

  return { approve, reject, requestApproval, pause, resume, stop, updateScript, restartWithCurrentScript };
}
