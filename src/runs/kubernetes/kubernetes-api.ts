import type { Writable } from 'node:stream';
import {
  ApiException,
  BatchV1Api,
  CoreV1Api,
  type KubeConfig,
  Log,
  type LogOptions,
  PatchStrategy,
  setHeaderOptions,
  type V1ConfigMap,
  type V1Job,
  type V1Node,
  type V1Pod,
  type V1Service,
} from '@kubernetes/client-node';
import { z } from 'zod';
import { RunError } from '../../errors.js';

/**
 * The calls Shepherd makes to the Kubernetes API, each one line over @kubernetes/client-node, with the
 * errors turned into `RunError`s in one place. deploy/kubernetes/rbac.yaml grants exactly these verbs; a
 * test checks it against every call the executor makes.
 */

/** The `Status` body of a failed call (metav1.Status). */
const statusSchema = z
  .object({ message: z.string().optional(), reason: z.string().optional() })
  .passthrough();

export interface KubernetesApi {
  listJobs(namespace: string, labelSelector: string): Promise<V1Job[]>;
  /** Undefined when there is no such Job. */
  readJob(namespace: string, name: string): Promise<V1Job | undefined>;
  /** `exists` when a Job of that name is already there (409 AlreadyExists). */
  createJob(namespace: string, job: V1Job): Promise<V1Job | 'exists'>;
  /** A JSON merge patch (RFC 7386). */
  patchJob(namespace: string, name: string, patch: object): Promise<V1Job>;
  /** Always with `propagationPolicy: Foreground`: without it a batch/v1 Job's pods are orphaned and keep running. */
  deleteJob(namespace: string, name: string): Promise<void>;
  listPods(namespace: string, labelSelector: string): Promise<V1Pod[]>;
  createConfigMap(namespace: string, configMap: V1ConfigMap): Promise<V1ConfigMap | 'exists'>;
  patchConfigMap(namespace: string, name: string, patch: object): Promise<V1ConfigMap>;
  deleteConfigMap(namespace: string, name: string): Promise<void>;
  createService(namespace: string, service: V1Service): Promise<V1Service>;
  /** Cluster-scoped: needs the ClusterRole; a 403 is returned as `forbidden` rather than thrown. */
  listNodes(): Promise<V1Node[] | 'forbidden'>;
  /** Pipe a container's log into `sink`; resolves once the stream is open, with its abort handle. */
  streamLog(
    namespace: string,
    pod: string,
    container: string,
    sink: Writable,
    options: LogOptions,
  ): Promise<AbortController>;
}

function statusMessage(error: ApiException<unknown>): string {
  if (typeof error.body === 'string') {
    try {
      const parsed = statusSchema.safeParse(JSON.parse(error.body));
      if (parsed.success && parsed.data.message !== undefined) return parsed.data.message;
    } catch {
      // Not a Status object (a proxy's HTML page): the code says enough.
    }
  }
  return `HTTP ${error.code}`;
}

/** One place that turns client errors into RunErrors naming the call. */
function asRunError(what: string, error: unknown): RunError {
  if (error instanceof ApiException) {
    const message = `Kubernetes ${what}: ${statusMessage(error)}`;
    // 422 Invalid: the object Shepherd built is not acceptable here (a label, a quota, an admission rule).
    const code = error.code === 422 ? 'invalid_run' : 'backend_api_failed';
    return new RunError(code, message, { cause: error });
  }
  const detail = error instanceof Error ? error.message : String(error);
  return new RunError('backend_unavailable', `Kubernetes ${what}: ${detail}`, { cause: error });
}

async function call<T>(what: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw asRunError(what, error);
  }
}

/** Like `call`, but a 404 (or 409 for creates) comes back as a value. */
async function callOr<T, F>(what: string, code: number, fallback: F, work: () => Promise<T>): Promise<T | F> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof ApiException && error.code === code) return fallback;
    throw asRunError(what, error);
  }
}

/** `source` is loaded on the first call, so a bot whose cluster is unreachable still starts. */
export function createKubernetesApi(source: KubeConfig | (() => KubeConfig)): KubernetesApi {
  let clients: { batch: BatchV1Api; core: CoreV1Api; log: Log } | undefined;
  const load = () => {
    if (clients === undefined) {
      const kubeConfig = typeof source === 'function' ? source() : source;
      clients = {
        batch: kubeConfig.makeApiClient(BatchV1Api),
        core: kubeConfig.makeApiClient(CoreV1Api),
        log: new Log(kubeConfig),
      };
    }
    return clients;
  };
  // Without it client-node sends a JSON Patch (its first listed media type), which wants an operation list.
  const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

  return {
    listJobs: (namespace, labelSelector) =>
      call(
        `list jobs in ${namespace}`,
        async () => (await load().batch.listNamespacedJob({ namespace, labelSelector })).items,
      ),
    readJob: (namespace, name) =>
      callOr(`get job ${namespace}/${name}`, 404, undefined, () =>
        load().batch.readNamespacedJob({ namespace, name }),
      ),
    createJob: (namespace, job) =>
      callOr(`create job ${namespace}/${job.metadata?.name}`, 409, 'exists' as const, () =>
        load().batch.createNamespacedJob({ namespace, body: job }),
      ),
    patchJob: (namespace, name, patch) =>
      call(`patch job ${namespace}/${name}`, () =>
        load().batch.patchNamespacedJob({ namespace, name, body: patch }, mergePatch),
      ),
    deleteJob: async (namespace, name) => {
      await callOr(`delete job ${namespace}/${name}`, 404, undefined, () =>
        load().batch.deleteNamespacedJob({ namespace, name, propagationPolicy: 'Foreground' }),
      );
    },
    listPods: (namespace, labelSelector) =>
      call(
        `list pods in ${namespace}`,
        async () => (await load().core.listNamespacedPod({ namespace, labelSelector })).items,
      ),
    createConfigMap: (namespace, configMap) =>
      callOr(`create configmap ${namespace}/${configMap.metadata?.name}`, 409, 'exists' as const, () =>
        load().core.createNamespacedConfigMap({ namespace, body: configMap }),
      ),
    patchConfigMap: (namespace, name, patch) =>
      call(`patch configmap ${namespace}/${name}`, () =>
        load().core.patchNamespacedConfigMap({ namespace, name, body: patch }, mergePatch),
      ),
    deleteConfigMap: async (namespace, name) => {
      await callOr(`delete configmap ${namespace}/${name}`, 404, undefined, () =>
        load().core.deleteNamespacedConfigMap({ namespace, name }),
      );
    },
    createService: (namespace, service) =>
      call(`create service ${namespace}/${service.metadata?.name}`, () =>
        load().core.createNamespacedService({ namespace, body: service }),
      ),
    listNodes: () =>
      callOr('list nodes', 403, 'forbidden' as const, async () => (await load().core.listNode()).items),
    streamLog: (namespace, pod, container, sink, options) =>
      call(`log of pod ${namespace}/${pod}`, () => load().log.log(namespace, pod, container, sink, options)),
  };
}
