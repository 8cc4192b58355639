import { z } from 'zod';

/*
 * Wire shapes of the objects the Kubernetes emulator stores, and the API server's own rules about them.
 *
 * Shapes: the fields the emulator reads, as named in the Kubernetes OpenAPI documents
 * (kubernetes/kubernetes api/openapi-spec/v3/apis__batch__v1_openapi.json at f3efda5e for Job, JobSpec,
 * JobStatus, JobCondition; the @kubernetes/client-node 1.4.0 models, generated from OpenAPI v1.34.0, for
 * the core/v1 objects: V1Pod, V1PodSpec, V1Container, V1EnvVar, V1Volume, V1ConfigMap, V1Service,
 * V1Status). Every schema is loose: fields the emulator does not read are kept as sent.
 *
 * Rules: the validation messages and Status bodies of k8s.io/apimachinery (field.Error strings,
 * `metav1.Status` with reason AlreadyExists / NotFound / Invalid / Forbidden / Unauthorized).
 */

const stringMap = z.record(z.string(), z.string());

const ownerReferenceSchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.string(),
  name: z.string(),
  uid: z.string(),
  controller: z.boolean().optional(),
  blockOwnerDeletion: z.boolean().optional(),
});

const metaSchema = z.looseObject({
  name: z.string().optional(),
  namespace: z.string().optional(),
  uid: z.string().optional(),
  resourceVersion: z.string().optional(),
  creationTimestamp: z.string().optional(),
  deletionTimestamp: z.string().optional(),
  deletionGracePeriodSeconds: z.number().optional(),
  labels: stringMap.optional(),
  annotations: stringMap.optional(),
  ownerReferences: z.array(ownerReferenceSchema).optional(),
  finalizers: z.array(z.string()).optional(),
});

const envVarSchema = z.looseObject({
  name: z.string(),
  value: z.string().optional(),
  valueFrom: z
    .looseObject({
      configMapKeyRef: z.looseObject({ name: z.string(), key: z.string() }).optional(),
      fieldRef: z.looseObject({ fieldPath: z.string() }).optional(),
    })
    .optional(),
});

const quantityMap = z.record(z.string(), z.union([z.string(), z.number()]));

const containerSchema = z.looseObject({
  name: z.string().optional(),
  image: z.string().optional(),
  command: z.array(z.string()).optional(),
  args: z.array(z.string()).optional(),
  workingDir: z.string().optional(),
  env: z.array(envVarSchema).optional(),
  resources: z.looseObject({ limits: quantityMap.optional(), requests: quantityMap.optional() }).optional(),
  volumeMounts: z
    .array(
      z.looseObject({
        name: z.string(),
        mountPath: z.string(),
        subPath: z.string().optional(),
        readOnly: z.boolean().optional(),
      }),
    )
    .optional(),
});

const volumeSchema = z.looseObject({
  name: z.string(),
  configMap: z
    .looseObject({
      name: z.string(),
      items: z.array(z.looseObject({ key: z.string(), path: z.string() })).optional(),
    })
    .optional(),
  emptyDir: z.looseObject({}).optional(),
  persistentVolumeClaim: z.looseObject({ claimName: z.string() }).optional(),
});

const podSpecSchema = z.looseObject({
  restartPolicy: z.string().optional(),
  terminationGracePeriodSeconds: z.number().optional(),
  containers: z.array(containerSchema),
  volumes: z.array(volumeSchema).optional(),
  hostname: z.string().optional(),
  subdomain: z.string().optional(),
  nodeName: z.string().optional(),
});

const conditionSchema = z.looseObject({
  type: z.string(),
  status: z.string(),
  reason: z.string().optional(),
  message: z.string().optional(),
  lastTransitionTime: z.string().optional(),
  lastProbeTime: z.string().nullable().optional(),
});

export const jobSchema = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.string().optional(),
  metadata: metaSchema,
  spec: z.looseObject({
    template: z.looseObject({ metadata: metaSchema.optional(), spec: podSpecSchema }),
    backoffLimit: z.number().optional(),
    activeDeadlineSeconds: z.number().optional(),
    suspend: z.boolean().optional(),
    completions: z.number().optional(),
    parallelism: z.number().optional(),
    completionMode: z.string().optional(),
    selector: z.looseObject({ matchLabels: stringMap.optional() }).optional(),
  }),
  status: z
    .looseObject({
      conditions: z.array(conditionSchema).optional(),
      active: z.number().optional(),
      ready: z.number().optional(),
      succeeded: z.number().optional(),
      failed: z.number().optional(),
      terminating: z.number().optional(),
      startTime: z.string().optional(),
      completionTime: z.string().optional(),
    })
    .optional(),
});
export type WireJob = z.infer<typeof jobSchema>;

const containerStateSchema = z.looseObject({
  waiting: z.looseObject({ reason: z.string().optional(), message: z.string().optional() }).optional(),
  running: z.looseObject({ startedAt: z.string().optional() }).optional(),
  terminated: z
    .looseObject({
      exitCode: z.number(),
      reason: z.string().optional(),
      message: z.string().optional(),
      startedAt: z.string().optional(),
      finishedAt: z.string().optional(),
    })
    .optional(),
});

export const podSchema = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.string().optional(),
  metadata: metaSchema,
  spec: podSpecSchema,
  status: z
    .looseObject({
      phase: z.string().optional(),
      reason: z.string().optional(),
      conditions: z.array(conditionSchema).optional(),
      containerStatuses: z
        .array(
          z.looseObject({
            name: z.string(),
            image: z.string(),
            imageID: z.string(),
            ready: z.boolean(),
            restartCount: z.number(),
            started: z.boolean().optional(),
            state: containerStateSchema.optional(),
          }),
        )
        .optional(),
      hostIP: z.string().optional(),
      podIP: z.string().optional(),
      startTime: z.string().optional(),
    })
    .optional(),
});
export type WirePod = z.infer<typeof podSchema>;
export type WireContainerState = z.infer<typeof containerStateSchema>;
export type WireCondition = z.infer<typeof conditionSchema>;

export const configMapSchema = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.string().optional(),
  metadata: metaSchema,
  data: stringMap.optional(),
  binaryData: stringMap.optional(),
});
export type WireConfigMap = z.infer<typeof configMapSchema>;

export const serviceSchema = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.string().optional(),
  metadata: metaSchema,
  spec: z.looseObject({
    clusterIP: z.string().optional(),
    selector: stringMap.optional(),
    ports: z.array(z.looseObject({ name: z.string().optional(), port: z.number() })).optional(),
  }),
});
export type WireService = z.infer<typeof serviceSchema>;

export type WireObject = WireJob | WirePod | WireConfigMap | WireService;

/** metav1.Status of a failed call. */
export function statusBody(
  code: number,
  reason: string,
  message: string,
  details?: Record<string, unknown>,
): Record<string, unknown> {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    ...(details === undefined ? {} : { details }),
    code,
  };
}

/** One field.Error, as apimachinery prints it. */
export interface FieldError {
  field: string;
  reason: 'FieldValueRequired' | 'FieldValueInvalid' | 'FieldValueNotSupported' | 'FieldValueTooLong';
  message: string;
}

export const fieldErrors = {
  required: (field: string): FieldError => ({
    field,
    reason: 'FieldValueRequired',
    message: 'Required value',
  }),
  invalid: (field: string, value: unknown, detail: string): FieldError => ({
    field,
    reason: 'FieldValueInvalid',
    message: `Invalid value: ${JSON.stringify(value)}: ${detail}`,
  }),
  notSupported: (field: string, value: unknown, supported: string[]): FieldError => ({
    field,
    reason: 'FieldValueNotSupported',
    message: `Unsupported value: ${JSON.stringify(value)}: supported values: ${supported.map((entry) => `"${entry}"`).join(', ')}`,
  }),
  tooLong: (field: string, limit: number): FieldError => ({
    field,
    reason: 'FieldValueTooLong',
    message: `Too long: must have at most ${limit} bytes`,
  }),
};

/** 422 Invalid: `Job.batch "x" is invalid: <field>: <message>` (several errors in brackets). */
export function invalidBody(kind: string, group: string, name: string, errors: FieldError[]) {
  const texts = errors.map((error) => `${error.field}: ${error.message}`);
  const qualified = group === '' ? kind : `${kind}.${group}`;
  const joined = texts.length === 1 ? (texts[0] ?? '') : `[${texts.join(', ')}]`;
  return statusBody(422, 'Invalid', `${qualified} "${name}" is invalid: ${joined}`, {
    name,
    group,
    kind,
    causes: errors.map((error) => ({ reason: error.reason, message: error.message, field: error.field })),
  });
}

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
export const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** k8s.io/apimachinery ValidateLabels: qualified names as keys, values of at most 63 characters. */
export function validateLabels(labels: Record<string, string> | undefined, field: string): FieldError[] {
  const errors: FieldError[] = [];
  for (const [key, value] of Object.entries(labels ?? {})) {
    const slash = key.lastIndexOf('/');
    const name = slash === -1 ? key : key.slice(slash + 1);
    const prefix = slash === -1 ? undefined : key.slice(0, slash);
    if (name.length > 63 || !LABEL_NAME.test(name) || (prefix !== undefined && !DNS_SUBDOMAIN.test(prefix))) {
      errors.push(fieldErrors.invalid(field, key, 'name part must consist of alphanumeric characters'));
    }
    if (value.length > 63)
      errors.push(fieldErrors.invalid(field, value, 'must be no more than 63 characters'));
    else if (!LABEL_VALUE.test(value)) {
      errors.push(
        fieldErrors.invalid(
          field,
          value,
          "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.'",
        ),
      );
    }
  }
  return errors;
}

export function validateName(name: string | undefined, pattern: RegExp, maxLength: number): FieldError[] {
  if (name === undefined || name === '') return [fieldErrors.required('metadata.name')];
  if (name.length > maxLength) {
    return [fieldErrors.invalid('metadata.name', name, `must be no more than ${maxLength} characters`)];
  }
  return pattern.test(name) ? [] : [fieldErrors.invalid('metadata.name', name, 'a lowercase RFC 1123 name')];
}

export const SERVICE_NAME = DNS_1035;

/** ConfigMap: keys of `[-._a-zA-Z0-9]`, and the whole data (keys and values) at most 1 MiB. */
export function validateConfigMap(configMap: WireConfigMap): FieldError[] {
  const errors = [
    ...validateName(configMap.metadata.name, DNS_SUBDOMAIN, 253),
    ...validateLabels(configMap.metadata.labels, 'metadata.labels'),
  ];
  let size = 0;
  for (const [key, value] of [
    ...Object.entries(configMap.data ?? {}),
    ...Object.entries(configMap.binaryData ?? {}),
  ]) {
    if (!/^[-._a-zA-Z0-9]+$/.test(key)) {
      errors.push(
        fieldErrors.invalid(
          `data[${key}]`,
          key,
          "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
        ),
      );
    }
    size += Buffer.byteLength(key) + Buffer.byteLength(value);
  }
  if (size > 1024 * 1024) errors.push(fieldErrors.tooLong('[]', 1024 * 1024));
  return errors;
}
