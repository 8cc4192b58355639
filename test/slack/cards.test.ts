import { describe, expect, it } from 'vitest';
import {
  CARD_ACTIONS_BLOCK_ID,
  messageChars,
  renderCard,
  renderTextMessages,
} from '../../src/bot/slack/cards.js';

describe('renderCard', () => {
  it('renders title, text, fields and buttons carrying only the id', () => {
    const body = renderCard({
      title: 'Approve exp-7',
      text: 'Cost **$40**',
      fields: [{ label: 'GPUs', value: '4' }],
      actions: [
        { actionId: 'approve:ap_1', label: 'Approve', style: 'primary' },
        { actionId: 'details:ap_1', label: 'Details', style: 'default' },
      ],
    });
    expect(body.blocks).toEqual([
      { type: 'header', text: { type: 'plain_text', text: 'Approve exp-7', emoji: true } },
      { type: 'section', text: { type: 'mrkdwn', text: 'Cost *$40*' } },
      { type: 'section', fields: [{ type: 'mrkdwn', text: '*GPUs*\n4' }] },
      {
        type: 'actions',
        block_id: CARD_ACTIONS_BLOCK_ID,
        elements: [
          {
            type: 'button',
            text: { type: 'plain_text', text: 'Approve', emoji: true },
            action_id: 'approve:ap_1',
            value: 'approve:ap_1',
            style: 'primary',
          },
          {
            type: 'button',
            text: { type: 'plain_text', text: 'Details', emoji: true },
            action_id: 'details:ap_1',
            value: 'details:ap_1',
          },
        ],
      },
    ]);
    expect(body.text).toContain('Approve exp-7');
  });

  it('swaps buttons for an outcome line once resolved', () => {
    const body = renderCard({
      title: 'x',
      actions: [{ actionId: 'a', label: 'A' }],
      resolved: 'Rejected by <@U1>',
    });
    expect(body.blocks.some((block) => block.type === 'actions')).toBe(false);
    expect(body.blocks.at(-1)).toEqual({
      type: 'context',
      elements: [{ type: 'mrkdwn', text: 'Rejected by &lt;@U1&gt;' }],
    });
  });

  it('truncates an over-long title to the header limit', () => {
    const header = renderCard({ title: 't'.repeat(400) }).blocks[0];
    expect(header?.type === 'header' && header.text.text.length).toBe(150);
  });
});

describe('renderTextMessages', () => {
  it('keeps each message within 50 blocks and 40,000 characters', () => {
    const text = Array.from({ length: 6000 }, (_, index) => `row ${index} ${'w'.repeat(40)}`).join('\n');
    const messages = renderTextMessages(text);
    expect(messages.length).toBeGreaterThan(1);
    for (const message of messages) {
      expect(message.blocks.length).toBeLessThanOrEqual(50);
      expect(messageChars(message)).toBeLessThanOrEqual(40_000);
    }
  });

  it('never sends an empty message', () => {
    expect(renderTextMessages('   ')[0]?.blocks).toHaveLength(1);
  });
});
