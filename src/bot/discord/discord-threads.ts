import { PlatformError } from '../../errors.js';
import { decodeThreadId, encodeThreadId } from '../chat-adapter.js';

/*
 * Discord session ids:
 *   discord:<parentChannelId>:<threadChannelId>   a thread in a server channel
 *   discord:dm:<dmChannelId>                      a direct-message conversation
 *   discord:<channelId>:<channelId>               a plain channel (only when something is posted outside a thread)
 * Outbound calls always post into the last part, so every form is directly addressable.
 */

/** The `channel` part of a DM session id. */
const DM_CHANNEL = 'dm';

export function threadSessionId(parentChannelId: string, threadChannelId: string): string {
  return encodeThreadId({ platform: 'discord', channel: parentChannelId, thread: threadChannelId });
}

export function dmSessionId(dmChannelId: string): string {
  return encodeThreadId({ platform: 'discord', channel: DM_CHANNEL, thread: dmChannelId });
}

/** The channel id to post into for a session id; throws a final `PlatformError` for anything else. */
export function targetChannelId(threadId: string): string {
  let reference: ReturnType<typeof decodeThreadId>;
  try {
    reference = decodeThreadId(threadId);
  } catch (error) {
    throw new PlatformError('discord', 'thread_invalid', `not a thread id: ${threadId}`, {
      retryable: false,
      cause: error,
    });
  }
  if (reference.platform !== 'discord' || !/^\d+$/.test(reference.thread)) {
    throw new PlatformError('discord', 'thread_invalid', `not a Discord thread id: ${threadId}`, {
      retryable: false,
    });
  }
  return reference.thread;
}
