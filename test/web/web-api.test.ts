import { request } from 'node:http';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createPlaygroundApp } from '../../src/bot/web/playground-app.js';
import { createWebAdapter } from '../../src/bot/web/web-adapter.js';
import { createWebStore } from '../../src/bot/web/web-store.js';
import { createLogger } from '../../src/logger.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';
import { type Playground, startPlayground } from './playground-fixture.js';

// A 1×1 PNG.
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  'base64',
);

let playground: Playground;

beforeAll(async () => {
  playground = await startPlayground('web-api');
});
afterAll(async () => {
  await playground.close();
});
beforeEach(() => {
  playground.handlers.messages.length = 0;
  playground.handlers.actions.length = 0;
  playground.handlers.actionOutcome = { status: 'accepted' };
});

async function startThread(channel: string, text = '@shepherd hello'): Promise<string> {
  const response = await playground.post('/api/messages', { channel, user: 'alice', text });
  expect(response.status).toBe(202);
  return response.body.threadId as string;
}

async function threadMessages(threadId: string): Promise<Record<string, unknown>[]> {
  const response = await playground.get(`/api/threads/${encodeURIComponent(threadId)}/messages`);
  expect(response.status).toBe(200);
  return response.body.messages as Record<string, unknown>[];
}

describe('POST /api/messages', () => {
  it('starts a thread on a top-level mention and hands it to onMessage', async () => {
    const response = await playground.post('/api/messages', {
      channel: 'ml-runs',
      user: 'alice',
      text: 'hey @Shepherd, fine-tune please',
    });
    expect(response.status).toBe(202);
    const { threadId, messageId } = response.body;
    expect(threadId).toMatch(/^m\d+$/);
    expect(messageId).toBe(threadId);
    expect(playground.handlers.messages).toEqual([
      expect.objectContaining({
        threadId: `web:ml-runs:${threadId}`,
        messageId,
        deliveryId: messageId,
        user: { id: 'alice', name: 'alice' },
        text: 'hey @Shepherd, fine-tune please',
        addressed: true,
        startsThread: true,
      }),
    ]);
  });

  it('a DM channel (dm.<name>) is one session addressed without a mention', async () => {
    const first = await playground.post('/api/messages', {
      channel: 'dm.carol',
      user: 'carol',
      text: 'runs',
    });
    const second = await playground.post('/api/messages', {
      channel: 'dm.carol',
      user: 'carol',
      text: 'and how is qwen doing?',
    });
    expect(first.status).toBe(202);
    expect(second.status).toBe(202);
    // The second top-level message continues the DM's thread instead of opening another.
    expect(second.body.threadId).toBe(first.body.threadId);
    const threadId = `web:dm.carol:${String(first.body.threadId)}`;
    expect(playground.handlers.messages).toEqual([
      expect.objectContaining({ threadId, addressed: true, startsThread: true, text: 'runs' }),
      expect.objectContaining({ threadId, addressed: true, startsThread: false }),
    ]);
    expect(await threadMessages(first.body.threadId as string)).toHaveLength(2);
  });

  it('stores a top-level message without a mention but marks it unaddressed', async () => {
    const response = await playground.post('/api/messages', {
      channel: 'random',
      user: 'bob',
      text: 'mail shepherd@example.com or @shepherds',
    });
    expect(response.status).toBe(202);
    expect(playground.handlers.messages[0]).toMatchObject({ addressed: false, startsThread: true });
    expect(await threadMessages(response.body.threadId as string)).toHaveLength(1);
  });

  it('appends replies in order, with or without a mention, by root id or full thread id', async () => {
    const root = await startThread('replies');
    const first = await playground.post('/api/messages', {
      channel: 'replies',
      user: 'carol',
      text: 'how is it going?',
      threadId: root,
    });
    const second = await playground.post('/api/messages', {
      channel: 'replies',
      user: 'dan',
      text: '@shepherd pause it',
      threadId: `web:replies:${root}`,
    });
    expect(first.status).toBe(202);
    expect(second.body).toEqual({ threadId: root, messageId: expect.stringMatching(/^m\d+$/) });
    const [, carol, dan] = playground.handlers.messages;
    expect(carol).toMatchObject({ threadId: `web:replies:${root}`, addressed: false, startsThread: false });
    expect(dan).toMatchObject({ threadId: `web:replies:${root}`, addressed: true, startsThread: false });
    const messages = await threadMessages(root);
    expect(messages.map((message) => message.user)).toEqual(['alice', 'carol', 'dan']);
    expect(messages.map((message) => message.id)).toEqual([
      root,
      first.body.messageId,
      second.body.messageId,
    ]);
  });

  it('answers 404 for an unknown thread or a thread in another channel', async () => {
    const root = await startThread('home');
    const missing = await playground.post('/api/messages', {
      channel: 'home',
      user: 'a',
      text: 'x',
      threadId: 'm999999',
    });
    expect(missing.status).toBe(404);
    expect(missing.body.error).toEqual(expect.any(String));
    const elsewhere = await playground.post('/api/messages', {
      channel: 'away',
      user: 'a',
      text: 'x',
      threadId: root,
    });
    expect(elsewhere.status).toBe(404);
    const reply = await playground.post('/api/messages', {
      channel: 'home',
      user: 'a',
      text: 'x',
      threadId: 'm1x',
    });
    expect(reply.status).toBe(404);
    expect(playground.handlers.messages).toHaveLength(1);
  });

  it('answers 400 naming the bad field', async () => {
    const invalidJson = await playground.post('/api/messages', '{"channel": ');
    expect(invalidJson).toEqual({ status: 400, body: { error: expect.stringContaining('JSON') } });
    const missing = await playground.post('/api/messages', { user: 'alice', text: 'hi' });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatch(/^channel:/);
    const wrongType = await playground.post('/api/messages', { channel: 'c', user: 42, text: 'hi' });
    expect(wrongType.body.error).toMatch(/^user:/);
    const badThread = await playground.post('/api/messages', {
      channel: 'c',
      user: 'a',
      text: 'hi',
      threadId: 7,
    });
    expect(badThread.body.error).toMatch(/^threadId:/);
    const colon = await playground.post('/api/messages', { channel: 'a:b', user: 'a', text: 'hi' });
    expect(colon.body.error).toMatch(/^channel:/);
    const impostor = await playground.post('/api/messages', { channel: 'c', user: 'Shepherd', text: 'hi' });
    expect(impostor).toEqual({ status: 400, body: { error: expect.stringMatching(/^user:/) } });
    expect(playground.handlers.messages).toHaveLength(0);
  });

  it('answers 413 for text over 40,000 characters and bodies over 1 MB', async () => {
    const longText = await playground.post('/api/messages', {
      channel: 'c',
      user: 'a',
      text: 'x'.repeat(40_001),
    });
    expect(longText.status).toBe(413);
    expect(longText.body.error).toMatch(/^text:/);
    const okText = await playground.post('/api/messages', {
      channel: 'c',
      user: 'a',
      text: 'x'.repeat(40_000),
    });
    expect(okText.status).toBe(202);
    const huge = await playground.post('/api/messages', {
      channel: 'c',
      user: 'a',
      text: 'x'.repeat(1_100_000),
    });
    expect(huge.status).toBe(413);
  });
});

describe('bot messages and cards', () => {
  it('serves bot posts, edits and cards in thread order with absent fields omitted', async () => {
    const root = await startThread('cards');
    const threadId = `web:cards:${root}`;
    const status = await playground.adapter.postMessage(threadId, 'thinking…');
    await playground.adapter.editMessage(threadId, status.messageId, 'done thinking');
    const card = await playground.adapter.postCard(threadId, {
      title: 'Approve run?',
      text: 'requested by alice',
      fields: [{ label: 'GPUs', value: '2' }],
      image: { png: PNG, filename: 'loss.png', alt: 'loss' },
      actions: [
        { actionId: 'approve:ap_1', label: 'Approve', style: 'primary' },
        { actionId: 'reject:ap_1', label: 'Reject' },
      ],
    });
    const messages = await threadMessages(root);
    expect(messages.map((message) => message.id)).toEqual([root, status.messageId, card.messageId]);
    const [human, edited, cardMessage] = messages;
    expect(Object.keys(human ?? {}).sort()).toEqual(['id', 'text', 'ts', 'user']);
    expect(edited).toEqual({
      id: status.messageId,
      user: 'shepherd',
      text: 'done thinking',
      ts: expect.any(Number),
      editedAt: expect.any(Number),
    });
    expect(cardMessage?.user).toBe('shepherd');
    expect(cardMessage?.card).toEqual({
      title: 'Approve run?',
      text: 'requested by alice',
      fields: [{ label: 'GPUs', value: '2' }],
      imageUrl: expect.stringMatching(/^\/api\/files\/[0-9a-f]{32}$/),
      actions: [
        { actionId: 'approve:ap_1', label: 'Approve', style: 'primary' },
        { actionId: 'reject:ap_1', label: 'Reject' },
      ],
    });
    const image = await fetch(
      `${playground.url}${(cardMessage as { card: { imageUrl: string } }).card.imageUrl}`,
    );
    expect(image.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await image.arrayBuffer()).equals(PNG)).toBe(true);

    await playground.adapter.updateCard(threadId, card.messageId, {
      title: 'Approve run?',
      resolved: 'Approved by bob',
    });
    const resolved = (await threadMessages(root))[2];
    expect(resolved?.card).toEqual({ title: 'Approve run?', resolved: 'Approved by bob' });
    expect(resolved?.editedAt).toEqual(expect.any(Number));
  });

  it('uploads images and files and serves the same bytes back', async () => {
    const root = await startThread('uploads');
    const threadId = `web:uploads:${root}`;
    await playground.adapter.upload(threadId, {
      filename: 'chart.png',
      data: PNG,
      contentType: 'image/png',
      comment: 'loss so far',
    });
    await playground.adapter.upload(threadId, {
      filename: 'train.log',
      data: Buffer.from('step 1 loss 2.0\n'),
      contentType: 'text/plain',
    });
    await playground.adapter.upload(threadId, {
      filename: 'evil.html',
      data: Buffer.from('<script>alert(1)</script>'),
      contentType: 'text/html',
    });
    const [, chart, log, html] = await threadMessages(root);
    expect(chart).toMatchObject({ text: 'loss so far', images: [expect.stringMatching(/^\/api\/files\//)] });
    const chartResponse = await fetch(`${playground.url}${(chart as { images: string[] }).images[0]}`);
    expect(chartResponse.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await chartResponse.arrayBuffer()).equals(PNG)).toBe(true);
    const logFile = (log as { files: { name: string; url: string }[] }).files[0];
    expect(logFile?.name).toBe('train.log');
    expect(await (await fetch(`${playground.url}${logFile?.url}`)).text()).toBe('step 1 loss 2.0\n');
    // HTML is never served inline from the playground's origin.
    const htmlResponse = await fetch(
      `${playground.url}${(html as { files: { url: string }[] }).files[0]?.url}`,
    );
    expect(htmlResponse.headers.get('content-type')).toBe('application/octet-stream');
    expect(htmlResponse.headers.get('content-disposition')).toMatch(/^attachment/);
    expect((await fetch(`${playground.url}/api/files/${'0'.repeat(32)}`)).status).toBe(404);
  });

  it('refuses files over the size cap', async () => {
    const root = await startThread('big-files');
    await expect(
      playground.adapter.upload(`web:big-files:${root}`, {
        filename: 'huge.bin',
        data: new Uint8Array(8 * 1024 * 1024 + 1),
        contentType: 'application/octet-stream',
      }),
    ).rejects.toMatchObject({ name: 'PlatformError', code: 'file_too_large', retryable: false });
  });

  it('marks ephemeral messages with the user they are for', async () => {
    const root = await startThread('ephemeral');
    await playground.adapter.postEphemeral?.(`web:ephemeral:${root}`, 'bob', 'only you can approve this');
    const [, note] = await threadMessages(root);
    expect(note).toMatchObject({ user: 'shepherd', text: 'only you can approve this', visibleTo: 'bob' });
  });

  it('throws a non-retryable PlatformError for a thread or message that does not exist', async () => {
    await expect(playground.adapter.postMessage('web:nowhere:m424242', 'hi')).rejects.toMatchObject({
      code: 'thread_unknown',
      retryable: false,
    });
    await expect(playground.adapter.editMessage('web:nowhere:m1', 'm424242', 'hi')).rejects.toMatchObject({
      code: 'message_unknown',
    });
    await expect(playground.adapter.postMessage('slack:C1:1.2', 'hi')).rejects.toMatchObject({
      code: 'thread_invalid',
    });
  });
});

describe('POST /api/actions', () => {
  async function threadWithCard(channel: string) {
    const root = await startThread(channel);
    const threadId = `web:${channel}:${root}`;
    const card = await playground.adapter.postCard(threadId, {
      title: 'Approve?',
      actions: [{ actionId: 'approve:ap_9', label: 'Approve', style: 'primary' }],
    });
    return { root, threadId, messageId: card.messageId };
  }

  it('maps handler outcomes to 200, 403, 409 and 404', async () => {
    const { root, threadId, messageId } = await threadWithCard('actions');
    const click = { threadId: root, messageId, actionId: 'approve:ap_9', user: 'bob' };
    playground.handlers.actionOutcome = { status: 'accepted', message: 'Approved.' };
    expect(await playground.post('/api/actions', click)).toEqual({
      status: 200,
      body: { ok: true, message: 'Approved.' },
    });
    playground.handlers.actionOutcome = { status: 'accepted' };
    expect(await playground.post('/api/actions', { ...click, threadId })).toEqual({
      status: 200,
      body: { ok: true },
    });
    playground.handlers.actionOutcome = { status: 'forbidden', message: 'you cannot approve your own run' };
    expect(await playground.post('/api/actions', click)).toEqual({
      status: 403,
      body: { error: 'you cannot approve your own run' },
    });
    playground.handlers.actionOutcome = { status: 'resolved', message: 'already approved by carol' };
    expect(await playground.post('/api/actions', click)).toEqual({
      status: 409,
      body: { error: 'already approved by carol' },
    });
    playground.handlers.actionOutcome = { status: 'unknown', message: 'approval expired' };
    expect(await playground.post('/api/actions', click)).toEqual({
      status: 404,
      body: { error: 'approval expired' },
    });
    expect(playground.handlers.actions).toHaveLength(5);
    expect(playground.handlers.actions[0]).toEqual({
      threadId,
      messageId,
      actionId: 'approve:ap_9',
      user: { id: 'bob', name: 'bob' },
    });
  });

  it('rejects buttons that are not on the card, wrong threads and resolved cards without asking the core', async () => {
    const { root, threadId, messageId } = await threadWithCard('bad-actions');
    const notOnCard = await playground.post('/api/actions', {
      threadId: root,
      messageId,
      actionId: 'delete:all',
      user: 'bob',
    });
    expect(notOnCard.status).toBe(404);
    const wrongThread = await playground.post('/api/actions', {
      threadId: 'm1',
      messageId,
      actionId: 'approve:ap_9',
      user: 'b',
    });
    expect(wrongThread.status).toBe(404);
    const plainMessage = await playground.post('/api/actions', {
      threadId: root,
      messageId: root,
      actionId: 'approve:ap_9',
      user: 'b',
    });
    expect(plainMessage.status).toBe(404);
    const missingField = await playground.post('/api/actions', { threadId: root, messageId, user: 'b' });
    expect(missingField).toEqual({ status: 400, body: { error: expect.stringMatching(/^actionId:/) } });
    await playground.adapter.updateCard(threadId, messageId, {
      title: 'Approve?',
      resolved: 'Rejected by carol',
    });
    const resolved = await playground.post('/api/actions', {
      threadId: root,
      messageId,
      actionId: 'approve:ap_9',
      user: 'b',
    });
    expect(resolved.status).toBe(409);
    expect(resolved.body.error).toContain('Rejected by carol');
    expect(playground.handlers.actions).toHaveLength(0);
  });
});

describe('other routes', () => {
  it('lists channels with their threads, newest activity first, with a root preview', async () => {
    const older = await startThread('listing', '@shepherd first thread');
    const newer = await startThread('listing', `@shepherd ${'long '.repeat(60)}`);
    await playground.post('/api/channels', { channel: 'empty-one' });
    const { body } = await playground.get('/api/channels');
    const channels = body.channels as { channel: string; threads: Record<string, unknown>[] }[];
    const listing = channels.find((channel) => channel.channel === 'listing');
    expect(listing?.threads.map((thread) => thread.threadId)).toEqual([newer, older]);
    expect(listing?.threads[1]).toMatchObject({ user: 'alice', preview: '@shepherd first thread' });
    expect(String(listing?.threads[0]?.preview).length).toBeLessThanOrEqual(120);
    expect(channels.find((channel) => channel.channel === 'empty-one')?.threads).toEqual([]);
  });

  it('serves the page, health and JSON 404s', async () => {
    const page = await fetch(`${playground.url}/`);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'sha256-");
    expect(await page.text()).toContain('id="composer"');
    expect((await playground.get('/healthz')).body.ok).toBe(true);
    expect(await playground.get('/api/nothing')).toEqual({
      status: 404,
      body: { error: expect.any(String) },
    });
    expect((await playground.get('/api/threads/m999999/messages')).status).toBe(404);
  });

  it('streams an event for new and edited messages, including posts from another process', async () => {
    const root = await startThread('events');
    const events: Record<string, unknown>[] = [];
    const connection = request(`${playground.url}/api/events`);
    const opened = new Promise<void>((resolve, reject) => {
      connection.on('response', (response) => {
        expect(response.headers['content-type']).toContain('text/event-stream');
        let buffer = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          buffer += chunk;
          if (buffer.includes('retry:')) resolve();
          let boundary = buffer.indexOf('\n\n');
          while (boundary >= 0) {
            const block = buffer.slice(0, boundary);
            buffer = buffer.slice(boundary + 2);
            const data = block.split('\n').find((line) => line.startsWith('data: '));
            if (data !== undefined) events.push(JSON.parse(data.slice(6)) as Record<string, unknown>);
            boundary = buffer.indexOf('\n\n');
          }
        });
      });
      connection.on('error', reject);
    });
    connection.end();
    await opened;

    const reply = await playground.post('/api/messages', {
      channel: 'events',
      user: 'carol',
      text: 'status?',
      threadId: root,
    });
    // A separate connection and store, as a worker process would have.
    const workerRedis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    const workerStore = createWebStore({ redis: workerRedis, prefix: playground.prefix });
    const fromWorker = await workerStore.createMessage({
      channel: 'events',
      threadId: root,
      user: 'shepherd',
      text: 'step 10',
    });
    await workerStore.editMessage(fromWorker.id, { text: 'step 20' });
    workerRedis.disconnect();

    await expect.poll(() => events.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(3);
    connection.destroy();
    expect(events.slice(0, 3)).toEqual([
      {
        kind: 'message-create',
        channel: 'events',
        threadId: root,
        encodedThreadId: `web:events:${root}`,
        messageId: reply.body.messageId,
      },
      {
        kind: 'message-create',
        channel: 'events',
        threadId: root,
        encodedThreadId: `web:events:${root}`,
        messageId: fromWorker.id,
      },
      {
        kind: 'message-edit',
        channel: 'events',
        threadId: root,
        encodedThreadId: `web:events:${root}`,
        messageId: fromWorker.id,
      },
    ]);
  });
});

describe('adapter lifecycle', () => {
  it('fails to start on a taken port with a PlatformError', async () => {
    const secondApp = createPlaygroundApp({
      store: playground.store,
      redis: playground.redis,
      host: '127.0.0.1',
      port: playground.app.address().port,
      botName: 'shepherd',
      logger: createLogger('silent'),
    });
    const second = createWebAdapter({ store: playground.store, host: secondApp });
    await expect(second.start(playground.handlers)).rejects.toMatchObject({ code: 'listen_failed' });
    expect(() => secondApp.address()).toThrow(/not started/);
    expect(second.isConnected?.()).toBe(false);
    await second.stop();
  });
});
