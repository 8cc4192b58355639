import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, type PlaygroundMessage, startTestApp, type TestApp } from '../helpers/app-harness.js';
import {
  type FakeServer,
  RAW_CODE_MARKER,
  RAW_DOCS_MARKER,
  startFakeDocsHub,
  startFakeGithub,
} from '../helpers/fake-research-servers.js';
import { cardsTitled } from '../helpers/flow.js';
import {
  type RecordedRequest,
  type ScriptedLlmServer,
  type Step,
  startScriptedOpenAi,
} from '../helpers/scripted-llm/index.js';

/*
 * Issue 24: the agent researches before it writes. Black-box through the playground with the scripted
 * LLM, fake docs/papers Hub and GitHub servers (test/helpers/fake-research-servers.ts), real Redis and
 * BullMQ. The sub-agent's LLM calls are told apart by their system prompt (prompts/research.md).
 */

const SUB_AGENT = 'research assistant of';
const GITHUB_TOKEN = 'ghp_researchtesttoken1234567890abcd';

const systemText = (request: RecordedRequest) => {
  const messages = (request.body.messages ?? []) as Array<{ role: string; content: unknown }>;
  return String(messages.find((message) => message.role === 'system')?.content ?? '');
};
const isSubAgent = (request: RecordedRequest) => systemText(request).includes(SUB_AGENT);
const toolMessages = (request: RecordedRequest) =>
  ((request.body.messages ?? []) as Array<{ role: string; content: unknown; tool_call_id?: string }>).filter(
    (message) => message.role === 'tool',
  );
/** The content of the tool result for call `id` in the first request that holds it. */
function toolResult(
  llm: ScriptedLlmServer,
  id: string,
): { request: RecordedRequest; content: string } | undefined {
  for (const request of llm.requests) {
    const found = toolMessages(request).find((message) => message.tool_call_id === id);
    if (found !== undefined) return { request, content: String(found.content) };
  }
  return undefined;
}

describe('research sub-agent, based-on card and plan (playground)', () => {
  let llm: ScriptedLlmServer;
  let hub: FakeServer;
  let github: FakeServer;
  let shepherd: TestApp;
  const mainSteps: Step[] = [];
  const subSteps: Step[] = [];

  beforeAll(async () => {
    llm = await startScriptedOpenAi();
    llm.setHandler(
      (request) => (isSubAgent(request) ? subSteps.shift() : mainSteps.shift()) ?? { text: 'ok' },
    );
    hub = await startFakeDocsHub();
    github = await startFakeGithub();
    shepherd = await startTestApp({
      environment: {
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_HUB_URL: hub.url,
        SHEPHERD_DOCS_URL: `${hub.url}/docs`,
        SHEPHERD_GITHUB_API_URL: github.url,
        SHEPHERD_GITHUB_TOKEN: GITHUB_TOKEN,
      },
    });
  }, 60_000);

  afterAll(async () => {
    await shepherd?.stop();
    await llm?.close();
    await hub?.close();
    await github?.close();
  });

  it('researches before writing a GRPO script; the main agent gets the summary, the card shows "based on"', async () => {
    // The docs search answers slowly, so the status line shows the sub-agent's tool.
    hub.delayMs.set('/api/docs/search', 2500);
    const question = 'current TRL GRPOTrainer usage and GRPOConfig fields';
    mainSteps.push(
      { toolCalls: [{ id: 'call_research_1', name: 'research', arguments: { question } }] },
      {
        toolCalls: [
          {
            id: 'call_start_1',
            name: 'start_training',
            arguments: { name: 'grpo-qwen', gpus: 0, script: 'import shepherd\nshepherd.finish()\n' },
          },
        ],
      },
      { text: 'The GRPO run grpo-qwen waits for approval.' },
    );
    subSteps.push(
      {
        toolCalls: [
          { id: 'sub_docs_1', name: 'docs_search', arguments: { query: 'GRPOTrainer', library: 'trl' } },
        ],
      },
      {
        toolCalls: [
          {
            id: 'sub_code_1',
            name: 'github_search_code',
            arguments: { query: 'GRPOTrainer(', repo: 'huggingface/trl' },
          },
        ],
      },
      {
        text: 'Use GRPOTrainer(model=..., reward_funcs=[...], args=GRPOConfig(output_dir=...)); trl 0.19.1.',
      },
    );
    const threadId = await shepherd.mention('fine-tune Qwen on gsm8k with TRL GRPO', 'alice');

    // The status line names the research and the tool the sub-agent runs.
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some(
        (message) =>
          (message.card?.text ?? message.text).includes(`researching: ${question}`) &&
          (message.card?.text ?? message.text).includes('docs_search'),
      ),
    );
    const messages = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => message.text.includes('waits for approval')),
    );

    // The sub-agent searched the docs (Hub search endpoint) and GitHub code (with the token).
    expect(
      hub.requests.some(
        (request) => request.path === '/api/docs/search' && request.query.get('product') === 'trl',
      ),
    ).toBe(true);
    const codeSearch = github.requests.find((request) => request.path === '/search/code');
    expect(codeSearch?.query.get('q')).toBe('GRPOTrainer( repo:huggingface/trl');
    expect(codeSearch?.authorization).toBe(`Bearer ${GITHUB_TOKEN}`);
    // The raw pages reached the sub-agent, inside the untrusted boundary and redacted.
    const subResult = toolResult(llm, 'sub_code_1');
    expect(subResult?.content).toContain(RAW_CODE_MARKER);
    expect(subResult?.content).toMatch(/^<tool-result-[0-9a-f]{12} tool="github_search_code">/);
    expect(isSubAgent(subResult?.request as RecordedRequest)).toBe(true);

    // The main agent's next request holds the summary with URLs and versions, not the raw pages.
    const summary = toolResult(llm, 'call_research_1');
    expect(summary).toBeDefined();
    expect(isSubAgent(summary?.request as RecordedRequest)).toBe(false);
    expect(summary?.content).toContain('Research complete');
    expect(summary?.content).toContain(
      `${hub.url}/docs/trl/v0.19.1/en/grpo_trainer#quick-start (version v0.19.1)`,
    );
    expect(summary?.content).toContain(
      'https://github.com/huggingface/trl/blob/0f3a1c2d4e5b/examples/scripts/grpo.py',
    );
    expect(summary?.content).toContain('trl 0.19.1');
    expect(summary?.content).toContain('reward_funcs');
    const mainBody = JSON.stringify(summary?.request.body);
    expect(mainBody).not.toContain(RAW_DOCS_MARKER);
    expect(mainBody).not.toContain(RAW_CODE_MARKER);

    // The script card says what the script is based on.
    const card = cardsTitled(messages, 'grpo-qwen')[0];
    expect(card?.card?.text).toContain(`Based on: ${hub.url}/docs/trl/v0.19.1/en/grpo_trainer#quick-start`);
    expect(card?.card?.text).toContain('github.com/huggingface/trl');
    hub.delayMs.clear();
  }, 60_000);

  it('stops a sub-agent at its token budget and returns what it has, marked partial', async () => {
    const searchesBefore = hub.requests.filter((request) => request.path === '/api/docs/search').length;
    mainSteps.push(
      {
        toolCalls: [
          {
            id: 'call_research_2',
            name: 'research',
            arguments: { question: 'GRPO reward functions again', budget_tokens: 1000 },
          },
        ],
      },
      { text: 'Research stopped early.' },
    );
    subSteps.push(
      // 400 tokens: within the budget, so the search runs (a new thread: nothing cached).
      {
        toolCalls: [
          { id: 'sub_docs_2', name: 'docs_search', arguments: { query: 'GRPOTrainer', library: 'trl' } },
        ],
        usage: { inputTokens: 300, outputTokens: 100 },
      },
      {
        // 1100 tokens in all: past the budget of 1000, so this call's tool never runs.
        text: 'So far: reward functions take completions and return floats.',
        toolCalls: [{ id: 'sub_code_2', name: 'github_search_code', arguments: { query: 'reward_funcs' } }],
        usage: { inputTokens: 600, outputTokens: 100 },
      },
    );
    const threadId = await shepherd.mention('how do GRPO reward functions look?', 'bob');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => message.text.includes('Research stopped early')),
    );
    const summary = toolResult(llm, 'call_research_2');
    expect(summary?.content).toContain(
      'PARTIAL research: the token budget ran out (1100 tokens used (900 in, 200 out) of 1000)',
    );
    expect(summary?.content).toContain('So far: reward functions take completions and return floats.');
    // The call past the budget never ran.
    expect(github.requests.some((request) => request.query.get('q') === 'reward_funcs')).toBe(false);
    expect(hub.requests.filter((request) => request.path === '/api/docs/search').length).toBe(
      searchesBefore + 1,
    );
    expect(toolResult(llm, 'sub_code_2')).toBeUndefined();
  }, 60_000);

  it('docs_fetch reads allowed pages as text and refuses other hosts and redirects off the host', async () => {
    mainSteps.push(
      {
        toolCalls: [
          { id: 'call_research_3', name: 'research', arguments: { question: 'read the GRPO trainer page' } },
        ],
      },
      { text: 'Fetch checks done.' },
    );
    const docsPage = `${hub.url}/docs/trl/main/en/grpo_trainer`;
    subSteps.push(
      {
        toolCalls: [
          { id: 'sub_fetch_ok', name: 'docs_fetch', arguments: { url: docsPage } },
          { id: 'sub_fetch_redis', name: 'docs_fetch', arguments: { url: 'http://127.0.0.1:6379/' } },
          {
            id: 'sub_fetch_metadata',
            name: 'docs_fetch',
            arguments: { url: 'http://169.254.169.254/latest/meta-data/' },
          },
          {
            id: 'sub_fetch_redirect',
            name: 'docs_fetch',
            arguments: { url: `${hub.url}/docs/redirect-out` },
          },
          { id: 'sub_fetch_again', name: 'docs_fetch', arguments: { url: docsPage } },
        ],
      },
      { text: 'Read the page.' },
    );
    const threadId = await shepherd.mention('check the GRPO docs page', 'carol');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => message.text.includes('Fetch checks done')),
    );
    const ok = toolResult(llm, 'sub_fetch_ok')?.content ?? '';
    expect(ok).toContain(`${RAW_DOCS_MARKER} & more`);
    expect(ok).not.toContain('<h1>');
    expect(ok).not.toContain('var x');
    expect(toolResult(llm, 'sub_fetch_redis')?.content).toContain(
      'Refused (url_outside_sources): not fetched: http://127.0.0.1:6379/',
    );
    expect(toolResult(llm, 'sub_fetch_metadata')?.content).toContain('Refused (url_outside_sources)');
    expect(toolResult(llm, 'sub_fetch_redirect')?.content).toContain('not followed');
    // The second read of the same URL in the thread came from the cache.
    expect(toolResult(llm, 'sub_fetch_again')?.content).toContain(RAW_DOCS_MARKER);
    expect(hub.requests.filter((request) => request.path === '/docs/trl/main/en/grpo_trainer').length).toBe(
      1,
    );
    const summary = toolResult(llm, 'call_research_3')?.content ?? '';
    expect(summary).toContain(`${docsPage} (version main)`);
    expect(summary).not.toContain('6379');
  }, 60_000);

  it('shows the plan in one card, edits it in place, and `session` shows it', async () => {
    const steps = (second: string, third: string) => [
      { title: 'Research TRL GRPO usage', status: 'done' },
      { title: 'Write train.py', status: second },
      { title: 'Launch the run', status: third },
    ];
    mainSteps.push(
      { toolCalls: [{ id: 'call_plan_1', name: 'plan', arguments: { steps: steps('running', 'pending') } }] },
      { text: 'Plan posted.' },
    );
    const threadId = await shepherd.mention('plan a GRPO fine-tune', 'dave');
    const first = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => message.text.includes('Plan posted')),
    );
    const plans = (all: PlaygroundMessage[]) =>
      all.filter((message) => message.card?.title?.startsWith('Plan'));
    expect(plans(first)).toHaveLength(1);
    expect(plans(first)[0]?.card?.title).toBe('Plan (1/3 done)');
    expect(plans(first)[0]?.card?.text).toContain('▶️ 2. Write train.py (running)');

    mainSteps.push(
      { toolCalls: [{ id: 'call_plan_2', name: 'plan', arguments: { steps: steps('done', 'failed') } }] },
      { text: 'Plan updated.' },
    );
    await shepherd.reply(threadId, '@shepherd go on', 'dave');
    const second = await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) => message.text.includes('Plan updated')),
    );
    expect(plans(second)).toHaveLength(1);
    expect(plans(second)[0]?.id).toBe(plans(first)[0]?.id);
    expect(plans(second)[0]?.card?.title).toBe('Plan (2/3 done)');
    expect(plans(second)[0]?.card?.text).toContain('❌ 3. Launch the run (failed)');

    await shepherd.reply(threadId, '@shepherd session', 'dave');
    await shepherd.waitForMessages(threadId, (all) =>
      botMessages(all).some((message) =>
        message.text.includes('Plan:\n✅ 1. Research TRL GRPO usage (done)'),
      ),
    );
  }, 60_000);
});
