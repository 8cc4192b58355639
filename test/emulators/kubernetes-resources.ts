import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import {
  defaultJob,
  jsonPatch,
  mergePatch,
  parseSelector,
  strategicMergePatch,
  validateJob,
  validateJobUpdate,
} from './kubernetes-api-rules.js';
import { type Kubelet, metaTime } from './kubernetes-kubelet.js';
import {
  configMapSchema,
  DNS_SUBDOMAIN,
  type FieldError,
  invalidBody,
  jobSchema,
  podSchema,
  SERVICE_NAME,
  serviceSchema,
  statusBody,
  validateConfigMap,
  validateLabels,
  validateName,
  type WireConfigMap,
  type WireJob,
  type WireObject,
  type WirePod,
  type WireService,
} from './kubernetes-objects.js';

/*
 * The REST handlers of the emulated API server for jobs, pods, configmaps and services: create (201, 409
 * AlreadyExists, 422 Invalid), get and list (label selectors), patch (merge, strategic merge, JSON patch;
 * 415 for anything else), delete with propagationPolicy. A batch/v1 Job deleted without a policy orphans
 * its pods (the API's default for Jobs), which keep running; Foreground deletes them first; the Job's
 * ConfigMaps and Services go with it through their ownerReferences.
 */

export type Kind = 'jobs' | 'pods' | 'configmaps' | 'services';
export const KINDS: ReadonlySet<string> = new Set(['jobs', 'pods', 'configmaps', 'services']);

export interface Store {
  jobs: Map<string, WireJob>;
  pods: Map<string, WirePod>;
  configmaps: Map<string, WireConfigMap>;
  services: Map<string, WireService>;
}

const TYPES: Record<
  Kind,
  { kind: string; group: string; apiVersion: string; schema: z.ZodType<WireObject> }
> = {
  jobs: { kind: 'Job', group: 'batch', apiVersion: 'batch/v1', schema: jobSchema },
  pods: { kind: 'Pod', group: '', apiVersion: 'v1', schema: podSchema },
  configmaps: { kind: 'ConfigMap', group: '', apiVersion: 'v1', schema: configMapSchema },
  services: { kind: 'Service', group: '', apiVersion: 'v1', schema: serviceSchema },
};

export interface ResourceRequest {
  verb: string;
  kind: Kind;
  namespace: string | undefined;
  name: string | undefined;
  query: URLSearchParams;
  body: string;
  contentType: string;
}

type Result = { code: number; body: unknown };

function validate(kind: Kind, object: WireObject): FieldError[] {
  if (kind === 'jobs') return validateJob(object as WireJob);
  if (kind === 'configmaps') return validateConfigMap(object as WireConfigMap);
  if (kind === 'services') {
    return [
      ...validateName(object.metadata.name, SERVICE_NAME, 63),
      ...validateLabels(object.metadata.labels, 'metadata.labels'),
    ];
  }
  return validateName(object.metadata.name, DNS_SUBDOMAIN, 253);
}

let resourceVersion = 1000;

export function createResourceHandlers(options: {
  store: Store;
  kubelet: Kubelet;
  namespaces: ReadonlySet<string>;
  reconcile: () => void;
}) {
  const { store, kubelet } = options;
  const key = (namespace: string | undefined, name: string | undefined) => `${namespace}/${name}`;
  const mapOf = (kind: Kind) => store[kind] as Map<string, WireObject>;
  const withType = (kind: Kind, object: WireObject) => ({
    ...object,
    apiVersion: TYPES[kind].apiVersion,
    kind: TYPES[kind].kind,
  });
  const notFound = (kind: Kind, name: string | undefined): Result => ({
    code: 404,
    body: statusBody(
      404,
      'NotFound',
      `${kind}${TYPES[kind].group === '' ? '' : `.${TYPES[kind].group}`} "${name}" not found`,
      {
        name,
        group: TYPES[kind].group,
        kind,
      },
    ),
  });

  function parse(kind: Kind, text: string): { object: WireObject } | { failed: Result } {
    try {
      const parsed = TYPES[kind].schema.safeParse(JSON.parse(text));
      if (parsed.success) return { object: parsed.data };
      const message = `${TYPES[kind].kind} in version "v1" cannot be handled: ${parsed.error.message}`;
      return { failed: { code: 400, body: statusBody(400, 'BadRequest', message) } };
    } catch (error) {
      return { failed: { code: 400, body: statusBody(400, 'BadRequest', `json: ${String(error)}`) } };
    }
  }

  function create(request: ResourceRequest): Result {
    const { kind, namespace } = request;
    if (kind === 'pods')
      return {
        code: 405,
        body: statusBody(405, 'MethodNotAllowed', 'the emulator creates pods only through Jobs'),
      };
    if (namespace === undefined || !options.namespaces.has(namespace)) {
      return {
        code: 404,
        body: statusBody(404, 'NotFound', `namespaces "${namespace}" not found`, {
          name: namespace,
          kind: 'namespaces',
        }),
      };
    }
    const parsed = parse(kind, request.body);
    if ('failed' in parsed) return parsed.failed;
    const { object } = parsed;
    const name = object.metadata.name;
    if (object.metadata.namespace !== undefined && object.metadata.namespace !== namespace) {
      return {
        code: 400,
        body: statusBody(
          400,
          'BadRequest',
          'the namespace of the provided object does not match the namespace sent on the request',
        ),
      };
    }
    if (mapOf(kind).has(key(namespace, name))) {
      const qualified = `${kind}${TYPES[kind].group === '' ? '' : `.${TYPES[kind].group}`}`;
      return {
        code: 409,
        body: statusBody(409, 'AlreadyExists', `${qualified} "${name}" already exists`, {
          name,
          group: TYPES[kind].group,
          kind,
        }),
      };
    }
    const uid = randomUUID();
    if (kind === 'jobs') {
      defaultJob(object as WireJob, uid);
      // Kueue's webhook: a Job of a queue starts suspended until Kueue admits it.
      if (object.metadata.labels?.['kueue.x-k8s.io/queue-name'] !== undefined)
        (object as WireJob).spec.suspend = true;
    }
    const errors = validate(kind, object);
    if (errors.length > 0)
      return { code: 422, body: invalidBody(TYPES[kind].kind, TYPES[kind].group, name ?? '', errors) };
    object.metadata = {
      ...object.metadata,
      namespace,
      uid,
      resourceVersion: String(++resourceVersion),
      creationTimestamp: metaTime(),
    };
    mapOf(kind).set(key(namespace, name), withType(kind, object));
    options.reconcile();
    return { code: 201, body: withType(kind, object) };
  }

  function patch(request: ResourceRequest, current: WireObject): Result {
    const { kind } = request;
    let patched: unknown;
    try {
      const body: unknown = JSON.parse(request.body);
      const type = request.contentType.split(';')[0]?.trim();
      if (type === 'application/merge-patch+json') patched = mergePatch(current, body);
      else if (type === 'application/strategic-merge-patch+json')
        patched = strategicMergePatch(current, body);
      else if (type === 'application/json-patch+json') patched = jsonPatch(current, body);
      else {
        return {
          code: 415,
          body: statusBody(
            415,
            'UnsupportedMediaType',
            `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`,
          ),
        };
      }
    } catch (error) {
      return {
        code: 400,
        body: statusBody(400, 'BadRequest', String(error instanceof Error ? error.message : error)),
      };
    }
    const parsed = parse(kind, JSON.stringify(patched));
    if ('failed' in parsed) return parsed.failed;
    const next = parsed.object;
    // Identity fields cannot change through a patch.
    next.metadata = {
      ...next.metadata,
      name: current.metadata.name,
      namespace: current.metadata.namespace,
      uid: current.metadata.uid,
    };
    const errors =
      kind === 'jobs' ? validateJobUpdate(current as WireJob, next as WireJob) : validate(kind, next);
    if (errors.length > 0) {
      return {
        code: 422,
        body: invalidBody(TYPES[kind].kind, TYPES[kind].group, current.metadata.name ?? '', errors),
      };
    }
    next.metadata.resourceVersion = String(++resourceVersion);
    mapOf(kind).set(key(request.namespace, request.name), withType(kind, next));
    options.reconcile();
    return { code: 200, body: withType(kind, next) };
  }

  /** Remove an object; its dependents are deleted (Foreground/Background) or orphaned. */
  function removeWithDependents(kind: Kind, object: WireObject, policy: string): void {
    mapOf(kind).delete(key(object.metadata.namespace, object.metadata.name));
    const uid = object.metadata.uid;
    for (const dependentKind of ['pods', 'configmaps', 'services', 'jobs'] as const) {
      for (const dependent of [...mapOf(dependentKind).values()]) {
        const owners = dependent.metadata.ownerReferences ?? [];
        if (!owners.some((owner) => owner.uid === uid)) continue;
        if (policy === 'Orphan') {
          dependent.metadata.ownerReferences = owners.filter((owner) => owner.uid !== uid);
        } else if (dependentKind === 'pods') {
          const pod = dependent as WirePod;
          kubelet.delete(pod, pod.spec.terminationGracePeriodSeconds ?? 30);
        } else {
          removeWithDependents(dependentKind, dependent, 'Background');
        }
      }
    }
    options.reconcile();
  }

  function remove(request: ResourceRequest, current: WireObject): Result {
    const { kind } = request;
    let policy = request.query.get('propagationPolicy') ?? undefined;
    if (policy === undefined && request.body.trim() !== '') {
      try {
        const options: unknown = JSON.parse(request.body);
        if (typeof options === 'object' && options !== null && 'propagationPolicy' in options) {
          policy = String((options as { propagationPolicy: unknown }).propagationPolicy);
        }
      } catch {
        // No DeleteOptions body.
      }
    }
    // batch/v1 Jobs keep the old default of orphaning their pods; everything else defaults to Background.
    policy ??= kind === 'jobs' ? 'Orphan' : 'Background';
    if (kind === 'pods') {
      const pod = current as WirePod;
      const grace = Number(
        request.query.get('gracePeriodSeconds') ?? pod.spec.terminationGracePeriodSeconds ?? 30,
      );
      kubelet.delete(pod, grace);
      return { code: 200, body: withType(kind, current) };
    }
    if (policy === 'Foreground') {
      current.metadata.deletionTimestamp ??= metaTime();
      current.metadata.finalizers = [
        ...new Set([...(current.metadata.finalizers ?? []), 'foregroundDeletion']),
      ];
      options.reconcile();
      return { code: 200, body: withType(kind, current) };
    }
    removeWithDependents(kind, current, policy);
    return {
      code: 200,
      body: {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Success',
        details: { name: current.metadata.name, group: TYPES[kind].group, kind, uid: current.metadata.uid },
      },
    };
  }

  function handle(request: ResourceRequest): Result {
    const { verb, kind, namespace, name } = request;
    if (verb === 'create') return create(request);
    // Shepherd polls with list; say so rather than answer a watch with a list.
    if (verb === 'watch')
      return {
        code: 405,
        body: statusBody(
          405,
          'MethodNotAllowed',
          'the emulator does not serve watch; Shepherd polls with list',
        ),
      };
    if (verb === 'list') {
      const matches = parseSelector(request.query.get('labelSelector'));
      const items = [...mapOf(kind).values()]
        .filter((object) => namespace === undefined || object.metadata.namespace === namespace)
        .filter((object) => matches(object.metadata.labels ?? {}))
        // List items carry no apiVersion/kind of their own.
        .map(({ apiVersion: _apiVersion, kind: _kind, ...rest }) => rest);
      return {
        code: 200,
        body: {
          kind: `${TYPES[kind].kind}List`,
          apiVersion: TYPES[kind].apiVersion,
          metadata: { resourceVersion: String(resourceVersion) },
          items,
        },
      };
    }
    const current = mapOf(kind).get(key(namespace, name));
    if (current === undefined) return notFound(kind, name);
    if (verb === 'get') return { code: 200, body: withType(kind, current) };
    if (verb === 'patch') return patch(request, current);
    if (verb === 'delete') return remove(request, current);
    return { code: 405, body: statusBody(405, 'MethodNotAllowed', `the emulator does not ${verb} ${kind}`) };
  }

  return { handle, removeWithDependents };
}
