import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type ScriptedLlmServer,
  startScriptedAnthropic,
  startScriptedOpenAi,
} from '../helpers/scripted-llm/index.js';

/** The scripted servers must speak the real wire formats: the official SDKs are the judges. */

let server: ScriptedLlmServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe('scripted OpenAI server', () => {
  it('answers non-streaming text and tool calls, recording requests', async () => {
    server = await startScriptedOpenAi();
    const client = new OpenAI({ baseURL: server.url, apiKey: 'x', maxRetries: 0 });
    server.enqueue({ toolCalls: [{ name: 'list_training_runs', arguments: { limit: 2 } }] });

    const first = await client.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: '[alice] list runs' }],
    });
    const call = first.choices[0]?.message.tool_calls?.[0];
    expect(call?.type === 'function' && call.function.name).toBe('list_training_runs');
    expect(call?.type === 'function' && JSON.parse(call.function.arguments)).toEqual({ limit: 2 });
    expect(first.choices[0]?.finish_reason).toBe('tool_calls');

    // Empty queue → fallback text.
    const second = await client.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(second.choices[0]?.message.content).toBe('ok');
    expect(server.requests.map((request) => request.lastUserText)).toEqual(['[alice] list runs', 'hi']);
  });

  it('streams text and tool-call deltas over SSE', async () => {
    server = await startScriptedOpenAi();
    const client = new OpenAI({ baseURL: server.url, apiKey: 'x', maxRetries: 0 });
    server.enqueue({
      text: 'Let me check the runs for you.',
      toolCalls: [{ name: 'get_training_status', arguments: { run: 'qwen-gsm8k-sft' } }],
    });
    const stream = await client.chat.completions.create({
      model: 'm',
      stream: true,
      messages: [{ role: 'user', content: 'status?' }],
    });
    let text = '';
    let args = '';
    let name = '';
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta;
      text += delta?.content ?? '';
      for (const call of delta?.tool_calls ?? []) {
        name += call.function?.name ?? '';
        args += call.function?.arguments ?? '';
      }
    }
    expect(text).toBe('Let me check the runs for you.');
    expect(name).toBe('get_training_status');
    expect(JSON.parse(args)).toEqual({ run: 'qwen-gsm8k-sft' });
    expect(server.requests[0]?.stream).toBe(true);
  });

  it('uses a handler and scripted HTTP errors', async () => {
    server = await startScriptedOpenAi();
    server.setHandler((request) => ({ text: `echo: ${request.lastUserText}` }));
    server.enqueue({ status: 400 });
    const client = new OpenAI({ baseURL: server.url, apiKey: 'x', maxRetries: 0 });
    await expect(
      client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'a' }] }),
    ).rejects.toMatchObject({ status: 400 });
    const reply = await client.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'b' }],
    });
    expect(reply.choices[0]?.message.content).toBe('echo: b');
  });
});

describe('scripted Anthropic server', () => {
  it('answers non-streaming text and tool_use blocks', async () => {
    server = await startScriptedAnthropic();
    const client = new Anthropic({ baseURL: server.url.replace(/\/v1$/, ''), apiKey: 'x', maxRetries: 0 });
    server.enqueue({ text: 'checking', toolCalls: [{ name: 'help', arguments: {} }] });
    const message = await client.messages.create({
      model: 'm',
      max_tokens: 100,
      messages: [{ role: 'user', content: '[bob] what can you do?' }],
    });
    expect(message.stop_reason).toBe('tool_use');
    expect(message.content.map((block) => block.type)).toEqual(['text', 'tool_use']);
    expect(server.requests[0]?.lastUserText).toBe('[bob] what can you do?');
  });

  it('streams text and tool input deltas', async () => {
    server = await startScriptedAnthropic();
    const client = new Anthropic({ baseURL: server.url.replace(/\/v1$/, ''), apiKey: 'x', maxRetries: 0 });
    server.enqueue({
      text: 'A streamed answer.',
      toolCalls: [{ name: 'stop_training', arguments: { run: 'r1' } }],
    });
    const final = await client.messages
      .stream({ model: 'm', max_tokens: 100, messages: [{ role: 'user', content: 'stop r1' }] })
      .finalMessage();
    const text = final.content.find((block) => block.type === 'text');
    const tool = final.content.find((block) => block.type === 'tool_use');
    expect(text?.type === 'text' && text.text).toBe('A streamed answer.');
    expect(tool?.type === 'tool_use' && tool.input).toEqual({ run: 'r1' });
    expect(final.stop_reason).toBe('tool_use');
    expect(server.requests[0]?.stream).toBe(true);
  });
});
