/**
 * The Slack adapter over Socket Mode, end to end through the wire-level emulator: real Bolt, real
 * WebClient, real WebSocket. The core is a recording fake at the `InboundHandlers` port.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SlackAdapter } from '../../src/bot/slack/slack-adapter.js';
import { PlatformError, RateLimitedError } from '../../src/errors.js';
import {
  blockActionsPayload,
  eventCallback,
  messageEvent,
  type SlackEmulator,
  slashCommandPayload,
  startSlackEmulator,
} from './emulator/index.js';
import { createRecordingHandlers, type RecordingHandlers } from './recording-handlers.js';
import { startSocketModeAdapter } from './socket-adapter.js';

let emulator: SlackEmulator;
let adapter: SlackAdapter;
let handlers: RecordingHandlers;

interface Block {
  type: string;
  text?: { text: string } | string;
  fields?: Array<{ text: string }>;
  elements?: Array<{ action_id?: string; value?: string; text: { text: string } | string }>;
}

function blocksOf(params: Record<string, unknown>): Block[] {
  return (params.blocks ?? []) as Block[];
}

/** A block's text: a markdown block's string, or the text object's text. */
function textOf(block: Block | undefined): string | undefined {
  return typeof block?.text === 'string' ? block.text : block?.text?.text;
}

beforeAll(async () => {
  emulator = await startSlackEmulator({
    users: [
      { id: 'UALICE', name: 'alice', displayName: 'Alice' },
      { id: 'UBOB', name: 'bob', realName: 'Bob Builder' },
    ],
  });
  handlers = createRecordingHandlers();
  adapter = await startSocketModeAdapter(emulator, handlers);
});

afterAll(async () => {
  await adapter?.stop();
  await emulator?.close();
});

beforeEach(() => {
  handlers.messages.length = 0;
  handlers.actions.length = 0;
  handlers.delayMs = 0;
  handlers.outcome = () => ({ status: 'accepted' });
  emulator.clearFaults();
});

describe('slack adapter over Socket Mode', () => {
  it('connects through SLACK_API_URL: auth.test with the bot token, apps.connections.open with the app token', () => {
    expect(adapter.mode).toBe('socket');
    expect(emulator.callsTo('auth.test')[0]?.token).toBe(emulator.botToken);
    expect(emulator.callsTo('apps.connections.open')[0]?.token).toBe(emulator.appToken);
    expect(adapter.identity()).toEqual({ botUserId: 'UBOT', botId: 'BBOT' });
  });

  it('turns a top-level mention into a new thread session and replies in that thread', async () => {
    handlers.delayMs = 1500;
    const mention = messageEvent({
      type: 'app_mention',
      channel: 'C1',
      user: 'UALICE',
      text: '<@UBOT> launch it with <@UBOB> &amp; co',
    });
    const ack = await emulator.sendEnvelope('events_api', eventCallback(mention, { eventId: 'EvMention1' }));
    expect(ack.latencyMs).toBeLessThan(1000);
    const [message] = await handlers.waitForMessages(1);
    expect(message).toMatchObject({
      threadId: `slack:C1:${mention.ts}`,
      messageId: mention.ts,
      user: { id: 'UALICE', name: 'Alice' },
      text: 'launch it with @Bob Builder & co',
      addressed: true,
      startsThread: true,
      deliveryId: 'EvMention1',
    });
    expect(emulator.callsTo('users.info').some((call) => call.params.user === 'UALICE')).toBe(true);

    const posted = await adapter.postMessage(`slack:C1:${mention.ts}`, 'On it: **run** started');
    const call = emulator.callsTo('chat.postMessage').at(-1);
    expect(call?.params).toMatchObject({ channel: 'C1', thread_ts: mention.ts });
    // Agent text goes out as a markdown block, with the mrkdwn conversion as the fallback text.
    expect(blocksOf(call?.params ?? {})).toEqual([{ type: 'markdown', text: 'On it: **run** started' }]);
    expect(call?.params.text).toBe('On it: *run* started');
    expect(posted.messageId).toBe(emulator.messages.get(posted.messageId)?.ts);

    await adapter.editMessage(`slack:C1:${mention.ts}`, posted.messageId, 'Done');
    expect(emulator.callsTo('chat.update').at(-1)?.params).toMatchObject({
      channel: 'C1',
      ts: posted.messageId,
    });
  });

  it('does not handle a mention twice when Slack also sends it as a message event', async () => {
    const ts = '1700000500.000100';
    await emulator.sendEnvelope(
      'events_api',
      eventCallback(
        messageEvent({ type: 'app_mention', channel: 'C1', user: 'UALICE', text: '<@UBOT> hi', ts }),
        { eventId: 'EvDouble1' },
      ),
    );
    await emulator.sendEnvelope(
      'events_api',
      eventCallback(
        messageEvent({ channel: 'C1', user: 'UALICE', text: '<@UBOT> hi', ts, channelType: 'channel' }),
        { eventId: 'EvDouble2' },
      ),
    );
    await handlers.waitForMessages(1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(handlers.messages).toHaveLength(1);
  });

  it('forwards a thread reply without a mention as not addressed, and ignores top-level chatter', async () => {
    await emulator.sendEnvelope(
      'events_api',
      eventCallback(messageEvent({ channel: 'C1', user: 'UBOB', text: 'lunch?', channelType: 'channel' })),
    );
    const reply = messageEvent({
      channel: 'C1',
      user: 'UBOB',
      text: 'also try lr=3e-4',
      threadTs: '1700000001.000001',
      channelType: 'channel',
    });
    await emulator.sendEnvelope('events_api', eventCallback(reply, { eventId: 'EvReply1' }));
    const [message] = await handlers.waitForMessages(1);
    expect(message).toMatchObject({
      threadId: 'slack:C1:1700000001.000001',
      user: { id: 'UBOB', name: 'Bob Builder' },
      text: 'also try lr=3e-4',
      addressed: false,
      startsThread: false,
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(handlers.messages).toHaveLength(1);
  });

  it('treats top-level DMs as one addressed session and a thread inside the DM as its own', async () => {
    const first = messageEvent({
      channel: 'D1',
      user: 'UALICE',
      text: 'status of run 7?',
      channelType: 'im',
    });
    await emulator.sendEnvelope('events_api', eventCallback(first, { eventId: 'EvDm1' }));
    const second = messageEvent({ channel: 'D1', user: 'UALICE', text: 'and run 8?', channelType: 'im' });
    await emulator.sendEnvelope('events_api', eventCallback(second, { eventId: 'EvDm2' }));
    const threaded = messageEvent({
      channel: 'D1',
      user: 'UALICE',
      text: 'about this one',
      channelType: 'im',
      threadTs: String(first.ts),
    });
    await emulator.sendEnvelope('events_api', eventCallback(threaded, { eventId: 'EvDm3' }));
    const messages = await handlers.waitForMessages(3);
    const byText = (text: string) => messages.find((message) => message.text === text);
    for (const [text, ts] of [
      ['status of run 7?', first.ts],
      ['and run 8?', second.ts],
    ] as const) {
      expect(byText(text)).toMatchObject({
        threadId: 'slack:D1:dm',
        messageId: ts,
        addressed: true,
        startsThread: false,
      });
    }
    expect(byText('about this one')).toMatchObject({
      threadId: `slack:D1:${first.ts}`,
      addressed: true,
      startsThread: false,
    });
  });

  it('answers the DM session top-level: messages, cards, uploads and ephemerals carry no thread_ts', async () => {
    const png = new Uint8Array(256).map((_, index) => index);
    const before = emulator.calls.length;
    const posted = await adapter.postMessage('slack:D1:dm', 'Run 7 is **running**');
    const card = await adapter.postCard('slack:D1:dm', {
      title: 'Approve run exp-9?',
      image: { png, filename: 'chart.png', alt: 'loss chart' },
      actions: [{ actionId: 'approve:ap_dm', label: 'Approve' }],
    });
    const upload = await adapter.upload('slack:D1:dm', {
      filename: 'loss.png',
      data: png,
      contentType: 'image/png',
      comment: 'Loss',
    });
    await adapter.postEphemeral('slack:D1:dm', 'UALICE', 'Only you see this');
    const calls = emulator.calls.slice(before);
    const outbound = calls.filter((call) =>
      ['chat.postMessage', 'files.completeUploadExternal', 'chat.postEphemeral'].includes(call.method),
    );
    expect(outbound.map((call) => call.method)).toEqual([
      'chat.postMessage',
      'files.completeUploadExternal',
      'chat.postMessage',
      'files.completeUploadExternal',
      'chat.postEphemeral',
    ]);
    // The card's chart is uploaded unshared and shown by an image block in the card's own message.
    const [, chartUpload, ...shared] = outbound;
    expect(chartUpload?.params).not.toHaveProperty('channel_id');
    const chartId = ((chartUpload?.params.files ?? []) as Array<{ id: string }>)[0]?.id;
    expect(emulator.messages.get(card.messageId)?.blocks).toEqual(
      expect.arrayContaining([{ type: 'image', slack_file: { id: chartId }, alt_text: 'loss chart' }]),
    );
    for (const call of [outbound[0], ...shared]) {
      expect(call?.params.channel ?? call?.params.channel_id).toBe('D1');
      expect(call?.params).not.toHaveProperty('thread_ts');
    }
    expect(emulator.messages.get(posted.messageId)).toMatchObject({ channel: 'D1', threadTs: undefined });
    expect(emulator.messages.get(card.messageId)).toMatchObject({ channel: 'D1', threadTs: undefined });
    expect(emulator.uploads.get(upload.messageId)?.completed).toMatchObject({
      channel: 'D1',
      threadTs: undefined,
    });

    // Edits address the message ts, as in any thread.
    await adapter.editMessage('slack:D1:dm', posted.messageId, 'Run 7 finished');
    expect(emulator.callsTo('chat.update').at(-1)?.params).toMatchObject({
      channel: 'D1',
      ts: posted.messageId,
    });
    await adapter.updateCard('slack:D1:dm', card.messageId, {
      title: 'Approve run exp-9?',
      resolved: 'Approved',
    });
    expect(emulator.callsTo('chat.update').at(-1)?.params).toMatchObject({
      channel: 'D1',
      ts: card.messageId,
    });

    // A DM thread still gets thread replies.
    await adapter.postMessage('slack:D1:1700000006.000006', 'in the thread');
    expect(emulator.callsTo('chat.postMessage').at(-1)?.params).toMatchObject({
      channel: 'D1',
      thread_ts: '1700000006.000006',
    });
  });

  it('routes a click on a top-level DM card to the DM session, and its refusal top-level', async () => {
    const card = await adapter.postCard('slack:D1:dm', {
      title: 'Approve run exp-10?',
      actions: [{ actionId: 'approve:ap_dm2', label: 'Approve' }],
    });
    handlers.outcome = () => ({ status: 'forbidden', message: 'Only approvers can approve this run.' });
    await emulator.sendEnvelope(
      'interactive',
      blockActionsPayload({
        userId: 'UALICE',
        channel: 'D1',
        messageTs: card.messageId,
        actionId: 'approve:ap_dm2',
      }),
    );
    const [action] = await handlers.waitForActions(1);
    expect(action).toMatchObject({ threadId: 'slack:D1:dm', messageId: card.messageId });
    const ephemeral = await emulator.waitForCall(
      'chat.postEphemeral',
      (call) => call.params.channel === 'D1' && call.params.text === 'Only approvers can approve this run.',
    );
    expect(ephemeral.params).not.toHaveProperty('thread_ts');
  });

  it('runs /shepherd in a DM in the DM session', async () => {
    await emulator.sendEnvelope(
      'slash_commands',
      slashCommandPayload({ userId: 'UALICE', channel: 'D3', text: 'runs' }),
    );
    const [message] = await handlers.waitForMessages(1);
    const root = emulator.callsTo('chat.postMessage').find((call) => call.params.channel === 'D3');
    expect(root?.params.thread_ts).toBeUndefined();
    const rootTs = (root?.response as { ts?: string } | undefined)?.ts;
    expect(message).toMatchObject({
      threadId: 'slack:D3:dm',
      messageId: rootTs,
      text: 'runs',
      addressed: true,
      startsThread: false,
    });
  });

  it('ignores its own messages, edits, and other bots', async () => {
    await emulator.sendEnvelope(
      'events_api',
      eventCallback(
        messageEvent({ channel: 'C1', user: 'UBOT', botId: 'BBOT', text: 'mine', threadTs: '1.1' }),
      ),
    );
    await emulator.sendEnvelope(
      'events_api',
      eventCallback(
        messageEvent({
          channel: 'C1',
          botId: 'BOTHER',
          subtype: 'bot_message',
          text: 'beep',
          threadTs: '1.1',
        }),
      ),
    );
    await emulator.sendEnvelope(
      'events_api',
      eventCallback(
        messageEvent({ channel: 'C1', user: 'UBOB', subtype: 'message_changed', text: 'x', threadTs: '1.1' }),
      ),
    );
    await emulator.sendEnvelope(
      'events_api',
      eventCallback(messageEvent({ channel: 'C1', user: 'UBOB', text: 'human', threadTs: '1.1' })),
    );
    const [message] = await handlers.waitForMessages(1);
    expect(message?.text).toBe('human');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(handlers.messages).toHaveLength(1);
  });

  it('produces one turn when Slack delivers the same event three times', async () => {
    const body = eventCallback(
      messageEvent({ type: 'app_mention', channel: 'C1', user: 'UALICE', text: '<@UBOT> runs' }),
      { eventId: 'EvRetry1' },
    );
    const acks = await Promise.all([
      emulator.sendEnvelope('events_api', body),
      emulator.sendEnvelope('events_api', body, { retryAttempt: 1, retryReason: 'timeout' }),
      emulator.sendEnvelope('events_api', body, { retryAttempt: 2, retryReason: 'timeout' }),
    ]);
    expect(acks).toHaveLength(3);
    await handlers.waitForMessages(1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(handlers.messages).toHaveLength(1);
  });

  it('renders an approval card as Block Kit, handles clicks with fast acks, refuses with an ephemeral, updates the card', async () => {
    const threadId = 'slack:C1:1700000002.000002';
    const card = {
      title: 'Approve run exp-7?',
      text: 'Launch **exp-7** on 4 GPUs',
      fields: Array.from({ length: 12 }, (_, index) => ({
        label: `field ${index}`,
        value: `value ${index}`,
      })),
      actions: [
        { actionId: 'approve:ap_1', label: 'Approve', style: 'primary' as const },
        { actionId: 'reject:ap_1', label: 'Reject', style: 'danger' as const },
      ],
    };
    const posted = await adapter.postCard(threadId, card);
    const cardCall = emulator.callsTo('chat.postMessage').at(-1);
    expect(cardCall?.params).toMatchObject({ channel: 'C1', thread_ts: '1700000002.000002' });
    const blocks = blocksOf(cardCall?.params ?? {});
    expect(blocks.map((block) => block.type)).toEqual(['header', 'section', 'section', 'section', 'actions']);
    expect(blocks[2]?.fields).toHaveLength(10);
    expect(blocks[3]?.fields).toHaveLength(2);
    expect(blocks[4]?.elements?.map((button) => [button.action_id, button.value])).toEqual([
      ['approve:ap_1', 'approve:ap_1'],
      ['reject:ap_1', 'reject:ap_1'],
    ]);

    handlers.delayMs = 1500;
    handlers.outcome = (action) =>
      action.user.id === 'UBOB'
        ? { status: 'forbidden', message: 'Only approvers can approve this run.' }
        : { status: 'accepted' };
    const click = blockActionsPayload({
      userId: 'UALICE',
      channel: 'C1',
      messageTs: posted.messageId,
      threadTs: '1700000002.000002',
      actionId: 'approve:ap_1',
    });
    const ack = await emulator.sendEnvelope('interactive', click);
    expect(ack.latencyMs).toBeLessThan(1000);
    const [action] = await handlers.waitForActions(1);
    expect(action).toEqual({
      threadId,
      messageId: posted.messageId,
      actionId: 'approve:ap_1',
      user: { id: 'UALICE', name: 'Alice' },
    });

    const ephemeralsBefore = emulator.callsTo('chat.postEphemeral').length;
    const refused = blockActionsPayload({
      userId: 'UBOB',
      channel: 'C1',
      messageTs: posted.messageId,
      threadTs: '1700000002.000002',
      actionId: 'approve:ap_1',
    });
    expect((await emulator.sendEnvelope('interactive', refused)).latencyMs).toBeLessThan(1000);
    const ephemeral = await emulator.waitForCall('chat.postEphemeral', (call) => call.params.user === 'UBOB');
    expect(ephemeral.params).toMatchObject({
      channel: 'C1',
      thread_ts: '1700000002.000002',
      text: 'Only approvers can approve this run.',
    });
    expect(emulator.callsTo('chat.postEphemeral')).toHaveLength(ephemeralsBefore + 1);

    await adapter.updateCard(threadId, posted.messageId, { ...card, resolved: '✅ Approved by <@UALICE>' });
    const update = emulator.callsTo('chat.update').at(-1);
    expect(update?.params).toMatchObject({ channel: 'C1', ts: posted.messageId });
    const updated = blocksOf(update?.params ?? {});
    expect(updated.some((block) => block.type === 'actions')).toBe(false);
    expect(updated.at(-1)).toMatchObject({
      type: 'context',
      elements: [{ type: 'mrkdwn', text: '✅ Approved by &lt;@UALICE&gt;' }],
    });
  });

  it('maps 429 to RateLimitedError with Retry-After, channel_not_found to a permanent error, 5xx to retryable', async () => {
    emulator.fault('chat.postMessage', { status: 429, retryAfterSeconds: 7 });
    const limited = await adapter.postMessage('slack:C1:1.000001', 'hello').catch((error: unknown) => error);
    expect(limited).toBeInstanceOf(RateLimitedError);
    expect((limited as RateLimitedError).retryAfterMs).toBe(7000);
    expect(emulator.callsTo('chat.postMessage').filter((call) => call.status === 429)).toHaveLength(1);

    emulator.fault('chat.postMessage', { error: 'channel_not_found' });
    const missing = await adapter
      .postMessage('slack:CGONE:1.000001', 'hello')
      .catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(PlatformError);
    expect(missing).not.toBeInstanceOf(RateLimitedError);
    expect(missing).toMatchObject({ code: 'channel_not_found', retryable: false, platform: 'slack' });

    emulator.fault('chat.update', { status: 503 });
    const unavailable = await adapter
      .editMessage('slack:C1:1.000001', '1.000001', 'x')
      .catch((error: unknown) => error);
    expect(unavailable).toMatchObject({ code: 'http_503', retryable: true });

    // After the 429 the next attempt (the notify queue's job) simply goes through.
    await expect(adapter.postMessage('slack:C1:1.000001', 'hello')).resolves.toMatchObject({
      messageId: expect.any(String),
    });
  });

  it('uploads a chart with the v2 flow into the right thread, bytes intact, never files.upload', async () => {
    const png = new Uint8Array(4096).map((_, index) => (index * 31) % 256);
    png.set([0x89, 0x50, 0x4e, 0x47], 0);
    const posted = await adapter.upload('slack:C1:1700000003.000003', {
      filename: 'loss.png',
      data: png,
      contentType: 'image/png',
      title: 'loss curve',
      comment: 'Loss for **exp-7**',
    });
    const getUrl = emulator.callsTo('files.getUploadURLExternal').at(-1);
    expect(getUrl?.params).toMatchObject({ filename: 'loss.png', length: '4096' });
    const stored = emulator.uploads.get(posted.messageId);
    expect(stored?.bytes?.equals(Buffer.from(png))).toBe(true);
    expect(stored?.completed).toEqual({
      channel: 'C1',
      threadTs: '1700000003.000003',
      title: 'loss curve',
      comment: 'Loss for *exp-7*',
    });
    expect(emulator.callsTo('files.upload')).toHaveLength(0);

    const before = emulator.calls.length;
    await adapter.postCard('slack:C1:1700000003.000003', {
      title: 'Run exp-7 diverged',
      image: { png, filename: 'chart.png', alt: 'loss chart' },
      actions: [{ actionId: 'stop:run_7', label: 'Stop' }],
    });
    const order = emulator.calls.slice(before).map((call) => call.method);
    expect(order).toEqual([
      'files.getUploadURLExternal',
      'upload',
      'files.completeUploadExternal',
      'chat.postMessage',
    ]);
  });

  it('splits a 10,000-character answer within Slack limits, in order', async () => {
    const paragraphs = Array.from(
      { length: 100 },
      (_, index) => `Paragraph ${String(index).padStart(3, '0')}: ${'x'.repeat(85)}`,
    );
    const text = paragraphs.join('\n');
    expect(text.length).toBeGreaterThanOrEqual(10_000);
    const before = emulator.callsTo('chat.postMessage').length;
    await adapter.postMessage('slack:C1:1700000004.000004', text);
    const calls = emulator.callsTo('chat.postMessage').slice(before);
    expect(calls.length).toBeGreaterThanOrEqual(1);
    let joined = '';
    for (const call of calls) {
      const blocks = blocksOf(call.params);
      expect(blocks.length).toBeLessThanOrEqual(50);
      expect(call.params.thread_ts).toBe('1700000004.000004');
      for (const block of blocks) {
        expect(block.type).toBe('markdown');
        expect(textOf(block)?.length ?? 0).toBeLessThanOrEqual(12_000);
        joined += `${textOf(block)}\n`;
      }
      expect(JSON.stringify(call.params).length).toBeLessThan(40_000 + 10_000);
    }
    const order = paragraphs.map((paragraph) => joined.indexOf(paragraph));
    expect(order.every((position) => position >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
  });

  it('cuts an enormous answer and attaches the full text as a file', async () => {
    const text = Array.from({ length: 3000 }, (_, index) => `log line ${index} ${'y'.repeat(60)}`).join('\n');
    const before = emulator.calls.length;
    await adapter.postMessage('slack:C1:1700000005.000005', text);
    const calls = emulator.calls.slice(before);
    const posts = calls.filter((call) => call.method === 'chat.postMessage');
    expect(posts.length).toBeLessThanOrEqual(3);
    for (const post of posts) expect(blocksOf(post.params).length).toBeLessThanOrEqual(50);
    const complete = calls.find((call) => call.method === 'files.completeUploadExternal');
    expect(complete?.params).toMatchObject({ channel_id: 'C1', thread_ts: '1700000005.000005' });
    const fileId = ((complete?.params.files ?? []) as Array<{ id: string }>)[0]?.id ?? '';
    expect(emulator.uploads.get(fileId)?.bytes?.toString('utf8')).toBe(text);
  });

  it('runs /shepherd: fast ack, a visible root message, then a thread session', async () => {
    handlers.delayMs = 1500;
    const ack = await emulator.sendEnvelope(
      'slash_commands',
      slashCommandPayload({ userId: 'UALICE', channel: 'C9', text: 'runs' }),
    );
    expect(ack.latencyMs).toBeLessThan(1000);
    const [message] = await handlers.waitForMessages(1);
    const root = emulator.callsTo('chat.postMessage').find((call) => call.params.channel === 'C9');
    expect(root?.params.thread_ts).toBeUndefined();
    expect(textOf(blocksOf(root?.params ?? {})[0])).toBe('<@UALICE> ran `/shepherd runs`');
    const rootTs = (root?.response as { ts?: string } | undefined)?.ts;
    expect(message).toMatchObject({
      threadId: `slack:C9:${rootTs}`,
      text: 'runs',
      addressed: true,
      startsThread: true,
      user: { id: 'UALICE' },
    });
  });

  it('answers a slash command it cannot post for with an ephemeral response_url message', async () => {
    emulator.fault('chat.postMessage', { error: 'not_in_channel' });
    const responseUrl = emulator.responseUrl();
    await emulator.sendEnvelope(
      'slash_commands',
      slashCommandPayload({ userId: 'UALICE', channel: 'CPRIVATE', text: 'help', responseUrl }),
    );
    await expect.poll(() => emulator.responses.length).toBeGreaterThan(0);
    expect(JSON.stringify(emulator.responses.at(-1)?.body)).toContain('not_in_channel');
    expect(handlers.messages).toHaveLength(0);
  });

  it('acks every envelope well inside 3 s', () => {
    expect(emulator.acks.length).toBeGreaterThan(10);
    for (const ack of emulator.acks) expect(ack.latencyMs).toBeLessThan(1000);
  });
});
