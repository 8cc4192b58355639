import type { ApprovalService } from '../approvals/approval-service.js';
import type { RunAccess } from '../runs/operations/run-access.js';
import type { SpendReports } from '../spend/spend-report.js';
import { type CompareRuns, createRunComparison } from '../sweeps/compare-runs.js';
import { createSweepCommands } from '../sweeps/sweep-commands.js';
import { createSweepService, type SweepService } from '../sweeps/sweep-service.js';
import type { SweepStore } from '../sweeps/sweep-store.js';
import { createSweepTools } from '../sweeps/sweep-tools.js';
import type { ScriptChecks } from '../tools/script-checks.js';
import type { RunsRuntime } from './create-runs.js';
import type { Feature, FeatureBase } from './feature.js';

interface SweepsFeature extends Feature {
  sweeps: SweepService;
  compare: CompareRuns;
}

/** Sweeps (one approval card for all trials), run comparisons, spend reports as commands. */
export function createSweepsFeature(
  base: FeatureBase,
  dependencies: {
    runs: RunsRuntime;
    store: SweepStore;
    approvals: ApprovalService;
    scriptChecks: ScriptChecks;
    access: RunAccess;
    spend: SpendReports;
  },
): SweepsFeature {
  const { config, logger, notifier } = base;
  const { runs } = dependencies;
  const sweeps = createSweepService({
    store: dependencies.store,
    runs: runs.service,
    queries: runs,
    approvals: dependencies.approvals,
    notifier,
    workspace: config.workspace,
    gpuHourUsd: config.runs.gpuHourUsd,
    defaultMaxHours: config.runs.defaultMaxHours,
    maxHours: config.runs.maxHours,
    gpuCapacity: runs.executor.allocatesGpus ? undefined : runs.allocator.inventory.length,
    quickchartUrl: config.monitor.quickchartUrl,
    logger: logger.child({ component: 'sweeps' }),
    checkSyntax: dependencies.scriptChecks.checkSyntax,
    access: dependencies.access,
  });
  const compare = createRunComparison({
    queries: runs,
    notifier,
    quickchartUrl: config.monitor.quickchartUrl,
  });
  const sweepCommands = createSweepCommands({
    sweeps,
    compare,
    spend: dependencies.spend,
    botName: config.botName,
    logger,
  });
  return {
    sweeps,
    compare,
    hooks: { sweepCards: { decide: sweeps.onDecision, checkEdit: sweeps.checkEdit } },
    actions: [],
    // After the runs' refresh (the runs feature's handler of the same kind runs first).
    controlHandlers: { 'run-schedule': () => sweeps.tick() },
    tools: createSweepTools(sweeps, compare),
    workers: [],
    commands: (threadId, text, actor) => sweepCommands.tryHandle(threadId, text, actor),
  };
}
