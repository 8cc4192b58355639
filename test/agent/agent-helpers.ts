import { z } from 'zod';
import type { LlmProvider } from '../../src/agent/llm-provider.js';
import type { ChatMessage } from '../../src/agent/messages.js';
import { createLlmProvider } from '../../src/agent/providers/create-llm-provider.js';
import { createLogger } from '../../src/logger.js';
import { defineTool, type ToolContext } from '../../src/tools/registry.js';
import {
  type RecordedRequest,
  type ScriptedLlmServer,
  startScriptedAnthropic,
  startScriptedOpenAi,
} from '../helpers/scripted-llm/index.js';

export type ProviderKind = 'openai' | 'anthropic';

export const logger = createLogger('silent');

export const context: ToolContext = { threadId: 'web:general:t1', actor: { id: 'u-alice', name: 'alice' } };

export function startServer(kind: ProviderKind): Promise<ScriptedLlmServer> {
  return kind === 'openai' ? startScriptedOpenAi() : startScriptedAnthropic();
}

export interface ProviderSetup {
  provider: LlmProvider;
  calls: string[];
}

export function makeProvider(
  kind: ProviderKind,
  baseUrl: string,
  overrides: { timeoutMs?: number; maxRetries?: number } = {},
): ProviderSetup {
  const calls: string[] = [];
  const provider = createLlmProvider(
    {
      provider: kind,
      baseUrl,
      model: 'scripted-model',
      apiKey: undefined,
      timeoutMs: overrides.timeoutMs ?? 5000,
      maxRetries: overrides.maxRetries ?? 2,
    },
    { logger, onCall: (reason) => calls.push(reason), retryBaseDelayMs: 10 },
  );
  return { provider, calls };
}

export function userMessage(author: string, content: string): ChatMessage {
  return { role: 'user', author, content };
}

/** Tool results as they reached the model, whatever the wire format. */
export function toolResultsIn(
  request: RecordedRequest | undefined,
): Array<{ id: string; content: string; isError: boolean }> {
  const messages = (request?.body.messages ?? []) as Array<Record<string, unknown>>;
  const results: Array<{ id: string; content: string; isError: boolean }> = [];
  for (const message of messages) {
    if (message.role === 'tool') {
      results.push({ id: String(message.tool_call_id), content: String(message.content), isError: false });
    }
    if (message.role === 'user' && Array.isArray(message.content)) {
      for (const block of message.content as Array<Record<string, unknown>>) {
        if (block.type === 'tool_result') {
          results.push({
            id: String(block.tool_use_id),
            content: String(block.content),
            isError: block.is_error === true,
          });
        }
      }
    }
  }
  return results;
}

/** All text the model was sent in a request (system excluded), for "does it contain" checks. */
export function requestText(request: RecordedRequest | undefined): string {
  return JSON.stringify(request?.body.messages ?? []);
}

export const runStatuses: Record<string, string> = { 'qwen-gsm8k-sft': 'running, step 120, loss 1.23' };

export function testTools() {
  const executed: string[] = [];
  const tools = [
    defineTool({
      name: 'list_training_runs',
      description: 'List all training runs.',
      input: z.object({}),
      async execute() {
        executed.push('list_training_runs');
        return { runs: Object.keys(runStatuses) };
      },
    }),
    defineTool({
      name: 'get_training_status',
      description: 'Status of one run.',
      input: z.object({ run: z.string().min(1).describe('Run name') }),
      async execute(input) {
        executed.push(`get_training_status:${input.run}`);
        return runStatuses[input.run] ?? `no run named ${input.run}`;
      },
    }),
    defineTool({
      name: 'explode',
      description: 'Always fails.',
      input: z.object({}),
      async execute() {
        executed.push('explode');
        throw new Error('disk full while writing checkpoint');
      },
    }),
  ];
  return { tools, executed };
}
