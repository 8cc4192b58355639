import type { ApprovalService } from '../approvals/approval-service.js';
import type { Notifier } from '../bot/notifier.js';
import type { Logger } from '../logger.js';
import type { Actor, RunService } from '../runs/lifecycle/run-service.js';
import type { RunAccess } from '../runs/operations/run-access.js';
import type { RunMeta } from '../runs/records/run-types.js';
import type { RunQueries } from '../runs/run-queries.js';
import type { Sweep, SweepStore, Trial } from './sweep-store.js';

export interface SweepServiceOptions {
  store: SweepStore;
  runs: RunService;
  queries: RunQueries;
  approvals: ApprovalService;
  notifier: Notifier;
  workspace: string;
  gpuHourUsd: number;
  defaultMaxHours: number;
  maxHours: number;
  /** GPUs this host can hand out; undefined when a cluster allocates them (no default cap then). */
  gpuCapacity: number | undefined;
  quickchartUrl: string;
  logger: Logger;
  /** `py_compile` before the card (as for every run): resolves an error text, or undefined. */
  checkSyntax?: (source: string) => Promise<string | undefined>;
  /** Who may change a run: a sweep is changed by whoever may change its trials (checked on the canary). */
  access?: RunAccess;
}

/** What the sweep modules share: the service's options plus the two lookups every step uses. */
export interface SweepContext extends SweepServiceOptions {
  /** One line in the sweep's thread; a failed post is logged, never thrown. */
  say(sweep: Sweep, text: string): Promise<unknown>;
  /** The trial's run, or undefined when it is gone. */
  metaOf(trial: Trial): Promise<RunMeta | undefined>;
}

/** The actor for what the sweep does on its own (early stops, starting trials after the canary). */
export const SHEPHERD: Actor = 'system';

export function createSweepContext(options: SweepServiceOptions): SweepContext {
  return {
    ...options,
    say: (sweep, text) =>
      options.notifier.post(sweep.threadId, text).catch((error: unknown) => {
        options.logger.warn({ sweep: sweep.name, err: error }, 'could not post a sweep line');
      }),
    metaOf: (trial) => options.queries.find(trial.runId).catch(() => undefined),
  };
}
