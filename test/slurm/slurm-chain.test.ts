import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import type { ProcessState } from '../../src/runs/executor.js';
import { parsePartitionMaxMinutes, planSegment } from '../../src/runs/slurm/slurm-chain.js';
import { renderJobScript } from '../../src/runs/slurm/slurm-job-script.js';
import { markWallTimeEnds, planWallTime } from '../../src/runs/slurm/slurm-wall-time.js';
import { testRunMeta } from '../helpers/run-meta.js';

/** Issue 22, wall-time chains: the planning is pure and tested here; the cluster test runs a real chain. */

const PARTITIONS = [
  'PartitionName=debug AllowGroups=ALL Default=YES QoS=N/A DefaultTime=NONE MaxNodes=UNLIMITED MaxTime=UNLIMITED MinNodes=0 Nodes=localhost State=UP',
  'PartitionName=short AllowGroups=ALL Default=NO MaxTime=04:00:00 Nodes=localhost State=UP',
  'PartitionName=long Default=NO MaxTime=2-00:00:00 Nodes=localhost',
  'PartitionName=tiny Default=NO MaxTime=00:01:00 Nodes=localhost',
].join('\n');

describe('wall-time chain planning', () => {
  it("reads a partition's MaxTime in minutes, the default partition's without a name", () => {
    expect(parsePartitionMaxMinutes(PARTITIONS, 'short')).toBe(240);
    expect(parsePartitionMaxMinutes(PARTITIONS, 'long')).toBe(2880);
    expect(parsePartitionMaxMinutes(PARTITIONS, 'tiny')).toBe(1);
    expect(parsePartitionMaxMinutes(PARTITIONS)).toBeUndefined(); // debug: UNLIMITED
    expect(parsePartitionMaxMinutes(PARTITIONS, 'nope')).toBeUndefined();
    expect(parsePartitionMaxMinutes('PartitionName=gpu Default=YES MaxTime=1-12:30:00')).toBe(2190);
    expect(parsePartitionMaxMinutes('PartitionName=gpu MaxTime=30')).toBe(30);
  });

  it('splits hours above MaxTime into segments; the last gets what is left; none when it fits', () => {
    expect(planSegment(10, 240, 1)).toEqual({ index: 1, of: 3, hours: 4 });
    expect(planSegment(10, 240, 2)).toEqual({ index: 2, of: 3, hours: 4 });
    expect(planSegment(10, 240, 3)).toEqual({ index: 3, of: 3, hours: 2 });
    expect(planSegment(10, 240, 9)).toEqual({ index: 3, of: 3, hours: 2 });
    expect(planSegment(4, 240, 1)).toBeUndefined();
    expect(planSegment(3, 240, 1)).toBeUndefined();
    expect(planSegment(100, undefined, 1)).toBeUndefined();
    expect(planSegment(0.05, 1, 1)).toEqual({ index: 1, of: 3, hours: 1 / 60 });
  });

  it('plans --time per segment, and the USR1 warning only for jobs at least twice the grace', async () => {
    const calls: string[][] = [];
    const run = async (_file: string, args: readonly string[]) => {
      calls.push([...args]);
      return { stdout: PARTITIONS, stderr: '', exitCode: 0 };
    };
    const logger = createLogger('silent');
    const plan = (maxHours: number, graceS: number, nextSegment?: number) =>
      planWallTime({
        run,
        meta: testRunMeta('r', { maxHours, ...(nextSegment === undefined ? {} : { nextSegment }) }),
        partition: 'short',
        graceS,
        signalled: true,
        logger,
      });
    expect(await plan(10, 60, 3)).toMatchObject({
      hours: 2,
      segment: { index: 3, of: 3 },
      sbatchArgs: ['--signal=B:USR1@60'],
      jobScript: { ignoreSignal: 'USR1' },
      launch: { segment: { index: 3, of: 3 } },
    });
    expect(calls[0]).toEqual(['show', 'partition', '-o', 'short']);
    expect(await plan(1 / 60, 60)).toMatchObject({
      hours: 1 / 60,
      sbatchArgs: [],
      jobScript: {},
      launch: {},
    });
    expect((await plan(2 / 60, 60)).sbatchArgs).toEqual(['--signal=B:USR1@60']);
  });

  it('ignores the warning signal through exec, so a script without the helper is not killed by it', () => {
    const base = {
      python: 'python3',
      script: 'train.py',
      launchNumber: 1,
      scriptVersion: 1,
      runtimeDir: '/h',
      environment: {},
    };
    const script = renderJobScript({ ...base, ignoreSignal: 'USR1' });
    expect(script).toMatch(/trap '' USR1\nexec 'python3' -u 'train.py'/);
    expect(renderJobScript(base)).not.toContain('trap');
  });

  it('reads an exit 0 on the warning signal (finish.json wallTime) as a time-limit end', async () => {
    const root = mkdtempSync(join(tmpdir(), 'shepherd-walltime-'));
    try {
      const runDir = (runId: string) => join(root, runId);
      mkdirSync(runDir('warned'));
      mkdirSync(runDir('finished'));
      writeFileSync(
        join(runDir('warned'), 'finish.json'),
        '{"ts": 1, "step": 9, "stopped": true, "wallTime": true}',
      );
      writeFileSync(join(runDir('finished'), 'finish.json'), '{"ts": 1, "step": 9, "stopped": false}');
      const states = new Map<string, ProcessState>([
        ['warned', { kind: 'exited', exitCode: 0 }],
        ['finished', { kind: 'exited', exitCode: 0 }],
      ]);
      await markWallTimeEnds(states, [testRunMeta('warned'), testRunMeta('finished')], runDir);
      expect(states.get('warned')).toEqual({
        kind: 'signaled',
        signal: 'SIGUSR1',
        exitCode: 0,
        crashClass: 'timeout',
      });
      expect(states.get('finished')).toEqual({ kind: 'exited', exitCode: 0 });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
