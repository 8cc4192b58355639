import { definedOnly } from '../../defined-only.js';
import { PlatformError } from '../../errors.js';
import {
  type Card,
  type ChatAdapter,
  decodeThreadId,
  type InboundHandlers,
  type PostedMessage,
  type Upload,
} from '../chat-adapter.js';
import { toWebCard } from './web-cards.js';
import type { NewWebMessage, WebStore } from './web-store.js';
import { WEB_BOT_USER } from './web-store-model.js';

/**
 * What hears people for the web adapter: the playground app (playground-app.ts), which serves the page
 * and the API that turn a person's message or click into `handlers` calls.
 */
interface WebAdapterHost {
  start(handlers: InboundHandlers): Promise<void>;
  stop(): Promise<void>;
  isConnected(): boolean;
}

interface WebAdapterOptions {
  store: WebStore;
  /** Without one the adapter only writes (a worker process posting into the store). */
  host?: WebAdapterHost;
}

export interface WebAdapter extends ChatAdapter {
  readonly platform: 'web';
}

/** Resolve `web:<channel>:<root>`; an empty root means "a new top-level message in the channel". */
function resolveThread(threadId: string): { channel: string; root: string | undefined } {
  let reference: ReturnType<typeof decodeThreadId>;
  try {
    reference = decodeThreadId(threadId);
  } catch (error) {
    throw new PlatformError('web', 'thread_invalid', `not a thread id: ${threadId}`, {
      retryable: false,
      cause: error,
    });
  }
  if (reference.platform !== 'web') {
    throw new PlatformError('web', 'thread_invalid', `not a playground thread: ${threadId}`, {
      retryable: false,
    });
  }
  return { channel: reference.channel, root: reference.thread === '' ? undefined : reference.thread };
}

/**
 * The web playground's chat adapter: posting methods write through the Redis store and work in any
 * process (no `start()` needed); `start()` starts its host, the playground app, which hears people.
 */
export function createWebAdapter(options: WebAdapterOptions): WebAdapter {
  const { store, host } = options;

  async function post(threadId: string, fields: Omit<NewWebMessage, 'channel' | 'threadId' | 'user'>) {
    const { channel, root } = resolveThread(threadId);
    const message = await store.createMessage({
      channel,
      user: WEB_BOT_USER,
      ...fields,
      ...definedOnly({ threadId: root }),
    });
    return { messageId: message.id } satisfies PostedMessage;
  }

  async function edit(threadId: string, messageId: string, patch: Parameters<WebStore['editMessage']>[1]) {
    resolveThread(threadId);
    const found = await store.editMessage(messageId, patch);
    if (!found) {
      throw new PlatformError('web', 'message_unknown', `no playground message ${messageId}`, {
        retryable: false,
      });
    }
  }

  return {
    platform: 'web',

    start: async (handlers: InboundHandlers) => await host?.start(handlers),

    stop: async () => await host?.stop(),

    isConnected: () => host?.isConnected() === true,

    postMessage: (threadId, text) => post(threadId, { text }),

    // An edit to text makes the message plain text, as on Slack and Discord (a status card loses its button).
    editMessage: (threadId, messageId, text) => edit(threadId, messageId, { text, card: null }),

    async postCard(threadId: string, card: Card) {
      return await post(threadId, { text: '', card: await toWebCard(card, store) });
    },

    async updateCard(threadId: string, messageId: string, card: Card) {
      await edit(threadId, messageId, { card: await toWebCard(card, store) });
    },

    async upload(threadId: string, upload: Upload) {
      const saved = await store.saveFile({
        name: upload.filename,
        contentType: upload.contentType,
        data: upload.data,
      });
      const isImage = upload.contentType.startsWith('image/');
      return await post(threadId, {
        text: upload.comment ?? '',
        ...(isImage
          ? { images: [saved.url] }
          : { files: [{ name: upload.title ?? upload.filename, url: saved.url }] }),
      });
    },

    async postEphemeral(threadId: string, userId: string, text: string) {
      await post(threadId, { text, visibleTo: userId });
    },
  };
}
