import { createHash } from 'node:crypto';
import path from 'node:path';
import type {
  V1ConfigMap,
  V1Container,
  V1EnvVar,
  V1Job,
  V1OwnerReference,
  V1Service,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import type { Config } from '../../config/config.js';
import { evaluationLines, shellQuote } from '../evaluation-script.js';
import type { RunMeta } from '../records/run-types.js';
import { hoursLeft } from '../time-limit.js';

/**
 * The objects a run becomes on Kubernetes, built without I/O: a `batch/v1` Job, the ConfigMap that carries
 * its script and the helper, and (multi-node) the headless Service its ranks find each other through.
 */

export type KubernetesSettings = Config['kubernetes'];

/** Labels Shepherd puts on its Jobs and their pods; polls and restarts find runs by them. */
export const LABELS = {
  managedBy: 'app.kubernetes.io/managed-by',
  run: 'shepherd.dev/run',
  queue: 'kueue.x-k8s.io/queue-name',
  /** Set on every pod by the Job controller (Kubernetes 1.27+). */
  jobName: 'batch.kubernetes.io/job-name',
} as const;
export const MANAGED_BY = 'shepherd';

export const ANNOTATIONS = {
  /** The run's launch number the Job (or its latest resume) belongs to. */
  launch: 'shepherd.dev/launch',
  /** Hash of everything a suspended Job cannot change; equal hashes let resume reuse the Job. */
  templateHash: 'shepherd.dev/template-hash',
  runName: 'shepherd.dev/run-name',
  /** Set by the Job controller on each pod of an Indexed Job. */
  completionIndex: 'batch.kubernetes.io/job-completion-index',
} as const;

/** Where things are inside the pod. */
const POD_PATHS = {
  /** The ConfigMap: the script at its top, the helper under `helper/`. */
  files: '/shepherd/files',
  helper: '/shepherd/files/helper',
  /** The run directory: the PVC's `<run id>` folder, or an emptyDir. */
  run: '/shepherd/run',
} as const;

const CONTAINER_NAME = 'train';
/** Each pod's rank in a multi-node Job (its completion index). */
const NODE_RANK = 'NODE_RANK';
const MASTER_PORT = 29500;
/** ConfigMap key whose value is the launch number (read into SHEPHERD_LAUNCH when the container starts). */
const LAUNCH_KEY = 'launch';
const SCRIPT_KEY = 'script';
/** Room for `-<index>` in an Indexed Job's pod hostname, which must stay a 63-character DNS label. */
const JOB_NAME_MAX = 52;

/** The script and helper files a pod needs (read by the executor from the run and helper directories). */
export interface JobFiles {
  /** `train.py`, or a command run's script under its base name; none for a command without one. */
  script?: { name: string; content: string };
  /** Helper files by path under the helper directory (`shepherd.py`, `shepherd/integrations/hf.py`). */
  helper: ReadonlyArray<{ path: string; content: string }>;
}

export interface JobManifestInput {
  meta: RunMeta;
  settings: Pick<KubernetesSettings, 'image' | 'queue' | 'pvc'>;
  jobName: string;
  /** Seconds between SIGTERM and SIGKILL (`terminationGracePeriodSeconds`). */
  graceS: number;
  files: JobFiles;
}

export interface JobManifests {
  job: V1Job;
  configMap: V1ConfigMap;
  /** Multi-node only; created after the Job, owned by it. */
  service?: V1Service;
}

/** DNS-safe Job name from the run name, its id and the launch number (unique per launch, ≤ 52 chars). */
export function jobNameFor(meta: Pick<RunMeta, 'id' | 'name' | 'launchCount'>): string {
  const suffix = `-${meta.id.replace(/^r-/, '')}-${meta.launchCount}`
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-');
  let base = meta.name
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-{2,}/g, '-')
    .replace(/^-+|-+$/g, '');
  // A Service (multi-node) needs a DNS-1035 label: the first character must be a letter.
  if (!/^[a-z]/.test(base)) base = base === '' ? 'run' : `run-${base}`;
  return `${base.slice(0, JOB_NAME_MAX - suffix.length).replace(/-+$/, '')}${suffix}`;
}

export function configMapNameFor(jobName: string): string {
  return `${jobName}-files`;
}

/** The image a run uses, or undefined when neither `--image` nor `SHEPHERD_K8S_IMAGE` names one. */
export function imageFor(
  meta: Pick<RunMeta, 'image'>,
  settings: Pick<KubernetesSettings, 'image'>,
): string | undefined {
  return meta.image ?? settings.image;
}

/** ConfigMap keys allow `[-._a-zA-Z0-9]`: a helper path `shepherd/integrations/hf.py` becomes `helper.shepherd.integrations.hf.py`. */
function helperKey(file: string): string {
  return `helper.${file.replaceAll('/', '.')}`;
}

/** Does this argv word name the command's script (as typed, relative to its working directory)? */
function namesScript(word: string, meta: RunMeta): boolean {
  if (meta.scriptPath === undefined || word.startsWith('-')) return false;
  return path.resolve(meta.cwd ?? '/', word) === meta.scriptPath;
}

/** The container's argv: `python -u train.py <args>`, or the command with its script pointed at the copy. */
export function containerArgv(meta: RunMeta, scriptName = 'train.py'): string[] {
  const script = `${POD_PATHS.files}/${scriptName}`;
  const base =
    meta.command === undefined
      ? ['python', '-u', script]
      : meta.command.map((word) => (namesScript(word, meta) ? script : word));
  return [...base, ...(meta.args ?? [])];
}

/**
 * The container's command: the argv itself, or with `--eval` a bash script that runs it (PID 1 passes a
 * TERM on to it), then the evaluation in the run directory (on the PVC, where Shepherd reads evaluation.json).
 * With several nodes only rank 0's pod evaluates (`NODE_RANK`, the completion index); the others would
 * write the same evaluation.json and eval.log on the shared PVC.
 */
function containerCommand(meta: RunMeta, scriptName: string | undefined): string[] {
  const argv = containerArgv(meta, scriptName);
  if (meta.evalCommand === undefined) return argv;
  const training = argv.map(shellQuote).join(' ');
  const ranked = (meta.nodes ?? 1) > 1 ? { rankVariable: NODE_RANK } : {};
  return ['/bin/bash', '-c', evaluationLines(training, meta.evalCommand, 'forward', ranked).join('\n')];
}

function runEnvironment(input: JobManifestInput, configMapName: string): V1EnvVar[] {
  const { meta, jobName } = input;
  const environment: V1EnvVar[] = [
    { name: 'SHEPHERD_RUN_DIR', value: POD_PATHS.run },
    { name: 'SHEPHERD_RUN_ID', value: meta.id },
    { name: 'SHEPHERD_RUN_NAME', value: meta.name },
    { name: 'SHEPHERD_RUN_CONFIG', value: JSON.stringify(meta.config ?? {}) },
    { name: 'SHEPHERD_RUN_ARGS', value: JSON.stringify(meta.args ?? []) },
    // From the ConfigMap, so a resumed (unsuspended) Job's new pod sees the new launch number.
    {
      name: 'SHEPHERD_LAUNCH',
      valueFrom: { configMapKeyRef: { name: configMapName, key: LAUNCH_KEY } },
    },
    // Shepherd may see only the pod's log (no shared volume): the helper prints metrics there too.
    { name: 'SHEPHERD_METRICS_STDOUT', value: '1' },
    { name: 'PYTHONPATH', value: POD_PATHS.helper },
    { name: 'PYTHONUNBUFFERED', value: '1' },
  ];
  const nodes = meta.nodes ?? 1;
  if (nodes > 1) {
    environment.push(
      { name: 'MASTER_ADDR', value: `${jobName}-0.${jobName}` },
      { name: 'MASTER_PORT', value: String(MASTER_PORT) },
      { name: 'WORLD_SIZE', value: String(nodes) },
      { name: 'NNODES', value: String(nodes) },
      {
        name: NODE_RANK,
        valueFrom: { fieldRef: { fieldPath: `metadata.annotations['${ANNOTATIONS.completionIndex}']` } },
      },
    );
  }
  return environment;
}

function volumesFor(
  input: JobManifestInput,
  configMapName: string,
): { volumes: V1Volume[]; mounts: V1VolumeMount[] } {
  const { settings, meta, files } = input;
  const items = [
    ...(files.script === undefined ? [] : [{ key: SCRIPT_KEY, path: files.script.name }]),
    ...files.helper.map((file) => ({ key: helperKey(file.path), path: `helper/${file.path}` })),
  ];
  const runVolume: V1Volume =
    settings.pvc === undefined
      ? { name: 'run', emptyDir: {} }
      : { name: 'run', persistentVolumeClaim: { claimName: settings.pvc } };
  return {
    volumes: [{ name: 'files', configMap: { name: configMapName, items } }, runVolume],
    mounts: [
      { name: 'files', mountPath: POD_PATHS.files, readOnly: true },
      // One folder of the claim per run, so runs sharing a PVC never see each other's files.
      settings.pvc === undefined
        ? { name: 'run', mountPath: POD_PATHS.run }
        : { name: 'run', mountPath: POD_PATHS.run, subPath: meta.id },
    ],
  };
}

function runLabels(input: JobManifestInput): Record<string, string> {
  const labels: Record<string, string> = { [LABELS.managedBy]: MANAGED_BY, [LABELS.run]: input.meta.id };
  if (input.settings.queue !== undefined) labels[LABELS.queue] = input.settings.queue;
  return labels;
}

/** Hash of the Job's spec (suspend aside): what must match for a paused Job to be resumed as it is. */
export function templateHash(job: V1Job): string {
  const { suspend: _suspend, ...spec } = job.spec ?? { template: {} };
  return createHash('sha256').update(JSON.stringify(spec)).digest('hex').slice(0, 16);
}

/** The ConfigMap's data for a launch: script, launch number, helper files. */
export function configMapData(files: JobFiles, launch: number): Record<string, string> {
  const data: Record<string, string> = { [LAUNCH_KEY]: String(launch) };
  if (files.script !== undefined) data[SCRIPT_KEY] = files.script.content;
  for (const file of files.helper) data[helperKey(file.path)] = file.content;
  return data;
}

/** The Job, its ConfigMap and (multi-node) its Service. Throws when no image is configured. */
export function buildJobManifests(input: JobManifestInput): JobManifests {
  const { meta, jobName, settings } = input;
  const image = imageFor(meta, settings);
  if (image === undefined) throw new Error('no container image');
  const configMapName = configMapNameFor(jobName);
  const labels = runLabels(input);
  const nodes = Math.max(1, meta.nodes ?? 1);
  const { volumes, mounts } = volumesFor(input, configMapName);
  const container: V1Container = {
    name: CONTAINER_NAME,
    image,
    command: containerCommand(meta, input.files.script?.name),
    workingDir: POD_PATHS.run,
    env: runEnvironment(input, configMapName),
    volumeMounts: mounts,
  };
  if (meta.gpus > 0) container.resources = { limits: { 'nvidia.com/gpu': String(meta.gpus) } };
  const job: V1Job = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: jobName, labels, annotations: { [ANNOTATIONS.runName]: meta.name } },
    spec: {
      // Shepherd decides retries: a failed pod fails the Job.
      backoffLimit: 0,
      activeDeadlineSeconds: Math.max(1, Math.ceil(hoursLeft(meta) * 3600)),
      // Kueue admits a Job by unsuspending it, so it is created suspended.
      suspend: settings.queue !== undefined,
      ...(nodes > 1 ? { completionMode: 'Indexed', completions: nodes, parallelism: nodes } : {}),
      template: {
        metadata: { labels },
        spec: {
          restartPolicy: 'Never',
          terminationGracePeriodSeconds: input.graceS,
          containers: [container],
          volumes,
          ...(nodes > 1 ? { subdomain: jobName } : {}),
        },
      },
    },
  };
  const annotations = job.metadata?.annotations ?? {};
  annotations[ANNOTATIONS.launch] = String(meta.launchCount);
  annotations[ANNOTATIONS.templateHash] = templateHash(job);
  const configMap: V1ConfigMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: configMapName, labels },
    data: configMapData(input.files, meta.launchCount),
  };
  const manifests: JobManifests = { job, configMap };
  if (nodes > 1) {
    manifests.service = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: jobName, labels },
      spec: {
        clusterIP: 'None',
        // Ranks resolve each other before they are ready (torchrun's rendezvous).
        publishNotReadyAddresses: true,
        selector: { [LABELS.jobName]: jobName },
        ports: [{ name: 'rendezvous', port: MASTER_PORT }],
      },
    };
  }
  return manifests;
}

/** The owner reference that makes an object go with its Job (garbage collection). */
export function ownedBy(job: V1Job): V1OwnerReference[] {
  return [
    {
      apiVersion: 'batch/v1',
      kind: 'Job',
      name: job.metadata?.name ?? '',
      uid: job.metadata?.uid ?? '',
      controller: false,
      blockOwnerDeletion: true,
    },
  ];
}

/** `ns/job` or `job` (the configured namespace) from `watch k8s:<namespace>/<job>`; undefined when malformed. */
export function parseKubernetesWatchTarget(
  text: string,
  defaultNamespace: string,
): { namespace: string; job: string } | undefined {
  const parts = text.trim().replace(/^k8s:/, '').split('/');
  const [first, second] = parts;
  if (parts.length > 2 || first === undefined) return undefined;
  const namespace = second === undefined ? defaultNamespace : first;
  const job = second ?? first;
  const dnsName = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
  const label = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
  return label.test(namespace) && dnsName.test(job) ? { namespace, job } : undefined;
}
