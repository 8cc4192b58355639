import type { V1ContainerStatus, V1Job, V1JobCondition, V1Pod } from '@kubernetes/client-node';
import type { ExecutorCrashClass, ProcessState } from '../executor.js';
import { ANNOTATIONS } from './kubernetes-job-manifest.js';

/**
 * A Job and its pods, as the executor's `ProcessState`. Pure: the executor lists Jobs and pods once per
 * poll and maps each run here.
 */

/** A container that cannot start: the run has failed, though Kubernetes would keep the pod Pending. */
const IMAGE_ERRORS = new Set(['ImagePullBackOff', 'ErrImagePull', 'InvalidImageName']);
/** Exit code reported for a container that never started (the API has none). */
const NEVER_STARTED_EXIT = 1;

function trueCondition(job: V1Job, type: string): V1JobCondition | undefined {
  return job.status?.conditions?.find((condition) => condition.type === type && condition.status === 'True');
}

/** The pod's first container (Shepherd's pods have one, `train`; a foreign Job's first is its main one). */
export function mainContainer(pod: V1Pod): V1ContainerStatus | undefined {
  const name = pod.spec?.containers[0]?.name;
  const statuses = pod.status?.containerStatuses ?? [];
  return statuses.find((status) => status.name === name) ?? statuses[0];
}

/** Has the container started (so it has a log to read)? */
export function containerStarted(pod: V1Pod): boolean {
  const state = mainContainer(pod)?.state;
  return state?.running !== undefined || state?.terminated?.startedAt !== undefined;
}

export function containerTerminated(pod: V1Pod): boolean {
  return mainContainer(pod)?.state?.terminated !== undefined;
}

/** The pod whose log is followed: rank 0 of an Indexed Job, else the newest. */
export function pickLogPod(pods: readonly V1Pod[]): V1Pod | undefined {
  const rankZero = pods.filter((pod) => {
    const index = pod.metadata?.annotations?.[ANNOTATIONS.completionIndex];
    return index === undefined || index === '0';
  });
  const created = (pod: V1Pod) => pod.metadata?.creationTimestamp?.getTime() ?? 0;
  return [...rankZero].sort((a, b) => created(b) - created(a))[0];
}

function unschedulableReason(pods: readonly V1Pod[]): string | undefined {
  for (const pod of pods) {
    const scheduled = pod.status?.conditions?.find((condition) => condition.type === 'PodScheduled');
    if (scheduled?.status === 'False' && scheduled.reason === 'Unschedulable') {
      return scheduled.message ?? 'no node can take the pod (Unschedulable)';
    }
  }
  return undefined;
}

export function imagePullFailure(pods: readonly V1Pod[]): ProcessState | undefined {
  for (const pod of pods) {
    const waiting = mainContainer(pod)?.state?.waiting;
    if (waiting?.reason !== undefined && IMAGE_ERRORS.has(waiting.reason)) {
      const reason = waiting.message === undefined ? waiting.reason : `${waiting.reason}: ${waiting.message}`;
      return { kind: 'exited', exitCode: NEVER_STARTED_EXIT, reason };
    }
  }
  return undefined;
}

/** Why the scheduler or the kubelet took a pod away (pod condition DisruptionTarget). */
function disruptionClass(pod: V1Pod): ExecutorCrashClass | undefined {
  const disruption = pod.status?.conditions?.find(
    (condition) => condition.type === 'DisruptionTarget' && condition.status === 'True',
  );
  if (disruption === undefined) return pod.status?.reason === 'Evicted' ? 'node_fail' : undefined;
  return disruption.reason === 'PreemptionByScheduler' ? 'preempted' : 'node_fail';
}

/** The ending of a Failed Job, from the container that failed. */
function failedState(failed: V1JobCondition, pods: readonly V1Pod[]): ProcessState {
  if (failed.reason === 'DeadlineExceeded') {
    return { kind: 'signaled', signal: 'SIGTERM', crashClass: 'timeout' };
  }
  const ended = pods
    .map((pod) => ({ pod, terminated: mainContainer(pod)?.state?.terminated }))
    .filter((entry) => entry.terminated !== undefined && entry.terminated.exitCode !== 0);
  const oom = ended.find((entry) => entry.terminated?.reason === 'OOMKilled');
  if (oom?.terminated !== undefined) {
    return {
      kind: 'exited',
      exitCode: oom.terminated.exitCode,
      crashClass: 'out_of_memory',
      reason: 'out of memory (OOMKilled)',
    };
  }
  const first = ended[0];
  if (first?.terminated !== undefined) {
    const state: ProcessState = { kind: 'exited', exitCode: first.terminated.exitCode };
    const crashClass = disruptionClass(first.pod);
    if (crashClass !== undefined) state.crashClass = crashClass;
    return state;
  }
  // The node went away or the pod was evicted before its container reported an end (PodGC, kubelet).
  const disrupted = pods.map(disruptionClass).find((crashClass) => crashClass !== undefined);
  if (disrupted !== undefined) return { kind: 'signaled', signal: 'SIGKILL', crashClass: disrupted };
  const detail = [failed.reason, failed.message].filter((part) => part !== undefined).join(': ');
  const imageFailure = imagePullFailure(pods);
  if (imageFailure !== undefined) return imageFailure;
  return { kind: 'exited', exitCode: 1, reason: `the Job failed${detail === '' ? '' : ` (${detail})`}` };
}

/** Is this state the end of the run (not alive, not waiting)? */
export function isFinal(state: ProcessState): boolean {
  return state.kind === 'exited' || state.kind === 'signaled';
}

/**
 * The state of a run's Job. `queue` is the Kueue LocalQueue (a suspended Job is then waiting for
 * admission rather than paused).
 */
export function jobState(
  job: V1Job,
  pods: readonly V1Pod[],
  options: { queue?: string | undefined } = {},
): ProcessState {
  if (trueCondition(job, 'Complete') !== undefined) return { kind: 'exited', exitCode: 0 };
  const failed = trueCondition(job, 'Failed');
  if (failed !== undefined) return failedState(failed, pods);
  const imageFailure = imagePullFailure(pods);
  if (imageFailure !== undefined) return imageFailure;
  const live = pods.filter((pod) => pod.status?.phase !== 'Succeeded' && pod.status?.phase !== 'Failed');
  if (job.spec?.suspend === true) {
    if (options.queue !== undefined) {
      return { kind: 'pending', reason: `waiting for Kueue to admit it (queue ${options.queue})` };
    }
    return { kind: 'pending', reason: 'the Job is suspended' };
  }
  const unschedulable = unschedulableReason(live);
  if (unschedulable !== undefined) return { kind: 'pending', reason: unschedulable };
  if (live.length === 0 && (job.status?.succeeded ?? 0) === 0) {
    return { kind: 'pending', reason: 'waiting for the Job controller to create its pod' };
  }
  return { kind: 'alive' };
}
