/**
 * Issue 24, reject with a reason on Discord: real discord.js ↔ the wire-level Discord emulator ↔ the real
 * core. An approver's Reject is answered with a modal (interaction callback type 9) instead of an ack;
 * the MODAL_SUBMIT interaction (type 5) with the reason is acknowledged (type 6) and decides the card,
 * which shows the reason.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DiscordEmulator, startDiscordEmulator } from '../discord/emulator/discord-emulator.js';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';

describe('reject with a reason on Discord (discord.js ↔ emulator)', () => {
  let emulator: DiscordEmulator;
  let shepherd: TestApp;

  beforeAll(async () => {
    emulator = await startDiscordEmulator();
    shepherd = await startTestApp({
      environment: {
        DISCORD_TOKEN: emulator.token,
        DISCORD_API_URL: emulator.apiUrl,
        SHEPHERD_LLM_BASE_URL: 'http://127.0.0.1:9/v1',
        SHEPHERD_GPUS: '2',
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_APPROVERS: emulator.users.bob.id,
      },
    });
  });
  afterAll(async () => {
    await shepherd?.stop();
    await emulator?.close();
  });

  it('Reject opens a modal; its submit rejects with the reason shown on the card', async () => {
    const mention = emulator.userSends({
      channelId: emulator.channelId,
      author: emulator.users.alice,
      content: 'run test/fixtures/healthy_train.py --gpus 2 --name discord-reason',
      mentionBot: true,
    });
    const threadId = String(mention.id);
    const card = await emulator.waitFor(
      () =>
        emulator
          .messagesIn(threadId)
          .find(
            (message) =>
              JSON.stringify(message.embeds ?? []).includes('discord-reason') &&
              Array.isArray(message.components) &&
              message.components.length > 0,
          ),
      20_000,
    );
    const rejectId = /"custom_id":"(reject:[^"]+)"/.exec(JSON.stringify(card.components))?.[1] ?? '';
    expect(rejectId).toMatch(/^reject:ap_/);

    const click = emulator.clickButton({
      messageId: String(card.id),
      customId: rejectId,
      user: emulator.users.bob,
    });
    const answer = await emulator.waitFor(() => click.callbacks[0], 5_000);
    expect(answer.type).toBe(9);
    expect(answer.at - click.createdAt).toBeLessThan(3000);
    expect(answer.data).toMatchObject({
      custom_id: rejectId,
      title: 'Reject',
      components: [{ type: 1, components: [{ type: 4, custom_id: 'reason', style: 2, required: false }] }],
    });
    expect((await shepherd.app.features.runs.service.findRun('discord-reason')).status).toBe(
      'pending_approval',
    );

    const submit = emulator.submitModal({
      interaction: click,
      user: emulator.users.bob,
      values: { reason: 'use 1 GPU and bf16' },
    });
    const ack = await emulator.waitFor(() => submit.callbacks[0], 5_000);
    expect(ack.type).toBe(6);
    await emulator.waitFor(() => {
      const edited = emulator.message(String(card.id));
      const embeds = JSON.stringify(edited?.embeds ?? []);
      return (
        Array.isArray(edited?.components) && edited.components.length === 0 && embeds.includes('Rejected by')
      );
    }, 15_000);
    expect(JSON.stringify(emulator.message(String(card.id))?.embeds)).toMatch(
      /Rejected by [^"]+ at \d\d:\d\d UTC: use 1 GPU and bf16/,
    );
    expect((await shepherd.app.features.runs.service.findRun('discord-reason')).status).toBe('rejected');
  }, 60_000);
});
