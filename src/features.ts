import type { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { LlmProvider } from './agent/llm-provider.js';
import { type ApprovalService, createApprovalService } from './approvals/approval-service.js';
import { createApprovalStore } from './approvals/approval-store.js';
import type { IdempotentNotifier } from './bot/notifier.js';
import { createCommandHandler } from './commands/command-handler.js';
import type { Config } from './config.js';
import { createRunsRuntime, type RunsRuntime } from './create-runs.js';
import { definedOnly } from './defined-only.js';
import type { Logger } from './logger.js';
import { createAlertPolicyStore } from './monitor/alert-policy.js';
import { createAlertRuleOperations } from './monitor/alert-rule-operations.js';
import { type AlertService, createAlertService } from './monitor/alert-service.js';
import { createNvidiaSmiProbe } from './monitor/gpu-probe.js';
import { createMonitor } from './monitor/monitor.js';
import { detectorConfigFrom } from './monitor/types.js';
import { createRunWatcher } from './monitor/watch-runs.js';
import { createMetricsCharts } from './notify/metrics-chart.js';
import type { ActionRouter } from './queue/chat-intake.js';
import { createControlQueue, createControlWorker } from './queue/control-worker.js';
import { JOBS, schedule } from './queue/jobs.js';
import type { InboxItem } from './queue/turn-inbox.js';
import type { Executor } from './runs/executor.js';
import { createRunAccess } from './runs/run-access.js';
import type { RunEvent } from './runs/run-events.js';
import { createRunFollows, type RunFollows } from './runs/run-follows.js';
import { createRunOperations, type RunOperations } from './runs/run-operations.js';
import { createRunCommand } from './runs/slurm/slurm-command.js';
import { createSlurmExecutor } from './runs/slurm/slurm-executor.js';
import { compileMetricPattern } from './runs/stdout-metrics/custom-pattern.js';
import { postDigest, scheduleDigest } from './spend/digest.js';
import { createSpendReports } from './spend/spend-report.js';
import { createRunComparison } from './sweeps/compare-runs.js';
import { createSweepCommands } from './sweeps/sweep-commands.js';
import { createSweepService, type SweepService } from './sweeps/sweep-service.js';
import { createSweepStore } from './sweeps/sweep-store.js';
import { createSweepTools } from './sweeps/sweep-tools.js';
import { createAlertTools } from './tools/alert-tools.js';
import { createShowMetricsTool } from './tools/chart-tool.js';
import { createCheckpointLister } from './tools/checkpoint-listing.js';
import { createDatasetViewer, createInspectDatasetTool } from './tools/dataset-viewer.js';
import { createFollowTools } from './tools/follow-tools.js';
import { createHelpTool } from './tools/help-tool.js';
import { createHubClient } from './tools/hub-api.js';
import { createHubTools } from './tools/hub-tools.js';
import { createMemoryNotes, createMemoryTool } from './tools/memory-tool.js';
import { createPlaybooks, createReadPlaybookTool, type Playbooks } from './tools/playbooks.js';
import { createToolRegistry, type ToolRegistry } from './tools/registry.js';
import { createRunInspectTools } from './tools/run-inspect-tools.js';
import { createRunTools } from './tools/run-tools.js';
import { createScriptChecks } from './tools/script-checks.js';
import { createWatchOperations } from './tools/watch-operations.js';

export interface FeatureDependencies {
  config: Config;
  logger: Logger;
  redis: Redis;
  prefix: string;
  notifier: IdempotentNotifier;
  actions: ActionRouter;
  pushEvent(threadId: string, eventId: string, text: string): Promise<void>;
  provider: LlmProvider;
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
  controlQueue: Queue;
  startWorkers(): Promise<Worker[]>;
  stop(): Promise<void>;
}

/** Run events the thread hears about: what happened on its own (started, waiting, ended by itself). */
function postsRunEvent(event: RunEvent): boolean {
  if (event.type === 'run-status' || event.type === 'run-paused') return false;
  if (event.type === 'run-ended') return event.meta.status === 'completed' || event.meta.status === 'failed';
  return true;
}

/** How often every run's process state is checked (one batched executor poll) and the GPU queue advanced. */
const RUN_REFRESH_MS = 2000;

/** Composes the product features (runs, approvals, commands, tools) on top of the spine. */
export async function createFeatures(dependencies: FeatureDependencies): Promise<Features> {
  const { config, logger, redis, prefix, notifier } = dependencies;

  let watchRun: (runId: string) => Promise<void> = async () => undefined;
  let follows: RunFollows | undefined;
  const sweepStore = createSweepStore({ redis, prefix });
  const onRunEvent = async (event: RunEvent) => {
    if (event.type === 'run-started') await watchRun(event.meta.id);
    // A followed run's thread gets its note and turn; never blocks the transition (errors are logged).
    if (event.type === 'run-ended') void follows?.onRunEnded(event.meta);
    // A sweep's trials speak through the sweep (one line per bad trial, a leaderboard at the end).
    // A trial stopped at its time limit still says so: it waits for a person to resume or stop it.
    if (event.type !== 'run-time-limit' && (await sweepStore.sweepOfRun(event.meta.id)) !== undefined) return;
    // What a person did (create, pause, stop, reject) is answered by the command, tool or card that did it.
    if (!postsRunEvent(event)) return;
    // Never block a run transition on a chat post: the notify queue retries on its own.
    notifier.post(event.meta.threadId, event.message).catch((error: unknown) => {
      logger.warn({ runId: event.meta.id, err: String(error) }, 'could not post a run event');
    });
  };
  // The local executor is the default; Slurm gets the same scrubbed environment its jobs inherit.
  const executor =
    dependencies.executor ??
    (config.runs.executor === 'slurm'
      ? createSlurmExecutor({
          config,
          logger: logger.child({ component: 'slurm' }),
          environment: { ...dependencies.runEnvironment },
        })
      : undefined);
  const runs = await createRunsRuntime({
    config,
    redis,
    logger: logger.child({ component: 'runs' }),
    environment: dependencies.runEnvironment,
    onEvent: onRunEvent,
    ...definedOnly({ executor }),
  });

  follows = createRunFollows({
    redis,
    prefix,
    store: runs.store,
    notifier,
    maxTurns: config.session.maxFollowTurns,
    pushEvent: dependencies.pushEvent,
    logger: logger.child({ component: 'follows' }),
  });
  const runFollows = follows;
  const controlQueue = createControlQueue(redis, prefix, logger);
  const spend = createSpendReports({
    runs,
    gpuHourUsd: config.runs.gpuHourUsd,
    budgetUsdMonth: config.approvals.budgetUsdMonth,
  });
  let sweeps: SweepService | undefined;
  const approvals = createApprovalService({
    store: createApprovalStore({ redis, prefix }),
    runs: runs.service,
    notifier,
    controlQueue,
    policy: {
      approvers: config.approvals.approvers,
      selfApproval: config.approvals.selfApproval,
      autoApproveUsd: config.approvals.autoApproveUsd,
    },
    gpuHourUsd: config.runs.gpuHourUsd,
    ttlMs: config.approvals.ttlHours * 3600 * 1000,
    logger: logger.child({ component: 'approvals' }),
    pushEvent: dependencies.pushEvent,
    ...(config.approvals.budgetUsdMonth === undefined
      ? {}
      : {
          budget: {
            limitUsd: config.approvals.budgetUsdMonth,
            spentUsd: (at: Date) => spend.spentThisMonth(at),
          },
        }),
    onSweepDecision: async (approval, decision) =>
      sweeps === undefined ? 'sweeps are not ready' : sweeps.onDecision(approval, decision),
  });
  dependencies.actions.register('approve', (action, id) => approvals.onAction(action, 'approved', id));
  dependencies.actions.register('reject', (action, id) => approvals.onAction(action, 'rejected', id));

  const access = createRunAccess({
    approvers: config.approvals.approvers,
    audit: runs.audit,
    logger: logger.child({ component: 'access' }),
  });
  // Check before spending: every script is compiled before its card, optionally run briefly on CPU.
  const scriptChecks = createScriptChecks({
    python: config.runs.python,
    environment: dependencies.runEnvironment,
    preflightSteps: config.checks.preflightSteps,
    preflightTimeoutS: config.checks.preflightTimeoutS,
  });
  const memoryNotes = createMemoryNotes(redis, prefix);
  const watching = createWatchOperations({
    runs: runs.service,
    workspace: config.workspace,
    redis,
    prefix,
    notifier,
    slurmCommand: createRunCommand({ ...dependencies.runEnvironment }),
    access,
    logger: logger.child({ component: 'watch' }),
  });
  for (const verb of ['confirm-stop', 'keep-running'] as const) {
    dependencies.actions.register(verb, (action, id) => watching.onAction(action, verb, id));
  }
  const operations = createRunOperations({
    runs: runs.service,
    store: runs.store,
    approvals,
    access,
    workspace: config.workspace,
    environments: config.runs.environments,
    defaultEnvironment: config.runs.defaultEnvironment,
    confirmStop: watching.confirmStop,
    python: config.runs.python,
    maxHours: config.runs.maxHours,
    checkSyntax: scriptChecks.checkSyntax,
    ...definedOnly({ preflight: scriptChecks.preflight }),
    notify: async (threadId, text) => {
      await notifier.post(threadId, text);
    },
    memoryEstimate: memoryNotes.latest,
  });
  const postChart = createMetricsCharts({
    runs: runs.service,
    facade: runs,
    notifier,
    quickchartUrl: config.monitor.quickchartUrl,
  });
  // People's alert rules and mutes, kept in Redis with the run (alert-policy.ts).
  const alertPolicy = createAlertPolicyStore({ redis, prefix });
  const alertRules = createAlertRuleOperations({
    store: alertPolicy,
    findRun: (reference) => runs.service.findRun(reference),
  });
  const monitor = createMonitor({
    redis,
    prefix,
    runDir: (meta) => runs.runDirectory(meta.id),
    detectors: detectorConfigFrom(config.monitor),
    logger: logger.child({ component: 'monitor' }),
    ...(config.monitor.metricPattern === undefined
      ? {}
      : { metricPattern: compileMetricPattern(config.monitor.metricPattern) }),
    policy: alertPolicy,
    gpuProbe: createNvidiaSmiProbe({
      command: config.monitor.nvidiaSmi,
      environment: dependencies.runEnvironment,
    }),
  });
  const alerts = createAlertService({
    redis,
    prefix,
    monitor,
    runs: runs.service,
    facade: runs,
    operations,
    notifier,
    provider: dependencies.provider,
    controlQueue,
    quickchartUrl: config.monitor.quickchartUrl,
    maxAutofix: config.monitor.maxAutofix,
    python: config.runs.python,
    environment: dependencies.runEnvironment,
    access,
    onAlert: (meta, incident) => runFollows.onIncident(meta, incident),
    checkpoints: runs.checkpoints,
    logger: logger.child({ component: 'alerts' }),
  });
  for (const verb of ['ack', 'stop', 'fix'] as const) {
    dependencies.actions.register(verb, (action, id) => alerts.onAction(action, verb, id));
  }
  sweeps = createSweepService({
    store: sweepStore,
    runs: runs.service,
    facade: runs,
    approvals,
    notifier,
    workspace: config.workspace,
    gpuHourUsd: config.runs.gpuHourUsd,
    defaultMaxHours: config.runs.defaultMaxHours,
    maxHours: config.runs.maxHours,
    gpuCapacity: runs.executor.allocatesGpus ? undefined : runs.allocator.inventory.length,
    quickchartUrl: config.monitor.quickchartUrl,
    logger: logger.child({ component: 'sweeps' }),
    checkSyntax: scriptChecks.checkSyntax,
    access,
  });
  const sweepService = sweeps;
  const compare = createRunComparison({
    runs: runs.service,
    facade: runs,
    notifier,
    quickchartUrl: config.monitor.quickchartUrl,
  });
  const countedAlerts: AlertService = {
    ...alerts,
    async onIncident(incident, meta) {
      // Incidents of sweep trials end in one line in the sweep's thread: no card, no triage.
      if (await sweepService.onIncident(incident, meta)) return;
      await alerts.onIncident(incident, meta);
      dependencies.onAlert?.(incident.kind);
    },
  };
  const watcher = createRunWatcher({
    config,
    redis,
    prefix,
    monitor,
    runs,
    alerts: countedAlerts,
    notifier,
    postChart,
    logger,
  });
  watchRun = watcher.watch;

  const playbooks = createPlaybooks({ directory: config.session.playbooksDir });
  const help = createHelpTool({ botName: config.botName, playbooks: () => playbooks.describe() });
  const hub = createHubClient({
    baseUrl: config.hub.url,
    token: config.hub.token,
    logger: logger.child({ component: 'hub' }),
  });
  const tools = createToolRegistry([
    help,
    ...createRunTools(operations),
    ...createRunInspectTools({
      runs,
      operations,
      checkpoints: createCheckpointLister({
        runs,
        history: runs.checkpoints,
        detectors: detectorConfigFrom(config.monitor),
      }),
    }),
    createShowMetricsTool(postChart),
    ...createAlertTools(alertRules),
    ...createHubTools(hub),
    ...createSweepTools(sweepService, compare),
    createInspectDatasetTool(
      createDatasetViewer({
        baseUrl: config.hub.datasetsServerUrl,
        token: config.hub.token,
        logger: logger.child({ component: 'datasets' }),
      }),
      { hasToken: config.hub.token !== undefined },
    ),
    createMemoryTool({ hub, notes: memoryNotes, gpuMemoryGb: config.checks.gpuMemoryGb }),
    ...createFollowTools({
      follows: runFollows,
      findRun: (run) => runs.service.findRun(run),
      maxTurns: config.session.maxFollowTurns,
    }),
    createReadPlaybookTool(playbooks),
  ]);
  const commandHandler = createCommandHandler({
    operations,
    botName: config.botName,
    helpText: async () => String(await help.execute({}, { threadId: '', actor: { id: '', name: '' } })),
    chart: postChart,
    ephemeral: (threadId, userId, text) => notifier.ephemeral(threadId, userId, text),
    watch: watching.watch,
    alertRules,
    logger,
  });
  const sweepCommands = createSweepCommands({
    sweeps: sweepService,
    compare,
    spend,
    botName: config.botName,
    logger,
  });
  const openApprovals = async (): Promise<string[]> => {
    const lines: string[] = [];
    for (const meta of await runs.service.listRuns()) {
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
    tools,
    runs,
    approvals,
    operations,
    alerts,
    follows: runFollows,
    playbooks,
    controlQueue,
    commands: {
      tryHandle: async (threadId, item) =>
        (await sweepCommands.tryHandle(threadId, item.text, item.user)) ??
        commandHandler.tryHandle(threadId, item.text, item.user),
    },
    async startWorkers() {
      await runs.service.reconcile();
      await watcher.sync(await runs.service.listRuns());
      await schedule(controlQueue, 'runs-refresh', { every: RUN_REFRESH_MS }, JOBS.runSchedule, {
        v: 1,
        kind: 'run-schedule',
        reason: 'periodic',
      });
      await scheduleDigest(controlQueue, config.digest.channel === undefined ? undefined : config.digest.at);
      return [
        createControlWorker({
          connection: redis,
          prefix,
          logger: logger.child({ component: 'control' }),
          handlers: {
            'approval-decision': (job) => approvals.apply(job),
            'alert-action': (job) => alerts.apply(job),
            'run-schedule': async () => {
              await runs.service.refresh();
              await sweepService.tick();
            },
            digest: async (job) => {
              const channel = config.digest.channel;
              if (channel === undefined) return;
              await postDigest({
                notifier,
                spend,
                channel,
                at: job.at === undefined ? new Date() : new Date(job.at),
                openApprovals,
              });
            },
          },
        }),
        watcher.createWorker(),
      ];
    },
    async stop() {
      await watcher.close();
      await controlQueue.close();
    },
  };
}
