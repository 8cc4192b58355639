import type { Approval, Decision } from '../approvals/approval-store.js';
import type { ChatUser } from '../bot/chat-adapter.js';
import { definedOnly } from '../defined-only.js';
import { RunError } from '../errors.js';
import type { Incident } from '../monitor/types.js';
import type { Actor } from '../runs/lifecycle/run-service.js';
import type { RunMeta } from '../runs/records/run-types.js';
import { createSweepContext, SHEPHERD, type SweepServiceOptions } from './sweep-context.js';
import { pauseSweep, resumeSweep, stopSweep } from './sweep-controls.js';
import { createSweep } from './sweep-creation.js';
import { applySweepEdit, checkSweepEdit } from './sweep-edits.js';
import { describeValues, type SweepSpec } from './sweep-grid.js';
import { handleTrialIncident } from './sweep-incidents.js';
import { advanceSweep } from './sweep-progress.js';
import { sweepStatus } from './sweep-report.js';
import type { Sweep } from './sweep-store.js';

/**
 * Sweeps: one card for the whole grid, a canary trial alone until it logged `canarySteps` healthy steps,
 * then the rest as the cap allows, bad trials stopped early with one line each, and a leaderboard with an
 * overlay chart at the end. Every step is driven by `advanceSweep` (sweep-progress.ts), which the periodic
 * `run-schedule` control job calls for each sweep in progress (state in Redis: a restart just carries on).
 * Creation, progress, incidents, controls and the report each live in their own module; this is the facade.
 */
export function createSweepService(options: SweepServiceOptions) {
  const context = createSweepContext(options);
  const { store, runs, logger } = context;

  /** Applies the decision on the sweep's card (a control job; a retry finds the sweep already moved on). */
  async function onDecision(approval: Approval, decision: Decision): Promise<string> {
    const approved = decision.decision === 'approved';
    const by: Actor = decision.auto ? SHEPHERD : decision.user;
    // Edits first, while the sweep still waits: a retried job finds it moved on and skips them.
    const pending = (await store.get(approval.runId))?.state === 'pending_approval';
    if (approved && pending && decision.edits !== undefined)
      await applySweepEdit(context, approval.runId, decision.edits.after, by, decision.user.name);
    const sweep = await store.update(approval.runId, (current) => {
      if (current.state !== 'pending_approval') return undefined;
      return approved
        ? { ...current, state: 'canary' }
        : {
            ...current,
            state: 'rejected',
            reason: decision.decision === 'expired' ? 'approval expired' : 'rejected',
          };
    });
    if (!approved) {
      for (const trial of sweep.trials)
        await runs.reject(trial.runId, by, `sweep ${sweep.name} not approved`).catch(() => undefined);
      await store.update(sweep.id, (current) => ({
        ...current,
        trials: current.trials.map((trial) => ({ ...trial, state: 'ended', outcome: 'rejected' })),
        reportedAt: new Date().toISOString(),
      }));
      return 'no trial will run';
    }
    await advanceSweep(context, sweep.id, by);
    const canary = sweep.trials[0];
    return `the canary ${canary?.name} (${describeValues(canary?.values ?? {})}) starts alone; the other ${sweep.trials.length - 1} wait for ${sweep.canarySteps} healthy steps`;
  }

  async function find(reference: string): Promise<Sweep> {
    const sweep = await store.find(reference);
    if (sweep === undefined) throw new RunError('run_not_found', `no sweep named ${reference}`);
    return sweep;
  }

  /** The periodic step: every sweep in progress advances. */
  async function tick(): Promise<void> {
    for (const sweep of await store.active()) {
      await advanceSweep(context, sweep.id).catch((error: unknown) => {
        logger.warn({ sweep: sweep.name, err: error }, 'sweep step failed; retried next tick');
      });
    }
  }

  return {
    create: (
      spec: SweepSpec,
      threadId: string,
      actor: ChatUser,
      origin: 'agent' | 'command',
      toolCall?: { name: string; input: unknown },
    ): Promise<string> =>
      createSweep(context, { spec, threadId, actor, origin, ...definedOnly({ toolCall }) }),
    onDecision,
    checkEdit: (sweepId: string, edit: Parameters<typeof checkSweepEdit>[2]) =>
      checkSweepEdit(context, sweepId, edit),
    onIncident: (incident: Incident, meta: RunMeta): Promise<boolean> =>
      handleTrialIncident(context, incident, meta),
    tick,
    status: async (reference: string): Promise<string> => sweepStatus(context, await find(reference)),
    pause: async (reference: string, actor: ChatUser, threadId: string): Promise<string> =>
      pauseSweep(context, await find(reference), actor, threadId),
    resume: async (reference: string, actor: ChatUser, threadId: string): Promise<string> =>
      resumeSweep(context, await find(reference), actor, threadId),
    stop: async (reference: string, actor: ChatUser, threadId: string): Promise<string> =>
      stopSweep(context, await find(reference), actor, threadId),
    isSweep: async (reference: string) => (await store.find(reference)) !== undefined,
    isTrial: async (runId: string) => (await store.sweepOfRun(runId)) !== undefined,
  };
}

export type SweepService = ReturnType<typeof createSweepService>;
