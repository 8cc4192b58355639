import type { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { LlmProvider } from '../agent/llm-provider.js';
import { createMeteredProvider } from '../agent/metered-provider.js';
import { createLlmProvider } from '../agent/providers/create-llm-provider.js';
import { createRedactingProvider } from '../agent/redacting-provider.js';
import { createSessionStore } from '../agent/session-store.js';
import { createThreadState } from '../agent/thread-state.js';
import { createTurnTraceStore } from '../agent/turn-trace.js';
import type { ChatAdapter } from '../bot/chat-adapter.js';
import type { PlaygroundApp } from '../bot/web/playground-app.js';
import type { WebAdapter } from '../bot/web/web-adapter.js';
import { createWebStore } from '../bot/web/web-store.js';
import { parseSessionCommand } from '../commands/session-commands.js';
import type { Config } from '../config/config.js';
import { definedOnly } from '../defined-only.js';
import type { Logger } from '../logger.js';
import { createOps, type Ops } from '../ops/create-ops.js';
import { instrumentProvider } from '../ops/instrumented-provider.js';
import { createActionRouter, createInboundHandlers, pushSystemEvent } from '../queue/chat-intake.js';
import { createNotifyWorker, createQueueNotifier, type QueueNotifier } from '../queue/notify-queue.js';
import { createTurnInbox, type TurnInbox } from '../queue/turn-inbox.js';
import { createTurnQueue, createTurnWorker } from '../queue/turn-worker.js';
import { createRedis } from '../redis/connection.js';
import { createScriptGate } from '../redis/script-gate.js';
import type { Executor } from '../runs/executor.js';
import { createLlmBudget, type LlmBudget } from '../spend/llm-budget.js';
import { createLlmLedger } from '../spend/llm-ledger.js';
import { registerSecretValues } from '../text/redact.js';
import { createAppTurns } from './app-turns.js';
import { createAdapters } from './create-adapters.js';
import { createFeatures, type Features } from './features.js';

/** Things tests and deployments may swap at the edges. */
export interface AppOverrides {
  provider?: LlmProvider;
  /** Extra adapters (Slack, Discord, test doubles) alongside the playground. */
  adapters?: ChatAdapter[];
  /** Called for every LLM HTTP request, with its reason. */
  onLlmCall?: (reason: string) => void;
  /** Called when a turn is picked up (a job taken, or a direct turn started), with its thread. */
  onTurnPickup?: (threadId: string) => void;
  /** Where training runs execute (default: from `SHEPHERD_EXECUTOR`). */
  executor?: Executor;
  /** Environment inherited by training processes; main passes `process.env`. */
  runEnvironment?: Readonly<Record<string, string | undefined>>;
}

export interface App {
  readonly config: Config;
  readonly redis: Redis;
  /** The web chat adapter (posting into the playground's store). */
  readonly web: WebAdapter;
  /** The playground app hosting it: the HTTP server, page and APIs; `address()` after `start()`. */
  readonly playground: PlaygroundApp;
  readonly notifier: QueueNotifier;
  readonly inbox: TurnInbox;
  readonly turnQueue: Queue;
  readonly features: Features;
  /** Health, readiness, Prometheus metrics and the queue dashboard. */
  readonly ops: Ops;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Tells a thread's agent that something happened and starts a turn. */
  pushEvent(threadId: string, eventId: string, text: string): Promise<void>;
}

/**
 * Builds the whole bot from a config: adapters (role `bot`), workers (role `worker`), or both (`all`,
 * the embedded default). Nothing here reads the environment.
 */
export async function createApp(config: Config, logger: Logger, overrides: AppOverrides = {}): Promise<App> {
  const spine = createSpine(config, logger);
  const { redis, prefix, notifier, inbox, turnQueue, ops } = spine;
  registerSecretValues(config.secretValues);
  const llmBudget = createLlmBudget({
    ledger: createLlmLedger({
      redis,
      prefix,
      prices: config.llm.prices,
      defaultCapUsd: config.llm.budgetUsdThread,
    }),
    postOnce: (key, threadId, text) => notifier.postOnce(key, threadId, text),
    personDayCapUsd: config.llm.budgetUsdPersonDay,
    approvers: config.approvals.approvers,
    botName: config.botName,
    logger: logger.child({ component: 'llm-budget' }),
  });
  const provider = createProvider(config, logger, overrides, ops, llmBudget);
  const features = await createFeatures({
    config,
    logger,
    redis,
    prefix,
    notifier,
    actions: spine.actions,
    pushEvent: spine.pushEvent,
    provider,
    llmBudget,
    runEnvironment: overrides.runEnvironment ?? { PATH: '/usr/local/bin:/usr/bin:/bin' },
    onAlert: (kind) => ops.metrics.alert(kind),
    ...definedOnly({ executor: overrides.executor }),
  });
  // Made after the features: Slack's App Home, Discord's autocomplete and the playground list runs.
  const chat = createAdapters({
    config,
    logger,
    redis,
    webStore: spine.webStore,
    traces: spine.traces,
    mounts: ops.mounts,
    runs: features.runs,
    operations: features.operations,
    ...definedOnly({ extra: overrides.adapters }),
  });
  ops.watchRuns({ listRuns: () => features.runs.list(), allocator: features.runs.allocator });
  const turns = createAppTurns({ config, logger, provider, features, llmBudget, ...spine });
  return {
    config,
    redis,
    web: chat.web,
    playground: chat.playground,
    notifier,
    inbox,
    turnQueue,
    features,
    ops,
    pushEvent: spine.pushEvent,
    ...createLifecycle({
      config,
      logger,
      spine,
      chat,
      features,
      turns,
      onTurnPickup: overrides.onTurnPickup,
    }),
  };
}

type Spine = ReturnType<typeof createSpine>;

/** Connections, adapters, queues and stores of the chat spine (no features yet). */
function createSpine(config: Config, logger: Logger) {
  const redis = createRedis(config, { logger });
  // The ack path (playground store, inbox) has a connection of its own, so its one script per message never
  // waits behind a worker's commands. Not auto-pipelined: that cost ~20 µs of CPU per ack (bench/spine-ack-cpu.ts).
  const ackRedis = createRedis(config, { logger });
  const prefix = config.queuePrefix;
  const ops = createOps({ config, redis, logger: logger.child({ component: 'ops' }) });
  // Its scripts go out one batch at a time: a burst of messages shares writes and wake-ups of Redis.
  const ackScripts = createScriptGate(ackRedis);
  const webStore = createWebStore({
    redis: ackRedis,
    scripts: ackScripts,
    prefix,
    fileTtlDays: config.fileTtlDays,
  });
  const notifier = createQueueNotifier({ connection: redis, prefix, logger });
  const inbox = createTurnInbox({ redis: ackRedis, scripts: ackScripts, prefix });
  const turnQueue = createTurnQueue(redis, prefix, logger);
  const threadState = createThreadState({ redis, prefix });
  const actions = createActionRouter();
  const handlers = createInboundHandlers({
    inbox,
    actions,
    logger,
    // `cancel` must reach the running turn now, not after it in the inbox.
    onAccepted: async (message) => {
      if (parseSessionCommand(message.text, config.botName)?.name !== 'cancel') return;
      if (await threadState.turnRunning(message.threadId)) {
        await threadState.requestCancel(message.threadId, message.user.name);
      }
    },
  });
  const pushEvent = (threadId: string, eventId: string, text: string) =>
    pushSystemEvent(inbox, threadId, eventId, text);
  const sessions = createSessionStore({ redis, prefix, logger });
  const traces = createTurnTraceStore({ redis, prefix });
  return {
    ...{ redis, ackRedis, prefix, ops, webStore, notifier, inbox, turnQueue },
    ...{ threadState, actions, handlers, pushEvent, sessions, traces },
  };
}

/**
 * Everything sent to a model is redacted here, and every answered call is metered against the LLM
 * budget, whichever provider (or test double) is used and whoever calls it.
 */
function createProvider(
  config: Config,
  logger: Logger,
  overrides: AppOverrides,
  ops: Ops,
  llmBudget: LlmBudget,
): LlmProvider {
  const provider =
    overrides.provider ??
    createLlmProvider(config.llm, {
      logger,
      onCall: (reason) => {
        // Counted once, in Prometheus (`shepherd_llm_calls_total`); the log line keeps each call visible.
        ops.metrics.llmCall(reason);
        logger.info({ metric: 'llm_calls_total', reason }, 'llm call');
        overrides.onLlmCall?.(reason);
      },
    });
  const metered = createMeteredProvider(instrumentProvider(provider, ops.metrics, config.llm.model), {
    defaultModel: config.llm.model,
    onUsage: (usage) => llmBudget.onUsage(usage),
    logger,
  });
  return createRedactingProvider(metered);
}

/** Start and stop: adapters, the notify worker, the turn worker and the features' workers, in order. */
function createLifecycle(options: {
  config: Config;
  logger: Logger;
  spine: Spine;
  chat: ReturnType<typeof createAdapters>;
  features: Features;
  turns: ReturnType<typeof createAppTurns>;
  onTurnPickup: ((threadId: string) => void) | undefined;
}): Pick<App, 'start' | 'stop'> {
  const { config, logger, spine, features } = options;
  const { redis, ackRedis, prefix, ops, notifier, turnQueue } = spine;
  const { adapters, playground } = options.chat;
  const runsAdapters = config.role !== 'worker';
  const runsWorkers = config.role !== 'bot';
  const workers: Worker[] = [];
  let notifyWorker: Worker | undefined;
  let started = false;
  let closed = false;

  const turnWorker = () =>
    createTurnWorker({
      connection: redis,
      queue: turnQueue,
      prefix,
      inbox: spine.inbox,
      processBatch: options.turns.processBatch,
      lockedReads: options.turns.lockedReads,
      onBatchDropped: async (threadId, batch, error) => {
        await notifier
          .post(
            threadId,
            `Sorry — I could not handle the last ${batch.items.length === 1 ? 'message' : `${batch.items.length} messages`} after several attempts (${String(error).slice(0, 200)}). Please try again.`,
          )
          .catch(() => undefined);
      },
      logger: logger.child({ component: 'turns' }),
      concurrency: config.queue.turnConcurrency,
      lockMs: config.queue.lockMs,
      // Job turns are counted from the worker's events (observe-workers.ts); direct turns say so here.
      onDirectTurnFinished: (duration, pickup) => ops.metrics.turnFinished(duration, pickup),
      ...definedOnly({ onTurnPickup: options.onTurnPickup }),
    });

  return {
    async start() {
      if (started) return;
      started = true;
      // Adapters first: a port already in use fails start-up before any worker has taken a job.
      if (runsAdapters) {
        for (const adapter of adapters.values()) await adapter.start(spine.handlers);
        notifyWorker = createNotifyWorker({
          connection: redis,
          prefix,
          adapters: (platform) => adapters.get(platform),
          logger: logger.child({ component: 'notify' }),
        });
      }
      if (runsWorkers) {
        workers.push(turnWorker());
        workers.push(...(await features.startWorkers()));
      }
      ops.watchWorkers(notifyWorker === undefined ? workers : [notifyWorker, ...workers]);
      if (runsAdapters) ops.watchAdapters(adapters.values());
      // A worker-only process has no playground server; it still answers probes and scrapes.
      else await ops.listenAlone();
      logger.info(
        {
          role: config.role,
          adapters: runsAdapters ? [...adapters.keys()] : [],
          playground: runsAdapters ? playground.address().url : undefined,
        },
        'shepherd started',
      );
    },
    async stop() {
      // An app that was never started (the CLI's read-only use) still closes its connections.
      if (closed) return;
      closed = true;
      const wasStarted = started;
      if (started) {
        started = false;
        // Workers finish or hand back their jobs first; their posts still need the notify worker and the
        // adapters, which stop last. Messages arriving meanwhile are queued in Redis for the next start.
        await Promise.all(workers.map((worker) => worker.close()));
        workers.length = 0;
        await notifyWorker?.close();
        notifyWorker = undefined;
        if (runsAdapters)
          for (const adapter of adapters.values()) await adapter.stop().catch(() => undefined);
      }
      await features.stop();
      await ops.stop();
      await notifier.close();
      await turnQueue.close();
      if (wasStarted) {
        redis.disconnect();
        ackRedis.disconnect();
      } else {
        // Queues created moments ago may still be loading their scripts: let those commands finish.
        await Promise.all([redis.quit(), ackRedis.quit()].map((quit) => quit.catch(() => undefined)));
      }
    },
  };
}
