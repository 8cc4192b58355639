/**
 * Issue 24, reject with a reason on Discord: real discord.js ↔ the wire-level Discord emulator ↔ the real
 * core. An approver's Reject is answered with a modal (interaction callback type 9) instead of an ack;
 * the MODAL_SUBMIT interaction (type 5) with the reason is acknowledged (type 6) and decides the card,
 * which shows the reason.
 *
 * Edit is answered with a modal pre-filled with GPUs, hours, name and script; a bad value is refused in
 * an ephemeral reply; the edited MODAL_SUBMIT approves and the run starts with the edits.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DiscordEmulator, startDiscordEmulator } from '../discord/emulator/discord-emulator.js';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { expectEditedRun } from '../helpers/approval-edits.js';

describe('approval forms on Discord: reject with a reason, edit then approve (discord.js ↔ emulator)', () => {
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

  /** alice asks for a 2-GPU run named `name`: its thread and its approval card once it has buttons. */
  async function launchCard(name: string) {
    const mention = emulator.userSends({
      channelId: emulator.channelId,
      author: emulator.users.alice,
      content: `run test/fixtures/healthy_train.py --gpus 2 --name ${name}`,
      mentionBot: true,
    });
    const threadId = String(mention.id);
    const card = await emulator.waitFor(
      () =>
        emulator
          .messagesIn(threadId)
          .find(
            (message) =>
              JSON.stringify(message.embeds ?? []).includes(name) &&
              Array.isArray(message.components) &&
              message.components.length > 0,
          ),
      20_000,
    );
    return { threadId, card };
  }

  it('Reject opens a modal; its submit rejects with the reason shown on the card', async () => {
    const { card } = await launchCard('discord-reason');
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
    expect((await shepherd.app.features.runs.find('discord-reason')).status).toBe('pending_approval');

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
    expect((await shepherd.app.features.runs.find('discord-reason')).status).toBe('rejected');
  }, 60_000);

  it('Edit opens a pre-filled modal; its submit approves with the edits shown on the card', async () => {
    const { threadId, card } = await launchCard('discord-edit');
    const editId = /"custom_id":"(edit:[^"]+)"/.exec(JSON.stringify(card.components))?.[1] ?? '';
    expect(editId).toMatch(/^edit:ap_/);
    const click = (user: typeof emulator.users.bob) =>
      emulator.clickButton({ messageId: String(card.id), customId: editId, user });

    const ephemeral = (text: string) =>
      emulator.waitFor(
        () =>
          emulator
            .messagesIn(threadId)
            .find((message) => message.flags === 64 && String(message.content).includes(text)),
        10_000,
      );
    // The requester may not approve: no modal, Approve's refusal.
    const alice = click(emulator.users.alice);
    const refused = await emulator.waitFor(() => alice.callbacks[0], 5_000);
    expect(refused.type).toBe(6);
    await ephemeral(`only approvers (${emulator.users.bob.id}) can approve`);

    const script = readFileSync('test/fixtures/healthy_train.py', 'utf8');
    const opened = click(emulator.users.bob);
    const answer = await emulator.waitFor(() => opened.callbacks[0], 5_000);
    expect(answer.type).toBe(9);
    const inputs = (answer.data as { components: Array<{ components: Array<Record<string, unknown>> }> })
      .components;
    expect(inputs.map((row) => [row.components[0]?.custom_id, row.components[0]?.value])).toEqual([
      ['gpus', '2'],
      ['hours', '24'],
      ['name', 'discord-edit'],
      ['script', script],
    ]);

    const bad = emulator.submitModal({
      interaction: opened,
      user: emulator.users.bob,
      values: { gpus: '-1', hours: '2', name: 'discord-edit', script },
    });
    await emulator.waitFor(() => bad.callbacks[0], 5_000);
    await ephemeral('not applied: GPUs must be a whole number');
    expect((await shepherd.app.features.runs.find('discord-edit')).status).toBe('pending_approval');

    const submit = emulator.submitModal({
      interaction: opened,
      user: emulator.users.bob,
      values: { gpus: '1', hours: '2', name: 'discord-small', script: `${script}# edited in discord\n` },
    });
    await emulator.waitFor(() => submit.callbacks[0], 5_000);
    await emulator.waitFor(() => {
      const edited = emulator.message(String(card.id));
      return Array.isArray(edited?.components) &&
        edited.components.length === 0 &&
        JSON.stringify(edited.embeds ?? []).includes('with edits')
        ? edited
        : undefined;
    }, 15_000);
    const embeds = JSON.stringify(emulator.message(String(card.id))?.embeds);
    expect(embeds).toMatch(/Approved by [^"]+ with edits at \d\d:\d\d UTC/);
    expect(embeds).toContain('GPUs: 2 → 1');
    expect(embeds).toContain('name: discord-edit → discord-small');
    expect(embeds).toContain('+# edited in discord');
    await expectEditedRun(shepherd, {
      name: 'discord-small',
      gpus: 1,
      maxHours: 2,
      before: { gpus: 2, maxHours: 24, name: 'discord-edit' },
      by: 'bob (ops)',
      scriptLine: '# edited in discord',
    });
  }, 60_000);
});
