import { runAgentTurn } from '../agent/agent-loop.js';
import type { LlmProvider } from '../agent/llm-provider.js';
import { runInLlmScope } from '../agent/llm-scope.js';
import type { ChatMessage } from '../agent/messages.js';
import { compactSession, withSummary } from '../agent/session-compaction.js';
import { parseSessionEntries, type SessionStore, sessionKeys } from '../agent/session-store.js';
import { loadSystemPrompt } from '../agent/system-prompt.js';
import { parseSummary, type SessionSummary, type ThreadState } from '../agent/thread-state.js';
import { createTurnRunner } from '../agent/turn-runner.js';
import type { TraceStep, TurnTraceStore } from '../agent/turn-trace.js';
import { TURN_ACTIONS, turnStatusCard } from '../bot/turn-status-card.js';
import { createSessionCommands } from '../commands/session-commands.js';
import type { Config } from '../config/config.js';
import { definedOnly } from '../defined-only.js';
import type { Logger } from '../logger.js';
import type { ActionRouter } from '../queue/chat-intake.js';
import type { QueueNotifier } from '../queue/notify-queue.js';
import type { LockedRead, LockedValue, TurnInbox } from '../queue/turn-inbox.js';
import type { LlmBudget } from '../spend/llm-budget.js';
import type { Features } from './features.js';

/** What a thread's turn is made of: its history, commands, the agent loop, and the status card. */
interface AppTurnsOptions {
  config: Config;
  logger: Logger;
  provider: LlmProvider;
  features: Features;
  notifier: QueueNotifier;
  inbox: TurnInbox;
  sessions: SessionStore;
  threadState: ThreadState;
  traces: TurnTraceStore;
  actions: ActionRouter;
  llmBudget: LlmBudget;
}

/** What a turn reads before its first LLM call besides the history; loaded with it. */
interface TurnState {
  /** The thread's model when it chose an allowed one other than the default. */
  model: string | undefined;
  summary: SessionSummary | undefined;
  /** The thread's spend key as read under the lock; absent when read afresh at the budget check. */
  spendFields?: Record<string, string>;
}

/**
 * Builds the turn worker's batch processor (`processBatch`) and what it reads with the thread's lock
 * (`lockedReads`), and registers the status card's Cancel button.
 */
export function createAppTurns(options: AppTurnsOptions) {
  const { config, logger, provider, features, notifier, inbox, sessions, threadState } = options;
  const stateKeys = sessionKeys(config.queuePrefix);
  // The history, model, summary and spend, read in the lock's round trip (turn_overhead_p50_ms).
  const lockedReads = (threadId: string): LockedRead[] => [
    { key: sessions.historyKey(threadId), kind: 'list' },
    { key: stateKeys.model(threadId), kind: 'string' },
    { key: stateKeys.summary(threadId), kind: 'string' },
    { key: options.llmBudget.spendKey(threadId), kind: 'hash' },
  ];
  const sessionCommands = createSessionCommands({
    state: threadState,
    follows: features.follows,
    defaultModel: config.llm.model,
    allowedModels: config.llm.models,
    historyLength: (threadId) => sessions.length(threadId),
    llmSpend: (threadId) => options.llmBudget.sessionLine(threadId),
    botName: config.botName,
    plan: (threadId) => features.plans.describe(threadId),
  });
  // The status line of a running turn carries a Cancel button; a click stops it at the next tool boundary.
  options.actions.register(TURN_ACTIONS.cancel, async (action) => {
    if (!(await threadState.turnRunning(action.threadId))) {
      return { status: 'resolved', message: 'nothing is running in this thread' };
    }
    await threadState.requestCancel(action.threadId, action.user.name);
    return { status: 'accepted', message: 'cancelling at the next tool boundary' };
  });
  // A model dropped from the allowed list since it was chosen falls back to the default.
  const allowedModel = (chosen: string | undefined) =>
    chosen !== undefined && config.llm.models.includes(chosen) ? chosen : undefined;
  const runAgent = createAgentRunner(options);

  /** The thread's stored history and state: from `values` (read with the lock) or afresh. */
  async function readThread(
    threadId: string,
    values: readonly LockedValue[] | undefined,
  ): Promise<{ stored: ChatMessage[]; state: TurnState }> {
    if (values === undefined) {
      const [entries, model, summary] = await Promise.all([
        sessions.load(threadId),
        threadState.model(threadId),
        threadState.summary(threadId),
      ]);
      return { stored: entries, state: { model: allowedModel(model), summary } };
    }
    // In the order of `lockedReads`.
    const [entries, model, summary, spendFields] = values;
    const state: TurnState = {
      model: allowedModel(typeof model === 'string' ? model : undefined),
      summary: parseSummary(typeof summary === 'string' ? summary : undefined),
      ...(spendFields !== undefined && typeof spendFields === 'object' && !Array.isArray(spendFields)
        ? { spendFields }
        : {}),
    };
    const stored = parseSessionEntries(Array.isArray(entries) ? entries : [], threadId, logger);
    return { stored, state };
  }

  const processBatch = createTurnRunner<TurnState>({
    logger,
    loadHistory: async (threadId, values) => {
      const { stored, state } = await readThread(threadId, values);
      // A compaction's summary call is billed to the thread (no person: it serves everyone in it).
      const history = await runInLlmScope({ threadId }, () =>
        compactSession(
          { provider, state: threadState, logger: logger.child({ threadId }) },
          threadId,
          stored,
          state.model,
        ),
      );
      // A compaction (the history got shorter) wrote a new summary: the turn's prompt carries that one.
      if (history.length < stored.length) state.summary = await threadState.summary(threadId);
      return { history, state };
    },
    postOnce: (key, threadId, text) => notifier.postOnce(key, threadId, text),
    postedOnce: (key) => notifier.postedOnce(key),
    edit: (threadId, messageId, text) => notifier.edit(threadId, messageId, text),
    statusCard: {
      post: (key, threadId, text) => notifier.postCardOnce(key, threadId, turnStatusCard(text)),
      update: (threadId, messageId, text) => notifier.updateCard(threadId, messageId, turnStatusCard(text)),
    },
    tryCommand: async (threadId, item) =>
      (await sessionCommands.tryHandle(threadId, item.text, item.user)) ??
      features.commands.tryHandle(threadId, item),
    runAgent,
    commit: (threadId, batch, messages: ChatMessage[]) =>
      inbox.commitBatch(threadId, batch, (multi) => sessions.appendInTransaction(multi, threadId, messages)),
  });
  return { processBatch, lockedReads };
}

type RunAgent = Parameters<typeof createTurnRunner<TurnState>>[0]['runAgent'];

/** One agent turn with the thread's summary and model; its trace is kept for the playground. */
function createAgentRunner(options: AppTurnsOptions): RunAgent {
  const { config, logger, provider, features, threadState, traces } = options;
  const systemPrompt = loadSystemPrompt(config.botName);
  return async ({ threadId, history, state, actor, onProgress }) => {
    const { summary, model } = state;
    const refused = await options.llmBudget.refusal(threadId, actor, state.spendFields);
    if (refused !== undefined) {
      logger.info({ threadId, actor: actor.id }, 'agent turn refused: llm budget used up');
      return { reply: refused, newMessages: [{ role: 'assistant', content: refused }] };
    }
    const steps: TraceStep[] = [];
    const startedAt = Date.now();
    // Every LLM call this turn makes, a tool's sub-agent included, is billed to this thread and person.
    const result = await runInLlmScope({ threadId, person: actor }, () =>
      runAgentTurn({
        provider,
        registry: features.tools,
        systemPrompt: withSummary(systemPrompt, summary),
        history,
        context: { threadId, actor },
        maxToolRounds: config.llm.maxToolRounds,
        onProgress,
        cancelledBy: () => threadState.cancelRequested(threadId),
        ...definedOnly({ model }),
        defaultModel: config.llm.model,
        onTrace: (step) => steps.push(step),
        logger: logger.child({ threadId }),
      }),
    );
    await traces
      .record({
        id: `${threadId}:${startedAt}`,
        threadId,
        startedAt,
        endedAt: Date.now(),
        outcome: result.outcome,
        reply: result.reply,
        steps,
      })
      .catch((error: unknown) => logger.warn({ threadId, err: error }, 'turn trace not stored'));
    if (result.outcome === 'cancelled') await threadState.markCancelled(threadId);
    await threadState.clearCancel(threadId);
    return result;
  };
}
