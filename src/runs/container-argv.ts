import path from 'node:path';
import { RunError } from '../errors.js';

/**
 * The argv that puts a run inside an image: Apptainer (local or Slurm), pyxis (`srun
 * --container-image`), or a local Docker/Podman engine. Pure: the executors decide the paths and GPUs.
 *
 * Every form makes the same host paths visible at the same paths inside: the run directory (logs,
 * metrics, checkpoints), the workspace (the code a command names) and the helper directory (the
 * launcher's `shepherd` module on PYTHONPATH, read-only). Same path in and out, so every path Shepherd
 * writes into the environment (SHEPHERD_RUN_DIR, PYTHONPATH, the working directory) holds inside too.
 */

/** A host path to show inside the container at the same path. */
export interface ContainerMount {
  path: string;
  readOnly?: boolean;
}

/** Local container engines (`SHEPHERD_LOCAL_CONTAINER`). */
export type ContainerEngine = 'docker' | 'podman';

const within = (parent: string, child: string) =>
  child === parent || child.startsWith(parent.endsWith(path.sep) ? parent : parent + path.sep);

/**
 * Absolute, de-duplicated mounts; a path inside another mounted path is already visible and is left
 * out. Bind specs are `src:dst[:ro]` lists separated by commas, so a path with `:` or `,` cannot be
 * written as one and is refused rather than mounted somewhere else.
 */
export function containerMounts(candidates: ReadonlyArray<ContainerMount | undefined>): ContainerMount[] {
  const resolved = candidates
    .filter((mount): mount is ContainerMount => mount !== undefined)
    .map((mount) => ({ ...mount, path: path.resolve(mount.path) }))
    .sort((first, second) => first.path.length - second.path.length);
  const kept: ContainerMount[] = [];
  for (const mount of resolved) {
    if (/[:,]/.test(mount.path)) {
      throw new RunError(
        'invalid_run',
        `${mount.path} cannot be mounted into a container: bind specs cannot carry ':' or ','`,
      );
    }
    // Covered by a mount already, unless that one is read-only and this one must be writable.
    if (kept.some((other) => within(other.path, mount.path) && (!other.readOnly || mount.readOnly))) continue;
    kept.push(mount);
  }
  return kept;
}

const bindSpec = (mount: ContainerMount) => `${mount.path}:${mount.path}${mount.readOnly ? ':ro' : ''}`;

/**
 * `apptainer exec [--nv] --bind … <image>`: `--nv` binds the NVIDIA devices and driver libraries (without
 * it CUDA sees no GPU). Apptainer does not hide devices, so the host's CUDA_VISIBLE_DEVICES stays valid.
 */
export function apptainerPrefix(
  image: string,
  options: { gpus: boolean; mounts: readonly ContainerMount[] },
): string[] {
  return [
    'apptainer',
    'exec',
    ...(options.gpus ? ['--nv'] : []),
    ...options.mounts.flatMap((mount) => ['--bind', bindSpec(mount)]),
    image,
  ];
}

/** pyxis: `--container-mounts=SRC:DST[:ro],…` for `srun --container-image` (empty when nothing to mount). */
export function pyxisMountsFlag(mounts: readonly ContainerMount[]): string | undefined {
  return mounts.length === 0 ? undefined : `--container-mounts=${mounts.map(bindSpec).join(',')}`;
}

/** The container of a local run; one name per run, so a relaunch can clear a leftover first. */
export function containerName(runId: string): string {
  return `shepherd-${runId}`;
}

interface EngineRunOptions {
  engine: ContainerEngine;
  image: string;
  name: string;
  /** Host GPU indices granted by the allocator. */
  gpuIndices: readonly number[];
  mounts: readonly ContainerMount[];
  /** Working directory inside (a mounted path). */
  cwd: string;
  /** `--user uid:gid` (SHEPHERD_RUN_AS_USER), with no way to gain privileges inside. */
  user?: { uid: number; gid: number };
  /** Variables whose value the engine client copies from its own environment (`-e NAME`): keeps values out of argv. */
  inherited: readonly string[];
  /** Variables with a value for inside only (`-e NAME=value`). */
  settings: Readonly<Record<string, string>>;
  argv: readonly string[];
}

/**
 * Docker takes GPUs as `--gpus '"device=2,3"'` (the inner quotes keep the comma out of its CSV parser);
 * Podman as CDI devices `--device nvidia.com/gpu=2`, one per GPU (`nvidia-ctk cdi generate`). Either way
 * only those devices exist inside, numbered from 0.
 */
function gpuFlags(engine: ContainerEngine, gpuIndices: readonly number[]): string[] {
  if (gpuIndices.length === 0) return [];
  if (engine === 'docker') return ['--gpus', `"device=${gpuIndices.join(',')}"`];
  return gpuIndices.flatMap((index) => ['--device', `nvidia.com/gpu=${index}`]);
}

/**
 * `docker|podman run` in the foreground: `--init` puts a small init as PID 1 that passes signals on
 * (a bare Python as PID 1 ignores SIGTERM without a handler), and `--sig-proxy` relays the SIGTERM the
 * engine client gets (pause, stop, the time limit) into the container, so the script's handler can
 * checkpoint. The log goes to the attached client (and so to output.log) only: `--log-driver none`
 * keeps the engine from storing a second copy of a days-long log.
 */
export function engineRunArgv(options: EngineRunOptions): string[] {
  const user =
    options.user === undefined
      ? []
      : ['--user', `${options.user.uid}:${options.user.gid}`, '--security-opt', 'no-new-privileges'];
  return [
    options.engine,
    'run',
    '--rm',
    '--name',
    options.name,
    '--init',
    '--sig-proxy=true',
    '--log-driver',
    'none',
    ...gpuFlags(options.engine, options.gpuIndices),
    ...options.mounts.flatMap((mount) => ['-v', bindSpec(mount)]),
    '-w',
    options.cwd,
    ...user,
    ...options.inherited.flatMap((name) => ['-e', name]),
    ...Object.entries(options.settings).flatMap(([name, value]) => ['-e', `${name}=${value}`]),
    options.image,
    ...options.argv,
  ];
}

/** Remove the run's container at once, running or not (a leftover from a killed launch, or at the hard stop). */
export function engineRemoveArgv(engine: ContainerEngine, name: string): string[] {
  // Podman's `rm -f` waits the container's stop timeout first; `-t 0` kills right away, as Docker's does.
  return engine === 'docker' ? ['docker', 'rm', '-f', name] : ['podman', 'rm', '-f', '-t', '0', name];
}

/**
 * CUDA_VISIBLE_DEVICES inside an engine container: only the granted GPUs exist there, renumbered
 * 0..n-1, so the host indices would name devices that are not there (or the wrong ones).
 */
export function containerVisibleDevices(gpuIndices: readonly number[]): string {
  return gpuIndices.map((_, index) => String(index)).join(',');
}
