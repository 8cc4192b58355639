import path from 'node:path';
import type { Environments } from '../config/environments.js';
import { RunError } from '../errors.js';
import {
  apptainerPrefix,
  type ContainerEngine,
  containerMounts,
  containerName,
  containerVisibleDevices,
  engineRemoveArgv,
  engineRunArgv,
} from './container-argv.js';
import type { LaunchRequest, Placement, PlacementRequest } from './executor.js';
import { applyEnvironment } from './named-environments.js';
import { RUN_FILES } from './records/run-files.js';
import type { RunMeta } from './records/run-types.js';
import type { RunUser } from './run-as-user.js';

/** `config.localContainer`: the engine for local runs in an image, and the default image. */
export interface LocalContainerSettings {
  engine?: ContainerEngine | undefined;
  image?: string | undefined;
}

/** What one launch needs to know about where it runs (the paths are absolute). */
interface PlanContext {
  meta: RunMeta;
  runDir: string;
  python: string;
  environments: Environments;
  gpuIndices: readonly number[];
  /** Where the launcher and the `shepherd` helper are read from (on the run's PYTHONPATH). */
  runtimeDir: string;
  workspace?: string | undefined;
  container?: LocalContainerSettings | undefined;
}

/** What the launcher starts: `train.py` with Python (legacy form), or an argv in a directory. */
export interface LocalLaunchPlan {
  argv?: string[];
  cwd: string;
  pathPrefix: string[];
  variables: Record<string, string>;
  /** The run goes into a Docker/Podman container; `argv` is still the command inside it. */
  engine?: { engine: ContainerEngine; image: string };
}

/**
 * The engine container a run goes into, if any: `--image` (meta.image) or `SHEPHERD_LOCAL_IMAGE`, with
 * `SHEPHERD_LOCAL_CONTAINER`. An environment's own `container` is an Apptainer image and wins over the
 * default image; naming `--image` as well is a contradiction, refused.
 */
function engineImage(
  meta: RunMeta,
  settings: LocalContainerSettings | undefined,
  apptainerImage: string | undefined,
): { engine: ContainerEngine; image: string } | undefined {
  if (meta.image !== undefined && settings?.engine === undefined) {
    throw new RunError(
      'invalid_run',
      `run ${meta.name} asks for image ${meta.image}, but local runs have no container engine (set SHEPHERD_LOCAL_CONTAINER=docker or podman)`,
    );
  }
  if (apptainerImage !== undefined) {
    if (meta.image !== undefined) {
      throw new RunError(
        'invalid_run',
        `environment ${meta.environmentName} runs in the Apptainer image ${apptainerImage}; it cannot also run in ${meta.image}`,
      );
    }
    return undefined;
  }
  const image = meta.image ?? settings?.image;
  return settings?.engine === undefined || image === undefined
    ? undefined
    : { engine: settings.engine, image };
}

/**
 * Where a local run goes, for its card: this host, or an image on it. `--image` without an engine is refused
 * here, before any card, rather than at launch.
 */
export function localPlacement(
  request: PlacementRequest,
  settings: LocalContainerSettings | undefined,
  gpuHourUsd: number,
): Placement {
  if (request.image !== undefined && settings?.engine === undefined) {
    throw new RunError(
      'invalid_run',
      `--image ${request.image} needs a container engine for local runs (set SHEPHERD_LOCAL_CONTAINER=docker or podman)`,
    );
  }
  const image = request.image ?? settings?.image;
  const engine = settings?.engine;
  return {
    description:
      engine === undefined || image === undefined ? 'this host' : `this host, ${engine} image ${image}`,
    hourlyUsd: request.gpus * gpuHourUsd,
  };
}

/** Inside an image the host's interpreter path means nothing: a bare name (`python3.11`) is kept. */
const imagePython = (python: string) => (path.isAbsolute(python) ? 'python3' : python);

export function localLaunchPlan(context: PlanContext): LocalLaunchPlan {
  const { meta, runDir } = context;
  const spec = meta.environmentName === undefined ? undefined : context.environments[meta.environmentName];
  if (meta.environmentName !== undefined && spec === undefined) {
    throw new RunError('unknown_environment', `environment ${meta.environmentName} is no longer configured`);
  }
  const engine = engineImage(meta, context.container, spec?.container);
  if (meta.command === undefined && spec === undefined && engine === undefined) {
    return { cwd: runDir, pathPrefix: [], variables: {} };
  }
  const python = engine === undefined ? context.python : imagePython(context.python);
  const applied = applyEnvironment(meta.command ?? [python, '-u', RUN_FILES.script], spec);
  const cwd = meta.cwd ?? runDir;
  const plan: LocalLaunchPlan = {
    argv: applied.argv,
    cwd,
    pathPrefix: applied.pathPrefix,
    variables: applied.variables,
  };
  if (engine !== undefined) plan.engine = engine;
  if (applied.container !== undefined) {
    const mounts = runMounts(runDir, context.workspace, context.runtimeDir, cwd);
    plan.argv = [
      ...apptainerPrefix(applied.container, { gpus: context.gpuIndices.length > 0, mounts }),
      ...applied.argv,
    ];
  }
  return plan;
}

/** The run directory and workspace (read-write), the helper (read-only), and the cwd if outside them all. */
function runMounts(runDir: string, workspace: string | undefined, runtimeDir: string, cwd: string) {
  return containerMounts([
    { path: runDir },
    workspace === undefined ? undefined : { path: workspace },
    { path: runtimeDir, readOnly: true },
    { path: cwd },
  ]);
}

/** The variables every launch sets, over what runs inherit; PATH gets the environment's prefix. */
export function launchEnvironment(
  inherited: Readonly<Record<string, string | undefined>>,
  request: LaunchRequest,
  runtime: string,
  plan: LocalLaunchPlan,
): Record<string, string> {
  const { meta, runDir, gpuIndices } = request;
  const environment: Record<string, string> = {};
  for (const [key, value] of Object.entries(inherited)) {
    if (value !== undefined) environment[key] = value;
  }
  const pythonPath = inherited.PYTHONPATH;
  Object.assign(environment, {
    SHEPHERD_RUN_DIR: runDir,
    SHEPHERD_RUN_ID: meta.id,
    SHEPHERD_RUN_NAME: meta.name,
    SHEPHERD_RUN_CONFIG: JSON.stringify(meta.config ?? {}),
    SHEPHERD_RUN_ARGS: JSON.stringify(meta.args ?? []),
    // The launcher runs it after training exits 0 (empty: no evaluation).
    SHEPHERD_EVAL_COMMAND: meta.evalCommand ?? '',
    SHEPHERD_LAUNCH: String(meta.launchCount),
    CUDA_VISIBLE_DEVICES: gpuIndices.join(','),
    PYTHONPATH: pythonPath ? `${runtime}${path.delimiter}${pythonPath}` : runtime,
    PYTHONUNBUFFERED: '1',
  });
  Object.assign(environment, plan.variables);
  if (plan.pathPrefix.length > 0) {
    environment.PATH = [...plan.pathPrefix, environment.PATH ?? '/usr/local/bin:/usr/bin:/bin'].join(
      path.delimiter,
    );
  }
  return environment;
}

/**
 * Variables that describe the host rather than the run: paths into the host's filesystem, its shell and
 * session, and the engine client's own settings. Everything else a local run would inherit (HF_HOME,
 * WANDB_*, NCCL_*, `SHEPHERD_RUN_ENV_` secrets, an environment's `env`) goes into the container too.
 */
const HOST_ONLY = new Set([
  '_',
  'CUDA_VISIBLE_DEVICES',
  'DISPLAY',
  'HOME',
  'HOSTNAME',
  'LD_LIBRARY_PATH',
  'LD_PRELOAD',
  'LOGNAME',
  'MAIL',
  'NVIDIA_VISIBLE_DEVICES',
  'OLDPWD',
  'PATH',
  'PWD',
  'PYTHONHOME',
  'PYTHONPATH',
  'SHELL',
  'SHLVL',
  'TERM',
  'TMPDIR',
  'USER',
  'VIRTUAL_ENV',
  'CONTAINER_HOST',
  'CONTAINER_CONNECTION',
  'INIT_CWD',
]);
const HOST_ONLY_PREFIXES = ['XDG_', 'CONDA_', 'SSH_', 'DBUS_', 'DOCKER_', 'CONTAINERS_', 'NODE_', 'BUILDAH_'];

function inheritedNames(environment: Readonly<Record<string, string>>, settings: Record<string, string>) {
  return Object.keys(environment)
    .filter(
      (name) =>
        /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) &&
        !HOST_ONLY.has(name) &&
        !HOST_ONLY_PREFIXES.some((prefix) => name.startsWith(prefix)) &&
        !(name in settings),
    )
    .sort();
}

/**
 * The engine client's argv for a run in a container, and the argv that removes the container. The
 * client gets the run's environment; the container gets it by name (`-e NAME`, values never in argv)
 * minus what only makes sense on the host, with CUDA_VISIBLE_DEVICES renumbered and PYTHONPATH = the
 * mounted helper. A run user becomes `--user`; HOME is the run directory, the one place it may write.
 */
export function engineLaunch(options: {
  engine: { engine: ContainerEngine; image: string };
  plan: LocalLaunchPlan & { argv: string[] };
  meta: RunMeta;
  runDir: string;
  workspace?: string | undefined;
  runtimeDir: string;
  gpuIndices: readonly number[];
  runAs?: RunUser | undefined;
  environment: Readonly<Record<string, string>>;
}): { argv: string[]; remove: string[] } {
  const { engine, plan, runAs } = options;
  const settings: Record<string, string> = {
    CUDA_VISIBLE_DEVICES: containerVisibleDevices(options.gpuIndices),
    PYTHONPATH: options.runtimeDir,
  };
  if (runAs !== undefined) settings.HOME = options.runDir;
  const name = containerName(options.meta.id);
  const argv = engineRunArgv({
    engine: engine.engine,
    image: engine.image,
    name,
    gpuIndices: options.gpuIndices,
    mounts: runMounts(options.runDir, options.workspace, options.runtimeDir, plan.cwd),
    cwd: plan.cwd,
    ...(runAs === undefined ? {} : { user: { uid: runAs.uid, gid: runAs.gid } }),
    inherited: inheritedNames(options.environment, settings),
    settings,
    argv: plan.argv,
  });
  return { argv, remove: engineRemoveArgv(engine.engine, name) };
}

/** The engine a run in a container would use (for clean-up; lenient: a leftover name is harmless to remove). */
export function engineOf(
  meta: RunMeta,
  settings: LocalContainerSettings | undefined,
): ContainerEngine | undefined {
  return settings?.engine !== undefined && (meta.image ?? settings.image) !== undefined
    ? settings.engine
    : undefined;
}
