import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/logger.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import type { CommandResult, RunCommand } from '../../src/runs/slurm/slurm-command.js';
import { createSlurmExecutor } from '../../src/runs/slurm/slurm-executor.js';

/**
 * A cluster with accounting off (as in `.ci/slurm-up`): plain `sacct` refuses, `sacct -c` reads the
 * job-completion log. The CLI is replaced at its boundary so the calls can be made to overlap exactly.
 */
function accountingOffCluster(exitCodes: Record<string, number>) {
  const calls: string[] = [];
  const runCommand: RunCommand = async (file, args) => {
    calls.push([file, ...args].join(' '));
    // Every call yields to the event loop first, so two polls interleave like real execFile calls.
    await new Promise((resolve) => setTimeout(resolve, 10));
    if (file === 'squeue') return { stdout: '', stderr: '', exitCode: 0 } satisfies CommandResult;
    if (file !== 'sacct') return { stdout: '', stderr: `unexpected ${file}`, exitCode: 2 };
    if (!args.includes('-c')) {
      return {
        stdout: '',
        stderr: 'sacct: error: Slurm accounting storage is disabled',
        exitCode: 1,
      };
    }
    const ids = (args[args.indexOf('-j') + 1] ?? '').split(',');
    const stdout = ids.map((id) => `${id}|FAILED|${exitCodes[id] ?? 0}:0`).join('\n');
    return { stdout, stderr: '', exitCode: 0 };
  };
  return { runCommand, calls };
}

function slurmRun(id: string, jobId: string): RunMeta {
  const at = new Date().toISOString();
  return {
    schemaVersion: 1,
    id,
    name: id,
    threadId: 'web:test:thread',
    requester: { id: 'u1', name: 'alice' },
    status: 'running',
    gpus: 0,
    gpuIndices: [],
    maxHours: 1,
    config: {},
    scriptVersion: 1,
    executor: 'slurm',
    launchCount: 1,
    jobId,
    createdAt: at,
    updatedAt: at,
  };
}

describe('Slurm executor with accounting off', () => {
  it('reads final states from the completion log even when two polls first ask sacct at once', async () => {
    const cluster = accountingOffCluster({ '101': 3, '102': 7 });
    const executor = createSlurmExecutor({
      config: loadConfig({ SHEPHERD_EXECUTOR: 'slurm', SHEPHERD_LOG_LEVEL: 'silent' }),
      logger: createLogger('silent'),
      runCommand: cluster.runCommand,
    });

    // Both polls start before either learns that accounting is off (the CI failure of stop 19).
    const [first, second] = await Promise.all([
      executor.poll([slurmRun('crash-a', '101')]),
      executor.poll([slurmRun('crash-b', '102')]),
    ]);

    expect(first.get('crash-a')).toMatchObject({ kind: 'exited', exitCode: 3 });
    expect(second.get('crash-b')).toMatchObject({ kind: 'exited', exitCode: 7 });

    // Once known, later polls go straight to the completion log.
    const before = cluster.calls.length;
    await executor.poll([slurmRun('crash-a', '101')]);
    const later = cluster.calls.slice(before).filter((call) => call.startsWith('sacct'));
    expect(later).toHaveLength(1);
    expect(later[0]).toContain(' -c ');
  });
});
