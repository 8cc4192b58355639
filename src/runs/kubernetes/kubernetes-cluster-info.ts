import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { ClusterInfo } from '../executor.js';
import type { KubernetesApi } from './kubernetes-api.js';
import { type KubernetesSettings, LABELS, MANAGED_BY } from './kubernetes-job-manifest.js';
import { jobState } from './kubernetes-states.js';

/**
 * `get_cluster_info` for Kubernetes: the nodes with `nvidia.com/gpu` (when the ClusterRole lets Shepherd
 * list nodes), the GPUs Shepherd's own pods hold on them, and Shepherd's Jobs still waiting.
 */

const GPU = 'nvidia.com/gpu';

function gpuCount(value: string | undefined): number {
  const count = Number.parseInt(value ?? '0', 10);
  return Number.isFinite(count) ? count : 0;
}

function nodeState(node: V1Node): string {
  if (node.spec?.unschedulable === true) return 'cordoned';
  const ready = node.status?.conditions?.find((condition) => condition.type === 'Ready');
  return ready?.status === 'True' ? 'ready' : 'not ready';
}

function gpusHeld(pods: readonly V1Pod[], nodeName: string): number {
  return pods
    .filter((pod) => pod.spec?.nodeName === nodeName)
    .filter((pod) => pod.status?.phase === 'Running' || pod.status?.phase === 'Pending')
    .reduce((sum, pod) => {
      const containers = pod.spec?.containers ?? [];
      return (
        sum + containers.reduce((inner, container) => inner + gpuCount(container.resources?.limits?.[GPU]), 0)
      );
    }, 0);
}

export async function kubernetesClusterInfo(
  api: KubernetesApi,
  settings: KubernetesSettings,
): Promise<ClusterInfo> {
  const namespace = settings.namespace;
  const selector = `${LABELS.managedBy}=${MANAGED_BY}`;
  const [nodes, jobs, pods] = await Promise.all([
    api.listNodes(),
    api.listJobs(namespace, selector),
    api.listPods(namespace, selector),
  ]);
  const notes = [
    `namespace ${namespace}`,
    settings.queue === undefined ? 'no Kueue queue (SHEPHERD_K8S_QUEUE)' : `Kueue queue ${settings.queue}`,
    settings.pvc === undefined
      ? "no PVC (SHEPHERD_K8S_PVC): checkpoints won't outlive their pod"
      : `run directories on PVC ${settings.pvc}`,
  ];
  const waiting = jobs.filter((job) => {
    const name = job.metadata?.name;
    const own = pods.filter((pod) => pod.metadata?.labels?.[LABELS.jobName] === name);
    return jobState(job, own, { queue: settings.queue }).kind === 'pending';
  }).length;
  const info: ClusterInfo = {
    executor: 'kubernetes',
    gpusTotal: 0,
    gpusFree: 0,
    queueLength: waiting,
    notes,
  };
  if (nodes === 'forbidden') {
    notes.push(
      'cannot list nodes: grant the shepherd-nodes ClusterRole (deploy/kubernetes/rbac.yaml) to see GPU capacity',
    );
    return info;
  }
  const gpuNodes = nodes.filter((node) => gpuCount(node.status?.allocatable?.[GPU]) > 0);
  info.nodes = gpuNodes.map((node) => {
    const name = node.metadata?.name ?? '?';
    return {
      name,
      state: nodeState(node),
      gpusTotal: gpuCount(node.status?.allocatable?.[GPU]),
      gpusAllocated: gpusHeld(pods, name),
    };
  });
  info.gpusTotal = info.nodes.reduce((sum, node) => sum + node.gpusTotal, 0);
  info.gpusFree = info.nodes
    .filter((node) => node.state === 'ready')
    .reduce((sum, node) => sum + Math.max(0, node.gpusTotal - node.gpusAllocated), 0);
  notes.push(`GPUs in use count only Shepherd's pods in namespace ${namespace}`);
  return info;
}
