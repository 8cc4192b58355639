import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/logger.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { createRunCommand, type RunCommand } from '../../src/runs/slurm/slurm-command.js';

/*
 * Finds the one-node CI cluster started by `.ci/slurm-up` (SLURM_CONF in the environment, or the path
 * it wrote to .tmp/slurm-conf-path) and checks that it answers. Slurm tests skip when it does not.
 */

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
export const FIXTURE = fileURLToPath(new URL('./fixtures/slurm_train.py', import.meta.url));

function findSlurmConf(): string | undefined {
  if (process.env.SLURM_CONF !== undefined && existsSync(process.env.SLURM_CONF))
    return process.env.SLURM_CONF;
  const pointer = path.join(repoRoot, '.tmp', 'slurm-conf-path');
  if (!existsSync(pointer)) return undefined;
  const candidate = path.join(readFileSync(pointer, 'utf8').trim(), 'slurm.conf');
  return existsSync(candidate) ? candidate : undefined;
}

export const slurmConf = findSlurmConf();

/** Like the app: the Slurm tools (and so, via `--export=ALL`, the jobs) get a minimal environment. */
export const slurmEnvironment: Record<string, string | undefined> = {
  PATH: '/usr/local/bin:/usr/bin:/bin',
  ...(slurmConf === undefined ? {} : { SLURM_CONF: slurmConf }),
};

function clusterAnswers(): boolean {
  if (slurmConf === undefined) return false;
  try {
    const states = execFileSync('sinfo', ['-h', '-o', '%t'], {
      env: slurmEnvironment,
      timeout: 5000,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    // `comp` shows while another file's job is completing: the cluster is up.
    return /idle|mix|alloc|comp/.test(states);
  } catch {
    return false;
  }
}

export const slurmAvailable = clusterAnswers();
export const SKIP_MESSAGE =
  'no Slurm cluster answers (start one with `bash .ci/slurm-up`; .ci/run does it in CI)';
if (!slurmAvailable && process.env.SHEPHERD_SLURM_TESTS === 'required') {
  // .ci/run started a cluster: a cluster that does not answer is a failure, not a skip.
  throw new Error(`Slurm tests are required but ${SKIP_MESSAGE}`);
}
if (!slurmAvailable) process.stderr.write(`Slurm tests skipped: ${SKIP_MESSAGE}\n`);

export function slurmTestConfig(overrides: Record<string, string> = {}) {
  return loadConfig({ SHEPHERD_EXECUTOR: 'slurm', SHEPHERD_LOG_LEVEL: 'silent', ...overrides });
}

export const silentLogger = createLogger('silent');

/** A `RunCommand` on the test cluster that counts calls per command. */
export function countingRunCommand(): { runCommand: RunCommand; calls: string[] } {
  const inner = createRunCommand(slurmEnvironment);
  const calls: string[] = [];
  return {
    calls,
    runCommand: (file, args, options) => {
      calls.push(file);
      return inner(file, args, options);
    },
  };
}

/** A run directory with the fixture as train.py, and the meta the run service would launch with. */
export async function makeRun(
  root: string,
  name: string,
  options: { gpus?: number; maxHours?: number; config?: Record<string, unknown> } = {},
): Promise<{ meta: RunMeta; runDir: string }> {
  const id = `${name}-${Math.random().toString(36).slice(2, 8)}`;
  const runDir = path.join(root, 'runs', id);
  await mkdir(runDir, { recursive: true });
  await copyFile(FIXTURE, path.join(runDir, 'train.py'));
  const at = new Date().toISOString();
  const meta: RunMeta = {
    schemaVersion: 1,
    id,
    name,
    threadId: 'web:test:thread',
    requester: { id: 'u1', name: 'alice' },
    status: 'running',
    gpus: options.gpus ?? 0,
    gpuIndices: [],
    maxHours: options.maxHours ?? 1,
    config: options.config ?? {},
    scriptVersion: 1,
    executor: 'slurm',
    launchCount: 1,
    createdAt: at,
    updatedAt: at,
  };
  return { meta, runDir };
}

export async function makeDataRoot(): Promise<string> {
  // The compute node is this host, so any local directory is "shared".
  return mkdtemp(path.join(tmpdir(), 'shepherd-slurm-test-'));
}

export async function readText(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch {
    return '';
  }
}

/** Poll `check` until it returns a value (not undefined) or time runs out. */
export async function waitFor<T>(
  check: () => Promise<T | undefined>,
  options: { timeoutMs: number; intervalMs?: number; what: string },
): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${options.what}`);
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 250));
  }
}
