import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createDiscordAdapter, type DiscordAdapter } from '../../src/bot/discord/discord-adapter.js';
import type { RunOverview } from '../../src/bot/runs-directory.js';
import { type DiscordEmulator, GLOBAL, startDiscordEmulator } from './emulator/discord-emulator.js';
import type { Json } from './emulator/payloads.js';
import { createCapturingLogger, createRecordingHandlers } from './helpers.js';

/** Runs as the core's runs directory would list them (newest first). */
function runsNamed(names: string[]): RunOverview[] {
  return names.map((name, index) => ({
    id: `r_${index.toString().padStart(4, '0')}`,
    name,
    status: index === 0 ? 'running' : 'pending_approval',
    gpus: 1,
    threadId: 'discord:1:1',
    createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, names.length - index)).toISOString(),
  }));
}

describe('/shepherd as a global command with subcommands and autocomplete', () => {
  let emulator: DiscordEmulator;
  let adapter: DiscordAdapter;
  const recorded = createRecordingHandlers();
  const captured = createCapturingLogger();
  const runs = runsNamed([
    'qwen-gsm8k-sft',
    'llama-dpo',
    'qwen-math-rl',
    ...Array.from({ length: 30 }, (_, index) => `sweep-${index}`),
  ]);
  let listCalls = 0;

  beforeAll(async () => {
    emulator = await startDiscordEmulator();
    adapter = createDiscordAdapter({
      token: emulator.token,
      apiUrl: emulator.apiUrl,
      // No DISCORD_GUILD_IDS: production registration, global only.
      guildIds: [],
      botName: 'shepherd',
      logger: captured.logger,
      runs: {
        list: async () => {
          listCalls += 1;
          return runs;
        },
        change: async () => {
          throw new Error('autocomplete never changes a run');
        },
      },
    });
    await adapter.start(recorded.handlers);
  });

  afterAll(async () => {
    await adapter?.stop();
    await emulator?.close();
  });

  test('the command is registered once, globally, usable in DMs', () => {
    const puts = emulator.calls.filter((call) => call.method === 'PUT');
    expect(puts.map((call) => call.path)).toEqual([`/applications/${emulator.applicationId}/commands`]);
    const [command] = emulator.commands.get(GLOBAL) as Json[];
    expect(command).toMatchObject({ name: 'shepherd', type: 1, contexts: [0, 1], dm_permission: true });
  });

  test('a subcommand in a DM reaches the core as the plain command', async () => {
    const dmChannelId = emulator.openDm(emulator.users.alice);
    const interaction = emulator.runSlashCommand({
      channelId: dmChannelId,
      subcommand: 'pause',
      options: { run: 'qwen-gsm8k-sft' },
      user: emulator.users.alice,
    });
    const inbound = await emulator.waitFor(() =>
      recorded.messages.find((message) => message.deliveryId === interaction.id),
    );
    expect(interaction.callbacks[0]?.type).toBe(5);
    expect(inbound).toMatchObject({
      threadId: `discord:dm:${dmChannelId}`,
      text: '@shepherd pause qwen-gsm8k-sft',
      addressed: true,
      startsThread: false,
      user: { id: emulator.users.alice.id },
    });
    expect(emulator.message(interaction.originalMessageId ?? '')?.content).toContain('pause qwen-gsm8k-sft');
  });

  test('chart and status map their options; a server channel opens a thread', async () => {
    const chart = emulator.runSlashCommand({
      channelId: emulator.channelId,
      subcommand: 'chart',
      options: { run: 'llama-dpo', metrics: 'loss grad_norm' },
      user: emulator.users.bob,
    });
    const charted = await emulator.waitFor(() =>
      recorded.messages.find((message) => message.deliveryId === chart.id),
    );
    expect(charted).toMatchObject({ text: '@shepherd chart llama-dpo loss grad_norm', startsThread: true });

    const status = emulator.runSlashCommand({
      channelId: emulator.channelId,
      subcommand: 'status',
      user: emulator.users.bob,
    });
    const asked = await emulator.waitFor(() =>
      recorded.messages.find((message) => message.deliveryId === status.id),
    );
    expect(asked.text).toBe('@shepherd status');
  });

  test('autocomplete answers with matching run names (callback type 8), prefix matches first', async () => {
    const before = recorded.messages.length;
    const interaction = emulator.autocomplete({
      channelId: emulator.channelId,
      subcommand: 'stop',
      option: 'run',
      typed: 'QWEN',
      user: emulator.users.bob,
    });
    const callback = await emulator.waitFor(() => interaction.callbacks[0]);
    expect(callback.type).toBe(8);
    const choices = (callback.data as { choices: Array<{ name: string; value: string }> }).choices;
    expect(choices.map((choice) => choice.value)).toEqual(['qwen-gsm8k-sft', 'qwen-math-rl']);
    expect(choices[0]?.name).toBe('qwen-gsm8k-sft (running)');
    expect(choices[1]?.name).toBe('qwen-math-rl (pending approval)');

    const dpo = emulator.autocomplete({
      channelId: emulator.openDm(emulator.users.alice),
      subcommand: 'status',
      option: 'run',
      typed: 'dpo',
      user: emulator.users.alice,
    });
    const dpoCallback = await emulator.waitFor(() => dpo.callbacks[0]);
    expect((dpoCallback.data as { choices: Json[] }).choices).toEqual([
      { name: 'llama-dpo (pending approval)', value: 'llama-dpo' },
    ]);
    // Autocomplete is not a message: nothing reached the session.
    expect(recorded.messages.length).toBe(before);
    expect(listCalls).toBeGreaterThanOrEqual(2);
  });

  test('an empty prefix lists at most 25 runs, newest first', async () => {
    const interaction = emulator.autocomplete({
      channelId: emulator.channelId,
      subcommand: 'resume',
      option: 'run',
      typed: '',
      user: emulator.users.bob,
    });
    const callback = await emulator.waitFor(() => interaction.callbacks[0]);
    const choices = (callback.data as { choices: Array<{ value: string }> }).choices;
    expect(choices).toHaveLength(25);
    expect(choices.slice(0, 3).map((choice) => choice.value)).toEqual([
      'qwen-gsm8k-sft',
      'llama-dpo',
      'qwen-math-rl',
    ]);
  });
});
