import { describe, expect, it } from 'vitest';
import { actionThreadId } from '../../src/bot/slack/slack-listeners.js';
import { DM_THREAD, dmThreadId, slackThread } from '../../src/bot/slack/slack-threads.js';
import { PlatformError } from '../../src/errors.js';

describe('slack thread ids', () => {
  it('posts the DM session top-level and threads everything else', () => {
    expect(dmThreadId('D1')).toBe('slack:D1:dm');
    expect(slackThread('slack:D1:dm')).toEqual({ channel: 'D1', threadTs: undefined });
    expect(slackThread('slack:D1:1700000000.000100')).toEqual({
      channel: 'D1',
      threadTs: '1700000000.000100',
    });
    expect(slackThread('slack:C1:1700000000.000200')).toEqual({
      channel: 'C1',
      threadTs: '1700000000.000200',
    });
    // The reserved part can never be a Slack ts.
    expect(DM_THREAD).not.toMatch(/^\d+\.\d+$/);
  });

  it('rejects thread ids of other platforms', () => {
    expect(() => slackThread('discord:dm:123')).toThrow(PlatformError);
  });

  it('resolves a card click to the session the card was posted in', () => {
    expect(actionThreadId('D1', '5.5', undefined)).toBe('slack:D1:dm');
    expect(actionThreadId('D1', '5.5', '4.4')).toBe('slack:D1:4.4');
    expect(actionThreadId('C1', '5.5', '4.4')).toBe('slack:C1:4.4');
    expect(actionThreadId('C1', '5.5', undefined)).toBe('slack:C1:5.5');
  });
});
