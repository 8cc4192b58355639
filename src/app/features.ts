import type { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { LlmProvider } from '../agent/llm-provider.js';
import type { ApprovalService } from '../approvals/approval-service.js';
import type { IdempotentNotifier } from '../bot/notifier.js';
import type { Config } from '../config/config.js';
import { definedOnly } from '../defined-only.js';
import type { Logger } from '../logger.js';
import type { AlertService } from '../monitor/alerts/alert-service.js';
import type { ActionRouter } from '../queue/chat-intake.js';
import { createControlQueue, createControlWorker, mergeControlHandlers } from '../queue/control-worker.js';
import type { InboxItem } from '../queue/turn-inbox.js';
import { createResearchStore, type ResearchStore } from '../research/research-store.js';
import type { Executor } from '../runs/executor.js';
import type { RunOperations } from '../runs/operations/operation-types.js';
import type { RunFollows } from '../runs/operations/run-follows.js';
import type { LlmBudget } from '../spend/llm-budget.js';
import { createSweepStore } from '../sweeps/sweep-store.js';
import { createMemoryNotes, type MemoryNotes } from '../tools/memory-tool.js';
import type { Plans } from '../tools/plan-tool.js';
import type { Playbooks } from '../tools/playbooks.js';
import { createToolRegistry, type ToolRegistry } from '../tools/registry.js';
import { createApprovalsFeature } from './approvals-feature.js';
import { createCommandsFeature } from './commands-feature.js';
import type { RunsRuntime } from './create-runs.js';
import type { Feature, FeatureBase } from './feature.js';
import { createHookBoard } from './feature-hooks.js';
import { createHelpFeature } from './help-feature.js';
import { createHubFeature } from './hub-feature.js';
import { createMonitorFeature } from './monitor-feature.js';
import { createOperationsFeature } from './operations-feature.js';
import { createRunsFeature } from './runs-feature.js';
import { createSpendFeature } from './spend-feature.js';
import { createSweepsFeature } from './sweeps-feature.js';

interface FeatureDependencies {
  config: Config;
  logger: Logger;
  redis: Redis;
  prefix: string;
  notifier: IdempotentNotifier;
  actions: ActionRouter;
  pushEvent(threadId: string, eventId: string, text: string): Promise<void>;
  provider: LlmProvider;
  /** The LLM budget: `budget +N` and `spend --llm` are its commands. */
  llmBudget: LlmBudget;
  /** Environment inherited by training processes (main passes `process.env`). */
  runEnvironment: Readonly<Record<string, string | undefined>>;
  executor?: Executor;
  /** Called once per alert posted, with the detector's kind (metrics). */
  onAlert?: (kind: string) => void;
}

export interface Features {
  tools: ToolRegistry;
  commands: {
    tryHandle(threadId: string, item: Extract<InboxItem, { type: 'message' }>): Promise<string | undefined>;
  };
  runs: RunsRuntime;
  approvals: ApprovalService;
  operations: RunOperations;
  alerts: AlertService;
  follows: RunFollows;
  playbooks: Playbooks;
  /** Each thread's visible plan (the `plan` tool), for `session`. */
  plans: Plans;
  controlQueue: Queue;
  startWorkers(): Promise<Worker[]>;
  stop(): Promise<void>;
}

/**
 * Composes the product features on top of the spine: each feature (src/app/) returns its actions,
 * control handlers, tools and workers, and this file only wires them together and joins the lists.
 */
export async function createFeatures(dependencies: FeatureDependencies): Promise<Features> {
  const { logger, redis, prefix, llmBudget } = dependencies;
  const controlQueue = createControlQueue(redis, prefix, logger);
  const base: FeatureBase = { ...dependencies, controlQueue };
  // Earlier features reach later ones (a run event the monitor hears, a sweep's card) through the hooks
  // each feature's description contributes, installed once the list is complete.
  const hooks = createHookBoard();
  const sweepStore = createSweepStore({ redis, prefix });
  const memoryNotes = createMemoryNotes(redis, prefix);
  const researchStore = createResearchStore({ redis, prefix });
  const runs = await createRunsFeature(
    base,
    {
      runEvent: hooks.runEvent,
      inSweep: async (runId) => (await sweepStore.sweepOfRun(runId)) !== undefined,
    },
    dependencies.executor,
  );
  const spend = createSpendFeature(base, { runs: runs.runs, sweepStore, llmBudget });
  const approvals = createApprovalsFeature(base, {
    runs: runs.runs,
    spend: spend.spend,
    research: researchStore,
    onSweepDecision: hooks.sweepDecision,
    checkSweepEdit: hooks.sweepEdit,
    checkSyntax: hooks.checkSyntax,
  });
  const operations = createOperationsFeature(base, {
    runs: runs.runs,
    approvals: approvals.approvals,
    access: runs.access,
    memoryNotes,
  });
  const sweepsFeature = createSweepsFeature(base, {
    runs: runs.runs,
    store: sweepStore,
    approvals: approvals.approvals,
    scriptChecks: operations.scriptChecks,
    access: runs.access,
    spend: spend.spend,
  });
  const hub = createHub(base, runs, operations, sweepsFeature);
  const monitor = createMonitorFeature(base, {
    modelReady: hub.modelReady,
    runs: runs.runs,
    operations: operations.operations,
    access: runs.access,
    follows: runs.follows,
    claimIncident: (incident, meta) => sweepsFeature.sweeps.onIncident(incident, meta),
    onTrackerLinks: approvals.showTrackerLinks,
    ...definedOnly({ onAlert: dependencies.onAlert }),
  });
  const { help, commands } = createHelpAndCommands(base, { memoryNotes, researchStore, operations, monitor });
  // Sweep commands are tried before the run commands (`sweep-status` is not a run's `status`).
  const features: Feature[] = [
    help,
    runs,
    spend,
    approvals,
    operations,
    monitor,
    sweepsFeature,
    hub,
    commands,
  ];
  hooks.install(features);
  registerActions(features, dependencies.actions);
  return {
    tools: createToolRegistry(features.flatMap((feature) => feature.tools)),
    runs: runs.runs,
    approvals: approvals.approvals,
    operations: operations.operations,
    alerts: monitor.alerts,
    follows: runs.follows,
    playbooks: help.playbooks,
    plans: help.plans,
    ...spine(features, dependencies, controlQueue),
  };
}

/** The model-ready card's buttons run the same fork and compare as the commands, under the run-access rules. */
function createHub(
  base: FeatureBase,
  runs: Awaited<ReturnType<typeof createRunsFeature>>,
  operations: ReturnType<typeof createOperationsFeature>,
  sweeps: ReturnType<typeof createSweepsFeature>,
) {
  return createHubFeature(base, {
    runs: runs.runs,
    operations: operations.operations,
    compare: sweeps.compare,
    access: runs.access,
  });
}

/** The lookups (help, Hub, research) and the commands that read the other features. */
function createHelpAndCommands(
  base: FeatureBase,
  parts: {
    memoryNotes: MemoryNotes;
    researchStore: ResearchStore;
    operations: ReturnType<typeof createOperationsFeature>;
    monitor: ReturnType<typeof createMonitorFeature>;
  },
) {
  const { operations, monitor } = parts;
  const help = createHelpFeature(base, {
    memoryNotes: parts.memoryNotes,
    researchStore: parts.researchStore,
    datasetChecks: operations.datasetChecks,
  });
  const commands = createCommandsFeature(base, {
    operations: operations.operations,
    helpText: help.helpText,
    postChart: monitor.postChart,
    watching: operations.watching,
    alertRules: monitor.alertRules,
  });
  return { help, commands };
}

/** The control queue, the command router and the workers' lifecycle: what every feature shares. */
function spine(
  features: readonly Feature[],
  dependencies: FeatureDependencies,
  controlQueue: Queue,
): Pick<Features, 'controlQueue' | 'commands' | 'startWorkers' | 'stop'> {
  return {
    controlQueue,
    commands: { tryHandle: (threadId, item) => tryCommands(features, threadId, item) },
    ...lifecycle(features, dependencies, controlQueue),
  };
}

/** Starting every feature's workers and the control worker, and stopping them. */
function lifecycle(
  features: readonly Feature[],
  { redis, prefix, logger }: FeatureDependencies,
  controlQueue: Queue,
): Pick<Features, 'startWorkers' | 'stop'> {
  return {
    async startWorkers() {
      const started: Worker[] = [];
      for (const feature of features) for (const start of feature.workers) started.push(...(await start()));
      const control = createControlWorker({
        connection: redis,
        prefix,
        logger: logger.child({ component: 'control' }),
        handlers: mergeControlHandlers(features.map((feature) => feature.controlHandlers)),
      });
      return [control, ...started];
    },
    async stop() {
      for (const feature of features) await feature.close?.();
      await controlQueue.close();
    },
  };
}

function registerActions(features: readonly Feature[], actions: ActionRouter): void {
  for (const feature of features) {
    for (const { verb, handler, form } of feature.actions) actions.register(verb, handler, form);
  }
}

/** The first feature that knows the command answers it. */
async function tryCommands(
  features: readonly Feature[],
  threadId: string,
  item: Extract<InboxItem, { type: 'message' }>,
): Promise<string | undefined> {
  for (const feature of features) {
    const answer = await feature.commands?.(threadId, item.text, item.user);
    if (answer !== undefined) return answer;
  }
  return undefined;
}
