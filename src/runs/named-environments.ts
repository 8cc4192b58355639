import path from 'node:path';
import type { EnvironmentSpec, Environments } from '../config/environments.js';
import { RunError } from '../errors.js';

/**
 * Named environments (`SHEPHERD_ENVIRONMENTS`): where a run's command finds its Python and libraries.
 * `venv` and `conda` (a prefix path) put their `bin/` first on PATH; a conda *name* is entered with
 * `conda run`; `python` replaces a leading `python`/`python3`; `container` wraps the command in
 * `apptainer exec` (or pyxis's `srun --container-image` on Slurm); `env` adds variables.
 */

function knownEnvironments(environments: Environments): string {
  const names = Object.keys(environments);
  return names.length === 0 ? 'none are configured (SHEPHERD_ENVIRONMENTS)' : names.join(', ');
}

/** The environment a run asked for (or the default); an unknown name is refused with the known list. */
export function pickEnvironment(
  environments: Environments,
  requested: string | undefined,
  fallback: string | undefined,
): { name: string; spec: EnvironmentSpec } | undefined {
  const name = requested ?? fallback;
  if (name === undefined) return undefined;
  const spec = environments[name];
  if (spec === undefined) {
    throw new RunError(
      'unknown_environment',
      `unknown environment "${name}"; known environments: ${knownEnvironments(environments)}`,
    );
  }
  return { name, spec };
}

/** How an environment changes one launch: the argv to run, directories to put first on PATH, variables. */
interface EnvironmentLaunch {
  argv: string[];
  pathPrefix: string[];
  variables: Record<string, string>;
  /** Image for `apptainer exec` / pyxis; applied by the executor (it differs between local and Slurm). */
  container?: string;
}

const PYTHON_NAMES = /^python(?:3(?:\.\d+)?)?$/;

/** Apply a named environment to an argv (the container, if any, is left to the executor). */
export function applyEnvironment(
  argv: readonly string[],
  spec: EnvironmentSpec | undefined,
): EnvironmentLaunch {
  const result: EnvironmentLaunch = { argv: [...argv], pathPrefix: [], variables: {} };
  if (spec === undefined) return result;
  let python = spec.python;
  if (spec.venv !== undefined) {
    result.pathPrefix.push(path.join(spec.venv, 'bin'));
    result.variables.VIRTUAL_ENV = spec.venv;
    python ??= path.join(spec.venv, 'bin', 'python');
  }
  let condaName: string | undefined;
  if (spec.conda !== undefined) {
    if (spec.conda.includes('/')) {
      result.pathPrefix.push(path.join(spec.conda, 'bin'));
      result.variables.CONDA_PREFIX = spec.conda;
      python ??= path.join(spec.conda, 'bin', 'python');
    } else {
      condaName = spec.conda;
    }
  }
  const [first, ...rest] = result.argv;
  if (python !== undefined && first !== undefined && PYTHON_NAMES.test(path.basename(first))) {
    result.argv = [python, ...rest];
  }
  if (condaName !== undefined) {
    result.argv = ['conda', 'run', '--no-capture-output', '-n', condaName, ...result.argv];
  }
  Object.assign(result.variables, spec.env ?? {});
  if (spec.container !== undefined) result.container = spec.container;
  return result;
}

/** One line for cards and status: what the environment is made of. */
export function describeEnvironment(name: string, spec: EnvironmentSpec): string {
  const parts: string[] = [];
  if (spec.venv !== undefined) parts.push(`venv ${spec.venv}`);
  if (spec.conda !== undefined) parts.push(`conda ${spec.conda}`);
  if (spec.python !== undefined) parts.push(`python ${spec.python}`);
  if (spec.container !== undefined) parts.push(`container ${spec.container}`);
  const variables = Object.keys(spec.env ?? {});
  if (variables.length > 0) parts.push(`env ${variables.join(', ')}`);
  return parts.length === 0 ? name : `${name} (${parts.join('; ')})`;
}
