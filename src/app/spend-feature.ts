import { postDigest, scheduleDigest } from '../spend/digest.js';
import type { LlmBudget } from '../spend/llm-budget.js';
import { createSpendReports, type SpendReports } from '../spend/spend-report.js';
import type { SweepStore } from '../sweeps/sweep-store.js';
import type { RunsRuntime } from './create-runs.js';
import type { Feature, FeatureBase } from './feature.js';

interface SpendFeature extends Feature {
  spend: SpendReports;
}

/**
 * Spend reports (the budget approvals check against), the daily digest, and the LLM budget's commands
 * (`budget`, `budget +N`, `spend --llm`; tried before the sweeps' `spend`).
 */
export function createSpendFeature(
  base: FeatureBase,
  dependencies: { runs: RunsRuntime; sweepStore: SweepStore; llmBudget: LlmBudget },
): SpendFeature {
  const { config, notifier } = base;
  const { runs, sweepStore } = dependencies;
  const spend = createSpendReports({
    runs,
    gpuHourUsd: config.runs.gpuHourUsd,
    budgetUsdMonth: config.approvals.budgetUsdMonth,
  });
  /** The digest's "waiting for approval" lines: single runs, then sweeps (their trials are not listed). */
  const openApprovals = async (): Promise<string[]> => {
    const lines: string[] = [];
    for (const meta of await runs.list()) {
      if (meta.status !== 'pending_approval' || (await sweepStore.sweepOfRun(meta.id)) !== undefined)
        continue;
      lines.push(`${meta.name} (${meta.requester.name}, ${meta.gpus} GPU${meta.gpus === 1 ? '' : 's'})`);
    }
    for (const sweep of await sweepStore.active()) {
      if (sweep.state === 'pending_approval')
        lines.push(`sweep ${sweep.name} (${sweep.requester.name}, ${sweep.trials.length} trials)`);
    }
    return lines;
  };
  return {
    spend,
    actions: [],
    controlHandlers: {
      digest: async (job) => {
        const channel = config.digest.channel;
        if (channel === undefined) return;
        const at = job.at === undefined ? new Date() : new Date(job.at);
        await postDigest({ notifier, spend, channel, at, openApprovals });
      },
    },
    tools: [],
    commands: (threadId, text, actor) => dependencies.llmBudget.tryCommand(threadId, text, actor),
    workers: [
      async () => {
        await scheduleDigest(
          base.controlQueue,
          config.digest.channel === undefined ? undefined : config.digest.at,
        );
        return [];
      },
    ],
  };
}
