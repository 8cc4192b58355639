/**
 * Issue 10 items 5, 7 and 8 on the real Slack (Bolt) and Discord (discord.js) clients against the
 * wire-level emulators, through the notify worker's code path (`performNotify`): an approval card for a
 * long script shows its start and attaches the whole (redacted) file; text quoted from logs cannot ping
 * or disguise a link on Slack; every Discord send and edit carries empty allowed mentions.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvalCard, resolvedApprovalCard } from '../../src/approvals/approval-card.js';
import type { Approval } from '../../src/approvals/approval-store.js';
import type { ChatAdapter } from '../../src/bot/chat-adapter.js';
import { createDiscordAdapter, type DiscordAdapter } from '../../src/bot/discord/discord-adapter.js';
import type { SlackAdapter } from '../../src/bot/slack/slack-adapter.js';
import { createLogger } from '../../src/logger.js';
import { cardToPayload, performNotify } from '../../src/queue/notify-queue.js';
import { type DiscordEmulator, startDiscordEmulator } from '../discord/emulator/discord-emulator.js';
import type { Json } from '../discord/emulator/payloads.js';
import { createRecordingHandlers as discordHandlers } from '../discord/helpers.js';
import { type SlackEmulator, startSlackEmulator } from '../slack/emulator/index.js';
import { createRecordingHandlers as slackHandlers } from '../slack/recording-handlers.js';
import { startSocketModeAdapter } from '../slack/socket-adapter.js';

const HF = `hf_${'AbCdEfGhIjKlMnOpQrStUvWx'}12`;
const LONG_SCRIPT = [
  'import time, shepherd',
  `HUB_TOKEN = "${HF}"`,
  ...Array.from({ length: 70 }, (_, index) => `value_${index} = ${index}`),
  'shepherd.finish()',
].join('\n');
const SHORT_SCRIPT = ['import shepherd', 'shepherd.log_metrics(step=1, loss=1.0)', 'shepherd.finish()'].join(
  '\n',
);
const HOSTILE_LOG =
  'step 7 <!channel> <!here> <@U02ADMIN> <https://evil.example|https://good.example> [https://good.example](https://evil.example)';

function approval(script: string): Approval {
  return {
    id: 'ap_1',
    kind: 'start',
    runId: 'r-42',
    runName: 'exp-42',
    threadId: 'x',
    requester: { id: 'alice', name: 'alice' },
    gpus: 0,
    maxHours: 1,
    costUsd: 0,
    scriptExcerpt: script,
  } as unknown as Approval;
}

const lookupFor = (adapter: ChatAdapter) => () => adapter;

describe('approval cards and quoted text on Slack', () => {
  let emulator: SlackEmulator;
  let adapter: SlackAdapter;

  beforeAll(async () => {
    emulator = await startSlackEmulator({ users: [{ id: 'UALICE', name: 'alice' }] });
    adapter = await startSocketModeAdapter(emulator, slackHandlers());
  });
  afterAll(async () => {
    await adapter?.stop();
    await emulator?.close();
  });

  it('a long script: its start on the card, the whole redacted file uploaded into the thread first', async () => {
    const threadId = 'slack:C1:1700000100.000001';
    const before = emulator.calls.length;
    const posted = await performNotify(lookupFor(adapter), {
      v: 1,
      op: 'card',
      threadId,
      card: cardToPayload(approvalCard(approval(LONG_SCRIPT))),
    });
    const order = emulator.calls.slice(before).map((call) => call.method);
    expect(order).toEqual([
      'files.getUploadURLExternal',
      'upload',
      'files.completeUploadExternal',
      'chat.postMessage',
    ]);
    const upload = [...emulator.uploads.values()].at(-1);
    const file = upload?.bytes?.toString('utf8') ?? '';
    expect(upload?.filename).toBe('r-42-train.py');
    expect(upload?.completed?.threadTs).toBe('1700000100.000001');
    expect(file).toContain('value_69 = 69');
    expect(file).toContain('HUB_TOKEN = "[REDACTED]"');
    expect(file).not.toContain(HF);
    const card = JSON.stringify(emulator.messages.get(posted.messageId ?? ''));
    expect(card).toContain('value_10 = 10');
    expect(card).not.toContain('value_69 = 69');
    expect(card).toContain('the whole file is attached');
    expect(card).not.toContain(HF);

    // A short script is shown whole, nothing uploaded.
    const uploads = emulator.uploads.size;
    const short = await performNotify(lookupFor(adapter), {
      v: 1,
      op: 'card',
      threadId,
      card: cardToPayload(approvalCard(approval(SHORT_SCRIPT))),
    });
    expect(emulator.uploads.size).toBe(uploads);
    expect(JSON.stringify(emulator.messages.get(short.messageId ?? ''))).toContain('shepherd.finish()');
  });

  it('log text cannot ping or disguise a link, in posts, fenced blocks and card fallbacks', async () => {
    const threadId = 'slack:C1:1700000100.000002';
    const posted = await performNotify(lookupFor(adapter), {
      v: 1,
      op: 'post',
      threadId,
      text: `status:\n${HOSTILE_LOG}\n\`\`\`\n${HOSTILE_LOG}\n\`\`\``,
    });
    const card = await performNotify(lookupFor(adapter), {
      v: 1,
      op: 'card',
      threadId,
      card: { title: 'exp failed', text: HOSTILE_LOG, fields: [{ label: 'Last line', value: HOSTILE_LOG }] },
    });
    let markdownBlocks = 0;
    for (const id of [posted.messageId, card.messageId]) {
      const stored = JSON.stringify(emulator.messages.get(id ?? ''));
      expect(stored).toContain('&lt;!channel&gt;');
      expect(stored).not.toMatch(/<!(?:channel|here)>|<@U02ADMIN>|<https:\/\/evil\.example\|/);
      // Nor in Slack's markdown block: a link labelled as another address shows its real target.
      const blocks = (emulator.messages.get(id ?? '')?.blocks ?? []) as Array<{
        type: string;
        text?: unknown;
      }>;
      for (const block of blocks.filter((entry) => entry.type === 'markdown')) {
        markdownBlocks += 1;
        expect(String(block.text)).not.toContain('[https://good.example](https://evil.example)');
        expect(String(block.text)).toContain('[https://evil.example](https://evil.example)');
      }
    }
    expect(markdownBlocks).toBeGreaterThan(0);
  });
});

describe('approval cards and pings on Discord', () => {
  let emulator: DiscordEmulator;
  let adapter: DiscordAdapter;
  const recorded = discordHandlers();

  beforeAll(async () => {
    emulator = await startDiscordEmulator();
    adapter = createDiscordAdapter({
      token: emulator.token,
      apiUrl: emulator.apiUrl,
      guildIds: [emulator.guildId],
      botName: 'shepherd',
      logger: createLogger('silent'),
    });
    await adapter.start(recorded.handlers);
  });
  afterAll(async () => {
    await adapter?.stop();
    await emulator?.close();
  });

  it('attaches the whole redacted script to a long card, keeps it on the decision edit, and never pings', async () => {
    const mention = emulator.userSends({
      channelId: emulator.channelId,
      author: emulator.users.alice,
      content: 'launch it',
      mentionBot: true,
    });
    const inbound = await emulator.waitFor(() => recorded.messages.find((m) => m.messageId === mention.id));
    const threadId = inbound.threadId;
    const threadChannelId = threadId.split(':')[2] ?? '';
    const before = emulator.calls.length;

    const posted = await performNotify(lookupFor(adapter), {
      v: 1,
      op: 'card',
      threadId,
      card: cardToPayload(approvalCard(approval(LONG_SCRIPT))),
    });
    const call = emulator.calls.findLast(
      (c) => c.method === 'POST' && c.path === `/channels/${threadChannelId}/messages`,
    );
    expect(call?.files.map((file) => file.name)).toEqual(['r-42-train.py']);
    const file = call?.files[0]?.data.toString('utf8') ?? '';
    expect(file).toContain('value_69 = 69');
    expect(file).not.toContain(HF);
    const stored = emulator.message(posted.messageId ?? '') as { attachments: Json[]; embeds: Json[] };
    expect(stored.attachments[0]?.filename).toBe('r-42-train.py');
    expect(JSON.stringify(stored.embeds)).toContain('value_10 = 10');
    expect(JSON.stringify(stored.embeds)).not.toContain(HF);

    // The decision edit keeps the attachment (API v10 keeps exactly the attachments listed).
    await performNotify(lookupFor(adapter), {
      v: 1,
      op: 'update-card',
      threadId,
      messageId: posted.messageId ?? '',
      card: cardToPayload(
        resolvedApprovalCard(approval(LONG_SCRIPT), {
          decision: 'approved',
          user: { id: 'bob', name: 'bob' },
          at: '2026-12-01T06:00:00.000Z',
          auto: false,
        } as never),
      ),
    });
    const after = emulator.message(posted.messageId ?? '') as { attachments: Json[] };
    expect(after.attachments.map((attachment) => attachment.filename)).toEqual(['r-42-train.py']);

    // Hostile text in a post, an edit and a card: every send and edit says "no pings".
    const text = await performNotify(lookupFor(adapter), { v: 1, op: 'post', threadId, text: HOSTILE_LOG });
    await performNotify(lookupFor(adapter), {
      v: 1,
      op: 'edit',
      threadId,
      messageId: text.messageId ?? '',
      text: `${HOSTILE_LOG} @everyone`,
    });
    const writes = emulator.calls
      .slice(before)
      .filter((c) => (c.method === 'POST' || c.method === 'PATCH') && c.path.includes('/messages'));
    expect(writes.length).toBeGreaterThanOrEqual(4);
    for (const write of writes) {
      expect((write.body as { allowed_mentions?: unknown }).allowed_mentions, write.path).toEqual({
        parse: [],
      });
    }
  });
});
