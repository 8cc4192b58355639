import { definedOnly } from '../defined-only.js';
import { JOBS, schedule } from '../queue/jobs.js';
import type { Executor } from '../runs/executor.js';
import type { RunEvent } from '../runs/lifecycle/run-events.js';
import { createRunAccess, type RunAccess } from '../runs/operations/run-access.js';
import { createRunFollows, type RunFollows } from '../runs/operations/run-follows.js';
import { createFollowTools } from '../tools/follow-tools.js';
import { createRunsRuntime, type RunsRuntime } from './create-runs.js';
import type { Feature, FeatureBase } from './feature.js';

/** How often every run's process state is checked (one batched executor poll) and the GPU queue advanced. */
const RUN_REFRESH_MS = 2000;

/** Run events the thread hears about: what happened on its own (started, waiting, ended by itself). */
function postsRunEvent(event: RunEvent): boolean {
  // Evaluation starting is news (nobody asked for it just now); other status changes answered their asker.
  if (event.type === 'run-status') return event.meta.status === 'evaluating';
  if (event.type === 'run-paused') return false;
  if (event.type === 'run-ended') return event.meta.status === 'completed' || event.meta.status === 'failed';
  return true;
}

interface RunsFeatureHooks {
  /** Every run event goes to the features' `onRunEvent` hooks (the monitor watches a started run). */
  runEvent(event: RunEvent): Promise<void>;
  /** Whether a run is a sweep trial (its trials speak through the sweep). */
  inSweep(runId: string): Promise<boolean>;
}

interface RunsFeature extends Feature {
  runs: RunsRuntime;
  follows: RunFollows;
  access: RunAccess;
}

/** How long stopping waits for launch records still being written. */
const LAUNCH_RECORD_STOP_WAIT_MS = 250;

/** Runs: the runtime (store, executor, launcher), follows, who may change a run, the periodic refresh. */
export async function createRunsFeature(
  base: FeatureBase,
  hooks: RunsFeatureHooks,
  injectedExecutor?: Executor,
): Promise<RunsFeature> {
  const { config, logger, redis, prefix, notifier } = base;
  let follows: RunFollows | undefined;
  const onEvent = async (event: RunEvent) => {
    await hooks.runEvent(event);
    // A followed run's thread gets its note and turn; never blocks the transition (errors are logged).
    if (event.type === 'run-ended') void follows?.onRunEnded(event.meta);
    // A sweep's trials speak through the sweep (one line per bad trial, a leaderboard at the end).
    // A trial stopped at its time limit still says so: it waits for a person to resume or stop it.
    if (event.type !== 'run-time-limit' && (await hooks.inSweep(event.meta.id))) return;
    // What a person did (create, pause, stop, reject) is answered by the command, tool or card that did it.
    if (!postsRunEvent(event)) return;
    // Never block a run transition on a chat post: the notify queue retries on its own.
    notifier.post(event.meta.threadId, event.message).catch((error: unknown) => {
      logger.warn({ runId: event.meta.id, err: error }, 'could not post a run event');
    });
  };
  // Backends are built from config (SHEPHERD_BACKENDS) in createRunsRuntime; tests inject theirs.
  const executor = injectedExecutor;
  const runs = await createRunsRuntime({
    config,
    redis,
    logger: logger.child({ component: 'runs' }),
    environment: base.runEnvironment,
    onEvent,
    ...definedOnly({ executor }),
  });
  const runFollows = createRunFollows({
    redis,
    prefix,
    store: runs.store,
    notifier,
    maxTurns: config.session.maxFollowTurns,
    pushEvent: base.pushEvent,
    logger: logger.child({ component: 'follows' }),
  });
  follows = runFollows;
  const access = createRunAccess({
    approvers: config.approvals.approvers,
    audit: runs.audit,
    logger: logger.child({ component: 'access' }),
  });
  return {
    runs,
    follows: runFollows,
    access,
    actions: [],
    close: async () => {
      // Records nearly written are finished; a slow environment probe is killed, not waited for.
      await runs.closeLaunchRecords(LAUNCH_RECORD_STOP_WAIT_MS);
      await runs.executor.close?.();
    },
    controlHandlers: {
      'run-schedule': async () => {
        await runs.service.refresh();
      },
    },
    tools: createFollowTools({
      follows: runFollows,
      findRun: (run) => runs.find(run),
      maxTurns: config.session.maxFollowTurns,
    }),
    workers: [
      async () => {
        await runs.service.reconcile();
        await schedule(base.controlQueue, 'runs-refresh', { every: RUN_REFRESH_MS }, JOBS.runSchedule, {
          v: 1,
          kind: 'run-schedule',
          reason: 'periodic',
        });
        return [];
      },
    ],
  };
}
