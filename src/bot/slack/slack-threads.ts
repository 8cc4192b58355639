/**
 * Slack thread ids (`slack:<channel>:<thread>`):
 *   slack:<channel>:<thread ts>   a thread in a channel or DM (the session lives in that thread)
 *   slack:<D…>:dm                 the top-level DM conversation with the bot (one session, no thread)
 * `dm` cannot collide with a Slack ts, which is always `<seconds>.<micros>`.
 */
import { PlatformError } from '../../errors.js';
import { decodeThreadId, encodeThreadId } from '../chat-adapter.js';

/** The reserved thread part of the top-level DM session. */
export const DM_THREAD = 'dm';

/** Slack DM (im) channel ids start with `D`; channels are `C…`, private channels and group DMs `G…`/`C…`. */
export function isDirectMessageChannel(channel: string): boolean {
  return channel.startsWith('D');
}

/** The thread id of the top-level conversation in a DM channel. */
export function dmThreadId(channel: string): string {
  return encodeThreadId({ platform: 'slack', channel, thread: DM_THREAD });
}

/**
 * Where to post for a Slack thread id: the channel, and the `thread_ts` to reply under, or undefined
 * for the top-level DM session (posted top-level in the DM).
 */
export function slackThread(threadId: string): { channel: string; threadTs: string | undefined } {
  const reference = decodeThreadId(threadId);
  if (reference.platform !== 'slack') {
    throw new PlatformError('slack', 'wrong_platform', `not a Slack thread: ${threadId}`, {
      retryable: false,
    });
  }
  return {
    channel: reference.channel,
    threadTs: reference.thread === DM_THREAD ? undefined : reference.thread,
  };
}
