import {
  DNS_LABEL,
  DNS_SUBDOMAIN,
  type FieldError,
  fieldErrors,
  validateLabels,
  validateName,
  type WireJob,
} from './kubernetes-objects.js';

/*
 * What the API server does to a request before storing it: defaulting and validation of a Job
 * (pkg/apis/batch/v1 defaults, pkg/apis/batch/validation; the template rules of pkg/apis/core/validation),
 * label selectors (k8s.io/apimachinery/pkg/labels), and the three patch types.
 */

type Json = unknown;

/** Defaults the API server applies to a new Job (SetDefaults_Job, PrepareForCreate). */
export function defaultJob(job: WireJob, uid: string): void {
  const spec = job.spec;
  spec.completionMode ??= 'NonIndexed';
  if (spec.completionMode === 'NonIndexed') {
    spec.completions ??= 1;
    spec.parallelism ??= 1;
  } else {
    spec.parallelism ??= 1;
  }
  spec.backoffLimit ??= 6;
  spec.suspend ??= false;
  spec.template.spec.restartPolicy ??= 'Always';
  spec.template.spec.terminationGracePeriodSeconds ??= 30;
  const name = job.metadata.name ?? '';
  const generated = {
    'batch.kubernetes.io/controller-uid': uid,
    'batch.kubernetes.io/job-name': name,
    'controller-uid': uid,
    'job-name': name,
  };
  spec.selector = { matchLabels: { 'batch.kubernetes.io/controller-uid': uid } };
  spec.template.metadata = {
    ...spec.template.metadata,
    labels: { ...spec.template.metadata?.labels, ...generated },
  };
}

function validateContainers(job: WireJob): FieldError[] {
  const errors: FieldError[] = [];
  const podSpec = job.spec.template.spec;
  const volumes = new Set((podSpec.volumes ?? []).map((volume) => volume.name));
  if (podSpec.containers.length === 0) errors.push(fieldErrors.required('spec.template.spec.containers'));
  podSpec.containers.forEach((container, index) => {
    const at = `spec.template.spec.containers[${index}]`;
    if (container.name === undefined) errors.push(fieldErrors.required(`${at}.name`));
    else if (!DNS_LABEL.test(container.name)) {
      errors.push(fieldErrors.invalid(`${at}.name`, container.name, 'a lowercase RFC 1123 label'));
    }
    if (container.image === undefined || container.image === '')
      errors.push(fieldErrors.required(`${at}.image`));
    for (const [resource, value] of Object.entries(container.resources?.limits ?? {})) {
      // Extended resources (nvidia.com/gpu) are whole numbers, and a request must equal the limit.
      if (resource.includes('/') && !/^\d+$/.test(String(value))) {
        errors.push(
          fieldErrors.invalid(`${at}.resources.limits[${resource}]`, String(value), 'must be an integer'),
        );
      }
      const request = container.resources?.requests?.[resource];
      if (resource.includes('/') && request !== undefined && String(request) !== String(value)) {
        errors.push(
          fieldErrors.invalid(
            `${at}.resources.requests[${resource}]`,
            String(request),
            `must be equal to ${resource} limit`,
          ),
        );
      }
    }
    (container.volumeMounts ?? []).forEach((mount, mountIndex) => {
      if (!volumes.has(mount.name)) {
        errors.push(fieldErrors.invalid(`${at}.volumeMounts[${mountIndex}].name`, mount.name, 'not found'));
      }
    });
  });
  return errors;
}

/** ValidateJob (create): name, labels, restart policy, containers, counts, deadline. */
export function validateJob(job: WireJob): FieldError[] {
  const spec = job.spec;
  const errors = [
    ...validateName(job.metadata.name, DNS_SUBDOMAIN, 253),
    ...validateLabels(job.metadata.labels, 'metadata.labels'),
    ...validateLabels(spec.template.metadata?.labels, 'spec.template.metadata.labels'),
    ...validateContainers(job),
  ];
  const restartPolicy = spec.template.spec.restartPolicy;
  if (restartPolicy !== 'Never' && restartPolicy !== 'OnFailure') {
    errors.push(
      fieldErrors.notSupported('spec.template.spec.restartPolicy', restartPolicy, ['OnFailure', 'Never']),
    );
  }
  if (spec.activeDeadlineSeconds !== undefined && spec.activeDeadlineSeconds <= 0) {
    errors.push(
      fieldErrors.invalid('spec.activeDeadlineSeconds', spec.activeDeadlineSeconds, 'must be greater than 0'),
    );
  }
  if ((spec.backoffLimit ?? 0) < 0) {
    errors.push(
      fieldErrors.invalid('spec.backoffLimit', spec.backoffLimit, 'must be greater than or equal to 0'),
    );
  }
  if (spec.completionMode !== 'NonIndexed' && spec.completionMode !== 'Indexed') {
    errors.push(
      fieldErrors.notSupported('spec.completionMode', spec.completionMode, ['NonIndexed', 'Indexed']),
    );
  }
  if (spec.completionMode === 'Indexed' && spec.completions === undefined) {
    errors.push(fieldErrors.required('spec.completions'));
  }
  return errors;
}

/** ValidateJobUpdate: the pod template may not change (beyond the scheduling directives, unused here). */
export function validateJobUpdate(before: WireJob, after: WireJob): FieldError[] {
  const errors: FieldError[] = [];
  if (
    JSON.stringify(before.spec.template.spec.containers) !==
    JSON.stringify(after.spec.template.spec.containers)
  ) {
    errors.push(fieldErrors.invalid('spec.template', '...', 'field is immutable'));
  }
  for (const field of ['completions', 'completionMode'] as const) {
    if (before.spec[field] !== after.spec[field]) {
      errors.push(fieldErrors.invalid(`spec.${field}`, after.spec[field], 'field is immutable'));
    }
  }
  return [...errors, ...validateLabels(after.metadata.labels, 'metadata.labels')];
}

type Requirement = (labels: Record<string, string>) => boolean;

/** A label selector (`a=b,c!=d,e in (f,g),h notin (i),j,!k`), as kubectl and client libraries send it. */
export function parseSelector(text: string | null): Requirement {
  if (text === null || text.trim() === '') return () => true;
  const parts: string[] = [];
  let depth = 0;
  let current = '';
  for (const character of text) {
    if (character === '(') depth += 1;
    if (character === ')') depth -= 1;
    if (character === ',' && depth === 0) {
      parts.push(current.trim());
      current = '';
    } else current += character;
  }
  parts.push(current.trim());
  const requirements = parts.map((part): Requirement => {
    const set = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(part);
    if (set !== null) {
      const [, key = '', operator, list = ''] = set;
      const values = new Set(list.split(',').map((value) => value.trim()));
      return (labels) => {
        const value = labels[key];
        return operator === 'in'
          ? value !== undefined && values.has(value)
          : value === undefined || !values.has(value);
      };
    }
    const equality = /^([^!=\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(part);
    if (equality !== null) {
      const [, key = '', operator, value] = equality;
      return (labels) => (operator === '!=' ? labels[key] !== value : labels[key] === value);
    }
    if (part.startsWith('!')) return (labels) => labels[part.slice(1)] === undefined;
    return (labels) => labels[part] !== undefined;
  });
  return (labels) => requirements.every((requirement) => requirement(labels));
}

function isObject(value: Json): value is Record<string, Json> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** RFC 7386 JSON merge patch (`application/merge-patch+json`): objects merge, null deletes, the rest replaces. */
export function mergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return patch;
  const result: Record<string, Json> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

/** Merge keys of the lists Shepherd's objects carry (x-kubernetes-patch-merge-key in the OpenAPI documents). */
const MERGE_KEYS: Record<string, string> = {
  ownerReferences: 'uid',
  containers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  conditions: 'type',
  ports: 'port',
};

/** `application/strategic-merge-patch+json`: a merge patch whose keyed lists merge item by item. */
export function strategicMergePatch(target: Json, patch: Json, field = ''): Json {
  const key = MERGE_KEYS[field];
  if (Array.isArray(patch) && Array.isArray(target) && key !== undefined) {
    const merged = [...target];
    for (const item of patch) {
      const index = isObject(item)
        ? merged.findIndex((entry) => isObject(entry) && entry[key] === item[key])
        : -1;
      if (index === -1) merged.push(item);
      else merged[index] = strategicMergePatch(merged[index], item);
    }
    return merged;
  }
  if (!isObject(patch)) return patch;
  const result: Record<string, Json> = isObject(target) ? { ...target } : {};
  for (const [name, value] of Object.entries(patch)) {
    if (value === null) delete result[name];
    else result[name] = strategicMergePatch(result[name], value, name);
  }
  return result;
}

/** RFC 6902 JSON patch (`application/json-patch+json`, client-node's default): add, replace, remove, test. */
export function jsonPatch(target: Json, operations: Json): Json {
  if (!Array.isArray(operations)) {
    throw new Error('json: cannot unmarshal object into Go value of type jsonpatch.Patch');
  }
  let document = structuredClone(target);
  for (const operation of operations) {
    if (!isObject(operation) || typeof operation.path !== 'string')
      throw new Error('invalid JSON patch operation');
    const tokens = operation.path
      .split('/')
      .slice(1)
      .map((token) => token.replaceAll('~1', '/').replaceAll('~0', '~'));
    const last = tokens.pop();
    if (last === undefined) {
      document = operation.value;
      continue;
    }
    let parent: Json = document;
    for (const token of tokens)
      parent =
        isObject(parent) || Array.isArray(parent) ? (parent as Record<string, Json>)[token] : undefined;
    if (!isObject(parent) && !Array.isArray(parent)) throw new Error(`path ${operation.path} not found`);
    const container = parent as Record<string, Json>;
    if (operation.op === 'remove') delete container[last];
    else if (operation.op === 'add' || operation.op === 'replace') container[last] = operation.value;
    else if (operation.op === 'test' && JSON.stringify(container[last]) !== JSON.stringify(operation.value)) {
      throw new Error(`testing value ${operation.path} failed`);
    }
  }
  return document;
}
