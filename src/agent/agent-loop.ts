import { definedOnly } from '../defined-only.js';
import { errorMessage, LlmError } from '../errors.js';
import type { Logger } from '../logger.js';
import { redactedHead } from '../redact.js';
import type { ToolContext, ToolRegistry } from '../tools/registry.js';
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
  logger: Logger;
}

type AgentTurnOutcome = 'answered' | 'max_rounds' | 'llm_unavailable' | 'cancelled';

interface AgentTurnResult {
  reply: string;
  /** Assistant and tool messages produced this turn, to append to the session. */
  newMessages: ChatMessage[];
  /** Tool rounds executed. */
  rounds: number;
  outcome: AgentTurnOutcome;
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

/**
 * One agent turn (ReAct): ask the model, run the tools it calls one by one, feed the results back,
 * and repeat until it answers or `maxToolRounds` tool rounds are spent. LLM failures (after the
 * provider's retries) become a plain "model unavailable" reply; this never throws for them. An
 * aborted `context.signal` does throw.
 */
export async function runAgentTurn(options: AgentTurnOptions): Promise<AgentTurnResult> {
  const { provider, registry, context, logger } = options;
  const newMessages: ChatMessage[] = [];
  // The working conversation also holds transient guard notes that are not saved to the session.
  const working: ChatMessage[] = [...options.history];
  const guard = createRepetitionGuard();
  let rounds = 0;
  let lastStatus: string | undefined;

  const progress = async (status: string) => {
    if (options.onProgress === undefined || status === lastStatus) return;
    lastStatus = status;
    try {
      await options.onProgress(status);
    } catch (error) {
      logger.warn({ err: errorMessage(error), threadId: context.threadId }, 'progress update failed');
    }
  };
  const checkCancel = async (): Promise<string | undefined> => {
    if (options.cancelledBy === undefined) return undefined;
    try {
      return await options.cancelledBy();
    } catch (error) {
      logger.warn({ err: errorMessage(error), threadId: context.threadId }, 'cancel check failed');
      return undefined;
    }
  };
  const add = (message: ChatMessage) => {
    working.push(message);
    newMessages.push(message);
  };

  for (;;) {
    await progress('thinking…');
    let response: Awaited<ReturnType<LlmProvider['complete']>>;
    const llmStarted = Date.now();
    const model = options.model ?? options.defaultModel ?? 'default';
    const reason = rounds === 0 ? 'turn' : 'tool_round';
    try {
      response = await provider.complete({
        system: options.systemPrompt,
        messages: trimHistory(working),
        tools: registry.specs(),
        reason: rounds === 0 ? 'turn' : 'tool_round',
        ...definedOnly({ model: options.model, signal: context.signal }),
      });
    } catch (error) {
      options.onTrace?.({
        kind: 'llm',
        model,
        reason,
        durationMs: Date.now() - llmStarted,
        toolCalls: 0,
        error: errorMessage(error).slice(0, 200),
      });
      if (!(error instanceof LlmError)) throw error;
      logger.warn({ threadId: context.threadId, rounds, err: error.message }, 'agent turn: llm unavailable');
      return { reply: unavailableReply(error), newMessages, rounds, outcome: 'llm_unavailable' };
    }

    options.onTrace?.({
      kind: 'llm',
      model,
      reason,
      durationMs: Date.now() - llmStarted,
      toolCalls: response.toolCalls.length,
      ...(response.usage === undefined
        ? {}
        : { inputTokens: response.usage.inputTokens, outputTokens: response.usage.outputTokens }),
    });

    if (response.toolCalls.length === 0) {
      const reply = response.text.trim() === '' ? '(The model returned an empty answer.)' : response.text;
      add({ role: 'assistant', content: reply });
      return { reply, newMessages, rounds, outcome: 'answered' };
    }

    if (rounds >= options.maxToolRounds) {
      // The unanswered tool calls are left out: providers reject a tool call without its result.
      const reply = maxRoundsReply(
        rounds,
        response.toolCalls.map((call) => call.name),
        response.text,
      );
      add({ role: 'assistant', content: reply });
      logger.info({ threadId: context.threadId, rounds }, 'agent turn: max tool rounds reached');
      return { reply, newMessages, rounds, outcome: 'max_rounds' };
    }

    const assistant: AssistantMessage = {
      role: 'assistant',
      content: response.text,
      toolCalls: response.toolCalls,
    };
    add(assistant);
    rounds += 1;
    // Sequential on purpose: write tools may depend on each other and approvals are ordered.
    let cancelledBy: string | undefined;
    const done: string[] = [];
    const skipped: string[] = [];
    for (const call of response.toolCalls) {
      // A tool boundary: nothing new starts once someone cancelled (even a cancel sent while the model thought).
      cancelledBy ??= await checkCancel();
      if (cancelledBy !== undefined) {
        skipped.push(call.name);
        // Every tool call needs a result, or the provider rejects the history.
        add({
          role: 'tool',
          toolCallId: call.id,
          name: call.name,
          content: `Not run: ${cancelledBy} cancelled the turn.`,
          isError: true,
        });
        continue;
      }
      await progress(`running tool ${call.name}…`);
      const toolStarted = Date.now();
      const result = await registry.execute(call, context);
      options.onTrace?.({
        kind: 'tool',
        name: call.name,
        arguments: summarizeArguments(call.arguments),
        result: summarizeResult(result.content),
        isError: result.isError === true,
        durationMs: Date.now() - toolStarted,
      });
      logger.debug(
        { threadId: context.threadId, tool: call.name, isError: result.isError, round: rounds },
        'tool executed',
      );
      add({
        role: 'tool',
        toolCallId: call.id,
        name: call.name,
        content: result.content,
        ...(result.isError ? { isError: true } : {}),
      });
      guard.record(call, result.content);
      done.push(call.name);
    }
    cancelledBy ??= await checkCancel();
    if (cancelledBy !== undefined) {
      const ran = done.length === 0 ? 'before running any tool this round' : `after ${done.join(', ')}`;
      const notRun = skipped.length === 0 ? '' : ` (not run: ${skipped.join(', ')})`;
      const reply = `Cancelled by ${cancelledBy}: I stopped ${ran}${notRun} and did nothing further.`;
      add({ role: 'assistant', content: reply });
      logger.info({ threadId: context.threadId, rounds, cancelledBy }, 'agent turn: cancelled');
      return { reply, newMessages, rounds, outcome: 'cancelled' };
    }
    const repetition = guard.check();
    if (repetition !== undefined) {
      logger.info({ threadId: context.threadId, repetition, rounds }, 'agent turn: repetition guard fired');
      const note: UserMessage = { role: 'user', author: 'system', content: REPETITION_NOTE };
      working.push(note);
    }
  }
}
