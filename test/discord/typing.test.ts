import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDiscordAdapter, type DiscordAdapter } from '../../src/bot/discord/discord-adapter.js';
import { createLogger } from '../../src/logger.js';
import { type DiscordEmulator, startDiscordEmulator } from './emulator/discord-emulator.js';
import { createRecordingHandlers } from './helpers.js';

/* "Shepherd is typing…" on the real discord.js client against the emulator, while a turn's status card is up. */
describe('discord typing indicator', () => {
  let emulator: DiscordEmulator;
  let adapter: DiscordAdapter;

  beforeAll(async () => {
    emulator = await startDiscordEmulator();
    adapter = createDiscordAdapter({
      token: emulator.token,
      apiUrl: emulator.apiUrl,
      guildIds: [emulator.guildId],
      botName: 'shepherd',
      logger: createLogger('silent'),
      typingIntervalMs: 150,
    });
    await adapter.start(createRecordingHandlers().handlers);
  });
  afterAll(async () => {
    await adapter?.stop();
    await emulator?.close();
  });

  const typingCalls = (channelId: string) =>
    emulator.calls.filter((call) => call.method === 'POST' && call.path === `/channels/${channelId}/typing`)
      .length;
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it('types while the status card is up and stops when it becomes the answer', async () => {
    const dm = emulator.openDm(emulator.users.alice);
    const threadId = `discord:dm:${dm}`;
    const status = {
      text: 'thinking…',
      actions: [{ actionId: 'cancel:turn', label: 'Cancel', style: 'danger' as const }],
    };
    const posted = await adapter.postCard(threadId, status);
    await sleep(700);
    const whileWorking = typingCalls(dm);
    expect(whileWorking).toBeGreaterThanOrEqual(3);
    await adapter.updateCard(threadId, posted.messageId, {
      ...status,
      text: 'running tool list_training_runs…',
    });
    await adapter.editMessage(threadId, posted.messageId, 'Here is the answer.');
    const atAnswer = typingCalls(dm);
    await sleep(500);
    expect(typingCalls(dm)).toBe(atAnswer);

    // An ordinary card (an approval) does not type.
    await adapter.postCard(threadId, {
      title: 'Approve?',
      actions: [{ actionId: 'approve:x', label: 'Approve' }],
    });
    await sleep(400);
    expect(typingCalls(dm)).toBe(atAnswer);
  });
});
