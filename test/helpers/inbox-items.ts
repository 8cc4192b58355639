import type { InboxItem } from '../../src/queue/turn-inbox.js';

/** An addressed message from alice as the inbound handler records it; the id is its delivery id too. */
export const inboxMessage = (id: string, text: string): InboxItem => ({
  type: 'message',
  messageId: id,
  deliveryId: id,
  user: { id: 'alice', name: 'alice' },
  text,
  addressed: true,
  receivedAt: Date.now(),
});
