import Anthropic, {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from '@anthropic-ai/sdk';
import type {
  ContentBlockParam,
  MessageParam,
  TextBlockParam,
  Tool,
  ToolResultBlockParam,
  ToolUseBlockParam,
} from '@anthropic-ai/sdk/resources/messages';
import { definedOnly } from '../../defined-only.js';
import type { Logger } from '../../logger.js';
import type { ToolCall, ToolSpec } from '../../tools/tool-call.js';
import type { LlmProvider, LlmRequest, LlmResponse } from '../llm-provider.js';
import { type ChatMessage, formatUserContent } from '../messages.js';
import type { FetchFunction } from './http-fetch.js';
import { classifySdkError, type RetryPolicy, withLlmRetries } from './llm-retry.js';

interface AnthropicProviderOptions {
  /** e.g. `https://api.anthropic.com`; a trailing `/v1` is accepted (the SDK adds its own). */
  baseUrl: string;
  model: string;
  apiKey: string | undefined;
  timeoutMs: number;
  retry: RetryPolicy;
  logger: Logger;
  maxTokens?: number;
  onCall?: (reason: string) => void;
  /** The HTTP client the SDK calls (http-fetch.ts); the built-in fetch when absent. */
  fetch?: FetchFunction;
}

const errorClasses = { APIError, APIConnectionError, APIConnectionTimeoutError, APIUserAbortError };

function parseToolInput(raw: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(raw);
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) {
      return parsed as Record<string, unknown>;
    }
  } catch {
    // The model's own arguments were not JSON; the tool already answered with an error, so an empty
    // input keeps the history well-formed for the API.
  }
  return {};
}

/**
 * Map the neutral history to Messages API turns. The API wants strictly alternating roles, so
 * consecutive user messages (several people talking) and tool results are merged into one user turn,
 * tool results first as the API requires.
 */
export function toAnthropicMessages(messages: ChatMessage[]): MessageParam[] {
  const mapped: Array<{ role: 'user' | 'assistant'; content: ContentBlockParam[] }> = [];
  const push = (role: 'user' | 'assistant', block: ContentBlockParam) => {
    const last = mapped.at(-1);
    if (last !== undefined && last.role === role) last.content.push(block);
    else mapped.push({ role, content: [block] });
  };
  for (const message of messages) {
    if (message.role === 'user') {
      const block: TextBlockParam = { type: 'text', text: formatUserContent(message) };
      push('user', block);
    } else if (message.role === 'tool') {
      const block: ToolResultBlockParam = {
        type: 'tool_result',
        tool_use_id: message.toolCallId,
        content: message.content,
        ...(message.isError === true ? { is_error: true } : {}),
      };
      push('user', block);
    } else {
      const blocks: ContentBlockParam[] = [];
      if (message.content.trim() !== '') blocks.push({ type: 'text', text: message.content });
      for (const call of message.toolCalls ?? []) {
        const block: ToolUseBlockParam = {
          type: 'tool_use',
          id: call.id,
          name: call.name,
          input: parseToolInput(call.arguments),
        };
        blocks.push(block);
      }
      // Empty assistant turns are rejected by the API.
      if (blocks.length === 0) blocks.push({ type: 'text', text: '(no reply)' });
      for (const block of blocks) push('assistant', block);
    }
  }
  // The API requires the conversation to open with a user turn.
  if (mapped[0]?.role === 'assistant') {
    mapped.unshift({
      role: 'user',
      content: [{ type: 'text', text: '[system] (earlier conversation trimmed)' }],
    });
  }
  return mapped;
}

function toAnthropicTools(tools: ToolSpec[]): Tool[] {
  return tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    input_schema: { ...tool.parameters, type: 'object' as const },
  }));
}

/**
 * The SDK appends `/v1/messages` itself, while OpenAI-style base URLs end in `/v1`; accepting both
 * lets one `SHEPHERD_LLM_BASE_URL` convention serve both providers.
 */
export function anthropicBaseUrl(baseUrl: string): string {
  return baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '');
}

/** A provider for the Anthropic Messages API (non-streaming). */
export function createAnthropicProvider(options: AnthropicProviderOptions): LlmProvider {
  const client = new Anthropic({
    baseURL: anthropicBaseUrl(options.baseUrl),
    apiKey: options.apiKey ?? 'not-needed',
    timeout: options.timeoutMs,
    maxRetries: 0,
    ...definedOnly({ fetch: options.fetch }),
  });

  async function attempt(request: LlmRequest): Promise<LlmResponse> {
    const message = await client.messages.create(
      {
        model: request.model ?? options.model,
        max_tokens: options.maxTokens ?? 4096,
        system: request.system,
        messages: toAnthropicMessages(request.messages),
        ...(request.tools.length > 0 ? { tools: toAnthropicTools(request.tools) } : {}),
      },
      definedOnly({ signal: request.signal }),
    );
    const texts: string[] = [];
    const toolCalls: ToolCall[] = [];
    for (const block of message.content) {
      if (block.type === 'text') texts.push(block.text);
      else if (block.type === 'tool_use') {
        toolCalls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) });
      }
    }
    return {
      text: texts.join(''),
      toolCalls,
      ...(message.usage === undefined
        ? {}
        : { usage: { inputTokens: message.usage.input_tokens, outputTokens: message.usage.output_tokens } }),
    };
  }

  return {
    complete(request) {
      return withLlmRetries(() => attempt(request), {
        policy: options.retry,
        provider: 'anthropic',
        reason: request.reason,
        logger: options.logger,
        signal: request.signal,
        onCall: options.onCall,
        classify: (error) => classifySdkError(error, errorClasses, 'anthropic'),
      });
    },
  };
}
