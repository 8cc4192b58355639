import { describe, expect, it } from 'vitest';
import { classifyEventCallback, toPlainText } from '../../src/bot/slack/slack-routing.js';
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
      threadId: 'slack:D1:dm',
      addressed: true,
      startsThread: false,
      rawText: 'hi',
    });
  });

  it('maps every top-level DM to the one DM session, and a thread inside the DM to that thread', () => {
    const first = eventCallback(
      messageEvent({ channel: 'D1', user: 'U1', text: 'status?', channelType: 'im', ts: '10.1' }),
    );
    const second = eventCallback(
      messageEvent({ channel: 'D1', user: 'U1', text: 'and now?', channelType: 'im', ts: '11.1' }),
    );
    for (const body of [first, second]) {
      expect(classifyEventCallback(body, identity)).toMatchObject({
        kind: 'deliver',
        threadId: 'slack:D1:dm',
        addressed: true,
        startsThread: false,
      });
    }
    expect(classifyEventCallback(first, identity)).toMatchObject({ messageId: '10.1' });
    expect(classifyEventCallback(second, identity)).toMatchObject({ messageId: '11.1' });

    const inDmThread = eventCallback(
      messageEvent({
        channel: 'D1',
        user: 'U1',
        text: 'this one',
        channelType: 'im',
        ts: '12.1',
        threadTs: '10.1',
      }),
    );
    expect(classifyEventCallback(inDmThread, identity)).toMatchObject({
      kind: 'deliver',
      threadId: 'slack:D1:10.1',
      addressed: true,
      startsThread: false,
    });
    // A DM without channel_type (some payloads omit it) is still recognised by its `D…` channel id.
    const untyped = eventCallback(messageEvent({ channel: 'D2', user: 'U1', text: 'hello', ts: '13.1' }));
    expect(classifyEventCallback(untyped, identity)).toMatchObject({
      kind: 'deliver',
      threadId: 'slack:D2:dm',
    });
    // A channel message without a mention is still ignored; a top-level mention still starts a thread.
    const chatter = eventCallback(
      messageEvent({ channel: 'C1', user: 'U1', text: 'hi', channelType: 'channel' }),
    );
    expect(classifyEventCallback(chatter, identity)).toMatchObject({ kind: 'ignore' });
    const mention = eventCallback(
      messageEvent({ type: 'app_mention', channel: 'C1', user: 'U1', text: '<@UBOT> go', ts: '14.1' }),
    );
    expect(classifyEventCallback(mention, identity)).toMatchObject({
      threadId: 'slack:C1:14.1',
      startsThread: true,
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
