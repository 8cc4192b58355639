import { describe, expect, it } from 'vitest';
import { detectCrash } from '../../src/monitor/detectors/crash.js';
import type { ProcessState } from '../../src/runs/executor.js';
import { infrastructureCause } from '../../src/runs/infrastructure-ending.js';
import type { RunMeta } from '../../src/runs/records/run-types.js';
import { mapSlurmState, parseSqueue } from '../../src/runs/slurm/slurm-parse.js';

/** Issue 22: which endings are the infrastructure's (relaunched) and which are the script's (triaged). */

const meta = {
  id: 'r1',
  name: 'qwen',
  status: 'running',
  executor: 'local',
  launchCount: 2,
} as RunMeta;
const HOUR = 3_600_000;

const cause = (state: ProcessState, logTail = '', extra: Partial<RunMeta> = {}, ranMs = 5 * HOUR) =>
  infrastructureCause({ meta: { ...meta, ...extra }, state, logTail, ranMs })?.kind;

const traceback = (line: string) =>
  `=== launch 2 at 2026-01-01T00:00:00Z (script v1, GPU 0) ===\nstep 10\nTraceback (most recent call last):\n  File "train.py", line 9, in <module>\n${line}\n`;

describe('infrastructure endings', () => {
  it('a SIGKILL or SIGBUS nobody in Shepherd asked for is infrastructure; a requested stop is not', () => {
    expect(cause({ kind: 'signaled', signal: 'SIGKILL' })).toBe('killed');
    expect(cause({ kind: 'signaled', signal: 'SIGBUS' })).toBe('killed');
    expect(cause({ kind: 'exited', exitCode: 137 })).toBe('killed');
    expect(cause({ kind: 'signaled', signal: 'SIGKILL' }, '', { stopRequested: 'stop' })).toBeUndefined();
    expect(cause({ kind: 'signaled', signal: 'SIGKILL' }, '', { stopRequested: 'pause' })).toBeUndefined();
    // A run Shepherd only watches cannot be relaunched by it.
    expect(
      cause({ kind: 'signaled', signal: 'SIGKILL' }, '', { watch: { source: 'log', logPath: '/x' } }),
    ).toBeUndefined();
    // SIGTERM from outside (a person's kill) and SIGSEGV (a bug) are not the infrastructure.
    expect(cause({ kind: 'signaled', signal: 'SIGTERM' })).toBeUndefined();
    expect(cause({ kind: 'signaled', signal: 'SIGSEGV' })).toBeUndefined();
  });

  it('Slurm NODE_FAIL, BOOT_FAIL, PREEMPTED and a requeue are infrastructure; TIMEOUT, OUT_OF_MEMORY, CANCELLED are not', () => {
    const slurm = { executor: 'slurm' as const };
    expect(cause(mapSlurmState('NODE_FAIL'), '', slurm)).toBe('node_fail');
    expect(cause(mapSlurmState('BOOT_FAIL'), '', slurm)).toBe('node_fail');
    expect(cause(mapSlurmState('PREEMPTED'), '', slurm)).toBe('preempted');
    expect(cause(mapSlurmState('TIMEOUT'), '', slurm)).toBeUndefined();
    expect(cause(mapSlurmState('OUT_OF_MEMORY'), '', slurm)).toBeUndefined();
    expect(cause(mapSlurmState('CANCELLED'), '', slurm)).toBeUndefined();
    // Captured after `scontrol requeue` on the CI cluster: back to PENDING (BeginTime) with RestartCnt 1.
    const [row] = parseSqueue('41|PENDING|BeginTime|1|\n');
    expect(row).toEqual({ jobId: '41', state: 'PENDING', reason: 'BeginTime', restarts: 1 });
    const requeued = mapSlurmState(row?.state ?? '', { reason: row?.reason ?? '', restarts: row?.restarts });
    expect(requeued).toEqual({ kind: 'pending', reason: 'requeued on Slurm', requeued: true });
    expect(cause(requeued, '', slurm)).toBe('requeued');
    // A job that waits for its first start is no requeue.
    const waiting = mapSlurmState('PENDING', { reason: 'Resources', restarts: 0 });
    expect(waiting).toEqual({ kind: 'pending', reason: 'queued on Slurm: waiting for resources' });
    expect(cause(waiting, '', slurm)).toBeUndefined();
  });

  it('Kubernetes evictions and preemptions (the executor maps them to node_fail / preempted) are infrastructure', () => {
    const k8s = { executor: 'kubernetes' as const };
    expect(cause({ kind: 'exited', exitCode: 137, crashClass: 'node_fail' }, '', k8s)).toBe('node_fail');
    expect(cause({ kind: 'exited', exitCode: 143, crashClass: 'preempted' }, '', k8s)).toBe('preempted');
    expect(cause({ kind: 'exited', exitCode: 137, crashClass: 'out_of_memory' }, '', k8s)).toBeUndefined();
  });

  it('reads the infrastructure tracebacks: NCCL, ECC, a rendezvous reset, a late illegal memory access', () => {
    const exit1: ProcessState = { kind: 'exited', exitCode: 1 };
    expect(
      cause(
        exit1,
        traceback(
          '[rank0]:[E ProcessGroupNCCL.cpp:563] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600029 milliseconds before timing out.',
        ),
      ),
    ).toBe('nccl_timeout');
    expect(cause(exit1, traceback('RuntimeError: CUDA error: uncorrectable ECC error encountered'))).toBe(
      'ecc_error',
    );
    expect(
      cause(
        exit1,
        traceback(
          'torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed.\nConnectionResetError: [Errno 104] Connection reset by peer',
        ),
      ),
    ).toBe('rendezvous_reset');
    const illegal = traceback('RuntimeError: CUDA error: an illegal memory access was encountered');
    expect(cause(exit1, illegal, {}, 5 * HOUR)).toBe('illegal_memory_access');
    // In the first minutes it is a bug in the script, not a failing GPU.
    expect(cause(exit1, illegal, {}, 2 * 60_000)).toBeUndefined();
  });

  it('a Python exception, CUDA out of memory or a clean exit are the script’s: not retried', () => {
    expect(cause({ kind: 'exited', exitCode: 1 }, traceback('ValueError: bad shape'))).toBeUndefined();
    expect(
      cause(
        { kind: 'exited', exitCode: 1 },
        traceback('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'),
      ),
    ).toBeUndefined();
    expect(cause({ kind: 'exited', exitCode: 0 })).toBeUndefined();
    // An NCCL timeout of an earlier launch does not make this launch's exception an infrastructure failure.
    const earlier = traceback('RuntimeError: NCCL communicator timed out').replace('launch 2', 'launch 1');
    expect(
      cause(
        { kind: 'exited', exitCode: 1 },
        `${earlier}=== launch 2 at 2026-01-01T01:00:00Z ===\nTraceback (most recent call last):\nKeyError: 'x'\n`,
      ),
    ).toBeUndefined();
  });

  it('the crash detector leaves an infrastructure ending to run-endings while the run is still running', () => {
    const killed: ProcessState = { kind: 'signaled', signal: 'SIGKILL' };
    expect(detectCrash(meta, killed, '')).toBeUndefined();
    const failed = detectCrash({ ...meta, status: 'failed' }, killed, '');
    expect(failed?.crashClass).toBe('host_oom_kill');
    expect(failed?.retries).toBeUndefined();
    // A user-code exception still alerts at once.
    expect(detectCrash(meta, { kind: 'exited', exitCode: 1 }, traceback('ValueError: x'))?.crashClass).toBe(
      'other',
    );
    // After the relaunches ran out, the alert lists each one.
    const spent = detectCrash(
      {
        ...meta,
        status: 'failed',
        autoRelaunches: [
          { at: 't', launch: 1, cause: 'killed at step 120 (SIGKILL, no stop requested)', from: 100 },
          { at: 't', launch: 2, cause: 'killed at step 150 (SIGKILL, no stop requested)', from: null },
        ],
      },
      killed,
      '',
    );
    expect(spent?.retries).toEqual([
      'retry 1 of 2: killed at step 120 (SIGKILL, no stop requested); relaunched from step 100',
      'retry 2 of 2: killed at step 150 (SIGKILL, no stop requested); relaunched from scratch',
    ]);
  });
});
