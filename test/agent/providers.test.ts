import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/agent/messages.js';
import { anthropicBaseUrl, toAnthropicMessages } from '../../src/agent/providers/anthropic-provider.js';
import { backoffDelay, retryAfterFromHeaders } from '../../src/agent/providers/llm-retry.js';
import { toOpenAiMessages } from '../../src/agent/providers/openai-provider.js';
import { loadSystemPrompt } from '../../src/agent/system-prompt.js';

const exchange: ChatMessage[] = [
  { role: 'user', author: 'alice', content: 'start it' },
  { role: 'user', author: 'bob', content: 'with 2 GPUs' },
  {
    role: 'assistant',
    content: 'Checking.',
    toolCalls: [{ id: 't1', name: 'get_cluster_info', arguments: '{}' }],
  },
  { role: 'tool', toolCallId: 't1', name: 'get_cluster_info', content: 'Error: down', isError: true },
  { role: 'user', author: 'system', content: 'note' },
  { role: 'assistant', content: 'Cluster is down.' },
];

describe('provider message mapping', () => {
  it('maps to Anthropic turns, merging consecutive user content with tool results first', () => {
    expect(toAnthropicMessages(exchange)).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: '[alice] start it' },
          { type: 'text', text: '[bob] with 2 GPUs' },
        ],
      },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Checking.' },
          { type: 'tool_use', id: 't1', name: 'get_cluster_info', input: {} },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 't1', content: 'Error: down', is_error: true },
          { type: 'text', text: '[system] note' },
        ],
      },
      { role: 'assistant', content: [{ type: 'text', text: 'Cluster is down.' }] },
    ]);
  });

  it('opens an Anthropic conversation with a user turn', () => {
    const mapped = toAnthropicMessages([{ role: 'assistant', content: 'hi' }]);
    expect(mapped[0]?.role).toBe('user');
  });

  it('maps to OpenAI messages with the system prompt first', () => {
    const mapped = toOpenAiMessages('SYS', exchange);
    expect(mapped[0]).toEqual({ role: 'system', content: 'SYS' });
    expect(mapped[2]).toEqual({ role: 'user', content: '[bob] with 2 GPUs' });
    expect(mapped[3]).toMatchObject({
      role: 'assistant',
      tool_calls: [{ id: 't1', type: 'function', function: { name: 'get_cluster_info', arguments: '{}' } }],
    });
    expect(mapped[4]).toEqual({ role: 'tool', tool_call_id: 't1', content: 'Error: down' });
  });

  it('accepts Anthropic base URLs with or without /v1', () => {
    expect(anthropicBaseUrl('https://api.anthropic.com')).toBe('https://api.anthropic.com');
    expect(anthropicBaseUrl('http://127.0.0.1:9/v1/')).toBe('http://127.0.0.1:9');
  });
});

describe('retry timing', () => {
  it('parses retry-after in seconds, milliseconds and dates', () => {
    expect(retryAfterFromHeaders(new Headers({ 'retry-after': '2' }))).toBe(2000);
    expect(retryAfterFromHeaders(new Headers({ 'retry-after-ms': '150' }))).toBe(150);
    const now = Date.parse('2025-01-01T00:00:00Z');
    expect(retryAfterFromHeaders(new Headers({ 'retry-after': 'Wed, 01 Jan 2025 00:00:03 GMT' }), now)).toBe(
      3000,
    );
    expect(retryAfterFromHeaders(new Headers())).toBeUndefined();
    expect(retryAfterFromHeaders(undefined)).toBeUndefined();
  });

  it('backs off exponentially with a cap', () => {
    const policy = { maxRetries: 5, baseDelayMs: 500, maxDelayMs: 3000 };
    expect(backoffDelay(0, policy, () => 0.5)).toBe(500);
    expect(backoffDelay(1, policy, () => 0.5)).toBe(1000);
    expect(backoffDelay(3, policy, () => 0.5)).toBe(3000);
  });
});

describe('system prompt', () => {
  it('loads prompts/system.md with the bot name filled in', () => {
    const prompt = loadSystemPrompt('herder');
    expect(prompt).toContain('You are herder');
    expect(prompt).not.toContain('{{botName}}');
    expect(prompt).toContain('[alice]');
  });
});
