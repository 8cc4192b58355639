import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botMessages, startTestApp, type TestApp } from '../helpers/app-harness.js';
import { deleteKeysWithPrefix, uniquePrefix } from '../helpers/redis.js';
import type { RecordedRequest } from '../helpers/scripted-llm/index.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

const systemOf = (request: RecordedRequest | undefined) => {
  const messages = (request?.body.messages ?? []) as Array<{ role: string; content: unknown }>;
  return String(messages.find((message) => message.role === 'system')?.content ?? '');
};
const isCompaction = (request: RecordedRequest) =>
  systemOf(request).includes('keep the memory of a chat thread');
const botTexts = (messages: Awaited<ReturnType<TestApp['messages']>>) =>
  botMessages(messages).map((message) => message.text);

describe('the session: compaction, model, reset, cancel, playbooks', () => {
  let llm: ScriptedLlmServer;
  let dataDir: string;
  let prefix: string;
  let shepherd: TestApp;
  const environment = () => ({
    SHEPHERD_LLM_BASE_URL: llm.url,
    SHEPHERD_LLM_MODEL: 'small-model',
    SHEPHERD_LLM_MODELS: 'small-model, big-model',
    SHEPHERD_DATA_DIR: dataDir,
  });
  const start = () => startTestApp({ environment: environment(), prefix, dataDir, keepState: true });

  beforeAll(async () => {
    llm = await startScriptedOpenAi({
      fallback: (request) =>
        isCompaction(request)
          ? { text: 'SUMMARY-7Q: alice listed the runs 26 times; no runs exist yet.' }
          : { text: `answer to: ${request.lastUserText ?? ''}` },
    });
    dataDir = mkdtempSync(join(tmpdir(), 'shepherd-session-'));
    prefix = uniquePrefix('session-flow');
    shepherd = await start();
  });
  afterAll(async () => {
    await shepherd.stop();
    await llm.close();
    await deleteKeysWithPrefix(prefix);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('summarises the history past the 50-message window in one call and keeps the summary across a restart', async () => {
    const threadId = await shepherd.mention('runs', 'alice');
    for (let index = 1; index < 26; index += 1) await shepherd.reply(threadId, '@shepherd runs', 'alice');
    await shepherd.waitForMessages(threadId, (all) => botMessages(all).length >= 26);
    const fullId = `web:ml-runs:${threadId}`;
    // Answers are posted before their batch commits to the session; wait for the commit.
    const deadline = Date.now() + 10_000;
    while ((await shepherd.app.redis.llen(`${prefix}:session:${fullId}`)) < 52 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(await shepherd.app.redis.llen(`${prefix}:session:${fullId}`)).toBe(52);
    expect(llm.requests).toHaveLength(0);

    await shepherd.reply(threadId, '@shepherd what have we done so far?', 'alice');
    await shepherd.waitForMessages(threadId, (all) =>
      botTexts(all).some((text) => text.startsWith('answer to:')),
    );
    expect(llm.requests).toHaveLength(2);
    const [compaction, turn] = llm.requests;
    expect(compaction && isCompaction(compaction)).toBe(true);
    expect(JSON.stringify(compaction?.body.messages)).toContain('[alice] @shepherd runs');
    expect(systemOf(turn)).toContain('SUMMARY-7Q');
    // The summarised entries left the session list; the recent ones stayed verbatim.
    const kept = await shepherd.app.redis.llen(`${prefix}:session:${fullId}`);
    expect(kept).toBeLessThan(40);
    expect(((turn?.body.messages ?? []) as unknown[]).length).toBeLessThan(40);

    await shepherd.stop();
    shepherd = await start();

    await shepherd.reply(threadId, '@shepherd session', 'bob');
    const after = await shepherd.waitForMessages(threadId, (all) =>
      botTexts(all).some((text) => text.includes('Summary:\nSUMMARY-7Q')),
    );
    const session = botTexts(after).find((text) => text.includes('SUMMARY-7Q')) ?? '';
    expect(session).toMatch(/Model: `small-model` \(default\)/);
    expect(session).toMatch(/older ones summarised/);
    expect(session).toMatch(/Follows: none\./);

    await shepherd.reply(threadId, '@shepherd and now?', 'alice');
    await shepherd.waitForMessages(threadId, (all) =>
      botTexts(all).some((text) =>
        /^answer to: \[alice\] <message-[0-9a-f]{12}>\n@shepherd and now\?/.test(text),
      ),
    );
    expect(llm.requests).toHaveLength(3);
    expect(isCompaction(llm.requests[2] as RecordedRequest)).toBe(false);
    expect(systemOf(llm.requests[2])).toContain('SUMMARY-7Q');

    // A reset starts over: no summary, no history for the model.
    await shepherd.reply(threadId, '@shepherd reset', 'alice');
    await shepherd.waitForMessages(threadId, (all) =>
      botTexts(all).some((text) => /^Fresh session/.test(text)),
    );
    await shepherd.reply(threadId, '@shepherd fresh question', 'alice');
    await shepherd.waitForMessages(threadId, (all) =>
      botTexts(all).some((text) => text.includes('fresh question')),
    );
    const fresh = llm.requests.at(-1);
    expect(systemOf(fresh)).not.toContain('SUMMARY-7Q');
    expect(JSON.stringify(fresh?.body.messages)).not.toContain('what have we done');
  }, 90_000);

  it('switches the thread model within the allowed list and refuses others', async () => {
    const threadId = await shepherd.mention('model big-model', 'alice');
    await shepherd.waitForMessages(threadId, (all) =>
      botTexts(all).some((text) => text.includes('now uses `big-model` (was `small-model`)')),
    );
    await shepherd.reply(threadId, '@shepherd model gpt-9000', 'bob');
    const refused = await shepherd.waitForMessages(threadId, (all) =>
      botTexts(all).some((text) => text.includes('`gpt-9000` is not an allowed model')),
    );
    expect(botTexts(refused).find((text) => text.includes('gpt-9000'))).toMatch(
      /stays on `big-model`\. Allowed: `small-model`, `big-model`/,
    );

    const before = llm.requests.length;
    await shepherd.reply(threadId, '@shepherd hello big', 'alice');
    await shepherd.waitForMessages(threadId, (all) =>
      botTexts(all).some((text) => text.includes('hello big')),
    );
    expect(llm.requests.slice(before).map((request) => request.body.model)).toEqual(['big-model']);

    // Another thread keeps the default.
    const other = await shepherd.mention('hello small', 'carol');
    await shepherd.waitForMessages(other, (all) =>
      botTexts(all).some((text) => text.includes('hello small')),
    );
    expect(llm.requests.at(-1)?.body.model).toBe('small-model');
  });

  it('cancel stops a running turn at the next tool boundary and says so', async () => {
    const before = llm.requests.length;
    llm.enqueue({
      delayMs: 3000,
      // biome-ignore lint/suspicious/noThenProperty: the scripted server's delayed-step shape
      then: {
        toolCalls: [
          { name: 'list_training_runs', arguments: {} },
          { name: 'get_cluster_info', arguments: {} },
        ],
      },
    });
    const threadId = await shepherd.mention('check the runs and the cluster, then summarise', 'alice');
    const deadline = Date.now() + 10_000;
    while (llm.requests.length === before && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await shepherd.reply(threadId, '@shepherd cancel', 'bob');
    const messages = await shepherd.waitForMessages(threadId, (all) =>
      botTexts(all).some((text) => text.startsWith('Cancelled by bob')),
    );
    expect(botTexts(messages).find((text) => text.startsWith('Cancelled by bob'))).toMatch(
      /stopped before running any tool this round \(not run: list_training_runs, get_cluster_info\)/,
    );
    await new Promise((resolve) => setTimeout(resolve, 1500));
    // Only the first request: the cancelled turn never asked the model again.
    expect(llm.requests.length).toBe(before + 1);
    // The cancel command itself adds nothing once the turn has said so.
    const all = await shepherd.messages(threadId);
    expect(botTexts(all).filter((text) => /cancel/i.test(text))).toHaveLength(1);

    await shepherd.reply(threadId, '@shepherd cancel', 'bob');
    await shepherd.waitForMessages(threadId, (latest) =>
      botTexts(latest).some((text) => text.startsWith('Nothing is running in this thread')),
    );
  });

  it('the Cancel button on the status line stops the turn, and the line becomes the plain answer', async () => {
    const before = llm.requests.length;
    llm.enqueue({
      delayMs: 4000,
      // biome-ignore lint/suspicious/noThenProperty: the scripted server's delayed-step shape
      then: { toolCalls: [{ name: 'get_cluster_info', arguments: {} }] },
    });
    const threadId = await shepherd.mention('look at the cluster', 'alice');
    const withButton = await shepherd.waitForMessages(threadId, (all) =>
      all.some((m) => m.card?.actions?.some((action) => action.label === 'Cancel')),
    );
    const status = withButton.find((m) => m.card?.actions?.some((action) => action.label === 'Cancel'));
    expect(status?.card?.text).toBe('thinking…');
    const cancel = status?.card?.actions?.find((action) => action.label === 'Cancel');
    expect((await shepherd.click(threadId, status?.id ?? '', cancel?.actionId ?? '', 'carol')).status).toBe(
      200,
    );
    const done = await shepherd.waitForMessages(threadId, (all) =>
      all.some((m) => m.id === status?.id && m.text.startsWith('Cancelled by carol')),
    );
    expect(done.find((m) => m.id === status?.id)?.card).toBeUndefined();
    expect(llm.requests.length).toBe(before + 1);
  });

  it('lists the playbooks in help and loads one with read_playbook', async () => {
    const threadId = await shepherd.mention('help', 'alice');
    const help = await shepherd.waitForMessages(threadId, (all) =>
      botTexts(all).some((text) => text.includes('Playbooks')),
    );
    const helpText = botTexts(help).find((text) => text.includes('Playbooks')) ?? '';
    for (const name of ['sft-trl', 'lora-qlora-peft', 'dpo', 'eval-held-out', 'multi-gpu', 'fit-in-memory']) {
      expect(helpText).toContain(`\`${name}\``);
    }
    expect(helpText).toMatch(/`dpo`: Preference tuning with DPO — use when /);

    const before = llm.requests.length;
    llm.enqueue(
      {
        toolCalls: [
          { name: 'read_playbook', arguments: { name: '../system' } },
          { name: 'read_playbook', arguments: { name: 'sft-trl' } },
        ],
      },
      { text: 'Loaded the SFT playbook.' },
    );
    await shepherd.reply(threadId, '@shepherd fine-tune Qwen on gsm8k', 'alice');
    await shepherd.waitForMessages(threadId, (all) => botTexts(all).includes('Loaded the SFT playbook.'));
    const toolResults = (
      (llm.requests[before + 1]?.body.messages ?? []) as Array<{ role: string; content: string }>
    )
      .filter((message) => message.role === 'tool')
      .map((message) => message.content);
    expect(toolResults[0]).toMatch(/no playbook named "\.\.\/system"/);
    expect(toolResults[1]).toContain('# Supervised fine-tuning (SFT) with TRL');
    expect(toolResults[1]).toContain('from shepherd.integrations.hf import ShepherdCallback');
  });
});
