import { Redis } from 'ioredis';
import type { ChatUser } from '../../src/bot/chat-adapter.js';
import { createPlaygroundApp } from '../../src/bot/web/playground-app.js';
import { createWebAdapter } from '../../src/bot/web/web-adapter.js';
import { createWebStore } from '../../src/bot/web/web-store.js';
import { createLogger } from '../../src/logger.js';
import { deleteKeysWithPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { describeChatAdapterContract, type ObservedPost } from './chat-adapter-contract.js';

interface MessageView {
  id: string;
  text: string;
  card?: {
    title?: string;
    text?: string;
    fields?: Array<{ label: string; value: string }>;
    actions?: Array<{ actionId: string }>;
    resolved?: string;
  };
  images?: string[];
  files?: Array<{ name: string; url: string }>;
}

describeChatAdapterContract('web playground', async (handlers) => {
  const prefix = uniquePrefix('contract-web');
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  const store = createWebStore({ redis, prefix });
  const playground = createPlaygroundApp({
    store,
    redis,
    host: '127.0.0.1',
    port: 0,
    botName: 'shepherd',
    logger: createLogger('silent'),
  });
  const adapter = createWebAdapter({ store, host: playground });
  await adapter.start(handlers);
  const url = playground.address().url;
  const post = async (path: string, body: unknown) => {
    const response = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`${path} answered ${response.status}: ${await response.text()}`);
    return (await response.json()) as Record<string, unknown>;
  };
  // The thread people opened with a mention; everything below happens in it, as the page shows it.
  const opened = await post('/api/messages', { channel: 'contract', user: 'alice', text: '@shepherd hi' });
  const root = String(opened.threadId);
  const threadId = `web:contract:${root}`;

  async function view(messageId: string): Promise<MessageView> {
    const response = await fetch(`${url}/api/threads/${encodeURIComponent(root)}/messages`);
    const { messages } = (await response.json()) as { messages: MessageView[] };
    const found = messages.find((message) => message.id === messageId);
    if (found === undefined) throw new Error(`message ${messageId} is not in thread ${root}`);
    return found;
  }

  return {
    adapter,
    threadId,
    people: { requester: { id: 'alice', name: 'alice' }, approver: { id: 'bob', name: 'bob' } },
    async observe(messageId): Promise<ObservedPost> {
      const message = await view(messageId);
      const card = message.card;
      const text = [
        message.text,
        card?.title,
        card?.text,
        ...(card?.fields ?? []).flatMap((field) => [field.label, field.value]),
        card?.resolved,
      ]
        .filter((part) => part !== undefined)
        .join('\n');
      return {
        text,
        actionIds: (card?.actions ?? []).map((action) => action.actionId),
        // The playground has no broadcast mentions: nothing it shows notifies a whole channel.
        pingsEveryone: false,
      };
    },
    async observeUpload(messageId) {
      const message = await view(messageId);
      const link = message.files?.[0] ?? { name: '', url: message.images?.[0] ?? '' };
      const response = await fetch(new URL(link.url, url));
      return { filename: link.name, bytes: new Uint8Array(await response.arrayBuffer()) };
    },
    async sendMention(person: ChatUser, text: string) {
      await post('/api/messages', {
        channel: 'contract',
        user: person.id,
        text: `@shepherd ${text}`,
        threadId: root,
      });
    },
    async click(person: ChatUser, messageId: string, actionId: string) {
      await post('/api/actions', { threadId, messageId, actionId, user: person.id });
    },
    async close() {
      await adapter.stop();
      await deleteKeysWithPrefix(prefix);
      redis.disconnect();
    },
  };
});
