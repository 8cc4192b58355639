import { deflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Card } from '../../src/bot/chat-adapter.js';
import { createDiscordAdapter, type DiscordAdapter } from '../../src/bot/discord/discord-adapter.js';
import { PlatformError } from '../../src/errors.js';
import { type DiscordEmulator, GLOBAL, startDiscordEmulator } from './emulator/discord-emulator.js';
import type { Json } from './emulator/payloads.js';
import { createCapturingLogger, createRecordingHandlers } from './helpers.js';

/** A tiny but real PNG (1×1), so the bytes in the multipart body can be compared exactly. */
function tinyPng(): Uint8Array {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (bytes: Buffer) => {
    let c = 0xffffffff;
    for (const byte of bytes) c = (crcTable[(c ^ byte) & 0xff] ?? 0) ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(body));
    return Buffer.concat([length, body, sum]);
  };
  const header = Buffer.from([0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(Buffer.from([0, 255, 0, 0, 255]))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('Discord adapter against the wire-level emulator', () => {
  let emulator: DiscordEmulator;
  let adapter: DiscordAdapter;
  const recorded = createRecordingHandlers();
  const captured = createCapturingLogger();

  beforeAll(async () => {
    emulator = await startDiscordEmulator();
    adapter = createDiscordAdapter({
      token: emulator.token,
      apiUrl: emulator.apiUrl,
      guildIds: [emulator.guildId],
      botName: 'shepherd',
      logger: captured.logger,
    });
    await adapter.start(recorded.handlers);
  });

  afterAll(async () => {
    await adapter?.stop();
    await emulator?.close();
  });

  /** Mention the bot in #ml-runs and return the session the adapter opened. */
  async function openSession(content: string) {
    const before = recorded.messages.length;
    const mention = emulator.userSends({
      channelId: emulator.channelId,
      author: emulator.users.alice,
      content,
      mentionBot: true,
    });
    const inbound = await emulator.waitFor(() =>
      recorded.messages.slice(before).find((m) => m.messageId === mention.id),
    );
    const threadChannelId = inbound.threadId.split(':')[2] ?? '';
    return { mention, inbound, threadChannelId };
  }

  test('identifies with the four intents and registers /shepherd globally and in the dev guild', () => {
    const identify = emulator.gateway.frames.find((frame) => frame.op === 2);
    // Guilds (1) + GuildMessages (512) + DirectMessages (4096) + MessageContent (32768)
    expect((identify?.d as { intents?: number } | undefined)?.intents).toBe(1 + 512 + 4096 + 32768);
    const globalCall = emulator.calls.find(
      (call) => call.method === 'PUT' && call.path === `/applications/${emulator.applicationId}/commands`,
    );
    expect(globalCall).toBeDefined();
    const global = emulator.commands.get(GLOBAL) as Json[];
    expect(global.map((command) => command.name)).toEqual(['shepherd']);
    const command = global[0] as Json;
    // Usable in servers and in the bot's DMs.
    expect(command).toMatchObject({ contexts: [0, 1], dm_permission: true });
    // Chosen, not defaulted (issue 26 §5): no Discord permission is needed; Shepherd checks who may act.
    expect(command).toHaveProperty('default_member_permissions', null);
    const subcommands = (command.options as Json[]).map((option) => [option.name, option.type]);
    expect(subcommands).toEqual(
      expect.arrayContaining(
        ['run', 'runs', 'status', 'pause', 'resume', 'stop', 'chart'].map((name) => [name, 1]),
      ),
    );
    const pause = (command.options as Json[]).find((option) => option.name === 'pause') as Json;
    expect(pause.options).toMatchObject([{ name: 'run', type: 3, required: true, autocomplete: true }]);
    // DISCORD_GUILD_IDS also registers it per server, where changes show at once.
    const inGuild = emulator.commands.get(emulator.guildId) as Json[];
    expect(inGuild.map((entry) => entry.name)).toEqual(['shepherd']);
    const guildCopy = inGuild[0] as Json;
    expect(guildCopy.contexts).toBeUndefined();
    expect((guildCopy.options as Json[]).map((option) => option.name)).toEqual(
      (command.options as Json[]).map((option) => option.name),
    );
    expect(adapter.botUserId()).toBe(emulator.bot.id);
  });

  test('a mention opens a thread; replies land in it; follow-ups reach the session without a mention', async () => {
    const { mention, inbound, threadChannelId } = await openSession(
      'fine-tune Qwen2.5-0.5B on gsm8k with SFT, 2 GPUs, 3 hours, and please keep the name of this thread short enough',
    );
    const threadCall = emulator.calls.find(
      (call) =>
        call.method === 'POST' &&
        call.path === `/channels/${emulator.channelId}/messages/${mention.id}/threads`,
    );
    expect(threadCall).toBeDefined();
    const threadName = String((threadCall?.body as { name?: string } | undefined)?.name);
    expect(threadName.startsWith('fine-tune Qwen2.5-0.5B on gsm8k')).toBe(true);
    expect(threadName.length).toBeLessThanOrEqual(100);
    expect(threadName).not.toContain('<@');

    expect(inbound).toMatchObject({
      threadId: `discord:${emulator.channelId}:${threadChannelId}`,
      startsThread: true,
      addressed: true,
      deliveryId: mention.id,
      user: { id: emulator.users.alice.id, name: 'Alice Liddell' },
    });
    expect(inbound.text.startsWith('@shepherd fine-tune')).toBe(true);
    expect(emulator.channel(threadChannelId)?.type).toBe(11);

    const posted = await adapter.postMessage(inbound.threadId, 'On it — writing train.py…');
    expect(emulator.message(posted.messageId)).toMatchObject({
      channel_id: threadChannelId,
      content: 'On it — writing train.py…',
    });

    const countBefore = recorded.messages.length;
    const followUp = emulator.userSends({
      channelId: threadChannelId,
      author: emulator.users.bob,
      content: 'how is it going?',
    });
    emulator.userSends({ channelId: threadChannelId, author: emulator.users.otherBot, content: 'CI passed' });
    const seen = await emulator.waitFor(() => recorded.messages.find((m) => m.messageId === followUp.id));
    expect(seen).toMatchObject({
      threadId: inbound.threadId,
      addressed: false,
      startsThread: false,
      text: 'how is it going?',
      user: { id: emulator.users.bob.id, name: 'bob (ops)' },
    });

    const again = emulator.userSends({
      channelId: threadChannelId,
      author: emulator.users.bob,
      content: 'pause it',
      mentionBot: true,
    });
    const addressed = await emulator.waitFor(() => recorded.messages.find((m) => m.messageId === again.id));
    expect(addressed).toMatchObject({
      threadId: inbound.threadId,
      addressed: true,
      startsThread: false,
      text: '@shepherd pause it',
    });

    await sleep(100);
    // Exactly the two people's messages: the bot's own post and the other bot's message were ignored.
    expect(recorded.messages.slice(countBefore).map((m) => m.messageId)).toEqual([followUp.id, again.id]);
    // Messages inside the thread continue it; only the channel mention opened a thread.
    const threadCalls = emulator.calls.filter((call) => call.path.endsWith('/threads'));
    expect(
      threadCalls.filter(
        (call) => call.path.includes(String(again.id)) || call.path.includes(String(followUp.id)),
      ),
    ).toHaveLength(0);
    expect(threadCalls.filter((call) => call.path.includes(String(mention.id)))).toHaveLength(1);
  });

  test('a plain channel message without a mention is not handled', async () => {
    const before = recorded.messages.length;
    emulator.userSends({ channelId: emulator.channelId, author: emulator.users.bob, content: 'lunch?' });
    await sleep(150);
    expect(recorded.messages.length).toBe(before);
  });

  test('a DM is its own addressed session', async () => {
    const dmChannelId = emulator.openDm(emulator.users.alice);
    const dm = emulator.userSends({ channelId: dmChannelId, author: emulator.users.alice, content: 'runs' });
    const inbound = await emulator.waitFor(() => recorded.messages.find((m) => m.messageId === dm.id));
    expect(inbound).toMatchObject({
      threadId: `discord:dm:${dmChannelId}`,
      addressed: true,
      startsThread: false,
      text: 'runs',
    });
    await adapter.postMessage(inbound.threadId, 'No runs yet.');
    expect(emulator.messagesIn(dmChannelId).map((m) => m.content)).toContain('No runs yet.');
  });

  test('approval card: buttons, deferred click within 3 s, onAction ids, ephemeral refusal, resolved edit', async () => {
    const { inbound, threadChannelId } = await openSession('train tiny model');
    const card: Card = {
      title: 'Approve run qwen-gsm8k-sft?',
      text: 'requested by Alice · 2 GPUs · max 3 h · est. $15',
      fields: [
        { label: 'GPUs', value: '2' },
        { label: 'train.py', value: '```py\nimport torch\n```' },
      ],
      actions: [
        { actionId: 'approve:ap_123', label: 'Approve', style: 'primary' },
        { actionId: 'reject:ap_123', label: 'Reject', style: 'danger' },
      ],
    };
    const posted = await adapter.postCard(inbound.threadId, card);
    const stored = emulator.message(posted.messageId) as Json;
    expect(stored.channel_id).toBe(threadChannelId);
    expect(stored.embeds).toMatchObject([
      {
        title: card.title,
        description: card.text,
        fields: [{ name: 'GPUs', value: '2' }, { name: 'train.py' }],
      },
    ]);
    expect(stored.components).toEqual([
      {
        type: 1,
        components: [
          { type: 2, style: 1, label: 'Approve', custom_id: 'approve:ap_123' },
          { type: 2, style: 4, label: 'Reject', custom_id: 'reject:ap_123' },
        ],
      },
    ]);

    // Bob approves; the handler is slow, the acknowledgement must not wait for it.
    let handlerDoneAt = 0;
    recorded.state.decide = async () => {
      await sleep(1_200);
      handlerDoneAt = Date.now();
      return { status: 'accepted' };
    };
    const click = emulator.clickButton({
      messageId: posted.messageId,
      customId: 'approve:ap_123',
      user: emulator.users.bob,
    });
    const ack = await emulator.waitFor(() => click.callbacks[0]);
    expect(ack.type).toBe(6);
    expect(ack.at - click.createdAt).toBeLessThan(3_000);
    const action = await emulator.waitFor(
      () => recorded.actions.find((a) => a.actionId === 'approve:ap_123'),
      5_000,
    );
    expect(action).toEqual({
      threadId: inbound.threadId,
      messageId: posted.messageId,
      actionId: 'approve:ap_123',
      user: { id: emulator.users.bob.id, name: 'bob (ops)' },
    });
    await emulator.waitFor(() => handlerDoneAt > 0, 5_000);
    expect(ack.at).toBeLessThan(handlerDoneAt);

    // Alice may not approve her own run: an ephemeral follow-up, flags 64.
    recorded.state.decide = async () => ({
      status: 'forbidden',
      message: 'You cannot approve your own run.',
    });
    const refused = emulator.clickButton({
      messageId: posted.messageId,
      customId: 'approve:ap_123',
      user: emulator.users.alice,
    });
    const followUp = await emulator.waitFor(() =>
      emulator.calls.find(
        (call) =>
          call.method === 'POST' && call.path === `/webhooks/${emulator.applicationId}/${refused.token}`,
      ),
    );
    expect(followUp.body).toMatchObject({ content: 'You cannot approve your own run.', flags: 64 });
    expect(refused.callbacks.map((callback) => callback.type)).toEqual([6]);

    await adapter.updateCard(inbound.threadId, posted.messageId, {
      ...card,
      resolved: 'Approved by bob at 14:02',
    });
    const edit = emulator.calls.findLast(
      (call) => call.method === 'PATCH' && call.path.endsWith(`/messages/${posted.messageId}`),
    );
    expect((edit?.body as Json | undefined)?.components).toEqual([]);
    const after = emulator.message(posted.messageId) as Json;
    expect(after.components).toEqual([]);
    expect(JSON.stringify(after.embeds)).toContain('Approved by bob at 14:02');
    recorded.state.decide = async () => ({ status: 'accepted' });
  });

  test('a chart is attached and shown in the embed; a 5,000-character answer is split', async () => {
    const { inbound, threadChannelId } = await openSession('chart please');
    const png = tinyPng();
    const posted = await adapter.postCard(inbound.threadId, {
      title: 'qwen-gsm8k-sft · loss',
      image: { png, filename: 'loss chart.png', alt: 'loss over steps' },
    });
    const call = emulator.calls.findLast(
      (c) => c.method === 'POST' && c.path === `/channels/${threadChannelId}/messages`,
    );
    expect(call?.files).toHaveLength(1);
    expect(call?.files[0]?.name).toBe('loss_chart.png');
    expect(Buffer.compare(call?.files[0]?.data ?? Buffer.alloc(0), Buffer.from(png))).toBe(0);
    expect((call?.body as { embeds?: Json[] } | undefined)?.embeds?.[0]?.image).toEqual({
      url: 'attachment://loss_chart.png',
    });
    const stored = emulator.message(posted.messageId) as {
      attachments: Json[];
      embeds: { image: { url: string } }[];
    };
    expect(stored.attachments[0]?.filename).toBe('loss_chart.png');
    expect(stored.embeds[0]?.image.url).toBe(stored.attachments[0]?.url);

    const uploaded = await adapter.upload(inbound.threadId, {
      filename: 'metrics.png',
      data: png,
      contentType: 'image/png',
      title: 'Loss',
      comment: 'Here is the loss curve.',
    });
    expect(emulator.message(uploaded.messageId)).toMatchObject({ content: 'Here is the loss curve.' });

    const paragraph =
      'The loss fell steadily from 2.31 to 0.87 over the first thousand steps, and the gradient norm stayed flat.';
    const lines = Array.from({ length: 48 }, (_, index) => `${index + 1}. ${paragraph}`);
    const answer = lines.join('\n');
    expect(answer.length).toBeGreaterThan(5_000);
    const before = emulator.messagesIn(threadChannelId).length;
    await adapter.postMessage(inbound.threadId, answer);
    const parts = emulator
      .messagesIn(threadChannelId)
      .slice(before)
      .map((m) => String(m.content));
    expect(parts.length).toBe(3);
    for (const part of parts) expect(part.length).toBeLessThanOrEqual(2_000);
    expect(parts.join('\n')).toBe(answer);
  });

  test('a 5xx on message create is retryable and not retried inside discord.js; the retry delivers once', async () => {
    const { inbound, threadChannelId } = await openSession('status');
    const route = new RegExp(`^/channels/${threadChannelId}/messages$`);
    emulator.failNext({ method: 'POST', path: route, status: 502 });
    const attempt = adapter.postMessage(inbound.threadId, 'Run is at step 1,840.');
    await expect(attempt).rejects.toBeInstanceOf(PlatformError);
    const error = (await attempt.catch((caught: unknown) => caught)) as PlatformError;
    expect(error.retryable).toBe(true);
    expect(error.platform).toBe('discord');
    expect(emulator.calls.filter((call) => route.test(call.path))).toHaveLength(1);

    await adapter.postMessage(inbound.threadId, 'Run is at step 1,840.');
    const delivered = emulator
      .messagesIn(threadChannelId)
      .filter((m) => m.content === 'Run is at step 1,840.');
    expect(delivered).toHaveLength(1);
  });

  test('missing permissions is final and logged', async () => {
    const { inbound, threadChannelId } = await openSession('status again');
    emulator.failNext({
      method: 'POST',
      path: new RegExp(`^/channels/${threadChannelId}/messages$`),
      status: 403,
      code: 50013,
      message: 'Missing Permissions',
    });
    const error = (await adapter
      .postMessage(inbound.threadId, 'hello')
      .catch((caught: unknown) => caught)) as PlatformError;
    expect(error).toBeInstanceOf(PlatformError);
    expect(error.retryable).toBe(false);
    expect(error.code).toBe('missing_permissions');
    expect(captured.lines.some((line) => line.code === 'missing_permissions' && line.level === 50)).toBe(
      true,
    );

    const unknown = (await adapter
      .editMessage(inbound.threadId, '123456789012345678', 'x')
      .catch((caught: unknown) => caught)) as PlatformError;
    expect(unknown.code).toBe('unknown_message');
    expect(unknown.retryable).toBe(false);
  });

  test('an edit in an archived thread unarchives it and goes through (issue 26 §5)', async () => {
    const { inbound, threadChannelId } = await openSession('a three-day run');
    const card = await adapter.postCard(inbound.threadId, {
      title: 'long-run: loss spike',
      text: 'at step 10',
    });
    const text = await adapter.postMessage(inbound.threadId, 'working…');
    // A day without a post: Discord archives the thread, and a plain edit would now fail with 50083.
    emulator.archiveThread(threadChannelId);
    await adapter.updateCard(inbound.threadId, card.messageId, {
      title: 'long-run: loss spike',
      text: 'at step 10',
      resolved: 'Acknowledged by Bob',
    });
    expect(emulator.channel(threadChannelId)?.thread_metadata).toMatchObject({ archived: false });
    expect(JSON.stringify(emulator.message(card.messageId))).toContain('Acknowledged by Bob');
    const unarchive = emulator.calls.filter(
      (call) => call.method === 'PATCH' && call.path === `/channels/${threadChannelId}`,
    );
    expect(unarchive.map((call) => call.body)).toEqual([{ archived: false }]);
    // The same for a plain edit.
    emulator.archiveThread(threadChannelId);
    await adapter.editMessage(inbound.threadId, text.messageId, 'done');
    expect(emulator.message(text.messageId)?.content).toBe('done');
    expect(emulator.channel(threadChannelId)?.thread_metadata).toMatchObject({ archived: false });
  });

  test('/shepherd is deferred, echoed, opens a thread and reaches onMessage', async () => {
    const interaction = emulator.runSlashCommand({
      channelId: emulator.channelId,
      subcommand: 'runs',
      user: emulator.users.bob,
    });
    const inbound = await emulator.waitFor(() =>
      recorded.messages.find((m) => m.deliveryId === interaction.id),
    );
    expect(interaction.callbacks[0]?.type).toBe(5);
    const original = interaction.originalMessageId ?? '';
    expect(emulator.message(original)?.content).toBe('**bob (ops)**: runs');
    expect(inbound).toMatchObject({
      threadId: `discord:${emulator.channelId}:${original}`,
      startsThread: true,
      addressed: true,
      text: '@shepherd runs',
      messageId: original,
    });
    // While the command's token is fresh, postEphemeral answers privately through it.
    await adapter.postEphemeral?.(inbound.threadId, emulator.users.bob.id, 'Only you can see this.');
    const privateReply = emulator.calls.findLast(
      (call) => call.path === `/webhooks/${emulator.applicationId}/${interaction.token}`,
    );
    expect(privateReply?.body).toMatchObject({ content: 'Only you can see this.', flags: 64 });
    // For someone without a recent interaction it falls back to a normal message that mentions them.
    await adapter.postEphemeral?.(inbound.threadId, emulator.users.alice.id, 'FYI');
    expect(emulator.messagesIn(original).map((m) => m.content)).toContain(
      `<@${emulator.users.alice.id}> FYI`,
    );
  });

  test('a dropped gateway connection resumes, replays missed events, and handles each message once', async () => {
    const { inbound, threadChannelId } = await openSession('watch this');
    const sessionId = emulator.gateway.sessionId();
    const identifies = emulator.gateway.frames.filter((frame) => frame.op === 2).length;

    emulator.gateway.drop();
    const missed = [
      emulator.userSends({
        channelId: threadChannelId,
        author: emulator.users.bob,
        content: 'sent while you were away 1',
      }),
      emulator.userSends({
        channelId: threadChannelId,
        author: emulator.users.bob,
        content: 'sent while you were away 2',
      }),
    ];
    const resume = await emulator.waitFor(
      () => emulator.gateway.frames.find((frame) => frame.op === 6),
      10_000,
    );
    expect(resume.path).toBe('/gateway-resume');
    expect(resume.d).toMatchObject({ session_id: sessionId, token: emulator.token });
    await emulator.waitFor(
      () => missed.every((message) => recorded.messages.some((m) => m.messageId === message.id)),
      10_000,
    );

    const later = emulator.userSends({
      channelId: threadChannelId,
      author: emulator.users.bob,
      content: 'after the resume',
    });
    await emulator.waitFor(() => recorded.messages.some((m) => m.messageId === later.id));
    await sleep(150);
    const ids = recorded.messages.filter((m) => m.threadId === inbound.threadId).map((m) => m.messageId);
    expect(ids).toEqual([inbound.messageId, missed[0]?.id, missed[1]?.id, later.id]);
    expect(new Set(recorded.messages.map((m) => m.deliveryId)).size).toBe(recorded.messages.length);
    expect(emulator.gateway.frames.filter((frame) => frame.op === 2)).toHaveLength(identifies);
  });
});

describe('without the Message Content intent', () => {
  test('logs one clear warning when messages arrive empty', async () => {
    const emulator = await startDiscordEmulator({ messageContentIntent: false });
    const captured = createCapturingLogger();
    const recorded = createRecordingHandlers();
    const adapter = createDiscordAdapter({
      token: emulator.token,
      apiUrl: emulator.apiUrl,
      guildIds: [],
      botName: 'shepherd',
      logger: captured.logger,
    });
    try {
      await adapter.start(recorded.handlers);
      const mention = emulator.userSends({
        channelId: emulator.channelId,
        author: emulator.users.alice,
        content: 'go',
        mentionBot: true,
      });
      const inbound = await emulator.waitFor(() => recorded.messages.find((m) => m.messageId === mention.id));
      const thread = inbound.threadId.split(':')[2] ?? '';
      emulator.userSends({ channelId: thread, author: emulator.users.bob, content: 'hidden 1' });
      emulator.userSends({ channelId: thread, author: emulator.users.bob, content: 'hidden 2' });
      await emulator.waitFor(() =>
        captured.lines.some((line) => String(line.msg).includes('Message Content intent')),
      );
      await sleep(150);
      expect(
        captured.lines.filter((line) => String(line.msg).includes('Message Content intent')),
      ).toHaveLength(1);
      // Empty messages carry nothing to answer, so they are not passed on.
      expect(recorded.messages).toHaveLength(1);
      // With no guild list, the command is registered once, globally (no per-server copies).
      expect((emulator.commands.get(GLOBAL) as Json[]).map((command) => command.name)).toEqual(['shepherd']);
      expect(emulator.commands.has(emulator.guildId)).toBe(false);
    } finally {
      await adapter.stop();
      await emulator.close();
    }
  });
});
