import { BACKEND_LABELS, type BackendKind, parseBackendName } from '../config/backend-kinds.js';
import { RunError } from '../errors.js';
import type { Logger } from '../logger.js';
import type {
  ClusterInfo,
  Executor,
  LaunchRequest,
  LaunchResult,
  Placement,
  PlacementRequest,
  ProcessState,
} from './executor.js';
import type { RunMeta } from './records/run-types.js';

/**
 * Several backends at once (`SHEPHERD_BACKENDS`), chosen per run. The router is itself an `Executor`:
 * each call goes to the backend the run records in `meta.executor`, and a batched poll is split by
 * backend so Slurm still gets one `squeue` and Kubernetes one list.
 */
export interface BackendRouter extends Executor {
  /** Configured backends, the default first. */
  readonly kinds: readonly BackendKind[];
  readonly defaultKind: BackendKind;
  /** The executor of a backend; a `RunError('unknown_backend')` naming the configured ones otherwise. */
  backend(kind: BackendKind): Executor;
  /** `--on` as typed (`k8s`, `hf`, `slurm`…), or the default when absent; refused when not configured. */
  resolve(name: string | undefined): BackendKind;
  /** Where a run would go on a backend and its hourly price (checked before any card is posted). */
  placeOn(kind: BackendKind, request: PlacementRequest): Promise<Placement>;
  /** The executor that owns an existing run (its backend, or a watch-only one for a job it follows). */
  executorFor(meta: RunMeta): Executor;
  /** Every configured backend's cluster info (a failing one reports its error as a note). */
  clusterInfoAll(): Promise<ClusterInfo[]>;
}

/** The backend a run belongs to (runs written before `--on` watched Slurm jobs under `executor: local`). */
export function backendOf(meta: Pick<RunMeta, 'executor' | 'watch'>): BackendKind {
  return meta.watch?.source === 'slurm' ? 'slurm' : meta.executor;
}

export function createBackendRouter(options: {
  backends: ReadonlyMap<BackendKind, Executor>;
  defaultKind: BackendKind;
  /** Backends that only poll and cancel runs they did not launch (a watched Slurm job without Slurm configured). */
  watchOnly?: Partial<Record<BackendKind, () => Executor>>;
  /** The price per GPU-hour of a backend that does not price runs itself. */
  gpuHourUsd: (kind: BackendKind) => number;
  logger: Pick<Logger, 'warn'>;
}): BackendRouter {
  const { backends, defaultKind } = options;
  const kinds = [defaultKind, ...[...backends.keys()].filter((kind) => kind !== defaultKind)];
  const lazy = new Map<BackendKind, Executor>();
  const configuredText = () => kinds.map((kind) => BACKEND_LABELS[kind].flag).join(', ');

  function backend(kind: BackendKind): Executor {
    const executor = backends.get(kind);
    if (executor === undefined) {
      throw new RunError(
        'unknown_backend',
        `the ${BACKEND_LABELS[kind].flag} backend is not configured here; configured: ${configuredText()}`,
      );
    }
    return executor;
  }

  /** The executor for an existing run: its backend, or a watch-only one for a job it merely follows. */
  function forRun(meta: RunMeta): Executor {
    const kind = backendOf(meta);
    const configured = backends.get(kind);
    if (configured !== undefined) return configured;
    const factory = meta.watch === undefined ? undefined : options.watchOnly?.[kind];
    if (factory === undefined) return backend(kind);
    let executor = lazy.get(kind);
    if (executor === undefined) {
      executor = factory();
      lazy.set(kind, executor);
    }
    return executor;
  }

  function resolve(name: string | undefined): BackendKind {
    if (name === undefined || name.trim() === '') return defaultKind;
    const kind = parseBackendName(name);
    if (kind === undefined) {
      throw new RunError('unknown_backend', `unknown backend "${name}"; configured: ${configuredText()}`);
    }
    backend(kind);
    return kind;
  }

  async function placeOn(kind: BackendKind, request: PlacementRequest): Promise<Placement> {
    const executor = backend(kind);
    if (executor.placement !== undefined) return executor.placement(request);
    const gpuHour = options.gpuHourUsd(kind);
    return { description: BACKEND_LABELS[kind].title, hourlyUsd: request.gpus * gpuHour };
  }

  async function poll(runs: RunMeta[]): Promise<Map<string, ProcessState>> {
    const groups = new Map<Executor, RunMeta[]>();
    const states = new Map<string, ProcessState>();
    // A run left without a state keeps its status: `unknown` would end it as failed, and a backend that is
    // down for a moment (or removed from SHEPHERD_BACKENDS by mistake) must not orphan runs that still live.
    for (const meta of runs) {
      let executor: Executor;
      try {
        executor = forRun(meta);
      } catch (error) {
        options.logger.warn(
          { runId: meta.id, err: error },
          'cannot poll a run: its backend is not configured',
        );
        continue;
      }
      const group = groups.get(executor) ?? [];
      group.push(meta);
      groups.set(executor, group);
    }
    // One failing backend must not hide the others' states.
    await Promise.all(
      [...groups].map(async ([executor, group]) => {
        try {
          for (const [id, state] of await executor.poll(group)) states.set(id, state);
        } catch (error) {
          options.logger.warn(
            { backend: executor.kind, runs: group.map((meta) => meta.id), err: error },
            'backend poll failed; its runs keep their status until the next poll',
          );
        }
      }),
    );
    return states;
  }

  async function clusterInfoAll(): Promise<ClusterInfo[]> {
    return Promise.all(
      kinds.map(async (kind) => {
        try {
          return await backend(kind).clusterInfo();
        } catch (error) {
          return { executor: kind, gpusTotal: 0, gpusFree: 0, notes: [`unavailable: ${String(error)}`] };
        }
      }),
    );
  }

  const defaultExecutor = backend(defaultKind);
  return {
    kind: defaultKind,
    allocatesGpus: defaultExecutor.allocatesGpus,
    kinds,
    defaultKind,
    backend,
    resolve,
    placeOn,
    clusterInfoAll,
    executorFor: forRun,
    launch: (request: LaunchRequest): Promise<LaunchResult> => forRun(request.meta).launch(request),
    poll,
    terminate: (meta, terminateOptions) => forRun(meta).terminate(meta, terminateOptions),
    dumpStacks: async (meta) => forRun(meta).dumpStacks?.(meta),
    clusterInfo: () => defaultExecutor.clusterInfo(),
    close: async () => {
      await Promise.all([...backends.values(), ...lazy.values()].map((executor) => executor.close?.()));
    },
  };
}
