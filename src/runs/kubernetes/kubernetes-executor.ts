import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import { RunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type {
  Executor,
  LaunchRequest,
  LaunchResult,
  Placement,
  PlacementRequest,
  ProcessState,
} from '../executor.js';
import type { RunMeta } from '../records/run-types.js';
import { createKubernetesApi, type KubernetesApi } from './kubernetes-api.js';
import { kubernetesClusterInfo } from './kubernetes-cluster-info.js';
import { type KubernetesSettings, LABELS } from './kubernetes-job-manifest.js';
import { assertImage, launchJob } from './kubernetes-launch.js';
import { createLogFollowers, type FollowTarget } from './kubernetes-log-follower.js';
import { createKubernetesPoller } from './kubernetes-poll.js';
import { containerTerminated, isFinal, jobState, mainContainer } from './kubernetes-states.js';

/** Waits and leases; tests shorten them. */
interface KubernetesTiming {
  /** Between checks while a Job or its pods go away. */
  checkMs: number;
  /** Beyond the grace period, how long the kubelet and the API may take to remove pods. */
  marginMs: number;
  /** A log follower that did not renew its lease for this long is replaced. */
  leaseMs: number;
  /** Reconnect a log stream that brought nothing for this long. */
  idleReconnectMs: number;
  /** First wait for a pod to appear; doubles. */
  retryMs: number;
  /** How long an ended run's log may take to be read to its end. */
  finishMs: number;
}

const DEFAULT_TIMING: KubernetesTiming = {
  checkMs: 1_000,
  marginMs: 60_000,
  leaseMs: 15_000,
  idleReconnectMs: 120_000,
  retryMs: 1_000,
  // Longer than the lease: the follower of a bot that died keeps it until it is stale.
  finishMs: 30_000,
};

interface KubernetesExecutorOptions {
  settings: KubernetesSettings;
  /** `SHEPHERD_STOP_GRACE_S`: the pod's `terminationGracePeriodSeconds`. */
  graceS: number;
  /** The run directory of a run id (output.log, the log cursor). */
  runDir: (runId: string) => string;
  /** `src/runs/python`: `shepherd.py` and its integrations go to the pod in the ConfigMap. */
  helperDir: string;
  logger: Logger;
  clock?: () => Date;
  /** Default: `settings.kubeconfig` (the first file of KUBECONFIG), else the in-cluster service account. */
  kubeConfig?: KubeConfig;
  timing?: Partial<KubernetesTiming>;
}

/** An executor that also ends its log followers (on shutdown). */
export interface KubernetesExecutor extends Executor {
  close(): Promise<void>;
}

function loadKubeConfig(settings: KubernetesSettings): KubeConfig {
  const kubeConfig = new KubeConfig();
  const file = settings.kubeconfig?.split(':').find((entry) => entry !== '');
  if (file === undefined) kubeConfig.loadFromCluster();
  else kubeConfig.loadFromFile(file);
  return kubeConfig;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}

/**
 * Runs as Kubernetes Jobs (see docs/kubernetes.md): launch creates (or unsuspends) the run's Job, poll maps
 * Jobs and pods to states and keeps each running run's pod log streaming into output.log, terminate
 * suspends (pause) or deletes (stop; pause under Kueue) the Job.
 */
export function createKubernetesExecutor(options: KubernetesExecutorOptions): KubernetesExecutor {
  const { settings, logger } = options;
  const clock = options.clock ?? (() => new Date());
  const timing = { ...DEFAULT_TIMING, ...options.timing };
  const kubernetes: KubernetesApi = createKubernetesApi(() => options.kubeConfig ?? loadKubeConfig(settings));
  const followers = createLogFollowers({
    api: kubernetes,
    logger,
    holder: `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`,
    leaseMs: timing.leaseMs,
    now: () => clock().getTime(),
    idleReconnectMs: timing.idleReconnectMs,
    retryMs: timing.retryMs,
  });

  function targetFor(meta: RunMeta, namespace: string, job: string): FollowTarget {
    const what =
      meta.watch === undefined
        ? meta.command === undefined
          ? `script v${meta.scriptVersion}`
          : 'command'
        : 'watched';
    const gpus =
      meta.watch === undefined ? `, ${plural(meta.gpus * Math.max(1, meta.nodes ?? 1), 'GPU')}` : '';
    return {
      runId: meta.id,
      runDir: options.runDir(meta.id),
      namespace,
      job,
      launchKey: `${job}#${meta.launchCount}`,
      // Without a shared volume the helper's metrics reach Shepherd only through the log.
      metricsFromLog: meta.watch !== undefined || settings.pvc === undefined,
      header: `=== launch ${meta.launchCount} at ${clock().toISOString()} (${what}, kubernetes job ${namespace}/${job}${gpus}) ===`,
    };
  }

  const poller = createKubernetesPoller({
    api: kubernetes,
    namespace: settings.namespace,
    queue: settings.queue,
    runDir: options.runDir,
    followers,
    targetFor,
    finishMs: timing.finishMs,
  });

  async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() >= deadline)
        throw new RunError('terminate_failed', `${what} after ${Math.round(timeoutMs / 1000)} s`);
      await sleep(timing.checkMs);
    }
  }

  const waitJobGone = (namespace: string, name: string, timeoutMs: number) =>
    waitUntil(
      async () => (await kubernetes.readJob(namespace, name)) === undefined,
      timeoutMs,
      `Kubernetes Job ${namespace}/${name} is still there`,
    );

  async function launch(request: LaunchRequest): Promise<LaunchResult> {
    const { meta, runDir } = request;
    if (meta.watch !== undefined) {
      throw new RunError('watched_run', `${meta.name} is watched: Shepherd does not launch it`);
    }
    if (meta.environmentName !== undefined) {
      logger.warn(
        { runId: meta.id, environment: meta.environmentName },
        'named environments do not apply on Kubernetes: the image is the environment',
      );
    }
    const jobId = await launchJob(
      {
        api: kubernetes,
        settings,
        graceS: options.graceS,
        helperDir: options.helperDir,
        logger,
        waitJobGone: (name) => waitJobGone(settings.namespace, name, options.graceS * 1000 + timing.marginMs),
      },
      meta,
      runDir,
    );
    followers.follow(targetFor(meta, settings.namespace, jobId));
    return { jobId };
  }

  /** Delete (Foreground) and wait until the Job is gone; its pods got SIGTERM and their grace period. */
  async function deleteAndWait(
    meta: RunMeta,
    namespace: string,
    name: string,
    graceMs: number,
  ): Promise<void> {
    await kubernetes.deleteJob(namespace, name);
    await waitJobGone(namespace, name, graceMs + timing.marginMs);
    await followers.settle(meta.id, timing.finishMs);
  }

  /** Suspend the Job and wait until its pods are gone; the exit code of the last one seen, when it ended. */
  async function suspendAndWait(meta: RunMeta, name: string, graceMs: number): Promise<number | undefined> {
    const namespace = settings.namespace;
    await kubernetes.patchJob(namespace, name, { spec: { suspend: true } });
    let exitCode: number | undefined;
    await waitUntil(
      async () => {
        const pods = await kubernetes.listPods(namespace, `${LABELS.jobName}=${name}`);
        for (const pod of pods) {
          if (containerTerminated(pod)) exitCode = mainContainer(pod)?.state?.terminated?.exitCode;
        }
        return pods.length === 0;
      },
      graceMs + timing.marginMs,
      `pods of Kubernetes Job ${namespace}/${name} are still there`,
    );
    await followers.settle(meta.id, timing.finishMs);
    return exitCode;
  }

  async function terminate(
    meta: RunMeta,
    terminateOptions: { graceMs: number; reason: 'pause' | 'stop' },
  ): Promise<ProcessState> {
    const watched = meta.watch?.source === 'kubernetes' ? meta.watch : undefined;
    const namespace = watched?.namespace ?? settings.namespace;
    const name = watched?.job ?? meta.jobId;
    if (name === undefined) return { kind: 'unknown', reason: 'run has no Kubernetes Job' };
    const job = await kubernetes.readJob(namespace, name);
    if (job === undefined) return { kind: 'unknown', reason: `Kubernetes has no Job ${namespace}/${name}` };
    const pods = await kubernetes.listPods(namespace, `${LABELS.jobName}=${name}`);
    const before = jobState(job, pods, watched === undefined ? { queue: settings.queue } : {});
    // It ended by itself just before: recorded and its log read to the end, as a poll would.
    if (isFinal(before))
      return poller.observe(meta, { namespace, job: name, own: watched === undefined }, job, pods);
    logger.info(
      { runId: meta.id, job: name, reason: terminateOptions.reason },
      'ending Kubernetes pods (SIGTERM)',
    );
    // Kueue owns `suspend` of the Jobs it manages, so a pause there deletes the Job (resume creates a new one).
    if (watched !== undefined || terminateOptions.reason === 'stop' || settings.queue !== undefined) {
      await deleteAndWait(meta, namespace, name, terminateOptions.graceMs);
      return { kind: 'signaled', signal: 'SIGTERM' };
    }
    const exitCode = await suspendAndWait(meta, name, terminateOptions.graceMs);
    return exitCode === undefined
      ? { kind: 'signaled', signal: 'SIGTERM' }
      : { kind: 'signaled', signal: 'SIGTERM', exitCode };
  }

  async function placement(request: PlacementRequest): Promise<Placement> {
    assertImage(request, settings);
    const nodes = Math.max(1, request.nodes ?? 1);
    const parts = [`Kubernetes namespace ${settings.namespace}`];
    if (settings.queue !== undefined) parts.push(`queue ${settings.queue}`);
    parts.push(`image ${request.image ?? settings.image}`);
    if (nodes > 1) parts.push(`${nodes} nodes`);
    const result: Placement = {
      description: parts.join(', '),
      hourlyUsd: request.gpus * nodes * settings.gpuHourUsd,
    };
    if (settings.pvc === undefined) {
      result.notes = [
        "no SHEPHERD_K8S_PVC: checkpoints won't outlive the pod, and metrics come from the pod's log",
      ];
    }
    return result;
  }

  return {
    kind: 'kubernetes',
    allocatesGpus: true,
    launch,
    poll: (runs) => poller.poll(runs),
    terminate,
    clusterInfo: () => kubernetesClusterInfo(kubernetes, settings),
    placement,
    close: () => followers.close(),
  };
}
