import type { Queue } from 'bullmq';
import type { ActionOutcome, ChatUser, InboundAction } from '../bot/chat-adapter.js';
import type { Notifier } from '../bot/notifier.js';
import { definedOnly } from '../defined-only.js';
import { errorMessage, RunError } from '../errors.js';
import type { Logger } from '../logger.js';
import { type ControlJob, enqueue, JOBS } from '../queue/jobs.js';
import { assertScriptSize } from '../runs/launch/workspace-script.js';
import type { RunService } from '../runs/lifecycle/run-service.js';
import type { RunMeta } from '../runs/records/run-types.js';
import { estimateRunCostUsd } from '../runs/run-cost.js';
import { approvalCard, formatUsd, resolvedApprovalCard } from './approval-card.js';
import { checkEdit, type EditChecks, editChangeLines, isEditable } from './approval-edits.js';
import { createApprovalEffects } from './approval-effects.js';
import { rejectReasonOf } from './approval-forms.js';
import { type ApprovalPolicy, checkDecision, isAutoApproved } from './approval-policy.js';
import { researchSourcesFor } from './approval-sources.js';
import type { Approval, ApprovalStore, Decision } from './approval-store.js';

/**
 * Approvals as buttons. A request posts a card; a click is checked against the policy and recorded
 * atomically (first decision wins) in the action handler, which answers at once; the decision is then
 * applied by a control job, so the click never waits on a process launch.
 */

interface ApprovalRequest {
  kind: Approval['kind'];
  meta: RunMeta;
  requester: ChatUser;
  /** Diff (script change) or the first lines of the script (start / resume). */
  scriptExcerpt: string;
  proposedScript?: string;
  /** `schedule`: the cron fields of the recurring job. */
  schedule?: string;
  reason?: string;
  origin: Approval['origin'];
  toolCall?: { name: string; input: unknown };
  /** The CPU pre-flight's line ("pre-flight: 5 steps in 8 s, loss 2.31 → 2.05" or the failure). */
  preflight?: string;
  /** The agent's memory estimate for this launch, when it made one. */
  memory?: string;
  /** GPUs asked for (resume and start use the run's). */
  gpus?: number;
  /** Shown on the card: the exact command line, the environment, launch warnings. */
  command?: string;
  environment?: string;
  warnings?: string[];
  /** A fork's configuration changes against its parent. */
  changes?: string[];
  /** The thread's last dataset format check. */
  datasetCheck?: string;
}

interface ApprovalServiceOptions {
  store: ApprovalStore;
  runs: RunService;
  notifier: Notifier;
  controlQueue: Queue;
  policy: ApprovalPolicy;
  gpuHourUsd: number;
  ttlMs: number;
  logger: Logger;
  /** Tells the thread's agent how its pending tool call ended (starts a turn). */
  pushEvent(threadId: string, eventId: string, text: string): Promise<void>;
  now?: () => Date;
  /** `SHEPHERD_BUDGET_USD_MONTH`: the limit and what this month's runs have spent so far. */
  budget?: { limitUsd: number; spentUsd(now: Date): Promise<number> };
  /** Applies a decision on a whole sweep (set once the sweep service exists); returns the outcome. */
  onSweepDecision?: (approval: Approval, decision: Decision) => Promise<string>;
  /** Checks a sweep card's Edit (bound once the sweep service exists). */
  checkSweepEdit?: EditChecks['checkSweepEdit'];
  /**
   * The sources of the thread's last research (within the hour): an agent's start or script-change card
   * shows them as "based on", so approvers see what the script was written from.
   */
  basedOn?: (threadId: string) => Promise<string[]>;
  /** Creates an approved recurring job (HF Jobs); absent where no backend schedules jobs. */
  createSchedule?: (runId: string, schedule: string) => Promise<string>;
  /** Checks a recurring job card's edited cron as `schedule` does (absent: no schedules here). */
  checkSchedule?: EditChecks['checkSchedule'];
  /** The run's current script (what a start card's Edit form opens with). */
  readScript(runId: string): Promise<string>;
  /** Compiles an edited script (a syntax error with its line, or undefined). */
  checkSyntax?: (source: string) => Promise<string | undefined>;
}

/** A sweep's one card: `gpus`/`maxHours` per trial, the cost of all trials together. */
interface SweepApprovalRequest {
  sweepId: string;
  name: string;
  threadId: string;
  requester: ChatUser;
  trials: number;
  gpus: number;
  maxHours: number;
  costUsd: number;
  /** Each trial's values, one line each. */
  summary: string;
  scriptExcerpt: string;
  origin: Approval['origin'];
  toolCall?: { name: string; input: unknown };
  /** Where the trials run (the backend and what it uses). */
  backend?: string;
}

export interface ApprovalService {
  /** Posts the approval card (or applies an auto-approval) and returns the stored approval. */
  request(request: ApprovalRequest): Promise<{ approval: Approval; autoApproved: boolean }>;
  requestSweep(request: SweepApprovalRequest): Promise<{ approval: Approval; autoApproved: boolean }>;
  /** The button handler for `APPROVAL_ACTIONS.approve` and `.reject` (`approve:<id>`, `reject:<id>`). */
  onAction(
    action: InboundAction,
    decision: 'approved' | 'rejected',
    approvalId: string,
  ): Promise<ActionOutcome>;
  /** The Edit form's submission (`edit:<id>` with values): approve with the checked edits. */
  onEdit(action: InboundAction, approvalId: string): Promise<ActionOutcome>;
  /** The control job: applies a recorded decision once (a retried job reuses the stored outcome). */
  apply(job: Extract<ControlJob, { kind: 'approval-decision' }>): Promise<void>;
}

export function createApprovalService(options: ApprovalServiceOptions): ApprovalService {
  const { store, runs, notifier, logger } = options;
  const now = options.now ?? (() => new Date());
  const applyToRun = createApprovalEffects(options);
  const editChecks: EditChecks = {
    readScript: options.readScript,
    checkRevision: (runId, revision) => runs.checkRevision(runId, revision),
    assertScriptSize,
    checkSweepEdit: options.checkSweepEdit,
    checkSchedule: options.checkSchedule,
    ...definedOnly({ checkSyntax: options.checkSyntax }),
  };

  async function enqueueDecision(approval: Approval, decision: Decision, delayMs = 0): Promise<void> {
    const job = {
      v: 1 as const,
      kind: 'approval-decision' as const,
      approvalId: approval.id,
      decision: decision.decision,
      user: decision.user,
      threadId: approval.threadId,
      auto: decision.auto,
    };
    await enqueue(options.controlQueue, JOBS.approvalDecision, job, {
      // One application per approval, whatever the number of clicks or retries.
      jobId: `${decision.decision === 'expired' && delayMs > 0 ? 'expire' : 'decision'}-${approval.id}`,
      delay: delayMs,
    });
  }

  async function budgetNow(): Promise<{ limitUsd: number; leftUsd: number } | undefined> {
    if (options.budget === undefined) return undefined;
    const spent = await options.budget.spentUsd(now());
    const leftUsd = Math.max(0, Math.round((options.budget.limitUsd - spent) * 100) / 100);
    return { limitUsd: options.budget.limitUsd, leftUsd };
  }

  async function requestSweep(input: SweepApprovalRequest) {
    const budget = await budgetNow();
    const approval = await store.create(
      {
        kind: 'sweep',
        runId: input.sweepId,
        runName: input.name,
        threadId: input.threadId,
        requester: input.requester,
        gpus: input.gpus,
        maxHours: input.maxHours,
        costUsd: input.costUsd,
        trials: input.trials,
        reason: input.summary,
        scriptExcerpt: input.scriptExcerpt,
        origin: input.origin,
        ...definedOnly({ budget, toolCall: input.toolCall, backend: input.backend }),
      },
      options.ttlMs,
      now(),
    );
    return submit(approval);
  }

  async function request(input: ApprovalRequest) {
    const gpus = input.gpus ?? input.meta.gpus;
    const costUsd = estimateRunCostUsd({ ...input.meta, gpus }, options.gpuHourUsd);
    const warnings = [...(input.meta.placementNotes ?? []), ...(input.warnings ?? [])];
    const budget = await budgetNow();
    const basedOn = await researchSourcesFor(input, options.basedOn, logger);
    const approval = await store.create(
      {
        kind: input.kind,
        runId: input.meta.id,
        runName: input.meta.name,
        threadId: input.meta.threadId,
        requester: input.requester,
        gpus,
        maxHours: input.meta.maxHours,
        costUsd,
        scriptExcerpt: input.scriptExcerpt,
        origin: input.origin,
        ...definedOnly({
          proposedScript: input.proposedScript,
          reason: input.reason,
          preflight: input.preflight,
          memory: input.memory,
          command: input.command,
          environment: input.environment,
          backend: input.meta.placement,
          schedule: input.schedule,
          changes: input.changes,
          datasetCheck: input.datasetCheck,
        }),
        ...(warnings.length === 0 ? {} : { warnings }),
        ...definedOnly({ toolCall: input.toolCall, budget }),
        ...(basedOn.length === 0 ? {} : { basedOn }),
      },
      options.ttlMs,
      now(),
    );
    return submit(approval);
  }

  /** Auto-approves (card posted resolved, as the audit trail) or posts the card and arms its expiry. */
  async function submit(approval: Approval) {
    const costUsd = approval.costUsd;
    const autoApproved = isAutoApproved(options.policy, costUsd, approval.budget);
    if (autoApproved) {
      const decision: Decision = {
        decision: 'approved',
        user: { id: 'shepherd', name: 'auto-approval' },
        at: now().toISOString(),
        auto: true,
        note: `est. ${formatUsd(costUsd)} ≤ ${formatUsd(options.policy.autoApproveUsd)}`,
      };
      await store.decide(approval.id, decision);
      // The card still appears, already resolved, as the audit trail.
      const posted = await notifier.postCard(approval.threadId, resolvedApprovalCard(approval, decision));
      await store.setCardMessage(approval.id, posted.messageId);
      await enqueueDecision(approval, decision);
      return { approval: { ...approval, cardMessageId: posted.messageId }, autoApproved };
    }
    const posted = await notifier.postCard(approval.threadId, approvalCard(approval));
    await store.setCardMessage(approval.id, posted.messageId);
    await enqueueDecision(
      approval,
      { decision: 'expired', user: { id: 'shepherd', name: 'shepherd' }, at: approval.expiresAt, auto: true },
      options.ttlMs,
    );
    return { approval: { ...approval, cardMessageId: posted.messageId }, autoApproved };
  }

  async function onAction(action: InboundAction, decision: 'approved' | 'rejected', approvalId: string) {
    return store.click(approvalId, {
      unknown: 'this approval no longer exists',
      choose: async (approval, existing) => {
        if (existing !== undefined) return { status: 'resolved', message: describeExisting(existing) };
        if (now().getTime() >= Date.parse(approval.expiresAt)) {
          return { status: 'resolved', message: 'this approval has expired; ask again' };
        }
        const verdict = checkDecision(options.policy, approval, action.user, decision);
        if (!verdict.allowed) return { status: 'forbidden', message: verdict.reason };
        // A reject form's reason becomes the decision's note: on the card, in the audit, to the agent.
        const note = decision === 'rejected' ? rejectReasonOf(action) : undefined;
        const at = now().toISOString();
        return { decision: { decision, user: action.user, at, auto: false, ...definedOnly({ note }) } };
      },
      lost: describeExisting,
      enqueue: (approval, recorded) => enqueueDecision(approval, recorded),
      accepted: (recorded) => (recorded.decision === 'approved' ? 'approved' : 'rejected'),
    });
  }

  /** An Edit form's submission: approves with the edits, once they pass the same checks as a new run. */
  async function onEdit(action: InboundAction, approvalId: string) {
    return store.click(approvalId, {
      unknown: 'this approval no longer exists',
      choose: async (approval, existing) => {
        if (existing !== undefined) return { status: 'resolved', message: describeExisting(existing) };
        if (now().getTime() >= Date.parse(approval.expiresAt)) {
          return { status: 'resolved', message: 'this approval has expired; ask again' };
        }
        const verdict = checkDecision(options.policy, approval, action.user, 'approved');
        if (!verdict.allowed) return { status: 'forbidden', message: verdict.reason };
        if (!isEditable(approval)) return { status: 'invalid', message: 'this card cannot be edited' };
        if (action.values === undefined)
          return { status: 'invalid', message: 'Edit opens a form: change the values there, then submit it' };
        const checked = await checkEdit(approval, action.values, editChecks);
        if ('error' in checked) return { status: 'invalid', message: `not applied: ${checked.error}` };
        const at = now().toISOString();
        return {
          decision: { decision: 'approved', user: action.user, at, auto: false, ...definedOnly(checked) },
        };
      },
      lost: describeExisting,
      enqueue: (approval, recorded) => enqueueDecision(approval, recorded),
      accepted: (recorded) => (recorded.edits === undefined ? 'approved' : 'approved with edits'),
    });
  }

  async function apply(job: Extract<ControlJob, { kind: 'approval-decision' }>): Promise<void> {
    const approval = await store.get(job.approvalId);
    if (approval === undefined) {
      logger.warn({ approvalId: job.approvalId }, 'decision for an unknown approval; ignored');
      return;
    }
    if (job.decision === 'expired') {
      // The expiry job only wins when nobody decided in time.
      const expiry: Decision = { decision: 'expired', user: job.user, at: now().toISOString(), auto: true };
      if (!(await store.decide(approval.id, expiry)).won) return;
    }
    await store.settle(approval.id, {
      effect: applyDecision,
      resolvedCard: (subject, decision) => resolvedApprovalCard(subject, decision),
      after: tellThread,
    });
  }

  /** Applies a decision to its run or sweep; never throws, the outcome line says what happened. */
  async function applyDecision(approval: Approval, decision: Decision): Promise<string> {
    try {
      return await applyToRun(approval, decision);
    } catch (error) {
      if (error instanceof RunError && error.code === 'illegal_transition') {
        // The run moved on meanwhile (or an attempt crashed after applying it, before recording so).
        logger.info({ approvalId: approval.id, err: error }, 'approval already applied');
        return `nothing to do: ${error.message}`;
      }
      await notifier.post(
        approval.threadId,
        `⚠️ ${approval.runName}: the approved action failed — ${errorMessage(error)}`,
      );
      return `could not be applied: ${errorMessage(error)}`;
    }
  }

  /** The thread hears of a decision that was not an approval; the agent of its own pending tool call. */
  async function tellThread(approval: Approval, decision: Decision, outcome: string): Promise<void> {
    if (decision.decision !== 'approved') {
      const what =
        decision.decision === 'expired'
          ? 'expired without a decision'
          : `was rejected by ${decision.user.name}`;
      await notifier.post(
        approval.threadId,
        `${approval.runName}: ${approvalLabel(approval)} ${what}${outcome ? ` — ${outcome}` : ''}.`,
      );
    }
    if (approval.origin === 'agent') {
      await options.pushEvent(
        approval.threadId,
        `${approval.id}-${decision.decision}`,
        `[approval ${approval.id}] ${approval.toolCall?.name ?? approvalLabel(approval)} for ${approval.runName}: ${
          decision.decision === 'approved'
            ? `approved by ${decision.user.name}${
                decision.edits === undefined
                  ? ''
                  : ` with edits (${editChangeLines(decision.edits).join('; ')})`
              }; ${outcome}`
            : decision.decision === 'rejected'
              ? `rejected by ${decision.user.name}${decision.note ? `: ${decision.note}` : ''}`
              : 'expired without a decision'
        }`,
      );
    }
  }

  return { request, requestSweep, onAction, onEdit, apply };
}

function approvalLabel(approval: Approval): string {
  return approval.kind === 'start'
    ? 'the launch'
    : approval.kind === 'resume'
      ? 'resuming'
      : approval.kind === 'sweep'
        ? 'the sweep'
        : approval.kind === 'schedule'
          ? 'the recurring job'
          : 'the script change';
}

function describeExisting(decision: Decision): string {
  switch (decision.decision) {
    case 'approved':
      return `already approved by ${decision.user.name}`;
    case 'rejected':
      return `already rejected by ${decision.user.name}`;
    case 'expired':
      return 'this approval has expired';
  }
}
