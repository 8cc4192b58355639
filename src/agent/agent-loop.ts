import { definedOnly } from '../defined-only.js';
import { errorMessage, LlmError } from '../errors.js';
import type { Logger } from '../logger.js';
import { redactedHead } from '../text/redact.js';
import type { ToolContext, ToolRegistry } from '../tools/registry.js';
import type { ToolCall } from '../tools/tool-call.js';
import type { LlmProvider } from './llm-provider.js';
import type { AssistantMessage, ChatMessage, UserMessage } from './messages.js';
import { createRepetitionGuard, REPETITION_NOTE } from './repetition-guard.js';
import { trimHistory } from './trim-history.js';
import { summarizeArguments, summarizeResult, type TraceStep } from './turn-trace.js';

interface AgentTurnOptions {
  provider: LlmProvider;
  registry: ToolRegistry;
  systemPrompt: string;
  /** The session so far, already including this turn's new user messages. */
  history: ChatMessage[];
  context: ToolContext;
  maxToolRounds: number;
  /**
   * Progress for the thread's status line ("thinking…", "running tool x…"). Consecutive duplicates
   * are dropped here; the caller throttles edits to about one a second. Errors are logged, not fatal.
   */
  onProgress?: (status: string) => void | Promise<void>;
  /** Asked at every tool boundary; a name means that person cancelled the turn (`cancel`). */
  cancelledBy?: () => Promise<string | undefined>;
  /** The thread's model, when it chose one other than the default. */
  model?: string;
  /** The default model's name, for the trace when the thread has not chosen one. */
  defaultModel?: string;
  /** Each LLM call and tool call as it ends (the turn's trace). */
  onTrace?: (step: TraceStep) => void;
  /**
   * Tokens (in + out) the turn may spend: once an LLM call brings the total to it, no further tool runs
   * and the turn ends `budget_exhausted` with the model's text so far (a sub-agent's partial answer).
   */
  tokenBudget?: number;
  logger: Logger;
}

type AgentTurnOutcome = 'answered' | 'max_rounds' | 'llm_unavailable' | 'cancelled' | 'budget_exhausted';

/** Tokens a turn spent, as the endpoint reported them (estimated from the text when it did not). */
export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

interface AgentTurnResult {
  reply: string;
  /** Assistant and tool messages produced this turn, to append to the session. */
  newMessages: ChatMessage[];
  /** Tool rounds executed. */
  rounds: number;
  outcome: AgentTurnOutcome;
  /** Every LLM call of the turn together (for budgets and spend). */
  usage: TokenUsage;
}

const PLAIN_COMMANDS_HINT =
  'Plain commands still work: help, runs, status <run>, pause/resume/stop <run>, chart <run>.';

function unavailableReply(error: LlmError): string {
  return `The model endpoint is unavailable right now (${shortReason(error)}). ${PLAIN_COMMANDS_HINT}`;
}

function shortReason(error: LlmError): string {
  // Redacted before the cut: an endpoint's error may echo a key.
  return redactedHead(error.message.split('\n')[0] ?? error.message, 161);
}

function maxRoundsReply(rounds: number, lastTools: string[], partialText: string): string {
  const lines = [
    `I stopped after ${rounds} tool rounds without finishing; the last step was ${lastTools.join(', ') || 'a tool call'}.`,
    'Ask me to continue, or narrow the request.',
  ];
  if (partialText.trim() !== '') lines.unshift(partialText.trim());
  return lines.join(' ');
}

type ModelResponse = Awaited<ReturnType<LlmProvider['complete']>>;

/** One turn's working state: the conversation so far, what it adds to the session, and its hooks. */
interface Turn {
  options: AgentTurnOptions;
  /** The working conversation also holds transient guard notes that are not saved to the session. */
  working: ChatMessage[];
  newMessages: ChatMessage[];
  guard: ReturnType<typeof createRepetitionGuard>;
  rounds: number;
  usage: TokenUsage;
  add(message: ChatMessage): void;
  /** Status-line progress; consecutive duplicates dropped, failures logged. */
  progress(status: string): Promise<void>;
  /** Who cancelled the turn, if anyone; a failing check counts as not cancelled. */
  checkCancel(): Promise<string | undefined>;
}

function startTurn(options: AgentTurnOptions): Turn {
  const { context, logger } = options;
  let lastStatus: string | undefined;
  const turn: Turn = {
    options,
    working: [...options.history],
    newMessages: [],
    guard: createRepetitionGuard(),
    rounds: 0,
    usage: { inputTokens: 0, outputTokens: 0 },
    add(message) {
      turn.working.push(message);
      turn.newMessages.push(message);
    },
    async progress(status) {
      if (options.onProgress === undefined || status === lastStatus) return;
      lastStatus = status;
      try {
        await options.onProgress(status);
      } catch (error) {
        logger.warn({ err: error, threadId: context.threadId }, 'progress update failed');
      }
    },
    async checkCancel() {
      if (options.cancelledBy === undefined) return undefined;
      try {
        return await options.cancelledBy();
      } catch (error) {
        logger.warn({ err: error, threadId: context.threadId }, 'cancel check failed');
        return undefined;
      }
    },
  };
  return turn;
}

/** One LLM call, traced; an `LlmError` (after the provider's retries) is returned, anything else thrown. */
async function askModel(turn: Turn): Promise<{ response: ModelResponse } | { unavailable: LlmError }> {
  const { options, rounds } = turn;
  const started = Date.now();
  const model = options.model ?? options.defaultModel ?? 'default';
  const reason = rounds === 0 ? 'turn' : 'tool_round';
  let response: ModelResponse;
  try {
    response = await options.provider.complete({
      system: options.systemPrompt,
      messages: trimHistory(turn.working),
      tools: options.registry.specs(),
      reason,
      ...definedOnly({ model: options.model, signal: options.context.signal }),
    });
  } catch (error) {
    options.onTrace?.({
      kind: 'llm',
      model,
      reason,
      durationMs: Date.now() - started,
      toolCalls: 0,
      error: errorMessage(error).slice(0, 200),
    });
    if (!(error instanceof LlmError)) throw error;
    return { unavailable: error };
  }
  countUsage(turn, response);
  options.onTrace?.({
    kind: 'llm',
    model,
    reason,
    durationMs: Date.now() - started,
    toolCalls: response.toolCalls.length,
    ...(response.usage === undefined
      ? {}
      : { inputTokens: response.usage.inputTokens, outputTokens: response.usage.outputTokens }),
  });
  return { response };
}

/** Adds a call's tokens; an endpoint that reports none is estimated at four characters a token. */
function countUsage(turn: Turn, response: ModelResponse): void {
  if (response.usage !== undefined) {
    turn.usage.inputTokens += response.usage.inputTokens;
    turn.usage.outputTokens += response.usage.outputTokens;
    return;
  }
  const sent = turn.options.systemPrompt.length + JSON.stringify(turn.working).length;
  const received = response.text.length + JSON.stringify(response.toolCalls).length;
  turn.usage.inputTokens += Math.ceil(sent / 4);
  turn.usage.outputTokens += Math.ceil(received / 4);
}

function budgetSpent(turn: Turn): boolean {
  const budget = turn.options.tokenBudget;
  return budget !== undefined && turn.usage.inputTokens + turn.usage.outputTokens >= budget;
}

/** Runs one tool call, traced, and adds its result to the conversation. */
async function runTool(turn: Turn, call: ToolCall): Promise<void> {
  const { options } = turn;
  const { context } = options;
  await turn.progress(`running tool ${call.name}…`);
  const started = Date.now();
  // A tool that runs long (a research sub-agent) reports its own steps on the status line.
  const result = await options.registry.execute(call, {
    ...context,
    progress: (status) => turn.progress(status),
  });
  options.onTrace?.({
    kind: 'tool',
    name: call.name,
    arguments: summarizeArguments(call.arguments),
    result: summarizeResult(result.content),
    isError: result.isError === true,
    durationMs: Date.now() - started,
  });
  options.logger.debug(
    { threadId: context.threadId, tool: call.name, isError: result.isError, round: turn.rounds },
    'tool executed',
  );
  turn.add({
    role: 'tool',
    toolCallId: call.id,
    name: call.name,
    content: result.content,
    ...(result.isError ? { isError: true } : {}),
  });
  turn.guard.record(call, result.content);
}

/**
 * Runs a round's tool calls one by one (sequential on purpose: write tools may depend on each other and
 * approvals are ordered). A cancel stops at the next tool boundary; the calls left get a "not run" result.
 */
async function runToolRound(
  turn: Turn,
  calls: readonly ToolCall[],
): Promise<{ cancelledBy: string | undefined; done: string[]; skipped: string[] }> {
  let cancelledBy: string | undefined;
  const done: string[] = [];
  const skipped: string[] = [];
  for (const call of calls) {
    // A tool boundary: nothing new starts once someone cancelled (even a cancel sent while the model thought).
    cancelledBy ??= await turn.checkCancel();
    if (cancelledBy !== undefined) {
      skipped.push(call.name);
      // Every tool call needs a result, or the provider rejects the history.
      turn.add({
        role: 'tool',
        toolCallId: call.id,
        name: call.name,
        content: `Not run: ${cancelledBy} cancelled the turn.`,
        isError: true,
      });
      continue;
    }
    await runTool(turn, call);
    done.push(call.name);
  }
  cancelledBy ??= await turn.checkCancel();
  return { cancelledBy, done, skipped };
}

/** Ends the turn with a final assistant message. */
function finish(turn: Turn, reply: string, outcome: AgentTurnOutcome): AgentTurnResult {
  turn.add({ role: 'assistant', content: reply });
  return { reply, newMessages: turn.newMessages, rounds: turn.rounds, outcome, usage: turn.usage };
}

/**
 * One agent turn (ReAct): ask the model, run the tools it calls one by one, feed the results back,
 * and repeat until it answers or `maxToolRounds` tool rounds are spent. LLM failures (after the
 * provider's retries) become a plain "model unavailable" reply; this never throws for them. An
 * aborted `context.signal` does throw.
 */
export async function runAgentTurn(options: AgentTurnOptions): Promise<AgentTurnResult> {
  const { context, logger } = options;
  const turn = startTurn(options);
  for (;;) {
    await turn.progress('thinking…');
    const asked = await askModel(turn);
    if ('unavailable' in asked) {
      const error = asked.unavailable;
      logger.warn(
        { threadId: context.threadId, rounds: turn.rounds, err: error },
        'agent turn: llm unavailable',
      );
      return {
        reply: unavailableReply(error),
        newMessages: turn.newMessages,
        rounds: turn.rounds,
        outcome: 'llm_unavailable',
        usage: turn.usage,
      };
    }
    const { response } = asked;
    if (response.toolCalls.length === 0) {
      const reply = response.text.trim() === '' ? '(The model returned an empty answer.)' : response.text;
      return finish(turn, reply, 'answered');
    }
    if (budgetSpent(turn)) {
      // Like max rounds: the unanswered tool calls are left out, the text so far is what the turn has.
      logger.info({ threadId: context.threadId, usage: turn.usage }, 'agent turn: token budget spent');
      return finish(turn, response.text, 'budget_exhausted');
    }
    if (turn.rounds >= options.maxToolRounds) {
      // The unanswered tool calls are left out: providers reject a tool call without its result.
      const tools = response.toolCalls.map((call) => call.name);
      const result = finish(turn, maxRoundsReply(turn.rounds, tools, response.text), 'max_rounds');
      logger.info({ threadId: context.threadId, rounds: turn.rounds }, 'agent turn: max tool rounds reached');
      return result;
    }
    const assistant: AssistantMessage = {
      role: 'assistant',
      content: response.text,
      toolCalls: response.toolCalls,
    };
    turn.add(assistant);
    turn.rounds += 1;
    const { cancelledBy, done, skipped } = await runToolRound(turn, response.toolCalls);
    if (cancelledBy !== undefined) {
      const ran = done.length === 0 ? 'before running any tool this round' : `after ${done.join(', ')}`;
      const notRun = skipped.length === 0 ? '' : ` (not run: ${skipped.join(', ')})`;
      const result = finish(
        turn,
        `Cancelled by ${cancelledBy}: I stopped ${ran}${notRun} and did nothing further.`,
        'cancelled',
      );
      logger.info({ threadId: context.threadId, rounds: turn.rounds, cancelledBy }, 'agent turn: cancelled');
      return result;
    }
    const repetition = turn.guard.check();
    if (repetition !== undefined) {
      logger.info(
        { threadId: context.threadId, repetition, rounds: turn.rounds },
        'agent turn: repetition guard fired',
      );
      const note: UserMessage = { role: 'user', author: 'system', content: REPETITION_NOTE };
      turn.working.push(note);
    }
  }
}
