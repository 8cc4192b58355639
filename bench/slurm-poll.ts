/**
 * slurm_poll_ms_100_jobs: one executor poll over 100 submitted (held) Slurm jobs.
 * Needs a cluster: `bash .ci/slurm-up` (or SLURM_CONF in the environment). Run: `npx tsx bench/slurm-poll.ts`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config/config.js';
import { createLogger } from '../src/logger.js';
import type { RunMeta } from '../src/runs/records/run-types.js';
import { createRunCommand, type RunCommand } from '../src/runs/slurm/slurm-command.js';
import { createSlurmExecutor } from '../src/runs/slurm/slurm-executor.js';

const JOBS = 100;

function findSlurmConf(): string | undefined {
  if (process.env.SLURM_CONF !== undefined && existsSync(process.env.SLURM_CONF))
    return process.env.SLURM_CONF;
  const pointer = path.resolve(import.meta.dirname, '../.tmp/slurm-conf-path');
  if (!existsSync(pointer)) return undefined;
  const candidate = path.join(readFileSync(pointer, 'utf8').trim(), 'slurm.conf');
  return existsSync(candidate) ? candidate : undefined;
}

async function main(): Promise<void> {
  const slurmConf = findSlurmConf();
  if (slurmConf === undefined) {
    process.stderr.write('slurm-poll: no Slurm cluster (run `bash .ci/slurm-up` first); skipped\n');
    process.stdout.write('slurm_poll_skipped=1\n');
    return;
  }
  const inner = createRunCommand({ ...process.env, SLURM_CONF: slurmConf });
  let calls = 0;
  const runCommand: RunCommand = (file, args, options) => {
    calls += 1;
    return inner(file, args, options);
  };
  const workDir = await mkdtemp(path.join(tmpdir(), 'shepherd-slurm-bench-'));
  const jobIds: string[] = [];
  try {
    // Held jobs stay in the queue without using the node, like a backlog of waiting runs.
    for (let index = 0; index < JOBS; index += 1) {
      const result = await inner('sbatch', [
        '--parsable',
        '--hold',
        `--job-name=bench-${index}`,
        '--time=1',
        '--output=/dev/null',
        `--chdir=${workDir}`,
        '--wrap=true',
      ]);
      if (result.exitCode !== 0) throw new Error(`sbatch failed: ${result.stderr.trim()}`);
      jobIds.push(result.stdout.trim().split(';')[0] ?? '');
    }
    const executor = createSlurmExecutor({
      config: loadConfig({ SHEPHERD_EXECUTOR: 'slurm' }),
      logger: createLogger('silent'),
      runCommand,
    });
    const at = new Date().toISOString();
    const runs: RunMeta[] = jobIds.map((jobId, index) => ({
      schemaVersion: 1,
      id: `bench-${index}`,
      name: `bench-${index}`,
      threadId: 'web:bench:bench',
      requester: { id: 'bench', name: 'bench' },
      status: 'running',
      gpus: 0,
      gpuIndices: [],
      maxHours: 1,
      scriptVersion: 1,
      executor: 'slurm',
      jobId,
      launchCount: 1,
      createdAt: at,
      updatedAt: at,
    }));
    await executor.poll(runs.slice(0, 1)); // warm up (module loading, first connection)
    calls = 0;
    const started = performance.now();
    const states = await executor.poll(runs);
    const elapsed = performance.now() - started;
    const pending = [...states.values()].filter((state) => state.kind === 'pending').length;
    process.stdout.write(`slurm_poll_ms_100_jobs=${elapsed.toFixed(1)}\n`);
    process.stdout.write(`slurm_poll_calls=${calls}\n`);
    process.stdout.write(`slurm_poll_jobs_seen_pending=${pending}\n`);
  } finally {
    if (jobIds.length > 0) await inner('scancel', jobIds);
    await rm(workDir, { recursive: true, force: true });
  }
}

await main();
