/**
 * The promises of the `ChatAdapter` port (src/bot/chat-adapter.ts), checked the same way against every
 * platform. Each platform's test file starts a real adapter against its emulator and says how to see
 * what the platform received and how a person writes or clicks there; this suite does the rest.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ChatAdapter, ChatUser } from '../../src/bot/chat-adapter.js';
import { createRecordingHandlers, type RecordingHandlers } from '../slack/recording-handlers.js';

/** A message as people on the platform see it. */
export interface ObservedPost {
  /** All text shown on the message (body, card title, text, fields, outcome line), in any layout. */
  text: string;
  /** The ids of the buttons people can click on it. */
  actionIds: string[];
  /** Whether the platform would notify the whole channel (`<!channel>`, `@everyone`, `@here`) for it. */
  pingsEveryone: boolean;
}

export interface ObservedUpload {
  /** The name the platform shows the file under. */
  filename: string;
  bytes: Uint8Array;
}

export interface ContractPlatform {
  /** The adapter, already started with the handlers the suite passed to `setup`. */
  adapter: ChatAdapter;
  /** A thread the bot may post into and people write in. */
  threadId: string;
  /** Two people, as the adapter must report them (id and display name). */
  people: { requester: ChatUser; approver: ChatUser };
  observe(messageId: string): Promise<ObservedPost>;
  observeUpload(messageId: string): Promise<ObservedUpload>;
  /** `person` writes `text` in the thread, mentioning the bot. */
  sendMention(person: ChatUser, text: string): Promise<void>;
  /** `person` clicks button `actionId` on the card `messageId` in the thread. */
  click(person: ChatUser, messageId: string, actionId: string): Promise<void>;
  close(): Promise<void>;
}

/** What the platform shows may lag behind the call that returned (a socket event, a store write). */
async function eventually<T>(
  read: () => Promise<T>,
  holds: (value: T) => boolean,
  timeoutMs = 5_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (holds(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const BROADCASTS = 'heads up <!channel> <!here> @everyone @here: loss is NaN';

export function describeChatAdapterContract(
  name: string,
  /** Start the adapter with `handlers` (they record what reaches the core; setup may wait on them too). */
  setup: (handlers: RecordingHandlers) => Promise<ContractPlatform>,
): void {
  describe(`ChatAdapter contract: ${name}`, () => {
    let platform: ContractPlatform;
    let handlers: RecordingHandlers;

    beforeAll(async () => {
      handlers = createRecordingHandlers();
      platform = await setup(handlers);
    });
    afterAll(async () => {
      await platform?.close();
    });
    beforeEach(() => {
      handlers.messages.length = 0;
      handlers.actions.length = 0;
      handlers.outcome = () => ({ status: 'accepted' });
    });

    it('postMessage returns an id and the text arrives; editMessage changes it', async () => {
      const posted = await platform.adapter.postMessage(platform.threadId, 'Run tiny-gpt started on 2 GPUs.');
      expect(posted.messageId).toEqual(expect.any(String));
      expect(posted.messageId).not.toBe('');
      const seen = await eventually(
        () => platform.observe(posted.messageId),
        (post) => post.text.includes('tiny-gpt'),
      );
      expect(seen.text).toContain('Run tiny-gpt started on 2 GPUs.');

      await platform.adapter.editMessage(platform.threadId, posted.messageId, 'Run tiny-gpt finished.');
      const edited = await eventually(
        () => platform.observe(posted.messageId),
        (post) => post.text.includes('finished'),
      );
      expect(edited.text).toContain('Run tiny-gpt finished.');
      expect(edited.text).not.toContain('started on 2 GPUs');
    });

    it('postCard shows title, text, fields and buttons; updateCard replaces it and a resolved card loses its buttons', async () => {
      const card = {
        title: 'Approve run exp-7?',
        text: 'Launch exp-7 on 4 GPUs',
        fields: [
          { label: 'GPUs', value: '4' },
          { label: 'Max hours', value: '6' },
        ],
        actions: [
          { actionId: 'approve:ap_contract', label: 'Approve', style: 'primary' as const },
          { actionId: 'reject:ap_contract', label: 'Reject', style: 'danger' as const },
        ],
      };
      const posted = await platform.adapter.postCard(platform.threadId, card);
      expect(posted.messageId).toEqual(expect.any(String));
      const seen = await eventually(
        () => platform.observe(posted.messageId),
        (post) => post.actionIds.length > 0,
      );
      for (const part of ['Approve run exp-7?', 'Launch exp-7 on 4 GPUs', 'GPUs', 'Max hours', '6'])
        expect(seen.text).toContain(part);
      expect(seen.actionIds).toEqual(['approve:ap_contract', 'reject:ap_contract']);

      await platform.adapter.updateCard(platform.threadId, posted.messageId, {
        ...card,
        fields: [{ label: 'GPUs', value: '2' }],
        resolved: 'Approved by bob',
      });
      const resolved = await eventually(
        () => platform.observe(posted.messageId),
        (post) => post.text.includes('Approved by bob'),
      );
      expect(resolved.text).toContain('Approved by bob');
      expect(resolved.text).toContain('Approve run exp-7?');
      expect(resolved.text).not.toContain('Max hours');
      expect(resolved.actionIds).toEqual([]);
    });

    it('upload puts the file with its bytes into the thread', async () => {
      const text = 'step,loss\n1,2.5\n2,2.1\n';
      const posted = await platform.adapter.upload(platform.threadId, {
        filename: 'losses.csv',
        data: new TextEncoder().encode(text),
        contentType: 'text/csv',
        title: 'Losses',
      });
      expect(posted.messageId).toEqual(expect.any(String));
      const file = await platform.observeUpload(posted.messageId);
      // Shown under its file name or its title (the playground's link reads the title).
      expect(['losses.csv', 'Losses']).toContain(file.filename);
      expect(new TextDecoder().decode(file.bytes)).toBe(text);
    });

    it('an inbound mention reaches onMessage with the thread and its author', async () => {
      const { requester } = platform.people;
      await platform.sendMention(requester, 'how is the contract run doing?');
      const [message] = await handlers.waitForMessages(1);
      expect(message).toMatchObject({
        threadId: platform.threadId,
        user: requester,
        addressed: true,
        startsThread: false,
      });
      expect(message?.text).toContain('how is the contract run doing?');
      expect(message?.messageId).toEqual(expect.any(String));
      expect(message?.deliveryId).toEqual(expect.any(String));
    });

    it('a button click reaches onAction with the action id, the card and the person who clicked', async () => {
      const posted = await platform.adapter.postCard(platform.threadId, {
        title: 'Resume run exp-8?',
        actions: [{ actionId: 'approve:ap_click', label: 'Approve', style: 'primary' }],
      });
      await eventually(
        () => platform.observe(posted.messageId),
        (post) => post.actionIds.length > 0,
      );
      const { approver } = platform.people;
      await platform.click(approver, posted.messageId, 'approve:ap_click');
      const [action] = await handlers.waitForActions(1);
      expect(action).toEqual({
        threadId: platform.threadId,
        messageId: posted.messageId,
        actionId: 'approve:ap_click',
        user: approver,
      });
    });

    it('neutralises broadcast mentions in messages and cards, keeping the words', async () => {
      const message = await platform.adapter.postMessage(platform.threadId, BROADCASTS);
      const seenMessage = await eventually(
        () => platform.observe(message.messageId),
        (post) => post.text.includes('loss is NaN'),
      );
      expect(seenMessage.text).toContain('loss is NaN');
      expect(seenMessage.pingsEveryone).toBe(false);

      const card = await platform.adapter.postCard(platform.threadId, {
        title: 'Run exp-9 crashed',
        text: BROADCASTS,
        fields: [{ label: 'log', value: '<!everyone> @everyone' }],
      });
      const seenCard = await eventually(
        () => platform.observe(card.messageId),
        (post) => post.text.includes('loss is NaN'),
      );
      expect(seenCard.text).toContain('Run exp-9 crashed');
      expect(seenCard.pingsEveryone).toBe(false);
    });
  });
}
