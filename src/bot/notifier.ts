import { ServiceError } from '../errors.js';
import type { Card, ChatAdapter, Platform, PostedMessage, Upload } from './chat-adapter.js';
import { decodeThreadId } from './chat-adapter.js';

/**
 * How everything above the adapters speaks into a thread. It is implemented by the notify queue
 * (`src/queue/notify-queue.ts`: retries at 1 s, 2 s, 4 s, Retry-After honoured).
 */
export interface Notifier {
  post(threadId: string, text: string): Promise<PostedMessage>;
  edit(threadId: string, messageId: string, text: string): Promise<void>;
  postCard(threadId: string, card: Card): Promise<PostedMessage>;
  updateCard(threadId: string, messageId: string, card: Card): Promise<void>;
  upload(threadId: string, upload: Upload): Promise<PostedMessage>;
  /** Private where the platform allows it, otherwise a normal post addressed to the user. */
  ephemeral(threadId: string, userId: string, text: string): Promise<void>;
}

/** A notifier whose card posts can be made idempotent: the same `key` never posts a second card. */
export interface IdempotentNotifier extends Notifier {
  postCardOnce(key: string, threadId: string, card: Card): Promise<PostedMessage>;
}

export type AdapterLookup = (platform: Platform) => ChatAdapter | undefined;

export function adapterForThread(lookup: AdapterLookup, threadId: string): ChatAdapter {
  let platform: Platform;
  try {
    platform = decodeThreadId(threadId).platform;
  } catch (error) {
    // A malformed id stays malformed: fail the post now rather than retry it.
    throw new ServiceError('thread_invalid', `not a thread id: ${threadId}`, {
      retryable: false,
      cause: error,
    });
  }
  const adapter = lookup(platform);
  if (adapter === undefined) {
    throw new ServiceError('adapter_missing', `no ${platform} adapter is running`, { retryable: true });
  }
  return adapter;
}
