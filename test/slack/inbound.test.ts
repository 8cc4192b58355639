import { describe, expect, it } from 'vitest';
import { classifyEventCallback, toPlainText } from '../../src/bot/slack/inbound.js';
import { eventCallback, messageEvent } from './emulator/index.js';

const identity = { botUserId: 'UBOT', botId: 'BBOT', allowBots: false };

describe('classifyEventCallback', () => {
  it('lets other bots in a thread through only when allowed', () => {
    const body = eventCallback(
      messageEvent({
        channel: 'C1',
        botId: 'BOTHER',
        subtype: 'bot_message',
        text: 'ci passed',
        threadTs: '5.5',
      }),
      { eventId: 'Ev1' },
    );
    expect(classifyEventCallback(body, identity)).toMatchObject({ kind: 'ignore', reason: 'other bot' });
    expect(classifyEventCallback(body, { ...identity, allowBots: true })).toMatchObject({
      kind: 'deliver',
      userId: 'BOTHER',
      addressed: false,
      threadId: 'slack:C1:5.5',
    });
    const own = eventCallback(
      messageEvent({ channel: 'C1', botId: 'BBOT', subtype: 'bot_message', text: 'me', threadTs: '5.5' }),
    );
    expect(classifyEventCallback(own, { ...identity, allowBots: true })).toMatchObject({
      kind: 'ignore',
      reason: 'own message',
    });
  });

  it('handles a mention inside a thread in that thread, and a DM mention as a DM', () => {
    const inThread = eventCallback(
      messageEvent({
        type: 'app_mention',
        channel: 'C1',
        user: 'U1',
        text: '<@UBOT> pause',
        threadTs: '7.7',
        ts: '8.8',
      }),
    );
    expect(classifyEventCallback(inThread, identity)).toMatchObject({
      kind: 'deliver',
      threadId: 'slack:C1:7.7',
      startsThread: false,
      addressed: true,
      rawText: 'pause',
    });
    const dm = eventCallback(
      messageEvent({ channel: 'D1', user: 'U1', text: '<@UBOT> hi', channelType: 'im', ts: '9.9' }),
    );
    expect(classifyEventCallback(dm, identity)).toMatchObject({
      kind: 'deliver',
      threadId: 'slack:D1:9.9',
      addressed: true,
    });
  });

  it('rejects malformed payloads instead of throwing', () => {
    expect(classifyEventCallback({ event: { type: 'message' } }, identity)).toMatchObject({ kind: 'ignore' });
    expect(classifyEventCallback('nope', identity)).toMatchObject({ kind: 'ignore' });
  });
});

describe('toPlainText', () => {
  it('renders Slack tokens for the agent', () => {
    const names = new Map([['U2', 'bob']]);
    expect(toPlainText('hi <@U2>, see <#C1|ops> and <https://x.dev|docs> &lt;3 <!here>', names)).toBe(
      'hi @bob, see #ops and docs (https://x.dev) <3 @here',
    );
  });
});
