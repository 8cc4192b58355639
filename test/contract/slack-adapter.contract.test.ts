import type { ChatUser } from '../../src/bot/chat-adapter.js';
import {
  blockActionsPayload,
  eventCallback,
  messageEvent,
  startSlackEmulator,
} from '../slack/emulator/index.js';
import { startSocketModeAdapter } from '../slack/socket-adapter.js';
import { describeChatAdapterContract } from './chat-adapter-contract.js';

/** Slack turns these tokens into channel-wide notifications; `@channel` as plain text stays plain. */
const BROADCAST_TOKEN = /<!(?:channel|here|everyone)(?:\|[^>]*)?>/;

/** Every `text` string of a message and its blocks (markdown, mrkdwn and plain text alike). */
function textsOf(value: unknown, into: string[] = []): string[] {
  if (Array.isArray(value)) for (const item of value) textsOf(item, into);
  else if (typeof value === 'object' && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      if (key === 'text' && typeof item === 'string') into.push(item);
      else textsOf(item, into);
    }
  }
  return into;
}

/** The action ids of the buttons in a message's blocks. */
function actionIdsOf(blocks: unknown): string[] {
  if (!Array.isArray(blocks)) return [];
  return blocks
    .filter(
      (block): block is { type: string; elements: Array<{ action_id?: string }> } =>
        block?.type === 'actions',
    )
    .flatMap((block) => block.elements.map((element) => element.action_id ?? ''));
}

describeChatAdapterContract('Slack (Bolt over Socket Mode)', async (handlers) => {
  const emulator = await startSlackEmulator({
    users: [
      { id: 'UALICE', name: 'alice', displayName: 'Alice' },
      { id: 'UBOB', name: 'bob', realName: 'Bob Builder' },
    ],
  });
  const adapter = await startSocketModeAdapter(emulator, handlers);
  const channel = 'C1';
  const threadTs = '1700000100.000100';

  return {
    adapter,
    threadId: `slack:${channel}:${threadTs}`,
    people: { requester: { id: 'UALICE', name: 'Alice' }, approver: { id: 'UBOB', name: 'Bob Builder' } },
    async observe(messageId) {
      const message = emulator.messages.get(messageId);
      if (message === undefined) throw new Error(`Slack has no message ${messageId}`);
      const texts = textsOf({ text: message.text, blocks: message.blocks });
      return {
        // Slack shows mrkdwn entities decoded; the zero-width spaces that defuse tokens are invisible.
        text: texts.join('\n').replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&amp;', '&'),
        actionIds: actionIdsOf(message.blocks),
        pingsEveryone: texts.some((text) => BROADCAST_TOKEN.test(text)),
      };
    },
    async observeUpload(messageId) {
      const upload = emulator.uploads.get(messageId);
      if (upload?.bytes === undefined) throw new Error(`Slack has no bytes for file ${messageId}`);
      return { filename: upload.filename, bytes: new Uint8Array(upload.bytes) };
    },
    async sendMention(person: ChatUser, text: string) {
      const mention = messageEvent({
        type: 'app_mention',
        channel,
        user: person.id,
        text: `<@${emulator.botUserId}> ${text}`,
        threadTs,
      });
      await emulator.sendEnvelope('events_api', eventCallback(mention));
    },
    async click(person: ChatUser, messageId: string, actionId: string) {
      await emulator.sendEnvelope(
        'interactive',
        blockActionsPayload({ userId: person.id, channel, messageTs: messageId, threadTs, actionId }),
      );
    },
    async close() {
      await adapter.stop();
      await emulator.close();
    },
  };
});
