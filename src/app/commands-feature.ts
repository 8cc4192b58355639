import type { ChartRequest } from '../charts/metrics-chart.js';
import { createCommandHandler } from '../commands/command-handler.js';
import type { AlertRuleOperations } from '../monitor/alerts/alert-rule-operations.js';
import type { RunOperations } from '../runs/operations/operation-types.js';
import type { WatchOperations } from '../tools/watch-operations.js';
import type { Feature, FeatureBase } from './feature.js';

/** The plain commands (`status`, `stop`, `chart`, `watch`, alert rules…), answered without the LLM. */
export function createCommandsFeature(
  base: FeatureBase,
  dependencies: {
    operations: RunOperations;
    helpText(): Promise<string>;
    postChart(request: ChartRequest): Promise<string>;
    watching: WatchOperations;
    alertRules: AlertRuleOperations;
  },
): Feature {
  const { notifier } = base;
  const handler = createCommandHandler({
    operations: dependencies.operations,
    botName: base.config.botName,
    helpText: dependencies.helpText,
    chart: dependencies.postChart,
    ephemeral: (threadId, userId, text) => notifier.ephemeral(threadId, userId, text),
    watch: dependencies.watching.watch,
    alertRules: dependencies.alertRules,
    logger: base.logger,
  });
  return {
    actions: [],
    controlHandlers: {},
    tools: [],
    workers: [],
    commands: (threadId, text, actor) => handler.tryHandle(threadId, text, actor),
  };
}
