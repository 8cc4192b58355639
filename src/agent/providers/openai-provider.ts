import { randomUUID } from 'node:crypto';
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { definedOnly } from '../../defined-only.js';
import type { Logger } from '../../logger.js';
import type { ToolCall, ToolSpec } from '../../tools/tool-call.js';
import type { LlmProvider, LlmRequest, LlmResponse } from '../llm-provider.js';
import { type ChatMessage, formatUserContent } from '../messages.js';
import type { FetchFunction } from './http-fetch.js';
import { classifySdkError, type RetryPolicy, withLlmRetries } from './llm-retry.js';

interface OpenAiProviderOptions {
  /** Any OpenAI-compatible endpoint: OpenAI, Ollama (`http://localhost:11434/v1`), vLLM, … */
  baseUrl: string;
  model: string;
  /** Local servers need none; the SDK insists on a value, so a placeholder is sent. */
  apiKey: string | undefined;
  timeoutMs: number;
  retry: RetryPolicy;
  logger: Logger;
  onCall?: (reason: string) => void;
  /** The HTTP client the SDK calls (http-fetch.ts); the built-in fetch when absent. */
  fetch?: FetchFunction;
}

const errorClasses = { APIError, APIConnectionError, APIConnectionTimeoutError, APIUserAbortError };

/** Map the neutral history to Chat Completions messages. */
export function toOpenAiMessages(system: string, messages: ChatMessage[]): ChatCompletionMessageParam[] {
  const mapped: ChatCompletionMessageParam[] = [{ role: 'system', content: system }];
  for (const message of messages) {
    if (message.role === 'user') {
      mapped.push({ role: 'user', content: formatUserContent(message) });
    } else if (message.role === 'assistant') {
      const toolCalls = message.toolCalls ?? [];
      if (toolCalls.length === 0) {
        mapped.push({ role: 'assistant', content: message.content });
      } else {
        mapped.push({
          role: 'assistant',
          // Some OpenAI-compatible servers reject an empty string next to tool calls; null is the spec.
          content: message.content === '' ? null : message.content,
          tool_calls: toolCalls.map((call) => ({
            id: call.id,
            type: 'function' as const,
            function: { name: call.name, arguments: call.arguments },
          })),
        });
      }
    } else {
      mapped.push({ role: 'tool', tool_call_id: message.toolCallId, content: message.content });
    }
  }
  return mapped;
}

function toOpenAiTools(tools: ToolSpec[]): ChatCompletionTool[] {
  return tools.map((tool) => ({
    type: 'function' as const,
    function: { name: tool.name, description: tool.description, parameters: tool.parameters },
  }));
}

/** A provider for the Chat Completions API (non-streaming: the turn needs the whole answer anyway). */
export function createOpenAiProvider(options: OpenAiProviderOptions): LlmProvider {
  const client = new OpenAI({
    baseURL: options.baseUrl,
    apiKey: options.apiKey ?? 'not-needed',
    timeout: options.timeoutMs,
    maxRetries: 0,
    ...definedOnly({ fetch: options.fetch }),
  });

  async function attempt(request: LlmRequest): Promise<LlmResponse> {
    const completion = await client.chat.completions.create(
      {
        model: request.model ?? options.model,
        messages: toOpenAiMessages(request.system, request.messages),
        // Several servers reject `tools: []`, so the key is left out when there are none.
        ...(request.tools.length > 0 ? { tools: toOpenAiTools(request.tools) } : {}),
      },
      definedOnly({ signal: request.signal }),
    );
    const message = completion.choices[0]?.message;
    const toolCalls: ToolCall[] = [];
    for (const call of message?.tool_calls ?? []) {
      if (call.type !== 'function') continue;
      const rawArguments: unknown = call.function.arguments;
      toolCalls.push({
        // Some compatible servers omit ids; the tool result must still be matched to its call.
        id: call.id || `call_${randomUUID()}`,
        name: call.function.name,
        arguments: typeof rawArguments === 'string' ? rawArguments : JSON.stringify(rawArguments ?? {}),
      });
    }
    const usage = completion.usage;
    return {
      text: message?.content ?? '',
      toolCalls,
      ...(usage === undefined || usage === null
        ? {}
        : { usage: { inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens } }),
    };
  }

  return {
    complete(request) {
      return withLlmRetries(() => attempt(request), {
        policy: options.retry,
        provider: 'openai',
        reason: request.reason,
        logger: options.logger,
        signal: request.signal,
        onCall: options.onCall,
        classify: (error) => classifySdkError(error, errorClasses, 'openai'),
      });
    },
  };
}
