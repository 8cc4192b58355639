import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DiscordEmulator, startDiscordEmulator } from '../discord/emulator/discord-emulator.js';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { type ScriptedLlmServer, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';

type Json = Record<string, unknown>;
const content = (message: Json) => String(message.content ?? '');

describe('Discord end to end: real discord.js → emulator → core → queue → agent → thread', () => {
  let emulator: DiscordEmulator;
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;

  beforeAll(async () => {
    emulator = await startDiscordEmulator();
    llm = await startScriptedOpenAi();
    shepherd = await startTestApp({
      environment: {
        DISCORD_TOKEN: emulator.token,
        DISCORD_API_URL: emulator.apiUrl,
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_GPUS: '2',
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_APPROVERS: emulator.users.bob.id,
        SHEPHERD_STOP_GRACE_S: '5',
      },
    });
  });
  afterAll(async () => {
    for (const run of await shepherd.app.features.runs.list()) {
      if (run.status === 'running')
        await shepherd.app.features.runs.service.stop(run.id, 'system').catch(() => undefined);
    }
    await shepherd.stop();
    await llm.close();
    await emulator.close();
  });

  it('turns a mention into a thread session, answers follow-ups without a mention, and approves a run by button', async () => {
    llm.enqueue({ text: 'Hi Alice — I can launch runs here.' });
    const mention = emulator.userSends({
      channelId: emulator.channelId,
      author: emulator.users.alice,
      content: 'what can you do for our team?',
      mentionBot: true,
    });
    const threadCall = await emulator.waitFor(
      () =>
        emulator.calls.find(
          (call) =>
            call.method === 'POST' &&
            call.path === `/channels/${emulator.channelId}/messages/${String(mention.id)}/threads`,
        ),
      15_000,
    );
    expect(threadCall.status).toBe(201);
    // A thread started from a message takes the message's id, as on Discord.
    const threadId = String(mention.id);
    expect(emulator.channel(threadId)?.type).toBe(11);
    await emulator.waitFor(
      () => emulator.messagesIn(threadId).find((m) => content(m).includes('I can launch runs here')),
      15_000,
    );

    llm.enqueue({ text: 'Nothing is running yet, Bob.' });
    emulator.userSends({ channelId: threadId, author: emulator.users.bob, content: 'how is it going?' });
    await emulator.waitFor(
      () => emulator.messagesIn(threadId).find((m) => content(m).includes('Nothing is running yet')),
      15_000,
    );
    expect(JSON.stringify(llm.requests.at(-1)?.body)).toContain('how is it going?');

    emulator.userSends({
      channelId: threadId,
      author: emulator.users.alice,
      content: 'run test/fixtures/healthy_train.py --gpus 1 --name discord-run',
      mentionBot: true,
    });
    const card = await emulator.waitFor(
      () =>
        emulator
          .messagesIn(threadId)
          .find(
            (m) =>
              JSON.stringify(m.embeds ?? []).includes('discord-run') &&
              Array.isArray(m.components) &&
              m.components.length > 0,
          ),
      15_000,
    );
    const buttons = JSON.stringify(card.components);
    const approveId = /"custom_id":"(approve:[^"]+)"/.exec(buttons)?.[1] ?? '';
    expect(approveId).toMatch(/^approve:ap_/);

    // Alice is not an approver: an ephemeral refusal and nothing changes.
    const refused = emulator.clickButton({
      messageId: String(card.id),
      customId: approveId,
      user: emulator.users.alice,
    });
    await emulator.waitFor(() => refused.callbacks[0], 5_000);
    expect(refused.callbacks[0]?.type).toBe(6);
    const followUp = await emulator.waitFor(
      () =>
        emulator.calls.find(
          (call) =>
            call.method === 'POST' && call.path === `/webhooks/${emulator.applicationId}/${refused.token}`,
        ),
      5_000,
    );
    expect(followUp.body).toMatchObject({ flags: 64 });
    expect((await shepherd.app.features.runs.find('discord-run')).status).toBe('pending_approval');

    const click = emulator.clickButton({
      messageId: String(card.id),
      customId: approveId,
      user: emulator.users.bob,
    });
    const ack = await emulator.waitFor(() => click.callbacks[0], 5_000);
    expect(ack.type).toBe(6);
    expect(ack.at - click.createdAt).toBeLessThan(3000);
    await emulator.waitFor(() => {
      const edited = emulator.message(String(card.id));
      return (
        edited !== undefined &&
        Array.isArray(edited.components) &&
        edited.components.length === 0 &&
        JSON.stringify(edited.embeds).includes('Approved by')
      );
    }, 15_000);
    await emulator.waitFor(
      () => emulator.messagesIn(threadId).find((m) => /discord-run .*running/.test(content(m))),
      15_000,
    );
    expect((await shepherd.app.features.runs.find('discord-run')).status).toBe('running');
  });
});
