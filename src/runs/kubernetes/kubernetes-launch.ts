import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { V1Job } from '@kubernetes/client-node';
import { RunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { RUN_FILES } from '../records/run-files.js';
import type { RunMeta } from '../records/run-types.js';
import type { KubernetesApi } from './kubernetes-api.js';
import {
  ANNOTATIONS,
  buildJobManifests,
  configMapData,
  configMapNameFor,
  imageFor,
  type JobFiles,
  type JobManifests,
  jobNameFor,
  type KubernetesSettings,
  LABELS,
  ownedBy,
  templateHash,
} from './kubernetes-job-manifest.js';

/**
 * Launching a run as a Job: a new Job (ConfigMap first, so the pod finds its files; then the Job; then
 * the ConfigMap and Service made the Job's, so they go with it), or the run's suspended Job unsuspended
 * when nothing it cannot change has changed (a pause without Kueue keeps it).
 */

interface LaunchContext {
  api: KubernetesApi;
  settings: KubernetesSettings;
  graceS: number;
  /** Directory with `shepherd.py` and `shepherd/integrations/`. */
  helperDir: string;
  logger: Logger;
  /** Wait until a Job is gone (after a Foreground delete). */
  waitJobGone: (name: string) => Promise<void>;
}

const NO_IMAGE_MESSAGE = 'no container image: set SHEPHERD_K8S_IMAGE or pass --image';

export function assertImage(meta: Pick<RunMeta, 'image'>, settings: KubernetesSettings): void {
  if (imageFor(meta, settings) === undefined) throw new RunError('invalid_run', NO_IMAGE_MESSAGE);
}

async function helperFiles(helperDir: string): Promise<JobFiles['helper']> {
  const files = [
    { path: 'shepherd.py', content: await readFile(path.join(helperDir, 'shepherd.py'), 'utf8') },
  ];
  const integrations = path.join(helperDir, 'shepherd', 'integrations');
  const names = await readdir(integrations).catch(() => [] as string[]);
  for (const name of names.filter((entry) => entry.endsWith('.py')).sort()) {
    files.push({
      path: `shepherd/integrations/${name}`,
      content: await readFile(path.join(integrations, name), 'utf8'),
    });
  }
  return files;
}

/** The script (train.py, or a command run's own script) and the helper, as the ConfigMap carries them. */
async function readJobFiles(meta: RunMeta, runDir: string, helperDir: string): Promise<JobFiles> {
  const helper = await helperFiles(helperDir);
  if (meta.command !== undefined) {
    if (meta.scriptPath === undefined) return { helper };
    const content = await readFile(meta.scriptPath, 'utf8');
    return { script: { name: path.basename(meta.scriptPath), content }, helper };
  }
  const content = await readFile(path.join(runDir, RUN_FILES.script), 'utf8').catch((error: unknown) => {
    throw new RunError('no_script', `run ${meta.name} has no ${RUN_FILES.script}`, { cause: error });
  });
  return { script: { name: RUN_FILES.script, content }, helper };
}

function finished(job: V1Job): boolean {
  return (job.status?.conditions ?? []).some(
    (condition) =>
      (condition.type === 'Complete' || condition.type === 'Failed') && condition.status === 'True',
  );
}

/** Create the ConfigMap, the Job and (multi-node) the Service; undo what was made when a step fails. */
async function createObjects(
  context: LaunchContext,
  meta: RunMeta,
  manifests: JobManifests,
): Promise<string> {
  const { api, settings } = context;
  const namespace = settings.namespace;
  const jobName = manifests.job.metadata?.name ?? '';
  const configMapName = manifests.configMap.metadata?.name ?? '';
  if ((await api.createConfigMap(namespace, manifests.configMap)) === 'exists') {
    // A retried launch: same name, so the same run and launch; bring its content up to date.
    await api.patchConfigMap(namespace, configMapName, { data: manifests.configMap.data });
  }
  let job: V1Job | undefined;
  let owned = false;
  try {
    const created = await api.createJob(namespace, manifests.job);
    // The same launch tried twice (the bot died between create and recording it): adopt our own Job.
    job = created === 'exists' ? await api.readJob(namespace, jobName) : created;
    if (job?.metadata?.labels?.[LABELS.run] !== meta.id) {
      job = undefined;
      throw new RunError(
        'invalid_run',
        `a Job named ${jobName} already exists in ${namespace} and is not this run's`,
      );
    }
    await api.patchConfigMap(namespace, configMapName, { metadata: { ownerReferences: ownedBy(job) } });
    owned = true;
    if (manifests.service !== undefined) {
      const metadata = { ...manifests.service.metadata, ownerReferences: ownedBy(job) };
      await api.createService(namespace, { ...manifests.service, metadata });
    }
    return jobName;
  } catch (error) {
    if (job !== undefined) await api.deleteJob(namespace, jobName).catch(() => undefined);
    if (!owned) await api.deleteConfigMap(namespace, configMapName).catch(() => undefined);
    throw error;
  }
}

/** A suspended Job of this run that can simply be unsuspended (no Kueue; same image, command, GPUs, limit). */
function reusableJob(jobs: readonly V1Job[], context: LaunchContext, meta: RunMeta, files: JobFiles) {
  if (context.settings.queue !== undefined) return undefined;
  return jobs.find((job) => {
    const name = job.metadata?.name;
    if (
      name === undefined ||
      job.spec?.suspend !== true ||
      finished(job) ||
      job.metadata?.deletionTimestamp
    ) {
      return false;
    }
    const rebuilt = buildJobManifests({
      meta,
      settings: context.settings,
      jobName: name,
      graceS: context.graceS,
      files,
    });
    return job.metadata?.annotations?.[ANNOTATIONS.templateHash] === templateHash(rebuilt.job);
  });
}

/** Launch `meta` (its `launchCount` is already the new launch's); returns the Job's name. */
export async function launchJob(context: LaunchContext, meta: RunMeta, runDir: string): Promise<string> {
  const { api, settings, logger } = context;
  const namespace = settings.namespace;
  assertImage(meta, settings);
  const files = await readJobFiles(meta, runDir, context.helperDir);
  const existing = await api.listJobs(namespace, `${LABELS.run}=${meta.id}`);
  const reusable = reusableJob(existing, context, meta, files);
  if (reusable?.metadata?.name !== undefined) {
    const name = reusable.metadata.name;
    // The new pod reads the script and SHEPHERD_LAUNCH from the ConfigMap when it starts.
    await api.patchConfigMap(namespace, configMapNameFor(name), {
      data: configMapData(files, meta.launchCount),
    });
    await api.patchJob(namespace, name, {
      metadata: { annotations: { [ANNOTATIONS.launch]: String(meta.launchCount) } },
      spec: { suspend: false },
    });
    logger.info({ runId: meta.id, job: name }, 'Kubernetes Job resumed (suspend: false)');
    return name;
  }
  // An older launch's Job still there (paused with a change it cannot take): it goes first.
  for (const job of existing) {
    const name = job.metadata?.name;
    if (name === undefined || finished(job)) continue;
    await api.deleteJob(namespace, name);
    await context.waitJobGone(name);
  }
  const jobName = jobNameFor(meta);
  const manifests = buildJobManifests({ meta, settings, jobName, graceS: context.graceS, files });
  await createObjects(context, meta, manifests);
  logger.info({ runId: meta.id, job: jobName, namespace, gpus: meta.gpus }, 'Kubernetes Job created');
  return jobName;
}
