import { APPROVAL_ACTIONS } from '../approvals/approval-card.js';
import { createRejectFormProvider } from '../approvals/approval-forms.js';
import { type ApprovalService, createApprovalService } from '../approvals/approval-service.js';
import { type Approval, createApprovalStore, type Decision } from '../approvals/approval-store.js';
import { createRunCardLinks } from '../approvals/run-card-links.js';
import type { RunsRuntime } from '../create-runs.js';
import type { ResearchStore } from '../research/research-store.js';
import type { SpendReports } from '../spend/spend-report.js';
import type { Feature, FeatureBase } from './feature.js';

interface ApprovalsFeature extends Feature {
  approvals: ApprovalService;
  /** The monitor found a run's first tracker links: they go onto its started (approval) card, once. */
  showTrackerLinks: ReturnType<typeof createRunCardLinks>['show'];
}

/** Approval cards: the approve / reject buttons and the control job that applies a decision. */
export function createApprovalsFeature(
  base: FeatureBase,
  dependencies: {
    runs: RunsRuntime;
    spend: SpendReports;
    /** The sources of the thread's last research, for the "based on" line of agent script cards. */
    research: ResearchStore;
    /** Applies a decision on a whole sweep (bound once the sweeps exist). */
    onSweepDecision(approval: Approval, decision: Decision): Promise<string>;
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
    basedOn: async (threadId) =>
      (await dependencies.research.lastSources(threadId)).map((source) =>
        source.version === undefined ? source.url : `${source.url} (${source.version})`,
      ),
    createSchedule: (runId, cron) => dependencies.runs.schedules.create(runId, cron),
  });
  const runCardLinks = createRunCardLinks({ redis, prefix, store, notifier, logger });
  return {
    approvals,
    showTrackerLinks: runCardLinks.show,
    actions: [
      {
        verb: APPROVAL_ACTIONS.approve,
        handler: (action, id) => approvals.onAction(action, 'approved', id),
      },
      {
        verb: APPROVAL_ACTIONS.reject,
        handler: (action, id) => approvals.onAction(action, 'rejected', id),
        form: createRejectFormProvider({ store, policy, now: () => new Date() }),
      },
    ],
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
