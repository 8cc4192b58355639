import { randomBytes, randomUUID } from 'node:crypto';
import type { Kubelet } from './kubernetes-kubelet.js';
import { metaTime } from './kubernetes-kubelet.js';
import type { WireCondition, WireJob, WirePod } from './kubernetes-objects.js';

/*
 * The emulator's Job controller (pkg/controller/job, as documented for batch/v1): it creates a Job's pods
 * (`<job>-<random>`, or `<job>-<index>-<random>` with hostname `<job>-<index>` for an Indexed Job), keeps
 * `status` (active, ready, succeeded, failed, startTime, conditions), fails the Job when more pods failed
 * than `backoffLimit` (FailureTarget, then Failed/BackoffLimitExceeded) or when `activeDeadlineSeconds`
 * passed (DeadlineExceeded), completes it (SuccessCriteriaMet, then Complete), deletes the active pods of a
 * suspended Job without counting them as failed (Suspended/JobSuspended; JobResumed on resume, with a new
 * startTime), and finishes a Foreground deletion once the pods are gone. Kueue's part, when asked for: a
 * Job with a queue-name label is admitted by unsuspending it.
 */

export interface JobControllerOptions {
  kubelet: Kubelet;
  jobs: () => WireJob[];
  podsOf: (job: WireJob) => WirePod[];
  addPod: (pod: WirePod) => void;
  /** Remove the Job from the API and collect its dependents (a finished Foreground deletion). */
  removeJob: (job: WireJob) => void;
  /** Kueue: admit Jobs of a queue by itself (true) or only when the test calls `admit`. */
  kueueAutoAdmit: () => boolean;
}

function setCondition(job: WireJob, type: string, status: string, reason: string, message: string): void {
  job.status ??= {};
  const conditions: WireCondition[] = job.status.conditions ?? [];
  const existing = conditions.find((entry) => entry.type === type);
  const at = metaTime();
  if (existing !== undefined) {
    if (existing.status !== status) existing.lastTransitionTime = at;
    Object.assign(existing, { status, reason, message, lastProbeTime: at });
  } else {
    conditions.push({ type, status, reason, message, lastProbeTime: at, lastTransitionTime: at });
  }
  job.status.conditions = conditions;
}

function hasCondition(job: WireJob, type: string): boolean {
  return (job.status?.conditions ?? []).some((entry) => entry.type === type && entry.status === 'True');
}

const INDEX_ANNOTATION = 'batch.kubernetes.io/job-completion-index';

export function createJobController(options: JobControllerOptions) {
  const { kubelet } = options;
  /** Pods already counted in a Job's succeeded/failed (they may be removed later). */
  const counted = new Map<string, 'succeeded' | 'failed'>();
  const admitted = new Set<string>();

  function newPod(job: WireJob, index: number | undefined): WirePod {
    const name = job.metadata.name ?? 'job';
    const template = job.spec.template;
    const suffix = randomBytes(3).toString('hex').slice(0, 5);
    const labels = { ...template.metadata?.labels };
    const annotations = { ...template.metadata?.annotations };
    const spec = structuredClone(template.spec);
    if (index !== undefined) {
      labels[INDEX_ANNOTATION] = String(index);
      annotations[INDEX_ANNOTATION] = String(index);
      spec.hostname = `${name}-${index}`;
    }
    return {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: index === undefined ? `${name}-${suffix}` : `${name}-${index}-${suffix}`,
        namespace: job.metadata.namespace,
        uid: randomUUID(),
        creationTimestamp: metaTime(),
        labels,
        annotations,
        ownerReferences: [
          {
            apiVersion: 'batch/v1',
            kind: 'Job',
            name,
            uid: job.metadata.uid ?? '',
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec,
    };
  }

  function graceOf(pod: WirePod): number {
    return pod.spec.terminationGracePeriodSeconds ?? 30;
  }

  function deleteActive(pods: readonly WirePod[]): void {
    for (const pod of pods) {
      const phase = pod.status?.phase;
      if (phase !== 'Succeeded' && phase !== 'Failed') kubelet.delete(pod, graceOf(pod));
    }
  }

  /** Count finished pods once each (a suspension's deleted pods are not failures). */
  function countFinished(job: WireJob, pods: readonly WirePod[]): void {
    job.status ??= {};
    for (const pod of pods) {
      const uid = pod.metadata.uid ?? '';
      if (counted.has(uid) || pod.metadata.deletionTimestamp !== undefined) continue;
      if (pod.status?.phase === 'Succeeded') {
        counted.set(uid, 'succeeded');
        job.status.succeeded = (job.status.succeeded ?? 0) + 1;
      } else if (pod.status?.phase === 'Failed') {
        counted.set(uid, 'failed');
        job.status.failed = (job.status.failed ?? 0) + 1;
      }
    }
  }

  function complete(job: WireJob, pods: readonly WirePod[]): boolean {
    const completions = job.spec.completions ?? 1;
    if (job.spec.completionMode === 'Indexed') {
      const done = new Set(
        pods
          .filter((pod) => counted.get(pod.metadata.uid ?? '') === 'succeeded')
          .map((pod) => pod.metadata.annotations?.[INDEX_ANNOTATION]),
      );
      return done.size >= completions;
    }
    return (job.status?.succeeded ?? 0) >= completions;
  }

  /** Start the pods the Job still needs (one per missing index for an Indexed Job). */
  function startPods(job: WireJob, active: readonly WirePod[], pods: readonly WirePod[]): void {
    const parallelism = job.spec.parallelism ?? 1;
    const completions = job.spec.completions ?? 1;
    const wanted: Array<number | undefined> = [];
    if (job.spec.completionMode === 'Indexed') {
      const taken = new Set(
        pods
          .filter((pod) => pod.status?.phase !== 'Failed' && pod.metadata.deletionTimestamp === undefined)
          .map((pod) => pod.metadata.annotations?.[INDEX_ANNOTATION]),
      );
      for (let index = 0; index < completions && active.length + wanted.length < parallelism; index += 1) {
        if (!taken.has(String(index))) wanted.push(index);
      }
    } else {
      const left = Math.min(parallelism, completions - (job.status?.succeeded ?? 0)) - active.length;
      for (let count = 0; count < left; count += 1) wanted.push(undefined);
    }
    for (const index of wanted) {
      const pod = newPod(job, index);
      options.addPod(pod);
      kubelet.start(pod);
    }
  }

  function reconcileRunning(job: WireJob, pods: WirePod[]): void {
    job.status ??= {};
    if (hasCondition(job, 'Suspended')) setCondition(job, 'Suspended', 'False', 'JobResumed', 'Job resumed');
    job.status.startTime ??= metaTime();
    countFinished(job, pods);
    const active = pods.filter(
      (pod) =>
        pod.status?.phase !== 'Succeeded' &&
        pod.status?.phase !== 'Failed' &&
        pod.metadata.deletionTimestamp === undefined,
    );
    const deadline = job.spec.activeDeadlineSeconds;
    if (deadline !== undefined && Date.now() - Date.parse(job.status.startTime) > deadline * 1000) {
      deleteActive(active);
      setCondition(
        job,
        'FailureTarget',
        'True',
        'DeadlineExceeded',
        'Job was active longer than specified deadline',
      );
      setCondition(
        job,
        'Failed',
        'True',
        'DeadlineExceeded',
        'Job was active longer than specified deadline',
      );
    } else if ((job.status.failed ?? 0) > (job.spec.backoffLimit ?? 6)) {
      deleteActive(active);
      setCondition(
        job,
        'FailureTarget',
        'True',
        'BackoffLimitExceeded',
        'Job has reached the specified backoff limit',
      );
      setCondition(
        job,
        'Failed',
        'True',
        'BackoffLimitExceeded',
        'Job has reached the specified backoff limit',
      );
    } else if (complete(job, pods)) {
      setCondition(
        job,
        'SuccessCriteriaMet',
        'True',
        'CompletionsReached',
        'Reached expected number of succeeded pods',
      );
      setCondition(
        job,
        'Complete',
        'True',
        'CompletionsReached',
        'Reached expected number of succeeded pods',
      );
      job.status.completionTime = metaTime();
    } else {
      startPods(job, active, pods);
    }
    const live = options
      .podsOf(job)
      .filter((pod) => pod.status?.phase !== 'Succeeded' && pod.status?.phase !== 'Failed');
    job.status.active = live.filter((pod) => pod.metadata.deletionTimestamp === undefined).length;
    job.status.ready = live.filter((pod) => pod.status?.phase === 'Running').length;
    job.status.terminating = live.filter((pod) => pod.metadata.deletionTimestamp !== undefined).length;
  }

  function reconcile(job: WireJob): void {
    const pods = options.podsOf(job);
    if (job.metadata.deletionTimestamp !== undefined) {
      // Foreground deletion: the Job goes once its pods are gone.
      for (const pod of pods) kubelet.delete(pod, graceOf(pod));
      if (options.podsOf(job).length === 0) options.removeJob(job);
      return;
    }
    if (hasCondition(job, 'Complete') || hasCondition(job, 'Failed')) return;
    const queue = job.metadata.labels?.['kueue.x-k8s.io/queue-name'];
    const uid = job.metadata.uid ?? '';
    if (queue !== undefined && options.kueueAutoAdmit() && !admitted.has(uid) && job.spec.suspend === true) {
      admitted.add(uid);
      job.spec.suspend = false;
    }
    if (job.spec.suspend === true) {
      deleteActive(pods);
      if (!hasCondition(job, 'Suspended'))
        setCondition(job, 'Suspended', 'True', 'JobSuspended', 'Job suspended');
      job.status ??= {};
      delete job.status.startTime;
      job.status.active = 0;
      job.status.ready = 0;
      job.status.terminating = pods.filter((pod) => pod.metadata.deletionTimestamp !== undefined).length;
      return;
    }
    reconcileRunning(job, pods);
  }

  return {
    reconcileAll(): void {
      for (const job of options.jobs()) reconcile(job);
    },
    /** Kueue admits the Job (unsuspends it). */
    admit(job: WireJob): void {
      admitted.add(job.metadata.uid ?? '');
      job.spec.suspend = false;
    },
  };
}
