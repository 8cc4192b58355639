import type { ChatUser } from '../../src/bot/chat-adapter.js';
import { createDiscordAdapter } from '../../src/bot/discord/discord-adapter.js';
import { createLogger } from '../../src/logger.js';
import { startDiscordEmulator } from '../discord/emulator/discord-emulator.js';
import type { EmulatorUser, Json } from '../discord/emulator/payloads.js';
import { describeChatAdapterContract } from './chat-adapter-contract.js';

/** Discord notifies a whole channel for these, unless the post's `allowed_mentions` forbids it. */
const BROADCAST = /@(?:everyone|here)\b/;

interface StoredMessage {
  content?: string;
  embeds?: Array<{
    title?: string;
    description?: string;
    fields?: Array<{ name: string; value: string }>;
    footer?: { text: string };
  }>;
  components?: Array<{ components?: Array<{ custom_id?: string }> }>;
  attachments?: Array<{ filename: string }>;
}

describeChatAdapterContract('Discord (discord.js against the emulator)', async (handlers) => {
  const emulator = await startDiscordEmulator();
  const adapter = createDiscordAdapter({
    token: emulator.token,
    apiUrl: emulator.apiUrl,
    guildIds: [emulator.guildId],
    botName: 'shepherd',
    logger: createLogger('silent'),
  });
  await adapter.start(handlers);
  // A mention in #ml-runs opens the thread everything below happens in.
  emulator.userSends({
    channelId: emulator.channelId,
    author: emulator.users.alice,
    content: 'train tiny model',
    mentionBot: true,
  });
  const [opening] = await handlers.waitForMessages(1);
  if (opening === undefined) throw new Error('the opening mention never reached the core');
  const threadId = opening.threadId;
  const threadChannelId = threadId.split(':')[2] ?? '';
  const people: Record<string, EmulatorUser> = {
    [emulator.users.alice.id]: emulator.users.alice,
    [emulator.users.bob.id]: emulator.users.bob,
  };
  const personOf = (user: ChatUser): EmulatorUser => {
    const person = people[user.id];
    if (person === undefined) throw new Error(`no emulated person ${user.id}`);
    return person;
  };
  const stored = (messageId: string): StoredMessage => {
    const message = emulator.message(messageId);
    if (message === undefined) throw new Error(`Discord has no message ${messageId}`);
    return message as StoredMessage;
  };

  /** Whether the last write of this content let `@everyone`/`@here` notify (no `allowed_mentions` guard). */
  function pings(content: string): boolean {
    if (!BROADCAST.test(content)) return false;
    const write = emulator.calls.findLast(
      (call) =>
        (call.method === 'POST' || call.method === 'PATCH') &&
        (call.body as Json | null)?.content === content,
    );
    const allowed = (write?.body as { allowed_mentions?: { parse?: string[] } } | undefined)
      ?.allowed_mentions;
    return allowed?.parse === undefined || allowed.parse.includes('everyone');
  }

  return {
    adapter,
    threadId,
    people: {
      requester: { id: emulator.users.alice.id, name: 'Alice Liddell' },
      approver: { id: emulator.users.bob.id, name: 'bob (ops)' },
    },
    async observe(messageId) {
      const message = stored(messageId);
      const content = message.content ?? '';
      const text = [
        content,
        ...(message.embeds ?? []).flatMap((embed) => [
          embed.title,
          embed.description,
          ...(embed.fields ?? []).flatMap((field) => [field.name, field.value]),
          embed.footer?.text,
        ]),
      ]
        .filter((part) => part !== undefined)
        .join('\n');
      return {
        text,
        actionIds: (message.components ?? []).flatMap((row) =>
          (row.components ?? []).map((button) => button.custom_id ?? ''),
        ),
        pingsEveryone: pings(content),
      };
    },
    async observeUpload(messageId) {
      const filename = stored(messageId).attachments?.[0]?.filename ?? '';
      const file = emulator.calls
        .flatMap((call) => call.files)
        .findLast((candidate) => candidate.name === filename);
      return { filename, bytes: new Uint8Array(file?.data ?? []) };
    },
    async sendMention(person: ChatUser, text: string) {
      emulator.userSends({
        channelId: threadChannelId,
        author: personOf(person),
        content: text,
        mentionBot: true,
      });
    },
    async click(person: ChatUser, messageId: string, actionId: string) {
      emulator.clickButton({ messageId, customId: actionId, user: personOf(person) });
    },
    async close() {
      await adapter.stop();
      await emulator.close();
    },
  };
});
