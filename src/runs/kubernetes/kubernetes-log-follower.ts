import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../../logger.js';
import type { KubernetesApi } from './kubernetes-api.js';
import { LABELS } from './kubernetes-job-manifest.js';
import { createLogLease, type LogLease } from './kubernetes-log-state.js';
import { type StreamTarget, streamPodLog } from './kubernetes-log-stream.js';
import { containerStarted, containerTerminated, pickLogPod } from './kubernetes-states.js';

/**
 * Follows each running run's pod log into its output.log. One session per run in this process, and one
 * follower per run across processes (the lease in the run directory): the bot and the workers all poll,
 * and whichever holds the lease streams. A session finds the Job's pod, streams its log with `follow`,
 * reconnects from the cursor when the stream breaks while the container runs, and ends when the
 * container has ended (a resumed Job's new pod gets a new session from the next launch or poll).
 */

export interface FollowTarget extends StreamTarget {
  runId: string;
  runDir: string;
  job: string;
}

interface Session {
  target: FollowTarget;
  stopping: boolean;
  /** The run is over: stop once the log is read, rather than wait for a pod. */
  finishing: boolean;
  wake: () => void;
  abort?: { abort(): void };
  done: Promise<void>;
}

interface LogFollowersOptions {
  api: Pick<KubernetesApi, 'listPods' | 'streamLog'>;
  logger: Logger;
  /** This follower's name in the lease (unique per executor instance). */
  holder: string;
  /** A lease not renewed for this long is taken over (its holder died). */
  leaseMs: number;
  now: () => number;
  idleReconnectMs: number;
  /** First wait while the pod is not there yet; doubles up to 10 s. */
  retryMs: number;
}

const MAX_RETRY_MS = 10_000;

export function createLogFollowers(options: LogFollowersOptions) {
  const { api, logger } = options;
  const sessions = new Map<string, Session>();
  const finished = new Set<string>();

  const leaseFor = (target: FollowTarget): LogLease =>
    createLogLease({
      runDir: target.runDir,
      holder: options.holder,
      leaseMs: options.leaseMs,
      now: options.now,
      confirmMs: Math.min(200, options.leaseMs / 10),
    });

  async function logPod(target: FollowTarget): Promise<V1Pod | undefined> {
    return pickLogPod(await api.listPods(target.namespace, `${LABELS.jobName}=${target.job}`));
  }

  function pause(session: Session, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      session.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /** Hold the lease (renewed) while `work` runs; false when another follower holds it. */
  async function withLease(target: FollowTarget, work: (lease: LogLease) => Promise<void>): Promise<boolean> {
    const lease = leaseFor(target);
    if (!(await lease.acquire())) return false;
    const renewal = setInterval(() => {
      lease.renew().catch((error: unknown) => logger.warn({ err: error }, 'log lease renewal failed'));
    }, options.leaseMs / 3);
    try {
      await work(lease);
    } finally {
      clearInterval(renewal);
      await lease.release().catch(() => undefined);
    }
    return true;
  }

  function streamOptions(session: Session, lease: LogLease) {
    return {
      api,
      lease,
      logger,
      idleReconnectMs: options.idleReconnectMs,
      onOpen: (stream: { abort(): void }) => {
        session.abort = stream;
        if (session.stopping) stream.abort();
      },
    };
  }

  /** Stream the pod's log until its container has ended (or the session is stopped). */
  async function follow(session: Session, lease: LogLease): Promise<void> {
    const { target } = session;
    let wait = options.retryMs;
    while (!session.stopping) {
      const pod = await logPod(target);
      if (pod === undefined || !containerStarted(pod)) {
        if (session.finishing || (pod !== undefined && containerTerminated(pod))) return;
        await pause(session, wait);
        wait = Math.min(wait * 2, MAX_RETRY_MS);
        continue;
      }
      const live = !containerTerminated(pod);
      const outcome = await streamPodLog(streamOptions(session, lease), target, pod, {
        follow: live,
        flushPartial: !live,
      });
      if (outcome.lost || !live) return;
      const after = await logPod(target);
      // The pod went away (a pause deletes it): this launch's log is read. Another pod: follow it.
      if (after === undefined) return;
      if (after.metadata?.uid !== pod.metadata?.uid) continue;
      if (containerTerminated(after)) {
        // The stream ended with the container: one plain read writes a last line without a newline.
        await streamPodLog(streamOptions(session, lease), target, after, {
          follow: false,
          flushPartial: true,
        });
        return;
      }
      if (outcome.lines > 0) wait = options.retryMs;
      else {
        await pause(session, wait);
        wait = Math.min(wait * 2, MAX_RETRY_MS);
      }
    }
  }

  function start(target: FollowTarget, after: Promise<void>): void {
    const session = newSession(target);
    session.done = after
      .then(() => withLease(target, (lease) => follow(session, lease)))
      .then(() => undefined)
      .catch((error: unknown) =>
        logger.warn({ err: error, runId: target.runId }, 'following the pod log failed'),
      )
      .finally(() => {
        if (sessions.get(target.runId) === session) sessions.delete(target.runId);
      });
    sessions.set(target.runId, session);
  }

  function newSession(target: FollowTarget): Session {
    return { target, stopping: false, finishing: false, wake: () => undefined, done: Promise.resolve() };
  }

  function stop(session: Session): void {
    session.stopping = true;
    session.abort?.abort();
    session.wake();
  }

  async function settle(runId: string, timeoutMs: number): Promise<void> {
    const session = sessions.get(runId);
    if (session === undefined) return;
    session.finishing = true;
    session.wake();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    await Promise.race([session.done, timedOut]);
    clearTimeout(timer);
    stop(session);
    await session.done;
  }

  /** The run has ended: read what is left of its log, then write `endingLine` once. */
  /** Read what is left of the pod's log, then the ending line (once per launch). */
  async function drain(target: FollowTarget, endingLine: string | undefined, lease: LogLease): Promise<void> {
    const pod = await logPod(target);
    if (pod !== undefined && containerStarted(pod)) {
      const read = { follow: false, flushPartial: true };
      await streamPodLog(streamOptions(newSession(target), lease), target, pod, read);
    }
    const state = await lease.held();
    if (endingLine !== undefined && state !== undefined && state.ended !== target.launchKey) {
      await lease.append([endingLine], {
        launchKey: target.launchKey,
        header: target.header,
        ended: target.launchKey,
      });
    }
  }

  /**
   * The run has ended: read what is left of its log, then write `endingLine` once. When another follower
   * holds the lease, wait (bounded) for it to finish its stream and release it, or for its lease to go
   * stale (its process died).
   */
  async function finish(
    target: FollowTarget,
    endingLine: string | undefined,
    timeoutMs: number,
  ): Promise<void> {
    if (finished.has(target.launchKey)) return;
    const deadline = Date.now() + timeoutMs;
    await settle(target.runId, timeoutMs);
    for (;;) {
      if (await withLease(target, (lease) => drain(target, endingLine, lease))) {
        finished.add(target.launchKey);
        return;
      }
      if (Date.now() >= deadline) return;
      await new Promise((resolve) => setTimeout(resolve, Math.min(options.leaseMs / 4, 1_000)));
    }
  }

  return {
    /** Follow the run's log (idempotent: an existing session of the same launch is only woken up). */
    follow(target: FollowTarget): void {
      if (finished.has(target.launchKey)) return;
      const existing = sessions.get(target.runId);
      if (existing !== undefined && existing.target.launchKey === target.launchKey && !existing.stopping) {
        existing.wake();
        return;
      }
      if (existing !== undefined) stop(existing);
      start(target, existing?.done ?? Promise.resolve());
    },
    /** The run's pods are gone or ending: let its session read what is left (bounded), then stop it. */
    settle,
    finish,
    async close(): Promise<void> {
      const all = [...sessions.values()];
      for (const session of all) stop(session);
      await Promise.all(all.map((session) => session.done));
    },
  };
}

export type LogFollowers = ReturnType<typeof createLogFollowers>;
