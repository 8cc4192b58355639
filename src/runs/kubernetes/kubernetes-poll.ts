import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import { z } from 'zod';
import type { ProcessState } from '../executor.js';
import { writeFileAtomic } from '../records/atomic-file.js';
import type { RunMeta } from '../records/run-types.js';
import type { KubernetesApi } from './kubernetes-api.js';
import { LABELS } from './kubernetes-job-manifest.js';
import type { FollowTarget, LogFollowers } from './kubernetes-log-follower.js';
import { imagePullFailure, isFinal, jobState } from './kubernetes-states.js';

/**
 * `poll(runs)`: one list of Jobs and one of pods for the runs Shepherd launched (by label), one get per
 * watched Job and one list of their pods per namespace. Each run's state comes from `jobState`; a running
 * one gets a log follower if this process has none, an ended one has its log read to the end first.
 */

/** `<run dir>/kubernetes-ending.json`: how the Job ended, for polls after it is gone (deleted, TTL). */
const ENDING_FILE = 'kubernetes-ending.json';

const endingSchema = z.object({
  job: z.string(),
  kind: z.enum(['exited', 'signaled']),
  exitCode: z.number().int().optional(),
  signal: z.string().optional(),
  crashClass: z.enum(['timeout', 'out_of_memory', 'node_fail', 'preempted', 'cancelled']).optional(),
  reason: z.string().optional(),
});

async function readEnding(runDir: string, job: string): Promise<ProcessState | undefined> {
  try {
    const parsed = endingSchema.safeParse(JSON.parse(await readFile(path.join(runDir, ENDING_FILE), 'utf8')));
    if (!parsed.success || parsed.data.job !== job) return undefined;
    const { kind, exitCode, signal, crashClass, reason } = parsed.data;
    const state: ProcessState =
      kind === 'exited' ? { kind, exitCode: exitCode ?? 1 } : { kind, signal: signal ?? 'SIGTERM' };
    if (kind === 'signaled' && exitCode !== undefined) state.exitCode = exitCode;
    if (crashClass !== undefined) state.crashClass = crashClass;
    if (reason !== undefined && state.kind === 'exited') state.reason = reason;
    return state;
  } catch {
    return undefined;
  }
}

async function recordEnding(runDir: string, job: string, state: ProcessState): Promise<void> {
  if ((await readEnding(runDir, job)) !== undefined) return;
  await writeFileAtomic(path.join(runDir, ENDING_FILE), JSON.stringify({ job, ...state }));
}

/** The line output.log gets when the Job's own words say more than an exit code. */
export function endingLine(state: ProcessState): string | undefined {
  if (state.kind === 'exited' && state.reason !== undefined) return `[shepherd] Kubernetes: ${state.reason}`;
  if (state.kind === 'signaled' && state.crashClass === 'timeout') {
    return '[shepherd] Kubernetes: the Job reached its time limit (activeDeadlineSeconds)';
  }
  return undefined;
}

interface PollContext {
  api: KubernetesApi;
  namespace: string;
  queue?: string | undefined;
  runDir: (runId: string) => string;
  followers: LogFollowers;
  targetFor: (meta: RunMeta, namespace: string, job: string) => FollowTarget;
  /** How long an ended run's log may take to be read to its end. */
  finishMs: number;
}

function podsOf(pods: readonly V1Pod[], job: string): V1Pod[] {
  return pods.filter((pod) => pod.metadata?.labels?.[LABELS.jobName] === job);
}

export function createKubernetesPoller(context: PollContext) {
  const { api, followers } = context;

  /** One run's state; starts or finishes its follower. `own`: launched by Shepherd (may delete its Job). */
  async function observe(
    meta: RunMeta,
    where: { namespace: string; job: string; own: boolean },
    job: V1Job | undefined,
    pods: V1Pod[],
  ): Promise<ProcessState> {
    const runDir = context.runDir(meta.id);
    const target = context.targetFor(meta, where.namespace, where.job);
    if (job === undefined) {
      const recorded = await readEnding(runDir, where.job);
      if (recorded === undefined) {
        return {
          kind: 'unknown',
          reason: `Kubernetes has no Job ${where.namespace}/${where.job} (deleted outside Shepherd?)`,
        };
      }
      // Seen ended by another process, which deleted it: the ending line is written once all the same.
      await followers.finish(target, endingLine(recorded), context.finishMs);
      return recorded;
    }
    const state = jobState(job, pods, where.own ? { queue: context.queue } : {});
    if (!isFinal(state)) {
      if (meta.status === 'running') followers.follow(target);
      return state;
    }
    await recordEnding(runDir, where.job, state);
    // A pod that cannot pull its image waits forever, holding its node's GPUs: the run is over, so is it.
    if (where.own && imagePullFailure(pods) !== undefined) await api.deleteJob(where.namespace, where.job);
    await followers.finish(target, endingLine(state), context.finishMs);
    return state;
  }

  async function pollOwn(runs: RunMeta[], states: Map<string, ProcessState>): Promise<void> {
    const launched = runs.filter((meta) => meta.jobId !== undefined);
    for (const meta of runs) {
      if (meta.jobId === undefined)
        states.set(meta.id, { kind: 'unknown', reason: 'run has no Kubernetes Job' });
    }
    if (launched.length === 0) return;
    const selector = `${LABELS.run} in (${[...new Set(launched.map((meta) => meta.id))].join(',')})`;
    const [jobs, pods] = await Promise.all([
      api.listJobs(context.namespace, selector),
      api.listPods(context.namespace, selector),
    ]);
    for (const meta of launched) {
      const name = meta.jobId ?? '';
      const job = jobs.find((candidate) => candidate.metadata?.name === name);
      const where = { namespace: context.namespace, job: name, own: true };
      states.set(meta.id, await observe(meta, where, job, podsOf(pods, name)));
    }
  }

  async function pollWatched(runs: RunMeta[], states: Map<string, ProcessState>): Promise<void> {
    const byNamespace = new Map<string, Array<{ meta: RunMeta; job: string }>>();
    for (const meta of runs) {
      if (meta.watch?.source !== 'kubernetes') continue;
      const group = byNamespace.get(meta.watch.namespace) ?? [];
      group.push({ meta, job: meta.watch.job });
      byNamespace.set(meta.watch.namespace, group);
    }
    for (const [namespace, group] of byNamespace) {
      const names = [...new Set(group.map((entry) => entry.job))];
      const [jobs, pods] = await Promise.all([
        Promise.all(names.map((name) => api.readJob(namespace, name))),
        api.listPods(namespace, `${LABELS.jobName} in (${names.join(',')})`),
      ]);
      for (const { meta, job: name } of group) {
        const job = jobs.find((candidate) => candidate?.metadata?.name === name);
        states.set(
          meta.id,
          await observe(meta, { namespace, job: name, own: false }, job, podsOf(pods, name)),
        );
      }
    }
  }

  return {
    observe,
    async poll(runs: RunMeta[]): Promise<Map<string, ProcessState>> {
      const states = new Map<string, ProcessState>();
      const own = runs.filter((meta) => meta.watch === undefined);
      const watched = runs.filter((meta) => meta.watch?.source === 'kubernetes');
      for (const meta of runs) {
        if (meta.watch !== undefined && meta.watch.source !== 'kubernetes') {
          states.set(meta.id, {
            kind: 'unknown',
            reason: `a ${meta.watch.source} watch is not a Kubernetes Job`,
          });
        }
      }
      await Promise.all([pollOwn(own, states), pollWatched(watched, states)]);
      return states;
    },
  };
}
