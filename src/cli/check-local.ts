import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../config/config.js';
import { PYTHON_RUNTIME_DIR } from '../runs/records/run-files.js';
import { type CheckOutcome, errorText, outcome } from './doctor-types.js';

/** The environment the probes run in (the CLI passes its own; nothing here reads `process.env`). */
export type ProbeEnvironment = Readonly<Record<string, string | undefined>>;

function run(
  command: string,
  args: string[],
  environment: ProbeEnvironment,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { timeout: 10_000, env: { PATH: environment.PATH, ...environment } },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 127;
        resolve({ code, stdout: String(stdout), stderr: String(stderr || (error?.message ?? '')) });
      },
    );
  });
}

/** The training interpreter runs, and Shepherd's helper imports with it. */
export async function checkPython(python: string, environment: ProbeEnvironment): Promise<CheckOutcome[]> {
  const version = await run(python, ['--version'], environment);
  if (version.code !== 0) {
    return [
      outcome(
        'python',
        'fail',
        `${python} does not run: ${version.stderr.trim()}`,
        'install Python 3 or set SHEPHERD_PYTHON',
      ),
    ];
  }
  const results = [outcome('python', 'ok', `${(version.stdout || version.stderr).trim()} (${python})`)];
  const helper = await run(python, ['-c', 'import shepherd; print(shepherd.__file__)'], {
    PATH: environment.PATH,
    PYTHONPATH: PYTHON_RUNTIME_DIR,
  });
  results.push(
    helper.code === 0
      ? outcome('python helper', 'ok', 'import shepherd works')
      : outcome(
          'python helper',
          'fail',
          `import shepherd failed: ${helper.stderr.trim().split('\n').at(-1) ?? ''}`,
          'reinstall Shepherd (src/runs/python must ship with it)',
        ),
  );
  return results;
}

/** `nvidia-smi` against `SHEPHERD_GPUS`; skipped on a host with neither. */
export async function checkGpus(
  configured: readonly number[] | undefined,
  environment: ProbeEnvironment,
  nvidiaSmi = 'nvidia-smi',
): Promise<CheckOutcome[]> {
  const listing = await run(
    nvidiaSmi,
    ['--query-gpu=index,name,memory.total', '--format=csv,noheader,nounits'],
    environment,
  );
  if (listing.code !== 0) {
    if (configured === undefined)
      return [outcome('gpus', 'skip', 'no nvidia-smi and SHEPHERD_GPUS unset (CPU-only runs)')];
    return [
      outcome(
        'gpus',
        'warn',
        `SHEPHERD_GPUS lists ${configured.length} GPU(s) but nvidia-smi does not run`,
        'install the NVIDIA driver, or leave SHEPHERD_GPUS unset on a CPU host',
      ),
    ];
  }
  const indices = listing.stdout
    .split('\n')
    .map((line) => Number(line.split(',')[0]))
    .filter((index) => Number.isInteger(index));
  if (configured === undefined) return [outcome('gpus', 'ok', `nvidia-smi sees ${indices.length} GPU(s)`)];
  const missing = configured.filter((index) => !indices.includes(index));
  return missing.length === 0
    ? [outcome('gpus', 'ok', `SHEPHERD_GPUS ${configured.join(',')} all present`)]
    : [
        outcome(
          'gpus',
          'fail',
          `SHEPHERD_GPUS names GPU(s) ${missing.join(',')} that nvidia-smi does not list (${indices.join(',') || 'none'})`,
          'fix SHEPHERD_GPUS',
        ),
      ];
}

/** `sinfo` answers and the partition exists; only when the Slurm executor is chosen. */
export async function checkSlurm(config: Config, environment: ProbeEnvironment): Promise<CheckOutcome[]> {
  if (config.runs.executor !== 'slurm') return [outcome('slurm', 'skip', 'SHEPHERD_EXECUTOR is local')];
  const partitions = await run('sinfo', ['-h', '-o', '%P'], environment);
  if (partitions.code !== 0) {
    return [
      outcome(
        'slurm',
        'fail',
        `sinfo failed: ${partitions.stderr.trim().slice(0, 160)}`,
        'install the Slurm client and check SLURM_CONF / slurmctld',
      ),
    ];
  }
  const names = partitions.stdout
    .split('\n')
    .map((name) => name.trim().replace(/\*$/, ''))
    .filter(Boolean);
  const wanted = config.slurm.partition;
  if (wanted === undefined) return [outcome('slurm', 'ok', `sinfo answers; partitions: ${names.join(', ')}`)];
  return names.includes(wanted)
    ? [outcome('slurm', 'ok', `partition ${wanted} exists`)]
    : [
        outcome(
          'slurm',
          'fail',
          `partition ${wanted} not found (have: ${names.join(', ')})`,
          'fix SHEPHERD_SLURM_PARTITION',
        ),
      ];
}

const GIB = 1024 ** 3;

/** Free space where runs write checkpoints and logs. */
export async function checkDisk(dataDir: string): Promise<CheckOutcome[]> {
  let directory = path.resolve(dataDir);
  while (!existsSync(directory) && path.dirname(directory) !== directory) directory = path.dirname(directory);
  try {
    const stats = await statfs(directory);
    const free = stats.bavail * stats.bsize;
    const text = `${(free / GIB).toFixed(1)} GiB free under ${dataDir}`;
    if (free < GIB) return [outcome('disk', 'fail', text, 'free space or move SHEPHERD_DATA_DIR')];
    if (free < 10 * GIB)
      return [outcome('disk', 'warn', text, 'checkpoints need room: free space or move SHEPHERD_DATA_DIR')];
    return [outcome('disk', 'ok', text)];
  } catch (error) {
    return [outcome('disk', 'fail', `cannot stat ${directory}: ${errorText(error)}`)];
  }
}
