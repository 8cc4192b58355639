import { APPROVAL_ACTIONS } from '../approvals/approval-card.js';
import { createEditFormProvider, type EditChecks } from '../approvals/approval-edits.js';
import { createRejectFormProvider } from '../approvals/approval-forms.js';
import { type ApprovalService, createApprovalService } from '../approvals/approval-service.js';
import { type Approval, createApprovalStore, type Decision } from '../approvals/approval-store.js';
import { createRunCardLinks } from '../approvals/run-card-links.js';
import type { ResearchStore } from '../research/research-store.js';
import type { SpendReports } from '../spend/spend-report.js';
import type { RunsRuntime } from './create-runs.js';
import type { Feature, FeatureBase } from './feature.js';

interface ApprovalsFeature extends Feature {
  approvals: ApprovalService;
  /** The monitor found a run's first tracker links: they go onto its started (approval) card, once. */
  showTrackerLinks: ReturnType<typeof createRunCardLinks>['show'];
}

/** Approval cards: the approve / reject / edit buttons and the control job that applies a decision. */
export function createApprovalsFeature(
  base: FeatureBase,
  dependencies: {
    runs: RunsRuntime;
    spend: SpendReports;
    /** The sources of the thread's last research, for the "based on" line of agent script cards. */
    research: ResearchStore;
    /** Applies a decision on a whole sweep (the sweeps feature's hook). */
    onSweepDecision(approval: Approval, decision: Decision): Promise<string>;
    /** Checks a sweep card's Edit (the sweeps feature's hook). */
    checkSweepEdit: NonNullable<EditChecks['checkSweepEdit']>;
    /** Compiles an edited script (the operations feature's hook). */
    checkSyntax(source: string): Promise<string | undefined>;
  },
): ApprovalsFeature {
  const { config, logger, redis, prefix, notifier } = base;
  const { spend } = dependencies;
  const budgetUsdMonth = config.approvals.budgetUsdMonth;
  const store = createApprovalStore({
    redis,
    prefix,
    notifier,
    onInvalid: (error) => logger.warn({ key: error.key, err: error }, 'unreadable approval record'),
  });
  const policy = {
    approvers: config.approvals.approvers,
    selfApproval: config.approvals.selfApproval,
    autoApproveUsd: config.approvals.autoApproveUsd,
  };
  const approvals = createApprovalService({
    store,
    runs: dependencies.runs.service,
    notifier,
    controlQueue: base.controlQueue,
    policy,
    gpuHourUsd: config.runs.gpuHourUsd,
    ttlMs: config.approvals.ttlHours * 3600 * 1000,
    logger: logger.child({ component: 'approvals' }),
    pushEvent: base.pushEvent,
    ...(budgetUsdMonth === undefined
      ? {}
      : { budget: { limitUsd: budgetUsdMonth, spentUsd: (at: Date) => spend.spentThisMonth(at) } }),
    onSweepDecision: dependencies.onSweepDecision,
    checkSweepEdit: dependencies.checkSweepEdit,
    basedOn: async (threadId) =>
      (await dependencies.research.lastSources(threadId)).map((source) =>
        source.version === undefined ? source.url : `${source.url} (${source.version})`,
      ),
    createSchedule: (runId, cron) => dependencies.runs.schedules.create(runId, cron),
    checkSchedule: async (runId, cron) => (await dependencies.runs.schedules.prepare(runId, cron)).cron,
    readScript: (runId) => dependencies.runs.readScript(runId),
    checkSyntax: dependencies.checkSyntax,
  });
  const runCardLinks = createRunCardLinks({ redis, prefix, store, notifier, logger });
  const now = () => new Date();
  return {
    approvals,
    showTrackerLinks: runCardLinks.show,
    actions: approvalActions(approvals, {
      store,
      policy,
      now,
      readScript: (runId) => dependencies.runs.readScript(runId),
    }),
    controlHandlers: {
      'approval-decision': async (job) => {
        await approvals.apply(job);
        await runCardLinks.settled(job.approvalId);
      },
    },
    tools: [],
    workers: [],
  };
}

/** The three buttons of an approval card; Reject and Edit open a form first. */
function approvalActions(
  approvals: ApprovalService,
  forms: Parameters<typeof createEditFormProvider>[0],
): Feature['actions'] {
  return [
    {
      verb: APPROVAL_ACTIONS.approve,
      handler: (action, id) => approvals.onAction(action, 'approved', id),
    },
    {
      verb: APPROVAL_ACTIONS.reject,
      handler: (action, id) => approvals.onAction(action, 'rejected', id),
      form: createRejectFormProvider({ store: forms.store, policy: forms.policy, now: forms.now }),
    },
    {
      verb: APPROVAL_ACTIONS.edit,
      handler: (action, id) => approvals.onEdit(action, id),
      form: createEditFormProvider({
        store: forms.store,
        policy: forms.policy,
        now: forms.now,
        readScript: forms.readScript,
      }),
    },
  ];
}
