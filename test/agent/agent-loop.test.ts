import { afterEach, describe, expect, it } from 'vitest';
import { runAgentTurn } from '../../src/agent/agent-loop.js';
import type { ChatMessage } from '../../src/agent/messages.js';
import { REPETITION_NOTE } from '../../src/agent/repetition-guard.js';
import { createToolRegistry } from '../../src/tools/registry.js';
import type { ScriptedLlmServer } from '../helpers/scripted-llm/index.js';
import {
  context,
  logger,
  makeProvider,
  type ProviderKind,
  requestText,
  startServer,
  testTools,
  toolResultsIn,
  userMessage,
} from './agent-helpers.js';

const SYSTEM = 'You are shepherd, a test assistant.';

describe.each<ProviderKind>(['openai', 'anthropic'])('agent loop with the %s provider', (kind) => {
  let server: ScriptedLlmServer;
  afterEach(async () => {
    await server.close();
  });

  async function turn(
    history: ChatMessage[],
    options: { maxToolRounds?: number; timeoutMs?: number; maxRetries?: number; baseUrl?: string } = {},
  ) {
    const { provider, calls } = makeProvider(kind, options.baseUrl ?? server.url, options);
    const { tools, executed } = testTools();
    const progress: string[] = [];
    const result = await runAgentTurn({
      provider,
      registry: createToolRegistry(tools),
      systemPrompt: SYSTEM,
      history,
      context,
      maxToolRounds: options.maxToolRounds ?? 10,
      onProgress: (status) => {
        progress.push(status);
      },
      logger,
    });
    return { result, calls, executed, progress };
  }

  it('answers plain text, sending the system prompt, authors and tools', async () => {
    server = await startServer(kind);
    server.enqueue({ text: 'Hi Alice, no runs yet.' });
    const { result, calls } = await turn([userMessage('alice', 'hello there')]);

    expect(result).toEqual({
      reply: 'Hi Alice, no runs yet.',
      newMessages: [{ role: 'assistant', content: 'Hi Alice, no runs yet.' }],
      rounds: 0,
      outcome: 'answered',
      // As the scripted endpoint reports it.
      usage: { inputTokens: 10, outputTokens: 5 },
    });
    expect(calls).toEqual(['turn']);
    const request = server.requests[0];
    expect(request?.lastUserText).toBe('[alice] hello there');
    expect(JSON.stringify(request?.body)).toContain(SYSTEM);
    expect(JSON.stringify(request?.body.tools)).toContain('get_training_status');
  });

  it('stops at the tool boundary after a cancel: the running tool finishes, the rest is answered as not run', async () => {
    server = await startServer(kind);
    server.enqueue({
      toolCalls: [
        { name: 'get_training_status', arguments: { run: 'a' } },
        { name: 'list_training_runs', arguments: {} },
      ],
    });
    const { provider, calls } = makeProvider(kind, server.url, {});
    const { tools, executed } = testTools();
    let checks = 0;
    const result = await runAgentTurn({
      provider,
      registry: createToolRegistry(tools),
      systemPrompt: SYSTEM,
      history: [userMessage('alice', 'check a, then list')],
      context,
      maxToolRounds: 10,
      // Nobody has cancelled before the first tool; bob has by the time it finished.
      cancelledBy: async () => (checks++ === 0 ? undefined : 'bob'),
      logger,
    });
    expect(result.outcome).toBe('cancelled');
    expect(result.reply).toBe(
      'Cancelled by bob: I stopped after get_training_status (not run: list_training_runs) and did nothing further.',
    );
    expect(executed).toEqual(['get_training_status:a']);
    expect(calls).toEqual(['turn']);
    // Every tool call has its result, so the saved history stays valid for the provider.
    expect(result.newMessages.filter((message) => message.role === 'tool')).toHaveLength(2);
  });

  it('runs a tool and sends its result back to the model', async () => {
    server = await startServer(kind);
    server.enqueue(
      { toolCalls: [{ name: 'get_training_status', arguments: { run: 'qwen-gsm8k-sft' } }] },
      { text: 'qwen-gsm8k-sft is at step 120.' },
    );
    const { result, executed, progress, calls } = await turn([userMessage('carol', 'how is it going?')]);

    expect(result.outcome).toBe('answered');
    expect(result.rounds).toBe(1);
    expect(result.reply).toBe('qwen-gsm8k-sft is at step 120.');
    expect(executed).toEqual(['get_training_status:qwen-gsm8k-sft']);
    expect(calls).toEqual(['turn', 'tool_round']);
    expect(progress).toEqual(['thinking…', 'running tool get_training_status…', 'thinking…']);

    const results = toolResultsIn(server.requests[1]);
    expect(results).toHaveLength(1);
    expect(results[0]?.content).toBe('running, step 120, loss 1.23');
    expect(results[0]?.isError).toBe(false);
    const assistant = result.newMessages[0];
    expect(assistant?.role === 'assistant' && assistant.toolCalls?.[0]?.id).toBe(results[0]?.id);
    expect(result.newMessages.map((message) => message.role)).toEqual(['assistant', 'tool', 'assistant']);
  });

  it('returns invalid arguments to the model as an error and recovers', async () => {
    server = await startServer(kind);
    const invalid = kind === 'openai' ? '{"run": ' : { run: 42 };
    server.enqueue(
      { toolCalls: [{ name: 'get_training_status', arguments: invalid }] },
      { toolCalls: [{ name: 'get_training_status', arguments: {} }] },
      { toolCalls: [{ name: 'get_training_status', arguments: { run: 'qwen-gsm8k-sft' } }] },
      { text: 'Fixed it: step 120.' },
    );
    const { result, executed } = await turn([userMessage('alice', 'status qwen-gsm8k-sft')]);

    expect(result.outcome).toBe('answered');
    expect(result.reply).toBe('Fixed it: step 120.');
    expect(executed).toEqual(['get_training_status:qwen-gsm8k-sft']);
    const first = toolResultsIn(server.requests[1])[0];
    expect(first?.content).toMatch(
      kind === 'openai' ? /not valid JSON/ : /invalid arguments for get_training_status: run:/,
    );
    if (kind === 'anthropic') expect(first?.isError).toBe(true);
    expect(toolResultsIn(server.requests[2])[1]?.content).toMatch(/invalid arguments.*run:/);
  });

  it('turns a throwing tool into an error result', async () => {
    server = await startServer(kind);
    server.enqueue(
      { toolCalls: [{ name: 'explode', arguments: {} }] },
      { text: 'The tool failed: disk full.' },
    );
    const { result } = await turn([userMessage('bob', 'do the thing')]);

    expect(result.outcome).toBe('answered');
    const toolMessage = result.newMessages[1];
    expect(toolMessage).toMatchObject({ role: 'tool', name: 'explode', isError: true });
    expect(toolResultsIn(server.requests[1])[0]?.content).toBe('Error: disk full while writing checkpoint');
  });

  it('answers an unknown tool with the list of tools', async () => {
    server = await startServer(kind);
    server.enqueue({ toolCalls: [{ name: 'launch_rocket', arguments: {} }] }, { text: 'Sorry.' });
    await turn([userMessage('bob', 'launch')]);
    expect(toolResultsIn(server.requests[1])[0]?.content).toMatch(
      /unknown tool "launch_rocket".*list_training_runs, get_training_status, explode/,
    );
  });

  it('retries a 500 and then succeeds', async () => {
    server = await startServer(kind);
    server.enqueue({ status: 500 }, { text: 'back again' });
    const { result, calls } = await turn([userMessage('alice', 'hi')]);
    expect(result.outcome).toBe('answered');
    expect(result.reply).toBe('back again');
    expect(server.requests).toHaveLength(2);
    expect(calls).toEqual(['turn', 'turn']);
  });

  it('honours retry-after on a 429', async () => {
    server = await startServer(kind);
    server.enqueue({ status: 429, headers: { 'retry-after': '1' } }, { text: 'after the wait' });
    const { result } = await turn([userMessage('alice', 'hi')]);
    expect(result.reply).toBe('after the wait');
    const [first, second] = server.requests;
    expect((second?.receivedAt ?? 0) - (first?.receivedAt ?? 0)).toBeGreaterThanOrEqual(950);
  });

  it('reports the model unavailable after repeated 500s', async () => {
    server = await startServer(kind);
    server.setHandler(() => ({ status: 503 }));
    const { result, calls } = await turn([userMessage('alice', 'hi')], { maxRetries: 2 });
    expect(result.outcome).toBe('llm_unavailable');
    expect(result.reply).toMatch(
      /^The model endpoint is unavailable right now \(.*HTTP 503.*\)\. Plain commands still work: help, runs/,
    );
    expect(result.newMessages).toEqual([]);
    expect(server.requests).toHaveLength(3);
    expect(calls).toHaveLength(3);
  });

  it('does not retry a 400', async () => {
    server = await startServer(kind);
    server.enqueue({ status: 400 });
    const { result } = await turn([userMessage('alice', 'hi')]);
    expect(result.outcome).toBe('llm_unavailable');
    expect(server.requests).toHaveLength(1);
  });

  it('reports the model unavailable when nothing listens', async () => {
    server = await startServer(kind);
    const deadUrl = server.url;
    await server.close();
    const { result, calls } = await turn([userMessage('alice', 'hi')], { baseUrl: deadUrl, maxRetries: 1 });
    expect(result.outcome).toBe('llm_unavailable');
    expect(result.reply).toMatch(/connection/i);
    expect(calls).toHaveLength(2);
  });

  it('times out a hanging endpoint', async () => {
    server = await startServer(kind);
    server.setHandler(() => ({ hang: true }));
    const started = Date.now();
    const { result } = await turn([userMessage('alice', 'hi')], { timeoutMs: 300, maxRetries: 1 });
    expect(result.outcome).toBe('llm_unavailable');
    expect(result.reply).toMatch(/timed out/);
    expect(server.requests).toHaveLength(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(600);
  });

  it('throws (rather than answering) when the caller aborts the turn', async () => {
    server = await startServer(kind);
    server.setHandler(() => ({ hang: true }));
    const { provider } = makeProvider(kind, server.url);
    const { tools } = testTools();
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('shutdown')), 100);
    await expect(
      runAgentTurn({
        provider,
        registry: createToolRegistry(tools),
        systemPrompt: SYSTEM,
        history: [userMessage('alice', 'hi')],
        context: { ...context, signal: controller.signal },
        maxToolRounds: 3,
        logger,
      }),
    ).rejects.toMatchObject({ name: 'LlmAbortedError' });
    expect(server.requests).toHaveLength(1);
  });

  it('stops after maxToolRounds with a clear reply', async () => {
    server = await startServer(kind);
    let step = 0;
    server.setHandler(() => {
      step += 1;
      return { toolCalls: [{ name: 'get_training_status', arguments: { run: `run-${step}` } }] };
    });
    const { result, executed } = await turn([userMessage('alice', 'loop forever')], { maxToolRounds: 2 });
    expect(result.outcome).toBe('max_rounds');
    expect(result.rounds).toBe(2);
    expect(result.reply).toMatch(
      /^I stopped after 2 tool rounds without finishing; the last step was get_training_status/,
    );
    expect(executed).toHaveLength(2);
    expect(server.requests).toHaveLength(3);
    // The session stays well-formed: every tool call has its result, the stop reply comes last.
    expect(result.newMessages.map((message) => message.role)).toEqual([
      'assistant',
      'tool',
      'assistant',
      'tool',
      'assistant',
    ]);
  });

  it('injects a corrective note after three identical tool calls', async () => {
    server = await startServer(kind);
    server.setHandler((request) =>
      requestText(request).includes('You are repeating')
        ? { text: 'Nothing new: step 120.' }
        : { toolCalls: [{ name: 'get_training_status', arguments: { run: 'qwen-gsm8k-sft' } }] },
    );
    const { result } = await turn([userMessage('alice', 'watch it')]);
    expect(result.outcome).toBe('answered');
    expect(result.rounds).toBe(3);
    expect(server.requests).toHaveLength(4);
    expect(requestText(server.requests[2])).not.toContain('You are repeating');
    expect(server.requests[3]?.lastUserText).toBe(`[system] ${REPETITION_NOTE}`);
    // The note is transient: not saved into the session.
    expect(JSON.stringify(result.newMessages)).not.toContain('You are repeating');
  });

  it('injects a corrective note on an A,B,A,B,A,B cycle', async () => {
    server = await startServer(kind);
    let step = 0;
    server.setHandler((request) => {
      if (requestText(request).includes('You are repeating')) return { text: 'Changing approach.' };
      step += 1;
      return step % 2 === 1
        ? { toolCalls: [{ name: 'list_training_runs', arguments: {} }] }
        : { toolCalls: [{ name: 'get_training_status', arguments: { run: 'qwen-gsm8k-sft' } }] };
    });
    const { result } = await turn([userMessage('alice', 'watch it')]);
    expect(result.rounds).toBe(6);
    expect(requestText(server.requests[5])).not.toContain('You are repeating');
    expect(server.requests[6]?.lastUserText).toBe(`[system] ${REPETITION_NOTE}`);
    expect(result.reply).toBe('Changing approach.');
  });

  it('sends only the trimmed history, starting at a user message', async () => {
    server = await startServer(kind);
    const history: ChatMessage[] = [];
    for (let index = 0; index < 30; index += 1) {
      history.push(userMessage(index % 2 === 0 ? 'alice' : 'bob', `message ${index}`));
      history.push({
        role: 'assistant',
        content: '',
        toolCalls: [{ id: `c${index}`, name: 'list_training_runs', arguments: '{}' }],
      });
      history.push({ role: 'tool', toolCallId: `c${index}`, name: 'list_training_runs', content: '[]' });
    }
    history.push(userMessage('carol', 'latest'));
    const { result } = await turn(history);
    expect(result.outcome).toBe('answered');
    const sent = requestText(server.requests[0]);
    expect(sent).toContain('[carol] latest');
    expect(sent).not.toContain('message 13"');
    expect(sent).toContain('message 14');
  });
});
