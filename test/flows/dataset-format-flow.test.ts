import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { type FakeHubServer, startFakeHub } from '../helpers/fake-hub-server.js';
import { cardsTitled } from '../helpers/flow.js';
import {
  type ScriptedLlmServer,
  type ScriptedToolCall,
  type Step,
  startScriptedOpenAi,
} from '../helpers/scripted-llm/index.js';
import { toolResults } from '../helpers/tool-results.js';

/*
 * Issue 23, "dataset format check by method": `inspect_dataset {dataset, method}` against the fake
 * datasets-server (`/splits`, `/info`, `/first-rows`), through the playground with the scripted model.
 * The verdict says what is missing and what could be mapped, and the launch card that follows shows it.
 */

describe('inspect_dataset checks the columns a training method needs', () => {
  let llm: ScriptedLlmServer;
  let hub: FakeHubServer;
  let shepherd: TestApp;
  let threadId = '';
  const agentSteps: Step[] = [];

  /** One agent turn that makes `calls` one after another, then answers; returns each call's result. */
  async function agentCalls(calls: ScriptedToolCall[], message: string): Promise<string[]> {
    const stamp = `${Date.now()}${Math.random().toString(36).slice(2, 6)}`;
    const withIds = calls.map((call, index) => ({ ...call, id: `call_${stamp}_${index}` }));
    const answer = `done ${stamp}`;
    for (const call of withIds) agentSteps.push({ toolCalls: [call] });
    agentSteps.push({ text: answer });
    if (threadId === '') threadId = await shepherd.mention(message);
    else await shepherd.reply(threadId, `@shepherd ${message}`);
    await shepherd.waitForMessages(threadId, (all) => botMessages(all).some((m) => m.text.includes(answer)));
    const results = toolResults(llm);
    return withIds.map((call) => results.get(call.id) ?? '(no result)');
  }

  beforeAll(async () => {
    llm = await startScriptedOpenAi();
    llm.setHandler(() => agentSteps.shift() ?? { text: 'ok' });
    hub = await startFakeHub();
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_HUB_URL: hub.url,
        SHEPHERD_DATASETS_SERVER_URL: hub.url,
      },
    });
  });

  afterAll(async () => {
    await shepherd?.stop();
    await llm?.close();
    await hub?.close();
  });

  it('gives a verdict for dpo, grpo and sft, with the columns that could be mapped', async () => {
    const [dpoMissing, dpoImplicit, grpo, sftMessages, sftMapped] = await agentCalls(
      [
        { name: 'inspect_dataset', arguments: { dataset: 'Anthropic/hh-rlhf', method: 'dpo', rows: 0 } },
        {
          name: 'inspect_dataset',
          arguments: { dataset: 'trl-lib/ultrafeedback_binarized', method: 'dpo', rows: 0 },
        },
        { name: 'inspect_dataset', arguments: { dataset: 'openai/gsm8k', method: 'grpo', rows: 0 } },
        {
          name: 'inspect_dataset',
          arguments: { dataset: 'HuggingFaceH4/no_robots', method: 'sft', rows: 0 },
        },
        { name: 'inspect_dataset', arguments: { dataset: 'openai/gsm8k', method: 'sft', rows: 0 } },
      ],
      'which of these datasets can I train on?',
    );
    expect(dpoMissing).toContain(
      'Format check for dpo: ❌ Anthropic/hh-rlhf lacks prompt (dpo needs prompt + chosen + rejected; it has chosen, rejected).',
    );
    expect(dpoMissing).toContain('No column could become prompt');
    expect(dpoImplicit).toContain(
      'Format check for dpo: ✅ trl-lib/ultrafeedback_binarized has what dpo needs: chosen/rejected conversations (implicit prompt).',
    );
    expect(dpoImplicit).toContain('• chosen: list<{content: string, role: string}>');
    expect(grpo).toContain('Format check for grpo: ❌ openai/gsm8k lacks prompt');
    expect(grpo).toContain('Could be mapped: question → prompt');
    expect(sftMessages).toContain(
      'Format check for sft: ✅ HuggingFaceH4/no_robots has what sft needs: messages.',
    );
    expect(sftMapped).toContain('Could be mapped: question → prompt, answer → completion');
    // The verdict comes from /info's features.
    expect(
      hub.requests.some(
        (request) => request.path === '/info' && request.query.get('dataset') === 'Anthropic/hh-rlhf',
      ),
    ).toBe(true);
  });

  it('shows the thread’s latest verdict on the launch card', async () => {
    await agentCalls(
      [{ name: 'inspect_dataset', arguments: { dataset: 'openai/gsm8k', method: 'grpo', rows: 0 } }],
      'check gsm8k for grpo',
    );
    const script = readFileSync('test/fixtures/healthy_train.py', 'utf8');
    agentSteps.push(
      {
        toolCalls: [
          { name: 'start_training', arguments: { name: 'grpo-gsm8k', script, gpus: 0, max_hours: 1 } },
        ],
      },
      { text: 'card posted' },
    );
    await shepherd.reply(threadId, '@shepherd launch it');
    const messages = await shepherd.waitForMessages(
      threadId,
      (all) => cardsTitled(all, 'grpo-gsm8k').length > 0,
    );
    const card = cardsTitled(messages, 'grpo-gsm8k')[0];
    expect(card?.card?.text).toContain(
      'Dataset check: ❌ openai/gsm8k lacks prompt for grpo; map question → prompt',
    );
  });
});
