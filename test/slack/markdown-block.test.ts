/**
 * Agent text on Slack as a `markdown` block, through the wire-level emulator with real Bolt: the block,
 * its mrkdwn fallback text, Slack tokens kept inert, and mrkdwn sections when a workspace refuses it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SlackAdapter } from '../../src/bot/slack/slack-adapter.js';
import { type SlackEmulator, startSlackEmulator } from './emulator/index.js';
import { createRecordingHandlers } from './recording-handlers.js';
import { startSocketModeAdapter } from './socket-adapter.js';

const ANSWER = '## Plan\n\n- **tiny-train** on `2` GPUs\n- ping <!channel> and <@UBOB>\n\n```\nx = 1\n```';

async function start(markdownBlocks: boolean): Promise<{ emulator: SlackEmulator; adapter: SlackAdapter }> {
  const emulator = await startSlackEmulator({ markdownBlocks });
  const adapter = await startSocketModeAdapter(emulator, createRecordingHandlers());
  return { emulator, adapter };
}

describe('slack markdown block', () => {
  let supported: { emulator: SlackEmulator; adapter: SlackAdapter };
  let refused: { emulator: SlackEmulator; adapter: SlackAdapter };

  beforeAll(async () => {
    supported = await start(true);
    refused = await start(false);
  });
  afterAll(async () => {
    for (const side of [supported, refused]) {
      await side?.adapter.stop();
      await side?.emulator.close();
    }
  });

  it('posts agent Markdown as one markdown block with the mrkdwn conversion as fallback text', async () => {
    const { emulator, adapter } = supported;
    const posted = await adapter.postMessage('slack:C1:1700000001.000001', ANSWER);
    const call = emulator.callsTo('chat.postMessage').at(-1);
    const blocks = call?.params.blocks as Array<{ type: string; text: string }>;
    expect(blocks).toHaveLength(1);
    expect(blocks[0]?.type).toBe('markdown');
    expect(blocks[0]?.text).toContain('- **tiny-train** on `2` GPUs');
    expect(blocks[0]?.text).toContain('```\nx = 1\n```');
    // Slack tokens quoted in the answer cannot ping anyone.
    expect(blocks[0]?.text).not.toContain('<!channel>');
    expect(blocks[0]?.text).not.toContain('<@UBOB>');
    expect(blocks[0]?.text).toContain('<\u200B!channel>');
    expect(call?.params.text).toContain('*tiny-train*');
    expect(call?.params.text).not.toContain('<!channel>');
    expect(emulator.messages.get(posted.messageId)?.blocks).toEqual(blocks);

    await adapter.editMessage('slack:C1:1700000001.000001', posted.messageId, 'Done: **ok**');
    expect(emulator.callsTo('chat.update').at(-1)?.params.blocks).toEqual([
      { type: 'markdown', text: 'Done: **ok**' },
    ]);
  });

  it('falls back to mrkdwn sections when the workspace refuses markdown blocks', async () => {
    const { emulator, adapter } = refused;
    const posted = await adapter.postMessage('slack:C1:1700000002.000002', ANSWER);
    const calls = emulator.callsTo('chat.postMessage');
    // The refused attempt, then the same text as sections; later posts go straight to sections.
    expect(calls.map((call) => (call.params.blocks as Array<{ type: string }>)[0]?.type)).toEqual([
      'markdown',
      'section',
    ]);
    const stored = emulator.messages.get(posted.messageId)?.blocks as Array<{ text: { text: string } }>;
    expect(stored[0]?.text.text).toContain('*tiny-train*');
    await adapter.postMessage('slack:C1:1700000002.000002', 'second **answer**');
    expect(
      (emulator.callsTo('chat.postMessage').at(-1)?.params.blocks as Array<{ type: string }> | undefined)?.[0]
        ?.type,
    ).toBe('section');
  });
});

describe('slack alert card', () => {
  let emulator: SlackEmulator;
  let adapter: SlackAdapter;

  beforeAll(async () => {
    ({ emulator, adapter } = await start(true));
  });
  afterAll(async () => {
    await adapter?.stop();
    await emulator?.close();
  });

  it('posts the chart and the buttons in one message, and keeps the chart when the card is resolved', async () => {
    const png = new Uint8Array(128).map((_, index) => index);
    const thread = 'slack:C2:1700000003.000003';
    const before = emulator.calls.length;
    const card = await adapter.postCard(thread, {
      title: 'loss spiked on tiny-train',
      text: 'step 120: loss 9.1 (median 2.0)',
      image: { png, filename: 'loss.png', alt: 'loss of tiny-train' },
      actions: [
        { actionId: 'fix:al_1', label: 'Propose a fix', style: 'primary' },
        { actionId: 'mute:al_1', label: 'Mute' },
      ],
    });
    const calls = emulator.calls.slice(before);
    // One message in the thread: the upload is not shared on its own.
    expect(calls.filter((call) => call.method === 'chat.postMessage')).toHaveLength(1);
    const completed = calls.find((call) => call.method === 'files.completeUploadExternal');
    expect(completed?.params).not.toHaveProperty('channel_id');
    const fileId = ((completed?.params.files ?? []) as Array<{ id: string }>)[0]?.id ?? '';
    expect(emulator.uploads.get(fileId)?.bytes?.equals(Buffer.from(png))).toBe(true);
    const blocks = emulator.messages.get(card.messageId)?.blocks as Array<{ type: string }>;
    expect(blocks.map((block) => block.type)).toEqual(['header', 'section', 'image', 'actions']);
    expect(blocks[2]).toEqual({ type: 'image', slack_file: { id: fileId }, alt_text: 'loss of tiny-train' });

    await adapter.updateCard(thread, card.messageId, {
      title: 'loss spiked on tiny-train',
      resolved: 'Muted by Bob',
    });
    const updated = emulator.messages.get(card.messageId)?.blocks as Array<{ type: string }>;
    expect(updated.map((block) => block.type)).toContain('image');
    expect(updated.map((block) => block.type)).not.toContain('actions');
  });
});
