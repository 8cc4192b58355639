import { type Client, DiscordAPIError, Routes } from 'discord.js';
import { z } from 'zod';
import type { Logger } from '../../logger.js';
import type { DiscordFile } from './cards.js';
import { toPlatformError } from './discord-errors.js';
import { targetChannelId } from './discord-threads.js';

const messageResponse = z.object({ id: z.string() });

/** Discord's "Thread is archived": an edit in a thread that auto-archived after a quiet day. */
const THREAD_ARCHIVED = 50083;

/** Creating and editing messages over REST; every failure is logged and rethrown as a `PlatformError`. */
interface DiscordMessages {
  /** Posts a message in the thread; resolves its id. */
  create(
    threadId: string,
    body: Record<string, unknown>,
    files: DiscordFile[],
    operation: string,
  ): Promise<string>;
  patch(
    threadId: string,
    messageId: string,
    body: Record<string, unknown>,
    files: DiscordFile[],
    operation: string,
  ): Promise<void>;
}

export function createDiscordMessages(client: Client, logger: Logger): DiscordMessages {
  async function call<T>(operation: string, threadId: string, request: () => Promise<T>): Promise<T> {
    try {
      return await request();
    } catch (error) {
      const failure = toPlatformError(error, operation);
      logger[failure.retryable ? 'warn' : 'error'](
        { threadId, operation, code: failure.code, retryable: failure.retryable, err: failure },
        failure.retryable
          ? 'Discord call failed; the notify queue may retry'
          : 'Discord call failed for good',
      );
      throw failure;
    }
  }

  return {
    async create(threadId, body, files, operation) {
      const channelId = targetChannelId(threadId);
      const data = await call(operation, threadId, () =>
        client.rest.post(Routes.channelMessages(channelId), { body, ...(files.length > 0 ? { files } : {}) }),
      );
      return messageResponse.parse(data).id;
    },

    async patch(threadId, messageId, body, files, operation) {
      const channelId = targetChannelId(threadId);
      const edit = () =>
        client.rest.patch(Routes.channelMessage(channelId, messageId), {
          body,
          ...(files.length > 0 ? { files } : {}),
        });
      await call(operation, threadId, async () => {
        try {
          return await edit();
        } catch (error) {
          if (!(error instanceof DiscordAPIError) || error.code !== THREAD_ARCHIVED) throw error;
          // A card on a multi-day run outlives the thread's auto-archive: open the thread again and edit,
          // so the card does not go stale. A locked thread stays shut (its unarchive fails for good).
          logger.info({ threadId, operation }, 'thread archived; unarchiving it to edit a message');
          await client.rest.patch(Routes.channel(channelId), { body: { archived: false } });
          return edit();
        }
      });
    },
  };
}
