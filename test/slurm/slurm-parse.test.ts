import { describe, expect, it } from 'vitest';
import { shellQuote } from '../../src/runs/evaluation-script.js';
import { renderJobScript } from '../../src/runs/slurm/slurm-job-script.js';
import {
  countGpus,
  describePendingReason,
  formatTimeLimit,
  mapSlurmState,
  parseSacct,
  parseSbatchOutput,
  parseScontrolNodes,
  parseSqueue,
  shortenSlurmError,
} from '../../src/runs/slurm/slurm-parse.js';

// Output captured from the Slurm 22.05 one-node CI cluster.
const SCONTROL_NODE =
  'NodeName=localhost Arch=x86_64 CoresPerSocket=1  CPUAlloc=1 CPUEfctv=2 CPUTot=2 Gres=gpu:2 GresDrain=N/A ' +
  'GresUsed=gpu:1(IDX:0) NodeAddr=127.0.0.1 State=MIXED ThreadsPerCore=1 Partitions=debug CfgTRES=cpu=2 AllocTRES=cpu=1';

describe('parseSqueue', () => {
  it('reads id, state and reason, skipping blank lines', () => {
    expect(parseSqueue('5|FAILED|NonZeroExitCode\n7|PENDING|Resources\n\n6|RUNNING|None\n')).toEqual([
      { jobId: '5', state: 'FAILED', reason: 'NonZeroExitCode' },
      { jobId: '7', state: 'PENDING', reason: 'Resources' },
      { jobId: '6', state: 'RUNNING', reason: 'None' },
    ]);
  });
});

describe('parseSacct', () => {
  it('splits exit code and signal and keeps the first word of the state', () => {
    expect(parseSacct('5|FAILED|3:0\n6|CANCELLED by 0|0:15\n7|TIMEOUT|0:0\n')).toEqual([
      { jobId: '5', state: 'FAILED', exitCode: 3, signal: 0 },
      { jobId: '6', state: 'CANCELLED', exitCode: 0, signal: 15 },
      { jobId: '7', state: 'TIMEOUT', exitCode: 0, signal: 0 },
    ]);
  });
  it('keeps the last row of a requeued job', () => {
    expect(parseSacct('9|REQUEUED|0:0\n9|COMPLETED|0:0')).toEqual([
      { jobId: '9', state: 'COMPLETED', exitCode: 0, signal: 0 },
    ]);
  });
});

describe('parseSbatchOutput', () => {
  it('parses id and id;cluster', () => {
    expect(parseSbatchOutput('42\n')).toEqual({ jobId: '42' });
    expect(parseSbatchOutput('42;gpu-cluster\n')).toEqual({ jobId: '42', cluster: 'gpu-cluster' });
    expect(parseSbatchOutput('sbatch: warning: something\n')).toBeUndefined();
  });
});

describe('formatTimeLimit', () => {
  it('rounds up to whole minutes, at least one', () => {
    expect(formatTimeLimit(24)).toBe('1-00:00:00');
    expect(formatTimeLimit(1.5)).toBe('0-01:30:00');
    expect(formatTimeLimit(1 / 60)).toBe('0-00:01:00');
    expect(formatTimeLimit(0.001)).toBe('0-00:01:00');
    expect(formatTimeLimit(49.25)).toBe('2-01:15:00');
  });
});

describe('shortenSlurmError', () => {
  it('drops the sbatch prefix, joins lines and caps the length', () => {
    expect(
      shortenSlurmError(
        'sbatch: error: invalid partition specified: nope\nsbatch: error: Batch job submission failed: Invalid partition name specified\n',
      ),
    ).toBe(
      'invalid partition specified: nope; Batch job submission failed: Invalid partition name specified',
    );
    const long = shortenSlurmError(`sbatch: error: ${'x'.repeat(500)}`);
    expect(long.length).toBe(300);
    expect(long.endsWith('…')).toBe(true);
  });
});

describe('mapSlurmState', () => {
  it('maps waiting and running states', () => {
    expect(mapSlurmState('PENDING', { reason: 'Resources' })).toEqual({
      kind: 'pending',
      reason: 'queued on Slurm: waiting for resources',
    });
    expect(mapSlurmState('PENDING', { reason: 'QOSMaxGRESPerUser' })).toEqual({
      kind: 'pending',
      reason: 'queued on Slurm: waiting for a limit (QOSMaxGRESPerUser)',
    });
    for (const state of ['RUNNING', 'CONFIGURING', 'COMPLETING']) {
      expect(mapSlurmState(state)).toEqual({ kind: 'alive' });
    }
    expect(mapSlurmState('SUSPENDED').kind).toBe('pending');
    expect(mapSlurmState('STOPPED').kind).toBe('pending');
    // Requeued: its processes were killed (run-endings relaunches it; see test/runs/infrastructure-ending).
    expect(mapSlurmState('REQUEUE_HOLD')).toEqual({
      kind: 'pending',
      reason: 'requeued and held on Slurm',
      requeued: true,
    });
  });
  it('maps final states with their exit codes', () => {
    expect(mapSlurmState('COMPLETED', { exitCode: 0, signal: 0 })).toEqual({ kind: 'exited', exitCode: 0 });
    expect(mapSlurmState('FAILED', { exitCode: 3, signal: 0 })).toEqual({ kind: 'exited', exitCode: 3 });
    expect(mapSlurmState('FAILED', { exitCode: 0, signal: 9 })).toEqual({
      kind: 'signaled',
      signal: 'SIGKILL',
      exitCode: 137,
    });
    expect(mapSlurmState('FAILED', { exitCode: 0, signal: 0 })).toEqual({ kind: 'exited', exitCode: 1 });
  });
  it('turns scheduler verdicts into crash classes', () => {
    expect(mapSlurmState('TIMEOUT', { exitCode: 0, signal: 0 })).toEqual({
      kind: 'signaled',
      signal: 'SIGTERM',
      crashClass: 'timeout',
    });
    expect(mapSlurmState('OUT_OF_MEMORY', { exitCode: 0, signal: 9 })).toEqual({
      kind: 'signaled',
      signal: 'SIGKILL',
      exitCode: 137,
      crashClass: 'out_of_memory',
    });
    expect(mapSlurmState('NODE_FAIL')).toMatchObject({ kind: 'signaled', crashClass: 'node_fail' });
    expect(mapSlurmState('BOOT_FAIL')).toMatchObject({ crashClass: 'node_fail' });
    expect(mapSlurmState('PREEMPTED')).toMatchObject({ crashClass: 'preempted' });
    expect(mapSlurmState('DEADLINE')).toMatchObject({ crashClass: 'timeout' });
    expect(mapSlurmState('CANCELLED by 0', { exitCode: 0, signal: 15 })).toEqual({
      kind: 'signaled',
      signal: 'SIGTERM',
      exitCode: 143,
      crashClass: 'cancelled',
    });
    expect(mapSlurmState('SOMETHING_NEW')).toEqual({
      kind: 'unknown',
      reason: 'Slurm job state SOMETHING_NEW',
    });
  });
});

describe('describePendingReason', () => {
  it('explains common reasons and keeps unknown ones', () => {
    expect(describePendingReason('Priority')).toBe('queued on Slurm: waiting for higher-priority jobs');
    expect(describePendingReason('WaitingForSomething')).toBe('queued on Slurm: WaitingForSomething');
  });
});

describe('node parsing', () => {
  it('counts GPUs in gres strings', () => {
    expect(countGpus('gpu:2')).toBe(2);
    expect(countGpus('gpu:a100:4(S:0-1)')).toBe(4);
    expect(countGpus('gpu:a100:1(IDX:0,2),gpu:v100:2(IDX:0-1)')).toBe(3);
    expect(countGpus('(null)')).toBe(0);
  });
  it('reads scontrol show node -d -o', () => {
    expect(parseScontrolNodes(`${SCONTROL_NODE}\n`)).toEqual([
      { name: 'localhost', state: 'MIXED', partitions: ['debug'], gpusTotal: 2, gpusAllocated: 1 },
    ]);
  });
});

describe('renderJobScript', () => {
  it('quotes values and execs python so signals reach it', () => {
    const script = renderJobScript({
      python: 'python3',
      script: 'train.py',
      launchNumber: 2,
      scriptVersion: 1,
      runtimeDir: '/opt/shepherd/python/',
      environment: { SHEPHERD_RUN_CONFIG: `{"a":1,"b":"it's"}` },
    });
    expect(script).toContain(`export SHEPHERD_RUN_CONFIG='{"a":1,"b":"it'\\''s"}'`);
    expect(script).toContain("exec 'python3' -u 'train.py'");
    expect(script).toContain('=== launch 2 at');
    expect(shellQuote("a'b")).toBe(`'a'\\''b'`);
  });
});
