import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../../config/config.js';
import { definedOnly } from '../../defined-only.js';
import { RunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type {
  ClusterInfo,
  Executor,
  LaunchRequest,
  LaunchResult,
  Placement,
  PlacementRequest,
  ProcessState,
} from '../executor.js';
import { RUN_FILES } from '../records/run-files.js';
import { appendRunFile } from '../records/run-store.js';
import type { RunMeta } from '../records/run-types.js';
import { createHfJobsClient, type HfJob, type HfJobsClient } from './hfjobs-client.js';
import { createHardwareCatalog, type HardwareCatalog, type HfFlavor, pickFlavor } from './hfjobs-hardware.js';
import { createHfJobSpecBuilder } from './hfjobs-job-spec.js';
import { followJobLog, type LogFollower } from './hfjobs-log-follower.js';
import { isFinalStage, jobStateOf } from './hfjobs-states.js';

/** Follower timings (tests shorten them). */
type FollowerTuning = Partial<
  Record<'reconnectDelayMs' | 'maxReconnectDelayMs' | 'idleMs' | 'drainIdleMs' | 'flushMs', number>
>;

export interface HfJobsExecutorOptions {
  /** `config.hfJobs`: namespace (unset: the token's user), image, flavour (unset: follows `--gpus`). */
  settings: Config['hfJobs'];
  /** `config.hub`: `SHEPHERD_HUB_URL` and `SHEPHERD_HUB_TOKEN` (with the job scope). */
  hub: { url: string; token?: string | undefined };
  /** The run directory of a run id (`RunStore.runDir`), for followers started by `poll`. */
  runDir: (runId: string) => string;
  /** Directory with `shepherd.py` and the job bootstrap (`PYTHON_RUNTIME_DIR`). */
  helperDir: string;
  logger: Logger;
  clock?: () => Date;
  fetch?: typeof fetch;
  /** Secrets every job gets (encrypted by the Hub), e.g. `SHEPHERD_RUN_ENV_*`; never the bot's token by default. */
  secrets?: Readonly<Record<string, string>>;
  /** `getJob` calls in flight at once during a poll. */
  pollConcurrency?: number;
  terminatePollMs?: number;
  /** How long `terminate` waits for a cancelled job to end before giving up. */
  cancelWaitMs?: number;
  /** How long one poll waits for an ended job's last log lines. */
  drainWaitMs?: number;
  /** After this, an ended job is reported ended even if its log could not be completed. */
  maxDrainMs?: number;
  follower?: FollowerTuning;
}

export interface HfJobsExecutor extends Executor {
  /** Stops every log follower of this process (shutdown, tests). Jobs keep running. */
  close(): Promise<void>;
}

interface JobTarget {
  namespace: string;
  jobId: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const usd = (value: number) => `$${value.toFixed(2)}`;

/** Runs `work` over `items`, at most `limit` at a time. */
async function eachLimited<T>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next] as T;
      next += 1;
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

const PAUSE_REFUSAL =
  'HF Jobs cannot pause a job: it has no suspend, and the files the job wrote go with it. ' +
  'Use stop to cancel it; a later resume starts a new job from what the script saved elsewhere (the Hub).';

/**
 * Runs on Hugging Face Jobs (`--on hf`). A run is one job: the image (`--image`, else `SHEPHERD_HF_IMAGE`), a
 * flavour (`--flavor`, else `SHEPHERD_HF_FLAVOR`, else one that follows `--gpus`), `timeoutSeconds` from
 * `--hours`, and the script inside the command (`hfjobs-job-spec.ts`). Its log is streamed into output.log
 * (`hfjobs-log-follower.ts`); states come from `getJob` (`hfjobs-states.ts`); stop cancels; pause is refused.
 */
export function createHfJobsExecutor(options: HfJobsExecutorOptions): HfJobsExecutor {
  const { settings, logger } = options;
  const now = options.clock ?? (() => new Date());
  const client: HfJobsClient = createHfJobsClient({
    url: options.hub.url,
    token: options.hub.token,
    namespace: settings.namespace,
    ...definedOnly({ fetch: options.fetch }),
  });
  const catalog: HardwareCatalog = createHardwareCatalog({
    fetchHardware: () => client.hardware(),
    logger,
    clock: now,
  });
  const specs = createHfJobSpecBuilder({
    helperDir: options.helperDir,
    ...definedOnly({ secrets: options.secrets }),
  });
  const followers = new Map<string, LogFollower>();
  /** Last state each run was seen in, answered when the API fails for a moment (never "ended" by an outage). */
  const lastSeen = new Map<string, ProcessState>();
  /** When each run's job was first seen ended, to bound the wait for its last log lines. */
  const endedSince = new Map<string, number>();
  const drainWaitMs = options.drainWaitMs ?? 10_000;
  const maxDrainMs = options.maxDrainMs ?? 60_000;

  async function chooseFlavor(request: PlacementRequest): Promise<{ flavor: HfFlavor; notes: string[] }> {
    return pickFlavor(request, await catalog.list(), settings.flavor);
  }

  async function targetOf(meta: RunMeta): Promise<JobTarget | undefined> {
    if (meta.watch?.source === 'hfjobs') {
      return { namespace: meta.watch.namespace ?? (await client.namespace()), jobId: meta.watch.jobId };
    }
    return meta.jobId === undefined ? undefined : { namespace: await client.namespace(), jobId: meta.jobId };
  }

  /** The follower of a run's job in this process, started when there is none (or it follows an older job). */
  function ensureFollower(runId: string, target: JobTarget): LogFollower {
    const existing = followers.get(runId);
    if (existing !== undefined && existing.jobId === target.jobId && !existing.finished()) return existing;
    if (existing !== undefined && existing.jobId !== target.jobId) void existing.stop();
    const follower = followJobLog({
      client,
      ...target,
      runDir: options.runDir(runId),
      logger: logger.child({ runId, jobId: target.jobId }),
      ...options.follower,
    });
    followers.set(runId, follower);
    return follower;
  }

  /** Waits (bounded) until an ended job's log is all in output.log; false while lines may still come. */
  async function drained(runId: string, target: JobTarget): Promise<boolean> {
    // A follower of this job that has finished already wrote the whole log: no second replay.
    const existing = followers.get(runId);
    const follower = existing?.jobId === target.jobId ? existing : ensureFollower(runId, target);
    const settled = await Promise.race([
      follower.done.then(() => true),
      sleep(drainWaitMs).then(() => false),
    ]);
    if (settled) {
      followers.delete(runId);
      endedSince.delete(runId);
      return true;
    }
    const since = endedSince.get(runId) ?? now().getTime();
    endedSince.set(runId, since);
    if (now().getTime() - since < maxDrainMs) return false;
    logger.warn(
      { runId, jobId: target.jobId },
      'HF job ended but its log could not be completed; reporting the end',
    );
    return true;
  }

  /** The state of one run's job; starts or finishes its log follower on the way. */
  async function stateOf(meta: RunMeta): Promise<ProcessState> {
    let target: JobTarget | undefined;
    let job: HfJob;
    try {
      target = await targetOf(meta);
      if (target === undefined) return { kind: 'unknown', reason: 'run has no HF job id' };
      job = await client.getJob(target.namespace, target.jobId);
    } catch (error) {
      if (target !== undefined && error instanceof RunError && error.code === 'backend_job_not_found') {
        return { kind: 'unknown', reason: `HF Jobs has no job ${target.jobId} in ${target.namespace}` };
      }
      const last = lastSeen.get(meta.id) ?? { kind: 'alive' };
      logger.warn({ runId: meta.id, err: error }, 'HF Jobs did not answer; keeping the last known state');
      return last;
    }
    const state = jobStateOf(job.status, job.flavor ?? undefined);
    if (!isFinalStage(job.status.stage)) {
      ensureFollower(meta.id, target);
      lastSeen.set(meta.id, state);
      return state;
    }
    // The run is reported ended only once output.log holds the job's last lines (detectors read them).
    if (!(await drained(meta.id, target))) return lastSeen.get(meta.id) ?? { kind: 'alive' };
    lastSeen.delete(meta.id);
    return state;
  }

  async function launch(request: LaunchRequest): Promise<LaunchResult> {
    const { meta, runDir } = request;
    const { flavor } = await chooseFlavor(meta);
    const image = meta.image ?? settings.image;
    const spec = await specs.build({ meta, runDir, image, flavor: flavor.name });
    const namespace = await client.namespace();
    await rm(path.join(runDir, RUN_FILES.finish), { force: true });
    // The new job's log says afresh whether (and how) it evaluated.
    await rm(path.join(runDir, RUN_FILES.evaluation), { force: true });
    const job = await client.runJob(namespace, spec);
    const what = meta.command === undefined ? `script v${meta.scriptVersion}` : 'command';
    await appendRunFile(
      runDir,
      RUN_FILES.output,
      `=== launch ${meta.launchCount} at ${now().toISOString()} (${what}, hf job ${job.id} in ${namespace}, ${flavor.name}, image ${image}) ===`,
    );
    lastSeen.set(meta.id, jobStateOf(job.status, flavor.name));
    ensureFollower(meta.id, { namespace, jobId: job.id });
    logger.info(
      { runId: meta.id, jobId: job.id, namespace, flavor: flavor.name },
      'run submitted to HF Jobs',
    );
    return { jobId: job.id };
  }

  async function poll(runs: RunMeta[]): Promise<Map<string, ProcessState>> {
    const states = new Map<string, ProcessState>();
    await eachLimited(runs, options.pollConcurrency ?? 8, async (meta) => {
      states.set(meta.id, await stateOf(meta));
    });
    return states;
  }

  /** Polls until the job has ended (its log drained); undefined when it is still there after `timeoutMs`. */
  async function waitForEnd(meta: RunMeta, timeoutMs: number): Promise<ProcessState | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const state = await stateOf(meta);
      if (state.kind !== 'alive' && state.kind !== 'pending') return state;
      if (Date.now() >= deadline) return undefined;
      await sleep(Math.min(options.terminatePollMs ?? 1_000, Math.max(0, deadline - Date.now())));
    }
  }

  async function terminate(
    meta: RunMeta,
    terminateOptions: { graceMs: number; reason: 'pause' | 'stop' },
  ): Promise<ProcessState> {
    if (terminateOptions.reason === 'pause') throw new RunError('invalid_run', PAUSE_REFUSAL);
    const target = await targetOf(meta);
    if (target === undefined) return { kind: 'unknown', reason: 'run has no HF job id' };
    const job = await client.getJob(target.namespace, target.jobId).catch((error: unknown) => {
      if (error instanceof RunError && error.code === 'backend_job_not_found') return undefined;
      throw error;
    });
    if (job === undefined) {
      return { kind: 'unknown', reason: `HF Jobs has no job ${target.jobId} in ${target.namespace}` };
    }
    if (!isFinalStage(job.status.stage)) {
      logger.info({ runId: meta.id, jobId: target.jobId }, 'cancelling HF job');
      try {
        await client.cancelJob(target.namespace, target.jobId);
      } catch (error) {
        // It may have ended between the two calls; anything else is reported.
        if (!isFinalStage((await client.getJob(target.namespace, target.jobId)).status.stage)) throw error;
      }
    }
    const ended = await waitForEnd(meta, options.cancelWaitMs ?? 120_000);
    if (ended === undefined) {
      throw new RunError(
        'terminate_failed',
        `HF job ${target.jobId} of run ${meta.name} is still there after cancel`,
      );
    }
    return ended;
  }

  async function placement(request: PlacementRequest): Promise<Placement> {
    if ((request.nodes ?? 1) > 1) {
      throw new RunError(
        'invalid_run',
        `HF Jobs runs one machine per job; ${request.nodes} nodes cannot run there`,
      );
    }
    const { flavor, notes } = await chooseFlavor(request);
    const namespace = await client.namespace().catch(() => undefined);
    return {
      description: `HF Jobs ${flavor.name} (${usd(flavor.hourlyUsd)}/h)${namespace === undefined ? '' : `, namespace ${namespace}`}`,
      hourlyUsd: flavor.hourlyUsd,
      notes: [
        ...notes,
        'files the job writes (checkpoints) end with it unless the script pushes them to the Hub',
        'pause is not available on HF Jobs: stop cancels the job',
      ],
    };
  }

  async function clusterInfo(): Promise<ClusterInfo> {
    const list = await catalog.list();
    const most = Math.max(0, ...list.flavors.map((flavor) => flavor.gpus));
    const source =
      list.source === 'api'
        ? 'from the hardware list'
        : `from the docs table (hardware list: ${list.problem ?? 'no answer'})`;
    return {
      executor: 'hfjobs',
      // No shared pool: each job gets its flavour's GPUs, up to `most`.
      gpusTotal: most,
      gpusFree: most,
      notes: [
        `GPUs come with the flavour, up to ${most} in one job; hourly prices ${source}:`,
        ...list.flavors.map((flavor) => `${flavor.name}: ${flavor.summary}, ${usd(flavor.hourlyUsd)}/h`),
      ],
    };
  }

  async function close(): Promise<void> {
    const all = [...followers.values()];
    followers.clear();
    await Promise.all(all.map((follower) => follower.stop()));
  }

  return { kind: 'hfjobs', allocatesGpus: true, launch, poll, terminate, clusterInfo, placement, close };
}
