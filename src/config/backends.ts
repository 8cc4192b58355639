import { z } from 'zod';
import { BACKEND_KINDS, type BackendKind, parseBackendName } from './backend-kinds.js';

/** Where runs go: `SHEPHERD_BACKENDS`, the default `SHEPHERD_EXECUTOR`, and each backend's own settings. */

const optionalString = z
  .string()
  .optional()
  .transform((value) => (value === undefined || value.trim() === '' ? undefined : value.trim()));
const nonNegativeNumber = z.coerce.number().nonnegative();

const backendName = z.string().transform((value, context) => {
  const kind = parseBackendName(value);
  if (kind === undefined) {
    context.addIssue({ code: 'custom', message: `unknown backend; use one of ${BACKEND_KINDS.join(', ')}` });
    return z.NEVER;
  }
  return kind;
});

/** `SHEPHERD_BACKENDS`: a comma list of backends (`k8s` and `hf` accepted); empty means just the default. */
const backendList = z
  .string()
  .default('')
  .transform((value, context) => {
    const kinds: BackendKind[] = [];
    for (const item of value.split(',').filter((part) => part.trim().length > 0)) {
      const kind = parseBackendName(item);
      if (kind === undefined) {
        context.addIssue({
          code: 'custom',
          message: `unknown backend "${item.trim()}"; use ${BACKEND_KINDS.join(', ')}`,
        });
        return z.NEVER;
      }
      if (!kinds.includes(kind)) kinds.push(kind);
    }
    return kinds;
  });

export const backendEnvironment = {
  SHEPHERD_EXECUTOR: backendName.default('local'),
  SHEPHERD_BACKENDS: backendList,
  SHEPHERD_SLURM_GPU_HOUR_USD: nonNegativeNumber.optional(),
  /** Local runs inside an image (`--image` or SHEPHERD_LOCAL_IMAGE) with this engine. */
  SHEPHERD_LOCAL_CONTAINER: z.enum(['docker', 'podman']).optional(),
  SHEPHERD_LOCAL_IMAGE: optionalString,
  /** Path of a kubeconfig; unset means in-cluster credentials (the service account). */
  KUBECONFIG: optionalString,
  SHEPHERD_K8S_NAMESPACE: z.string().min(1).default('default'),
  SHEPHERD_K8S_IMAGE: optionalString,
  SHEPHERD_K8S_QUEUE: optionalString,
  SHEPHERD_K8S_PVC: optionalString,
  SHEPHERD_K8S_GPU_HOUR_USD: nonNegativeNumber.optional(),
  SHEPHERD_HF_NAMESPACE: optionalString,
  SHEPHERD_HF_IMAGE: z.string().min(1).default('pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime'),
  SHEPHERD_HF_FLAVOR: optionalString,
};

type BackendEnvironment = z.output<z.ZodObject<typeof backendEnvironment>> & {
  SHEPHERD_GPU_HOUR_USD: number;
};

/** Configured backends, the default (`SHEPHERD_EXECUTOR`) first. */
export function configuredBackends(environment: BackendEnvironment): BackendKind[] {
  const first = environment.SHEPHERD_EXECUTOR;
  return [first, ...environment.SHEPHERD_BACKENDS.filter((kind) => kind !== first)];
}

export function backendSettings(environment: BackendEnvironment) {
  const gpuHourUsd = environment.SHEPHERD_GPU_HOUR_USD;
  return {
    localContainer: {
      engine: environment.SHEPHERD_LOCAL_CONTAINER,
      image: environment.SHEPHERD_LOCAL_IMAGE,
    },
    kubernetes: {
      kubeconfig: environment.KUBECONFIG,
      namespace: environment.SHEPHERD_K8S_NAMESPACE,
      image: environment.SHEPHERD_K8S_IMAGE,
      /** Kueue LocalQueue; when set, Kueue manages the Job's suspension. */
      queue: environment.SHEPHERD_K8S_QUEUE,
      pvc: environment.SHEPHERD_K8S_PVC,
      gpuHourUsd: environment.SHEPHERD_K8S_GPU_HOUR_USD ?? gpuHourUsd,
    },
    hfJobs: {
      namespace: environment.SHEPHERD_HF_NAMESPACE,
      image: environment.SHEPHERD_HF_IMAGE,
      /** Unset: the flavour follows `--gpus`. */
      flavor: environment.SHEPHERD_HF_FLAVOR,
    },
  };
}
