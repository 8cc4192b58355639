import type { Redis } from 'ioredis';
import {
  messageFromHash,
  type WebChannelSummary,
  type WebMessage,
  type WebStoreKeys,
} from './web-store-model.js';

/** The playground store's reads: messages, threads and the channel index the page lists. */

const PREVIEW_LENGTH = 120;

export interface WebStoreReads {
  getMessage(messageId: string): Promise<WebMessage | undefined>;
  /** All messages of a thread, root first; `undefined` if `rootId` is not a thread root. */
  getThread(rootId: string): Promise<WebMessage[] | undefined>;
  listChannels(options?: { threadLimit?: number }): Promise<WebChannelSummary[]>;
  /** The root id of the channel's most recently active thread. */
  latestThread(channel: string): Promise<string | undefined>;
}

export function createWebStoreReads(redis: Redis, keys: WebStoreKeys): WebStoreReads {
  async function readMessages(ids: string[]): Promise<WebMessage[]> {
    if (ids.length === 0) return [];
    const pipeline = redis.pipeline();
    for (const id of ids) pipeline.hgetall(keys.message(id));
    const results = (await pipeline.exec()) ?? [];
    const messages: WebMessage[] = [];
    results.forEach(([error, hash], index) => {
      const id = ids[index];
      if (error !== null || id === undefined) return;
      const message = messageFromHash(id, hash as Record<string, string>);
      if (message !== undefined) messages.push(message);
    });
    return messages;
  }

  /** Each channel's newest threads (root id and last activity), one pipeline for all channels. */
  async function threadIndex(channels: string[], limit: number) {
    const pipeline = redis.pipeline();
    for (const channel of channels) pipeline.zrevrange(keys.threads(channel), 0, limit - 1, 'WITHSCORES');
    const results = (await pipeline.exec()) ?? [];
    return channels.map((channel, index) => {
      const flat = (results[index]?.[1] as string[] | undefined) ?? [];
      const entries: { root: string; lastActivity: number }[] = [];
      for (let position = 0; position + 1 < flat.length; position += 2) {
        entries.push({ root: flat[position] as string, lastActivity: Number(flat[position + 1]) });
      }
      return { channel, entries };
    });
  }

  return {
    async getMessage(messageId) {
      const hash = await redis.hgetall(keys.message(messageId));
      return messageFromHash(messageId, hash);
    },

    async getThread(rootId) {
      const ids = await redis.lrange(keys.thread(rootId), 0, -1);
      if (ids[0] !== rootId) return undefined;
      return await readMessages(ids);
    },

    async listChannels(listOptions = {}) {
      const channels = await redis.zrange(keys.channels, 0, -1);
      if (channels.length === 0) return [];
      const perChannel = await threadIndex(channels, listOptions.threadLimit ?? 50);
      const roots = await readMessages(perChannel.flatMap((item) => item.entries.map((entry) => entry.root)));
      const rootsById = new Map(roots.map((message) => [message.id, message]));
      return perChannel.map(({ channel, entries }) => ({
        channel,
        threads: entries.flatMap((entry) => {
          const root = rootsById.get(entry.root);
          if (root === undefined) return [];
          const text = root.text || root.card?.title || '';
          return [
            {
              threadId: root.id,
              user: root.user,
              preview: text.length > PREVIEW_LENGTH ? `${text.slice(0, PREVIEW_LENGTH - 1)}…` : text,
              ts: root.ts,
              lastActivity: entry.lastActivity,
            },
          ];
        }),
      }));
    },

    async latestThread(channel) {
      const [root] = await redis.zrevrange(keys.threads(channel), 0, 0);
      return root;
    },
  };
}
