import type { V1ContainerState, V1Job, V1JobCondition, V1Pod, V1PodCondition } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  createLineFilter,
  sinceTimeOf,
  timestampKey,
} from '../../src/runs/kubernetes/kubernetes-log-lines.js';
import { endingLine } from '../../src/runs/kubernetes/kubernetes-poll.js';
import { jobState, pickLogPod } from '../../src/runs/kubernetes/kubernetes-states.js';

/*
 * Jobs and pods as @kubernetes/client-node 1.4.0 hands them over (V1Job, V1Pod: times as Date). Condition
 * types and reasons are the Job controller's (Complete, Failed with BackoffLimitExceeded/DeadlineExceeded,
 * Suspended), the scheduler's (PodScheduled False/Unschedulable) and the kubelet's (ErrImagePull,
 * ImagePullBackOff, OOMKilled, DisruptionTarget), as the batch/v1 and core/v1 API documents name them.
 */

const at = new Date('2024-06-01T12:00:00Z');

function condition(type: string, reason?: string, message?: string): V1JobCondition {
  return {
    type,
    status: 'True',
    lastTransitionTime: at,
    ...(reason === undefined ? {} : { reason }),
    ...(message === undefined ? {} : { message }),
  };
}

function job(conditions: V1JobCondition[] = [], suspend = false): V1Job {
  return {
    metadata: { name: 'gpt-0601-abcd-1', namespace: 'ml' },
    spec: { suspend, backoffLimit: 0, template: { spec: { containers: [{ name: 'train', image: 'x' }] } } },
    status: { conditions },
  };
}

function pod(options: {
  phase: string;
  state?: V1ContainerState;
  conditions?: V1PodCondition[];
  index?: string;
  created?: Date;
  reason?: string;
}): V1Pod {
  return {
    metadata: {
      name: `gpt-0601-abcd-1-${options.index ?? 'x'}-${Math.random().toString(16).slice(2, 7)}`,
      creationTimestamp: options.created ?? at,
      ...(options.index === undefined
        ? {}
        : { annotations: { 'batch.kubernetes.io/job-completion-index': options.index } }),
    },
    spec: { containers: [{ name: 'train', image: 'x' }] },
    status: {
      phase: options.phase,
      ...(options.reason === undefined ? {} : { reason: options.reason }),
      ...(options.conditions === undefined ? {} : { conditions: options.conditions }),
      ...(options.state === undefined
        ? {}
        : {
            containerStatuses: [
              { name: 'train', image: 'x', imageID: '', ready: false, restartCount: 0, state: options.state },
            ],
          }),
    },
  };
}

const terminated = (exitCode: number, reason: string): V1ContainerState => ({
  terminated: { exitCode, reason, startedAt: at, finishedAt: at },
});

describe('jobState', () => {
  it('Complete is exit 0', () => {
    expect(
      jobState(job([condition('SuccessCriteriaMet'), condition('Complete')]), [
        pod({ phase: 'Succeeded', state: terminated(0, 'Completed') }),
      ]),
    ).toEqual({
      kind: 'exited',
      exitCode: 0,
    });
  });

  it("Failed is the failed container's exit code", () => {
    const failed = job([
      condition('FailureTarget', 'BackoffLimitExceeded'),
      condition('Failed', 'BackoffLimitExceeded', 'Job has reached the specified backoff limit'),
    ]);
    expect(jobState(failed, [pod({ phase: 'Failed', state: terminated(3, 'Error') })])).toEqual({
      kind: 'exited',
      exitCode: 3,
    });
  });

  it('OOMKilled is out of memory', () => {
    const failed = job([condition('Failed', 'BackoffLimitExceeded')]);
    expect(jobState(failed, [pod({ phase: 'Failed', state: terminated(137, 'OOMKilled') })])).toEqual({
      kind: 'exited',
      exitCode: 137,
      crashClass: 'out_of_memory',
      reason: 'out of memory (OOMKilled)',
    });
  });

  it('a deadline is the time limit', () => {
    const failed = job([
      condition('Failed', 'DeadlineExceeded', 'Job was active longer than specified deadline'),
    ]);
    expect(jobState(failed, [])).toEqual({ kind: 'signaled', signal: 'SIGTERM', crashClass: 'timeout' });
  });

  it('a preempted or evicted pod says so', () => {
    const failed = job([condition('Failed', 'BackoffLimitExceeded')]);
    const preempted = pod({
      phase: 'Failed',
      state: terminated(143, 'Error'),
      conditions: [{ type: 'DisruptionTarget', status: 'True', reason: 'PreemptionByScheduler' }],
    });
    expect(jobState(failed, [preempted])).toEqual({ kind: 'exited', exitCode: 143, crashClass: 'preempted' });
    const evicted = pod({ phase: 'Failed', state: terminated(137, 'Error'), reason: 'Evicted' });
    expect(jobState(failed, [evicted])).toEqual({ kind: 'exited', exitCode: 137, crashClass: 'node_fail' });
  });

  it('a pod taken with its node (no container end reported) is a node failure, which Shepherd relaunches', () => {
    const failed = job([condition('Failed', 'BackoffLimitExceeded')]);
    const lost = pod({
      phase: 'Failed',
      conditions: [{ type: 'DisruptionTarget', status: 'True', reason: 'DeletionByPodGC' }],
    });
    expect(jobState(failed, [lost])).toEqual({
      kind: 'signaled',
      signal: 'SIGKILL',
      crashClass: 'node_fail',
    });
    const evicted = pod({ phase: 'Failed', reason: 'Evicted' });
    expect(jobState(failed, [evicted])).toEqual({
      kind: 'signaled',
      signal: 'SIGKILL',
      crashClass: 'node_fail',
    });
  });

  it('a Failed Job whose pods are gone says why', () => {
    expect(jobState(job([condition('Failed', 'PodFailurePolicy', 'Container train failed')]), [])).toEqual({
      kind: 'exited',
      exitCode: 1,
      reason: 'the Job failed (PodFailurePolicy: Container train failed)',
    });
  });

  it('an image that cannot be pulled is a failure with the reason, though the pod is Pending', () => {
    for (const reason of ['ErrImagePull', 'ImagePullBackOff']) {
      const waiting = pod({
        phase: 'Pending',
        state: { waiting: { reason, message: 'Back-off pulling image "nope:1"' } },
      });
      expect(jobState(job(), [waiting])).toEqual({
        kind: 'exited',
        exitCode: 1,
        reason: `${reason}: Back-off pulling image "nope:1"`,
      });
    }
  });

  it('Unschedulable is pending with the scheduler message', () => {
    const message = '0/3 nodes are available: 3 Insufficient nvidia.com/gpu.';
    const pending = pod({
      phase: 'Pending',
      conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message }],
    });
    expect(jobState(job(), [pending])).toEqual({ kind: 'pending', reason: message });
  });

  it('a suspended Job is waiting for Kueue under a queue, else suspended', () => {
    expect(jobState(job([], true), [], { queue: 'team-a' })).toEqual({
      kind: 'pending',
      reason: 'waiting for Kueue to admit it (queue team-a)',
    });
    expect(jobState(job([condition('Suspended', 'JobSuspended')], true), [])).toEqual({
      kind: 'pending',
      reason: 'the Job is suspended',
    });
  });

  it('no pod yet is pending; a started or starting pod is alive', () => {
    expect(jobState(job(), [])).toEqual({
      kind: 'pending',
      reason: 'waiting for the Job controller to create its pod',
    });
    expect(
      jobState(job(), [pod({ phase: 'Pending', state: { waiting: { reason: 'ContainerCreating' } } })]),
    ).toEqual({ kind: 'alive' });
    expect(jobState(job(), [pod({ phase: 'Running', state: { running: { startedAt: at } } })])).toEqual({
      kind: 'alive',
    });
  });
});

describe('pickLogPod', () => {
  it('follows rank 0 of an Indexed Job, and the newest pod otherwise', () => {
    const rankOne = pod({ phase: 'Running', index: '1', created: new Date('2024-06-01T12:00:05Z') });
    const rankZero = pod({ phase: 'Running', index: '0', created: new Date('2024-06-01T12:00:01Z') });
    expect(pickLogPod([rankOne, rankZero])).toBe(rankZero);
    const old = pod({ phase: 'Failed', created: new Date('2024-06-01T11:00:00Z') });
    const recent = pod({ phase: 'Running', created: new Date('2024-06-01T12:00:00Z') });
    expect(pickLogPod([old, recent])).toBe(recent);
    expect(pickLogPod([])).toBeUndefined();
  });
});

describe('log lines', () => {
  it('orders RFC 3339 nanosecond stamps, however many digits the kubelet kept', () => {
    const a = timestampKey('2024-06-01T12:00:00.1Z');
    const b = timestampKey('2024-06-01T12:00:00.09999Z');
    const c = timestampKey('2024-06-01T12:00:00Z');
    expect(a).toBe('2024-06-01T12:00:00.100000000');
    expect(b !== undefined && a !== undefined && b < a).toBe(true);
    expect(c).toBe('2024-06-01T12:00:00.000000000');
    expect(timestampKey('2024-06-01T14:00:00.5+02:00')).toBe('2024-06-01T12:00:00.500000000');
    expect(timestampKey('not a time')).toBeUndefined();
    expect(sinceTimeOf({ podUid: 'p', since: '2024-06-01T12:00:07.123456789Z', sameCount: 1 })).toBe(
      '2024-06-01T12:00:07Z',
    );
  });

  it('skips what the cursor covers, also when lines share a stamp and arrive split over chunks', () => {
    const t1 = '2024-06-01T12:00:00.5Z';
    const t2 = '2024-06-01T12:00:00.6Z';
    const first = createLineFilter({ podUid: 'p', sameCount: 0 });
    expect(first.take([`${t1} a`, `${t1} b`])).toEqual({
      texts: ['a', 'b'],
      cursor: { podUid: 'p', since: t1, sameCount: 2 },
    });
    // A reconnect from the second: the server sends the whole second again, in two chunks.
    const again = createLineFilter({ podUid: 'p', since: t1, sameCount: 2 });
    expect(again.take([`2024-06-01T12:00:00.4Z old`, `${t1} a`])).toEqual({
      texts: [],
      cursor: { podUid: 'p', since: t1, sameCount: 2 },
    });
    expect(again.take([`${t1} b`, `${t1} c`, `${t2} d`])).toEqual({
      texts: ['c', 'd'],
      cursor: { podUid: 'p', since: t2, sameCount: 1 },
    });
    // Lines without a stamp (a server that ignores timestamps=true) are kept as they are.
    expect(createLineFilter({ podUid: 'p', sameCount: 0 }).take(['plain']).texts).toEqual(['plain']);
  });

  it('writes an ending line only where the Job says more than an exit code', () => {
    expect(
      endingLine({ kind: 'exited', exitCode: 1, reason: 'ImagePullBackOff: Back-off pulling image "x"' }),
    ).toBe('[shepherd] Kubernetes: ImagePullBackOff: Back-off pulling image "x"');
    expect(endingLine({ kind: 'signaled', signal: 'SIGTERM', crashClass: 'timeout' })).toContain(
      'activeDeadlineSeconds',
    );
    expect(endingLine({ kind: 'exited', exitCode: 3 })).toBeUndefined();
  });
});
