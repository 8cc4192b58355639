import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeThreadId } from '../../src/bot/chat-adapter.js';
import { inboxItemSchema } from '../../src/queue/turn-inbox.js';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { startMonitor } from '../helpers/redis-monitor.js';

/*
 * The playground's ack path: the message and its inbox entry are written by one Redis command (one round
 * trip), seen on the wire with MONITOR. Before, the store script and the inbox accept script were two.
 */
describe('playground ack path', () => {
  let shepherd: TestApp;
  let monitor: Socket;
  let seen: string[][] = [];
  let turnQueueCommands: string[][] = [];

  beforeAll(async () => {
    // Role `bot`: no turn worker, so the only commands on our keys are the ack path's.
    shepherd = await startTestApp({ environment: { SHEPHERD_ROLE: 'bot' } });
    monitor = await startMonitor((args) => {
      if (args.some((arg) => arg.startsWith(`${shepherd.prefix}:`))) seen.push(args);
    });
    // Loads the scripts (a first EVALSHA may answer NOSCRIPT), so the posts below see the steady state.
    await shepherd.post({ channel: 'warm-up', user: 'alice', text: '@shepherd warm up' });
  });
  afterAll(async () => {
    monitor.destroy();
    await shepherd.stop();
  });

  /** Commands on the playground store or the inbox (not the turn job added after the answer). */
  const ackCommands = () =>
    seen.filter((args) =>
      args.some((arg) => /:(web:seq|delivery:|inbox:|inbox-pending|sessions$)/.test(arg)),
    );

  async function postCounted(body: Record<string, unknown>) {
    // MONITOR lines arrive a moment after the command runs; let earlier ones drain first.
    await new Promise((resolve) => setTimeout(resolve, 150));
    seen = [];
    const result = await shepherd.post(body);
    await new Promise((resolve) => setTimeout(resolve, 150));
    turnQueueCommands = seen.filter((args) =>
      args.some((arg) => arg.startsWith(`${shepherd.prefix}:turns:`)),
    );
    return { result, commands: ackCommands() };
  }

  it('stores a mention and records it in the new thread inbox in one command', async () => {
    const { result, commands } = await postCounted({
      channel: 'ml-runs',
      user: 'alice',
      text: '@shepherd start \u0001 here',
    });
    expect(result.status).toBe(202);
    expect(commands).toHaveLength(1);
    expect(commands[0]?.[0]?.toLowerCase()).toMatch(/^eval/);
    // No BullMQ work on the acking process: nothing touched the turns queue.
    expect(turnQueueCommands).toEqual([]);

    const root = String(result.body.threadId);
    expect(result.body.messageId).toBe(root);
    const threadId = encodeThreadId({ platform: 'web', channel: 'ml-runs', thread: root });
    const raw = await shepherd.app.redis.lrange(`${shepherd.prefix}:inbox:${threadId}`, 0, -1);
    expect(raw).toHaveLength(1);
    const item = inboxItemSchema.parse(JSON.parse(raw[0] ?? ''));
    expect(item).toMatchObject({
      type: 'message',
      messageId: root,
      deliveryId: root,
      user: { id: 'alice', name: 'alice' },
      // A control byte in the text is kept as written, not mistaken for the id placeholder.
      text: '@shepherd start \u0001 here',
      addressed: true,
    });
    expect(await shepherd.app.redis.exists(`${shepherd.prefix}:delivery:web:${root}`)).toBe(1);
    expect(await shepherd.app.redis.sismember(`${shepherd.prefix}:sessions`, threadId)).toBe(1);
    expect(await shepherd.app.redis.sismember(`${shepherd.prefix}:inbox-pending`, threadId)).toBe(1);
    // The same command queued the thread's wake-up request (after the warm-up's) for a turn worker's
    // dispatcher; the acking process itself added no turn job.
    const wake = await shepherd.app.redis.lrange(`${shepherd.prefix}:turn-wake`, 0, -1);
    expect(wake.map((entry) => JSON.parse(entry) as unknown)).toEqual([expect.any(Array), [threadId, root]]);
    expect(await shepherd.app.turnQueue.getWaitingCount()).toBe(0);
  });

  it('keeps replies in order, ignores talk in threads without a session, refuses unknown threads', async () => {
    const root = await shepherd.mention('open a thread');
    const threadId = encodeThreadId({ platform: 'web', channel: 'ml-runs', thread: root });
    const replies: string[] = [];
    for (const text of ['first', 'second', 'third']) {
      const { result, commands } = await postCounted({
        channel: 'ml-runs',
        user: 'bob',
        text,
        threadId: root,
      });
      expect(result.status).toBe(202);
      expect(commands).toHaveLength(1);
      replies.push(String(result.body.messageId));
    }
    const items = (await shepherd.app.redis.lrange(`${shepherd.prefix}:inbox:${threadId}`, 0, -1)).map(
      (entry) => inboxItemSchema.parse(JSON.parse(entry)),
    );
    expect(items.map((item) => (item.type === 'message' ? item.text : ''))).toEqual([
      '@shepherd open a thread',
      'first',
      'second',
      'third',
    ]);
    expect(items.slice(1).map((item) => (item.type === 'message' ? item.messageId : ''))).toEqual(replies);

    // A top-level message without a mention is stored but opens no session.
    const quiet = await postCounted({ channel: 'ml-runs', user: 'carol', text: 'just chatting' });
    expect(quiet.result.status).toBe(202);
    expect(quiet.commands).toHaveLength(1);
    const quietThread = encodeThreadId({
      platform: 'web',
      channel: 'ml-runs',
      thread: String(quiet.result.body.threadId),
    });
    expect(await shepherd.app.redis.llen(`${shepherd.prefix}:inbox:${quietThread}`)).toBe(0);
    expect(await shepherd.app.redis.sismember(`${shepherd.prefix}:sessions`, quietThread)).toBe(0);
    expect((await shepherd.messages(String(quiet.result.body.threadId))).map((m) => m.text)).toEqual([
      'just chatting',
    ]);

    // A reply to a thread that does not exist is refused, and nothing reaches any inbox.
    const unknown = await postCounted({
      channel: 'ml-runs',
      user: 'bob',
      text: '@shepherd hi',
      threadId: 'm999999',
    });
    expect(unknown.result.status).toBe(404);
    const orphan = encodeThreadId({ platform: 'web', channel: 'ml-runs', thread: 'm999999' });
    expect(await shepherd.app.redis.exists(`${shepherd.prefix}:inbox:${orphan}`)).toBe(0);
  });

  it('accepts a delivery id once', async () => {
    const root = await shepherd.mention('dedupe me');
    const threadId = encodeThreadId({ platform: 'web', channel: 'ml-runs', thread: root });
    // The same delivery again (as a retried platform delivery would be) is a duplicate.
    const again = await shepherd.app.inbox.accept(
      threadId,
      {
        type: 'message',
        messageId: root,
        deliveryId: root,
        user: { id: 'alice', name: 'alice' },
        text: '@shepherd dedupe me',
        addressed: true,
        receivedAt: Date.now(),
      },
      { addressed: true, deliveryKey: `web:${root}` },
    );
    expect(again).toBe('duplicate');
    expect(await shepherd.app.redis.llen(`${shepherd.prefix}:inbox:${threadId}`)).toBe(1);
  });
});
