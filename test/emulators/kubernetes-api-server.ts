import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { GPU_NODES } from './kubernetes-fixtures.js';
import { createJobController } from './kubernetes-job-controller.js';
import { createKubelet, type PodBehaviour } from './kubernetes-kubelet.js';
import { type LogStreams, serveLog } from './kubernetes-log-endpoint.js';
import { statusBody, type WireJob, type WireObject, type WirePod } from './kubernetes-objects.js';
import { createResourceHandlers, KINDS, type Kind, type Store } from './kubernetes-resources.js';

/*
 * An HTTP server standing in for a Kubernetes API server, for the subset Shepherd calls: batch/v1 jobs
 * (create, get, list, patch, delete with propagationPolicy), core/v1 pods (list, get, delete, log with
 * follow/timestamps/sinceTime), configmaps, services, nodes. Bearer-token authentication; authorisation
 * by an RBAC-like predicate (403 Forbidden otherwise); every call recorded as (verb, group, resource).
 * Behind it: a Job controller and a kubelet that runs pods as real processes (kubernetes-kubelet.ts).
 */

export interface RecordedCall {
  verb: string;
  group: string;
  resource: string;
  namespace?: string;
  name?: string;
  contentType?: string;
  query: Record<string, string>;
  status: number;
  /** Who refused it: RBAC, or an admission webhook (`setAdmission`). */
  denied?: 'rbac' | 'admission';
}

export interface KubernetesEmulatorOptions {
  /** Namespaces that exist (default `default` and `ml`). */
  namespaces?: string[];
  /** RBAC: may this (verb, group, resource) be done? Default: everything. */
  authorize?: (call: { verb: string; group: string; resource: string; namespace?: string }) => boolean;
  /** PVC claim name → host directory. */
  volumes?: Record<string, string>;
  /** The interpreter for `python` in a container command (default python3). */
  python?: string;
  /** Kueue admits Jobs of a queue by itself (default) or only on `admit`. */
  kueueAutoAdmit?: boolean;
}

export interface KubernetesEmulator {
  url: string;
  token: string;
  calls: RecordedCall[];
  /** A KubeConfig for this server (`insecure-skip-tls-verify`, which client-node 1.4 needs for http://). */
  kubeConfig(namespace?: string): KubeConfig;
  /** The same, as client-node's `loadFromOptions` JSON (for a child process). */
  kubeConfigText(namespace?: string): string;
  /**
   * The same as a kubeconfig file (`apiVersion: v1`, `kind: Config`; JSON is YAML), what `KUBECONFIG` names.
   * Shape: the kubeconfig format of k8s.io/client-go/tools/clientcmd/api/v1 (types.go `Config`).
   */
  kubeConfigFile(namespace?: string): string;
  jobs(namespace: string): WireJob[];
  pods(namespace: string): WirePod[];
  objects(kind: Kind, namespace: string): WireObject[];
  /** How the next pods behave (default: run their container). */
  setBehaviour(behaviour: (pod: WirePod) => PodBehaviour): void;
  oomKill(namespace: string, pod: string): boolean;
  /** Break every open log stream (a dropped connection). */
  dropLogStreams(): number;
  admit(namespace: string, job: string): void;
  setKueueAutoAdmit(value: boolean): void;
  /** A validating admission webhook: a message refuses the create (403, as webhook denials are). */
  setAdmission(check: (resource: string, object: unknown) => string | undefined): void;
  /** Someone else's Job, created outside Shepherd (not recorded). */
  createForeignJob(namespace: string, job: WireJob): void;
  close(): Promise<void>;
}

function parseLoosely(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** /apis/batch/v1/namespaces/ml/jobs/x → { group, namespace, resource, name, subresource } */
function parsePath(pathname: string) {
  const match =
    /^\/(?:api\/v1|apis\/(batch)\/v1)(?:\/namespaces\/([^/]+))?\/([a-z]+)(?:\/([^/]+))?(?:\/([a-z]+))?$/.exec(
      pathname,
    );
  if (match === null) return undefined;
  const [, group = '', namespace, resource = '', name, subresource] = match;
  return { group, namespace, resource, name, subresource };
}

function verbOf(method: string, name: string | undefined, watch: boolean): string {
  if (method === 'GET') return name !== undefined ? 'get' : watch ? 'watch' : 'list';
  if (method === 'POST') return 'create';
  if (method === 'PATCH') return 'patch';
  if (method === 'PUT') return 'update';
  if (method === 'DELETE') return name !== undefined ? 'delete' : 'deletecollection';
  return method.toLowerCase();
}

export async function startKubernetesEmulator(
  options: KubernetesEmulatorOptions = {},
): Promise<KubernetesEmulator> {
  const token = randomBytes(16).toString('hex');
  const namespaces = new Set(options.namespaces ?? ['default', 'ml']);
  const sandboxRoot = mkdtempSync(path.join(tmpdir(), 'k8s-emulator-'));
  const store: Store = { jobs: new Map(), pods: new Map(), configmaps: new Map(), services: new Map() };
  const calls: RecordedCall[] = [];
  const streams: LogStreams = { open: new Set() };
  let behaviour: (pod: WirePod) => PodBehaviour = () => ({ kind: 'run' });
  let kueueAutoAdmit = options.kueueAutoAdmit ?? true;
  let admission: (resource: string, object: unknown) => string | undefined = () => undefined;
  const key = (namespace: string | undefined, name: string | undefined) => `${namespace}/${name}`;

  const kubelet = createKubelet({
    sandboxRoot,
    volumes: options.volumes ?? {},
    python: options.python ?? 'python3',
    configMap: (namespace, name) => store.configmaps.get(key(namespace, name)),
    behaviour: (pod) => behaviour(pod),
    changed: () => setImmediate(() => controller.reconcileAll()),
    removed: (pod) => {
      store.pods.delete(key(pod.metadata.namespace, pod.metadata.name));
      setImmediate(() => controller.reconcileAll());
    },
  });
  const handlers = createResourceHandlers({
    store,
    kubelet,
    namespaces,
    reconcile: () => controller.reconcileAll(),
  });
  const controller = createJobController({
    kubelet,
    jobs: () => [...store.jobs.values()],
    podsOf: (job) =>
      [...store.pods.values()].filter((pod) =>
        (pod.metadata.ownerReferences ?? []).some((owner) => owner.uid === job.metadata.uid),
      ),
    addPod: (pod) => store.pods.set(key(pod.metadata.namespace, pod.metadata.name), pod),
    removeJob: (job) => handlers.removeWithDependents('jobs', job, 'Background'),
    kueueAutoAdmit: () => kueueAutoAdmit,
  });
  const ticker = setInterval(() => controller.reconcileAll(), 50);

  function send(response: ServerResponse, code: number, body: unknown): void {
    response.writeHead(code, { 'content-type': 'application/json' });
    response.end(JSON.stringify(body));
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<number> {
    const url = new URL(request.url ?? '/', 'http://emulator');
    if (request.headers.authorization !== `Bearer ${token}`) {
      send(response, 401, statusBody(401, 'Unauthorized', 'Unauthorized'));
      return 401;
    }
    const route = parsePath(url.pathname);
    const resource =
      route === undefined
        ? ''
        : route.subresource === undefined
          ? route.resource
          : `${route.resource}/${route.subresource}`;
    const verb = verbOf(request.method ?? 'GET', route?.name, url.searchParams.get('watch') === 'true');
    const call: RecordedCall = {
      verb,
      group: route?.group ?? '',
      resource,
      ...(route?.namespace === undefined ? {} : { namespace: route.namespace }),
      ...(route?.name === undefined ? {} : { name: route.name }),
      ...(request.headers['content-type'] === undefined
        ? {}
        : { contentType: request.headers['content-type'] }),
      query: Object.fromEntries(url.searchParams),
      status: 0,
    };
    calls.push(call);
    const settle = (code: number) => {
      call.status = code;
      return code;
    };
    const known = route !== undefined && (KINDS.has(route.resource) || route.resource === 'nodes');
    if (!known) {
      send(response, 404, statusBody(404, 'NotFound', 'the server could not find the requested resource'));
      return settle(404);
    }
    const allowed =
      options.authorize?.({
        verb,
        group: route.group,
        resource,
        ...(route.namespace === undefined ? {} : { namespace: route.namespace }),
      }) ?? true;
    if (!allowed) {
      const where =
        route.namespace === undefined ? 'at the cluster scope' : `in the namespace "${route.namespace}"`;
      const message = `${resource}${route.group === '' ? '' : `.${route.group}`} is forbidden: User "system:serviceaccount:${route.namespace ?? 'default'}:shepherd" cannot ${verb} resource "${route.resource}"${route.subresource === undefined ? '' : `/${route.subresource}`} in API group "${route.group}" ${where}`;
      send(response, 403, statusBody(403, 'Forbidden', message));
      call.denied = 'rbac';
      return settle(403);
    }
    if (route.resource === 'nodes') {
      send(response, 200, {
        kind: 'NodeList',
        apiVersion: 'v1',
        metadata: { resourceVersion: '1' },
        items: GPU_NODES,
      });
      return settle(200);
    }
    if (route.subresource === 'log') {
      const pod = store.pods.get(key(route.namespace, route.name));
      if (pod === undefined) {
        send(
          response,
          404,
          statusBody(404, 'NotFound', `pods "${route.name}" not found`, { name: route.name, kind: 'pods' }),
        );
        return settle(404);
      }
      serveLog(response, pod, url.searchParams, kubelet, streams);
      return settle(response.statusCode);
    }
    const body = ['POST', 'PATCH', 'PUT', 'DELETE'].includes(request.method ?? '')
      ? await readBody(request)
      : '';
    const denial = verb === 'create' ? admission(resource, parseLoosely(body)) : undefined;
    if (denial !== undefined) {
      send(
        response,
        403,
        statusBody(403, 'Forbidden', `admission webhook "policy.example.com" denied the request: ${denial}`),
      );
      call.denied = 'admission';
      return settle(403);
    }
    const result = handlers.handle({
      verb,
      kind: route.resource as Kind,
      namespace: route.namespace,
      name: route.name,
      query: url.searchParams,
      body,
      contentType: request.headers['content-type'] ?? '',
    });
    send(response, result.code, result.body);
    return settle(result.code);
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) send(response, 500, statusBody(500, 'InternalError', String(error)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const kubeConfigObject = (namespace = 'ml') => ({
    clusters: [{ name: 'emulator', server: url, skipTLSVerify: true }],
    users: [{ name: 'shepherd', token }],
    contexts: [{ name: 'emulator', cluster: 'emulator', user: 'shepherd', namespace }],
    currentContext: 'emulator',
  });

  return {
    url,
    token,
    calls,
    kubeConfig(namespace) {
      const kubeConfig = new KubeConfig();
      kubeConfig.loadFromOptions(kubeConfigObject(namespace));
      return kubeConfig;
    },
    kubeConfigText(namespace) {
      return JSON.stringify(kubeConfigObject(namespace));
    },
    kubeConfigFile(namespace = 'ml') {
      return JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'emulator', cluster: { server: url, 'insecure-skip-tls-verify': true } }],
        users: [{ name: 'shepherd', user: { token } }],
        contexts: [{ name: 'emulator', context: { cluster: 'emulator', user: 'shepherd', namespace } }],
        'current-context': 'emulator',
      });
    },
    jobs: (namespace) => [...store.jobs.values()].filter((job) => job.metadata.namespace === namespace),
    pods: (namespace) => [...store.pods.values()].filter((pod) => pod.metadata.namespace === namespace),
    objects: (kind, namespace) =>
      [...store[kind].values()].filter((object) => object.metadata.namespace === namespace),
    setBehaviour(next) {
      behaviour = next;
    },
    oomKill: (namespace, pod) => kubelet.oomKill(namespace, pod),
    dropLogStreams() {
      const open = [...streams.open];
      for (const response of open) response.socket?.destroy();
      return open.length;
    },
    setAdmission(check) {
      admission = check;
    },
    setKueueAutoAdmit(value) {
      kueueAutoAdmit = value;
    },
    admit(namespace, job) {
      const found = store.jobs.get(key(namespace, job));
      if (found !== undefined) controller.admit(found);
    },
    createForeignJob(namespace, job) {
      const result = handlers.handle({
        verb: 'create',
        kind: 'jobs',
        namespace,
        name: undefined,
        query: new URLSearchParams(),
        body: JSON.stringify(job),
        contentType: 'application/json',
      });
      if (result.code !== 201) throw new Error(`foreign Job refused: ${JSON.stringify(result.body)}`);
    },
    async close() {
      clearInterval(ticker);
      for (const response of streams.open) response.socket?.destroy();
      await kubelet.stopAll();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(sandboxRoot, { recursive: true, force: true });
    },
  };
}
