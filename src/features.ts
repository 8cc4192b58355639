import type { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { LlmProvider } from './agent/llm-provider.js';
import { type ApprovalService, createApprovalService } from './approvals/approval-service.js';
import { createApprovalStore } from './approvals/approval-store.js';
import type { ActionRouter } from './bot/inbound.js';
import { createCommandHandler } from './commands/command-handler.js';
import type { Config } from './config.js';
import type { Logger } from './logger.js';
import type { Notifier } from './notify/notifier.js';
import { createControlQueue, createControlWorker } from './queue/control-worker.js';
import type { InboxItem } from './queue/turn-inbox.js';
import { createRunsRuntime, type RunsRuntime } from './runs/create-runs.js';
import type { Executor } from './runs/executor.js';
import type { RunEvent } from './runs/run-events.js';
import { createHelpTool } from './tools/help-tool.js';
import { createToolRegistry, type ToolRegistry } from './tools/registry.js';
import { createRunOperations, type RunOperations } from './tools/run-operations.js';
import { createRunTools } from './tools/run-tools.js';

export interface FeatureDependencies {
  config: Config;
  logger: Logger;
  redis: Redis;
  prefix: string;
  notifier: Notifier;
  actions: ActionRouter;
  pushEvent(threadId: string, eventId: string, text: string): Promise<void>;
  provider: LlmProvider;
  /** Environment inherited by training processes (main passes `process.env`). */
  runEnvironment: Readonly<Record<string, string | undefined>>;
  executor?: Executor;
}

export interface Features {
  tools: ToolRegistry;
  commands: {
    tryHandle(threadId: string, item: Extract<InboxItem, { type: 'message' }>): Promise<string | undefined>;
  };
  runs: RunsRuntime;
  approvals: ApprovalService;
  operations: RunOperations;
  controlQueue: Queue;
  startWorkers(): Promise<Worker[]>;
  stop(): Promise<void>;
}

/** How often every run's process state is checked (one batched executor poll) and the GPU queue advanced. */
const RUN_REFRESH_MS = 2000;

/** Composes the product features (runs, approvals, commands, tools) on top of the spine. */
export async function createFeatures(dependencies: FeatureDependencies): Promise<Features> {
  const { config, logger, redis, prefix, notifier } = dependencies;

  const onRunEvent = (event: RunEvent) => {
    // Never block a run transition on a chat post: the notify queue retries on its own.
    notifier.post(event.meta.threadId, event.message).catch((error: unknown) => {
      logger.warn({ runId: event.meta.id, err: String(error) }, 'could not post a run event');
    });
  };
  const runs = await createRunsRuntime({
    config,
    redis,
    logger: logger.child({ component: 'runs' }),
    environment: dependencies.runEnvironment,
    onEvent: onRunEvent,
    ...(dependencies.executor === undefined ? {} : { executor: dependencies.executor }),
  });

  const controlQueue = createControlQueue(redis, prefix);
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
  });
  dependencies.actions.register('approve', (action, id) => approvals.onAction(action, 'approved', id));
  dependencies.actions.register('reject', (action, id) => approvals.onAction(action, 'rejected', id));

  const operations = createRunOperations({
    runs: runs.service,
    store: runs.store,
    approvals,
    workspace: config.workspace,
  });
  const help = createHelpTool({ botName: config.botName });
  const tools = createToolRegistry([help, ...createRunTools(operations)]);
  const commandHandler = createCommandHandler({
    operations,
    botName: config.botName,
    helpText: async () => String(await help.execute({}, { threadId: '', actor: { id: '', name: '' } })),
    logger,
  });

  return {
    tools,
    runs,
    approvals,
    operations,
    controlQueue,
    commands: {
      tryHandle: (threadId, item) => commandHandler.tryHandle(threadId, item.text, item.user),
    },
    async startWorkers() {
      await runs.service.reconcile();
      await controlQueue.upsertJobScheduler(
        'runs-refresh',
        { every: RUN_REFRESH_MS },
        {
          name: 'run-schedule',
          data: { v: 1, kind: 'run-schedule', reason: 'periodic' },
          opts: { removeOnComplete: true, removeOnFail: 100 },
        },
      );
      return [
        createControlWorker({
          connection: redis,
          prefix,
          logger: logger.child({ component: 'control' }),
          handlers: {
            'approval-decision': (job) => approvals.apply(job),
            'run-schedule': async () => {
              await runs.service.refresh();
            },
          },
        }),
      ];
    },
    async stop() {
      await controlQueue.close();
    },
  };
}
