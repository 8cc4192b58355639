import { symlink } from 'node:fs/promises';
import path from 'node:path';
import type { BackendKind } from '../../config/backend-kinds.js';
import type { Config } from '../../config/config.js';
import { definedOnly } from '../../defined-only.js';
import { RunError } from '../../errors.js';
import type { BackendRouter } from '../backend-router.js';
import type { Placement } from '../executor.js';
import type { GpuAllocator } from '../gpu-allocator.js';
import type { AuditLog } from '../records/audit-log.js';
import { RUN_FILES } from '../records/run-files.js';
import type { RunStore } from '../records/run-store.js';
import type { RunMeta } from '../records/run-types.js';
import { estimateCostUsd } from '../run-cost.js';
import { checkMaxHours } from '../time-limit.js';
import { plural } from './run-events.js';
import type { RunLock } from './run-lock.js';
import { createRunRevisions, type RunRevisions } from './run-revision.js';
import type { RunTransitions } from './run-transitions.js';

export interface CreateRunRequest {
  name: string;
  /** Python source of train.py. */
  script: string;
  gpus: number;
  maxHours?: number;
  modelId?: string;
  config?: Record<string, unknown>;
  args?: string[];
  threadId: string;
  requester: { id: string; name: string };
  /** Command runs (the script is then the named `.py` file, or empty when the command names none). */
  launch?: RunLaunchFields;
  /** `--on` as typed (`k8s`, `hf`, `slurm`, `local`); absent: the default backend (`SHEPHERD_EXECUTOR`). */
  backend?: string;
}

/** How a run starts when it is not a plain `train.py`: see `RunMeta`. */
type RunLaunchFields = Partial<
  Pick<
    RunMeta,
    | 'command'
    | 'cwd'
    | 'scriptPath'
    | 'environmentName'
    | 'nodes'
    | 'image'
    | 'flavor'
    | 'evalCommand'
    | 'logDir'
    | 'forkOf'
  >
>;

/** A run Shepherd watches but did not launch: it starts `running` at once, no approval. */
export interface AdoptRequest {
  name: string;
  threadId: string;
  requester: { id: string; name: string };
  watch: NonNullable<RunMeta['watch']>;
  jobId?: string;
  maxHours: number;
  /** What the thread is told ("watching Slurm job 42 (train.out)"). */
  description: string;
}

/** How runs come into being: created for approval, or adopted (watched) as already running. */
interface RunCreation extends RunRevisions {
  createRun(request: CreateRunRequest): Promise<RunMeta>;
  adopt(request: AdoptRequest): Promise<RunMeta>;
  /** `resume <run> --on k8s`: a paused or failed run moves to another backend before its approval. */
  moveToBackend(run: string, on: string): Promise<RunMeta>;
}

interface RunCreationOptions {
  config: Config;
  store: RunStore;
  audit: AuditLog;
  executor: BackendRouter;
  allocator: GpuAllocator;
  lock: RunLock;
  transitions: RunTransitions;
}

/** Name uniqueness is a read-then-write over all runs: creations are serialised across processes. */
const CREATE_LOCK = '__create__';
const CREATE_WAIT = { waitMs: 30_000 };

/**
 * `--eval` runs after training exits 0 (status `evaluating`): in Shepherd's local launcher, the Slurm batch
 * script, the Kubernetes pod's command when the run directory is on the PVC (without one the pod's
 * evaluation.json never reaches Shepherd), or the HF job's command (reported through its log). Refused
 * before any card where it could not run or report.
 */
function checkEvalPlacement(backend: BackendKind, image: string | undefined, config: Config): void {
  if (backend === 'slurm' || backend === 'hfjobs') return;
  if (backend === 'kubernetes') {
    if (config.kubernetes.pvc !== undefined) return;
    throw new RunError(
      'invalid_run',
      '--eval on Kubernetes needs SHEPHERD_K8S_PVC: the evaluation writes its results into the run directory, which only a PVC shares with Shepherd. Set it, run on another backend, or run the evaluation as its own run',
    );
  }
  const container = config.localContainer;
  if (container.engine !== undefined && (image ?? container.image) !== undefined)
    throw new RunError(
      'invalid_run',
      '--eval does not run in a local container yet; run the evaluation as its own run',
    );
}

/** The backend that polls a watched run. */
function watchBackend(watch: NonNullable<RunMeta['watch']>): BackendKind {
  return watch.source === 'log' ? 'local' : watch.source;
}

export function createRunCreation(options: RunCreationOptions): RunCreation {
  const { config, store, audit, executor, allocator, lock, transitions } = options;
  const { now, emit, setStatus } = transitions;

  /**
   * Checks the request; resolves its backend, hour limit and placement (before any card: an unknown or
   * unconfigured backend, or a request the backend cannot take, is refused here with a sentence for the user).
   */
  async function checkRequest(
    request: CreateRunRequest,
  ): Promise<{ maxHours: number; backend: BackendKind; placement: Placement }> {
    if (typeof request.name !== 'string' || request.name.trim() === '') {
      throw new RunError('invalid_run', 'a run needs a name');
    }
    if (
      typeof request.script !== 'string' ||
      (request.script.trim() === '' && request.launch?.command === undefined)
    ) {
      throw new RunError('invalid_run', 'the training script is empty');
    }
    if (!Number.isInteger(request.gpus) || request.gpus < 0) {
      throw new RunError('invalid_run', `gpus must be a whole number ≥ 0 (got ${String(request.gpus)})`);
    }
    const maxHours = checkMaxHours(request.maxHours ?? config.runs.defaultMaxHours, config.runs.maxHours);
    // The cost estimate must be a number too (no Infinity from a huge GPU count on a cluster).
    estimateCostUsd(request.gpus, maxHours, config.runs.gpuHourUsd);
    const backend = executor.resolve(request.backend);
    // The local launcher, the Slurm batch script or the Kubernetes pod runs the evaluation after training.
    if (request.launch?.evalCommand !== undefined) checkEvalPlacement(backend, request.launch.image, config);
    const total = allocator.inventory.length;
    if (!executor.backend(backend).allocatesGpus && request.gpus > total) {
      const has =
        total === 0 ? 'this host has no GPUs (use gpus: 0 to run on CPU)' : `this host has ${total}`;
      throw new RunError('gpus_unavailable', `asked for ${plural(request.gpus, 'GPU')} but ${has}`);
    }
    const placement = await executor.placeOn(
      backend,
      definedOnly({
        gpus: request.gpus,
        maxHours,
        nodes: request.launch?.nodes,
        image: request.launch?.image,
        flavor: request.launch?.flavor,
      }),
    );
    estimateCostUsd(1, maxHours, placement.hourlyUsd);
    return { maxHours, backend, placement };
  }

  async function createRun(request: CreateRunRequest): Promise<RunMeta> {
    const { maxHours, backend, placement } = await checkRequest(request);
    const meta = await lock.withLock(
      CREATE_LOCK,
      () =>
        store.createRun(
          {
            name: request.name,
            script: request.script,
            threadId: request.threadId,
            requester: request.requester,
            gpus: request.gpus,
            maxHours,
            executor: backend,
            launch: {
              ...request.launch,
              placement: placement.description,
              hourlyUsd: placement.hourlyUsd,
              ...(placement.notes === undefined || placement.notes.length === 0
                ? {}
                : { placementNotes: placement.notes }),
            },
            ...definedOnly({
              modelId: request.modelId,
              config: request.config,
              args: request.args,
            }),
          },
          now(),
        ),
      CREATE_WAIT,
    );
    await audit.record({
      ts: meta.createdAt,
      runId: meta.id,
      from: null,
      to: 'pending_approval',
      by: request.requester,
      reason: 'created',
    });
    await emit('run-status', meta, `${meta.name} created; waiting for approval`);
    return meta;
  }

  async function adopt(request: AdoptRequest): Promise<RunMeta> {
    const kind = watchBackend(request.watch);
    const remote = kind === 'kubernetes' || kind === 'hfjobs';
    // A remote job is followed by its backend: refused here when that backend is not configured.
    if (remote) executor.backend(kind);
    const meta = await lock.withLock(
      CREATE_LOCK,
      async () => {
        const created = await store.createRun(
          {
            name: request.name,
            script: '',
            threadId: request.threadId,
            requester: request.requester,
            gpus: 0,
            maxHours: request.maxHours,
            executor: kind,
            launch: { watch: request.watch },
          },
          now(),
        );
        // The monitor, status and crash reports read `output.log`: for a watched run it is the job's own log.
        // A remote backend's watched job has no log file here: its executor streams the log into output.log.
        if ('logPath' in request.watch) {
          await symlink(request.watch.logPath, path.join(store.runDir(created.id), RUN_FILES.output));
        }
        const at = now().toISOString();
        const running: RunMeta = {
          ...created,
          status: 'running',
          launchCount: 1,
          startedAt: at,
          updatedAt: at,
          ...definedOnly({ jobId: request.jobId }),
        };
        await store.writeMeta(running);
        return running;
      },
      CREATE_WAIT,
    );
    await audit.record({
      ts: meta.createdAt,
      runId: meta.id,
      from: null,
      to: 'running',
      by: request.requester,
      reason: `watch: ${request.description}`,
    });
    if (remote) await assertRemoteJobExists(meta, request.description);
    await emit('run-started', meta, `Watching ${meta.name}: ${request.description}`);
    return meta;
  }

  /** A remote job that its backend does not know is refused (the run is recorded as failed, not watched). */
  async function assertRemoteJobExists(meta: RunMeta, description: string): Promise<void> {
    const state = (await executor.executorFor(meta).poll([meta])).get(meta.id);
    if (state !== undefined && state.kind !== 'unknown') return;
    const reason = `${description} was not found${state?.reason === undefined ? '' : `: ${state.reason}`}`;
    await setStatus(meta, 'failed', {
      by: 'system',
      reason,
      statusReason: reason,
      patch: { endedAt: now().toISOString() },
    });
    throw new RunError('backend_job_not_found', reason);
  }

  async function moveToBackend(run: string, on: string): Promise<RunMeta> {
    const backend = executor.resolve(on);
    return transitions.withRun(run, async (meta) => {
      if (meta.status !== 'paused' && meta.status !== 'failed') {
        throw new RunError(
          'illegal_transition',
          `${meta.name} is ${meta.status}; only a paused or failed run moves`,
        );
      }
      if (meta.executor === backend) return meta;
      // Moved, a run with `--eval` would lose its evaluation: the same refusal as at creation.
      if (meta.evalCommand !== undefined) checkEvalPlacement(backend, meta.image, config);
      const placement = await executor.placeOn(
        backend,
        definedOnly({
          gpus: meta.gpus,
          maxHours: meta.maxHours,
          nodes: meta.nodes,
          image: meta.image,
          flavor: meta.flavor,
        }),
      );
      const { jobId: _jobId, placementNotes: _notes, ...rest } = meta;
      const moved: RunMeta = {
        ...rest,
        executor: backend,
        placement: placement.description,
        hourlyUsd: placement.hourlyUsd,
        ...(placement.notes === undefined || placement.notes.length === 0
          ? {}
          : { placementNotes: placement.notes }),
      };
      return transitions.writeQuietly(moved, {});
    });
  }

  // Editing a pending run's values on its card is checked like creating it, so it lives beside it.
  const revisions = createRunRevisions({ config, store, audit, executor, allocator, transitions });
  return { createRun, adopt, moveToBackend, ...revisions };
}
