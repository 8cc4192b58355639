/**
 * Slack end to end: real Bolt (Socket Mode and signed HTTP) ↔ wire-level Slack emulator ↔ the real core
 * (inbox, turn / notify / control workers on real Redis + BullMQ, approvals, runs). The LLM is a scripted
 * OpenAI-compatible server that answers by a token in the user's text, so background turns cannot
 * steal a scripted answer.
 */
import { createCanvas } from '@napi-rs/canvas';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app-harness.js';
import { type ScriptedLlmServer, type Step, startScriptedOpenAi } from '../helpers/scripted-llm/index.js';
import { until } from '../helpers/until.js';
import {
  blockActionsPayload,
  eventCallback,
  messageEvent,
  type SlackEmulator,
  type StoredMessage,
  startSlackEmulator,
} from '../slack/emulator/index.js';

const USERS = [
  { id: 'UALICE', name: 'alice', displayName: 'Alice' },
  { id: 'UBOB', name: 'bob', realName: 'Bob Builder' },
  { id: 'UCAROL', name: 'carol', displayName: 'Carol' },
];

interface Block {
  type: string;
  block_id?: string;
  text?: { text?: string } | string;
  elements?: Array<{ action_id?: string; text?: unknown }>;
}

const blocksOf = (value: unknown): Block[] => (Array.isArray(value) ? (value as Block[]) : []);
/** A block's text: a markdown block's string, or its text object's text. */
const textOf = (block: Block): string =>
  typeof block.text === 'string' ? block.text : (block.text?.text ?? '');

/** Everything a stored message shows: its blocks' texts (sections, headers, context) and its fallback text. */
function shown(message: StoredMessage): string {
  const parts = blocksOf(message.blocks).flatMap((block) => [
    textOf(block),
    ...(block.elements ?? []).map((element) =>
      typeof element.text === 'string' ? element.text : JSON.stringify(element.text ?? ''),
    ),
  ]);
  return [...parts, message.text ?? ''].join('\n');
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Answers by token: a user text containing `key` gets `step`; anything else (system events) gets `ok`. */
function scriptByToken(llm: ScriptedLlmServer, replies: Map<string, Step>): void {
  llm.setHandler((request) => {
    const text = request.lastUserText ?? '';
    for (const [key, step] of replies) if (text.includes(key)) return step;
    return { text: 'ok' };
  });
}

const requestsFor = (llm: ScriptedLlmServer, token: string) =>
  llm.requests.filter((request) => (request.lastUserText ?? '').includes(token));

describe('Slack over Socket Mode → real core', () => {
  let emulator: SlackEmulator;
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  const replies = new Map<string, Step>();
  const logLines: Array<Record<string, unknown>> = [];

  const inThread = (channel: string, threadTs: string) =>
    [...emulator.messages.values()].filter(
      (message) => message.channel === channel && message.threadTs === threadTs,
    );
  const findInThread = (channel: string, threadTs: string, needle: string | RegExp) =>
    inThread(channel, threadTs).find((message) =>
      typeof needle === 'string' ? shown(message).includes(needle) : needle.test(shown(message)),
    );

  const findTopLevel = (channel: string, needle: string) =>
    [...emulator.messages.values()].find(
      (message) =>
        message.channel === channel && message.threadTs === undefined && shown(message).includes(needle),
    );

  /** Sends an event the way Slack does over Socket Mode; resolves once Bolt acked it. */
  async function deliver(event: Record<string, unknown>, eventId?: string, retryAttempt = 0) {
    return emulator.sendEnvelope(
      'events_api',
      eventCallback(event, eventId === undefined ? {} : { eventId }),
      { retryAttempt, ...(retryAttempt > 0 ? { retryReason: 'timeout' } : {}) },
    );
  }

  beforeAll(async () => {
    emulator = await startSlackEmulator({ users: USERS });
    llm = await startScriptedOpenAi();
    scriptByToken(llm, replies);
    const logger = pino(
      { level: 'info' },
      {
        write(line: string) {
          logLines.push(JSON.parse(line) as Record<string, unknown>);
        },
      },
    );
    shepherd = await startTestApp({
      logger,
      environment: {
        SLACK_BOT_TOKEN: emulator.botToken,
        SLACK_APP_TOKEN: emulator.appToken,
        SLACK_API_URL: emulator.apiUrl,
        SHEPHERD_LLM_BASE_URL: llm.url,
        SHEPHERD_GPUS: '2',
        SHEPHERD_WORKSPACE: process.cwd(),
        SHEPHERD_APPROVERS: 'UBOB',
        SHEPHERD_STOP_GRACE_S: '5',
      },
    });
    await emulator.waitForSocket();
  });

  afterAll(async () => {
    if (shepherd !== undefined) {
      for (const run of await shepherd.app.features.runs.list()) {
        if (run.status === 'running' || run.status === 'queued') {
          await shepherd.app.features.runs.service.stop(run.id, 'system').catch(() => undefined);
        }
      }
      await shepherd.stop();
    }
    await llm?.close();
    await emulator?.close();
  });

  it('answers a mention in its thread, a follow-up without a mention, and DMs as one top-level session', async () => {
    replies.set('[Q1]', { text: 'Hello Alice, I launch and watch runs.' });
    replies.set('[Q2]', { text: 'Still nothing running, Bob.' });
    replies.set('[DM1]', { text: 'Private hello.' });
    replies.set('[DM2]', { text: 'Still private, Alice.' });

    const mention = messageEvent({
      type: 'app_mention',
      channel: 'C1',
      user: 'UALICE',
      text: '<@UBOT> what can you do? [Q1]',
    });
    const ack = await deliver(mention);
    expect(ack.latencyMs).toBeLessThan(3000);
    const threadTs = String(mention.ts);
    const answer = await until(
      () => findInThread('C1', threadTs, 'I launch and watch runs'),
      'the mention answer in its thread',
    );
    expect(answer.threadTs).toBe(threadTs);
    // The answer went out with the thread's ts: the status post and its edit both target this thread.
    const posts = emulator.callsTo('chat.postMessage').filter((call) => call.params.channel === 'C1');
    expect(posts.length).toBeGreaterThan(0);
    for (const call of posts) expect(call.params.thread_ts).toBe(threadTs);
    expect(JSON.stringify(requestsFor(llm, '[Q1]')[0]?.body)).toContain('Alice');

    // A reply in the thread without a mention reaches the same session.
    await deliver(
      messageEvent({
        channel: 'C1',
        user: 'UBOB',
        text: 'how is it going? [Q2]',
        threadTs,
        channelType: 'channel',
      }),
    );
    await until(() => findInThread('C1', threadTs, 'Still nothing running'), 'the follow-up answer');
    const followUp = requestsFor(llm, '[Q2]');
    expect(followUp).toHaveLength(1);
    // Same session: the follow-up turn sees the first exchange.
    expect(JSON.stringify(followUp[0]?.body)).toContain('[Q1]');
    expect(JSON.stringify(followUp[0]?.body)).toContain('I launch and watch runs');

    // A top-level message in a thread-less channel without a mention is not for the bot.
    const before = llm.requests.length;
    await deliver(
      messageEvent({ channel: 'C1', user: 'UBOB', text: 'lunch? [NOISE]', channelType: 'channel' }),
    );

    // A DM: no mention needed, answered top-level in the DM, and its session does not see the channel thread.
    const dm = messageEvent({ channel: 'D1', user: 'UALICE', text: 'psst [DM1]', channelType: 'im' });
    await deliver(dm);
    const dmAnswer = await until(() => findTopLevel('D1', 'Private hello'), 'the DM answer');
    expect(dmAnswer.channel).toBe('D1');
    expect(dmAnswer.threadTs).toBeUndefined();
    const dmRequest = requestsFor(llm, '[DM1]');
    expect(dmRequest).toHaveLength(1);
    expect(JSON.stringify(dmRequest[0]?.body)).not.toContain('[Q1]');

    // A second top-level DM continues the same conversation: its turn sees the first DM and its answer.
    const secondDm = messageEvent({
      channel: 'D1',
      user: 'UALICE',
      text: 'and then? [DM2]',
      channelType: 'im',
    });
    await deliver(secondDm);
    const secondAnswer = await until(() => findTopLevel('D1', 'Still private'), 'the second DM answer');
    expect(secondAnswer.threadTs).toBeUndefined();
    const secondRequest = requestsFor(llm, '[DM2]');
    expect(secondRequest).toHaveLength(1);
    expect(JSON.stringify(secondRequest[0]?.body)).toContain('psst [DM1]');
    expect(JSON.stringify(secondRequest[0]?.body)).toContain('Private hello.');
    // Nothing was threaded under either DM: every post to the DM went out without thread_ts.
    const dmPosts = emulator.callsTo('chat.postMessage').filter((call) => call.params.channel === 'D1');
    expect(dmPosts.length).toBeGreaterThanOrEqual(2);
    for (const call of dmPosts) expect(call.params).not.toHaveProperty('thread_ts');
    expect(inThread('D1', String(dm.ts))).toHaveLength(0);
    expect(requestsFor(llm, '[NOISE]')).toHaveLength(0);
    expect(llm.requests.length).toBe(before + 2);
  });

  it('resets a DM conversation: a plain `reset` in the DM starts a fresh session', async () => {
    replies.set('[DM3]', { text: 'Noted the secret.' });
    replies.set('[DM4]', { text: 'Fresh start here.' });
    await deliver(messageEvent({ channel: 'D2', user: 'UALICE', text: 'remember [DM3]', channelType: 'im' }));
    await until(() => findTopLevel('D2', 'Noted the secret'), 'the first DM answer');
    await deliver(messageEvent({ channel: 'D2', user: 'UALICE', text: 'reset', channelType: 'im' }));
    await until(() => findTopLevel('D2', 'Fresh session'), 'the reset answer');
    await deliver(
      messageEvent({ channel: 'D2', user: 'UALICE', text: 'what now? [DM4]', channelType: 'im' }),
    );
    await until(() => findTopLevel('D2', 'Fresh start here'), 'the answer after the reset');
    const after = requestsFor(llm, '[DM4]');
    expect(after).toHaveLength(1);
    expect(JSON.stringify(after[0]?.body)).not.toContain('[DM3]');
  });

  it('runs one turn for an event delivered three times (Socket Mode retries with the same event_id)', async () => {
    replies.set('[RETRY]', { text: 'Answered exactly once.' });
    const event = messageEvent({
      type: 'app_mention',
      channel: 'C2',
      user: 'UALICE',
      text: '<@UBOT> status please [RETRY]',
    });
    const eventId = `EvRetry${Date.now()}`;
    const acks = [];
    for (const attempt of [0, 1, 2]) acks.push(await deliver(event, eventId, attempt));
    expect(acks).toHaveLength(3);
    const threadTs = String(event.ts);
    await until(() => findInThread('C2', threadTs, 'Answered exactly once'), 'the answer');
    // Leave time for a (wrong) second turn to show up.
    await sleep(1500);
    const turns = requestsFor(llm, '[RETRY]');
    expect(turns).toHaveLength(1);
    // Nor was the message batched three times into that one turn.
    expect(JSON.stringify(turns[0]?.body).split('[RETRY]')).toHaveLength(2);
    const answers = inThread('C2', threadTs).filter((message) =>
      shown(message).includes('Answered exactly once'),
    );
    expect(answers).toHaveLength(1);
    // One status message (edited into the answer), not one per delivery.
    expect(inThread('C2', threadTs)).toHaveLength(1);
  });

  it('splits a 10,000-character answer within Block Kit limits, complete and in order', async () => {
    const words = Array.from({ length: 1500 }, (_unused, index) => `w${String(index).padStart(5, '0')}`);
    let long = '';
    for (let index = 0; long.length < 10_000; index += 1) {
      long += `${words[index % words.length]}${index % 12 === 11 ? '\n' : ' '}`;
    }
    // A unique last word marks the end of the answer.
    long = `${long.slice(0, 10_000 - ' THE-END'.length)} THE-END`;
    expect(long.length).toBe(10_000);
    replies.set('[LONG]', { text: long });
    const event = messageEvent({
      type: 'app_mention',
      channel: 'C3',
      user: 'UALICE',
      text: '<@UBOT> give me everything [LONG]',
    });
    await deliver(event);
    const threadTs = String(event.ts);
    await until(() => findInThread('C3', threadTs, 'THE-END'), 'the end of the long answer', 20_000);

    const posts = emulator
      .callsTo('chat.postMessage')
      .filter((call) => call.params.channel === 'C3' && call.params.thread_ts === threadTs);
    const answerPosts = posts.filter((call) => JSON.stringify(call.params.blocks ?? '').includes('w00000'));
    const firstAnswer = answerPosts[0];
    if (firstAnswer === undefined) throw new Error('the long answer was never posted');
    const fromFirst = posts.slice(posts.indexOf(firstAnswer));
    for (const call of [...posts, ...emulator.callsTo('chat.update')]) {
      expect((call.response as { ok?: boolean }).ok).toBe(true);
      const blocks = blocksOf(call.params.blocks);
      expect(blocks.length).toBeLessThanOrEqual(50);
      let chars = String(call.params.text ?? '').length;
      for (const block of blocks) {
        const text = textOf(block);
        if (block.type === 'section') expect(text.length).toBeLessThanOrEqual(3000);
        if (block.type === 'markdown') expect(text.length).toBeLessThanOrEqual(12_000);
        chars += text.length;
      }
      expect(chars).toBeLessThanOrEqual(40_000);
    }
    // Agent text goes out as markdown blocks (12,000 characters at most each, one per message).
    const sections = fromFirst.flatMap((call) =>
      blocksOf(call.params.blocks).filter((block) => block.type === 'markdown'),
    );
    expect(sections.length).toBeGreaterThanOrEqual(1);
    const delivered = sections
      .map(textOf)
      .join(' ')
      .split(/\s+/)
      .filter((word) => word !== '');
    expect(delivered).toEqual(long.split(/\s+/).filter((word) => word !== ''));
  });

  it('uploads a chart PNG into the right thread with the files upload v2 flow', async () => {
    replies.set('[CHART]', { text: 'Chart coming.' });
    const event = messageEvent({
      type: 'app_mention',
      channel: 'C4',
      user: 'UALICE',
      text: '<@UBOT> chart please [CHART]',
    });
    await deliver(event);
    const threadTs = String(event.ts);
    await until(() => findInThread('C4', threadTs, 'Chart coming'), 'the chart thread answer');

    const canvas = createCanvas(64, 32);
    const context = canvas.getContext('2d');
    context.fillStyle = '#2266cc';
    context.fillRect(0, 0, 64, 32);
    const png = canvas.toBuffer('image/png');
    expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');

    const callsBefore = emulator.calls.length;
    const posted = await shepherd.app.notifier.upload(`slack:C4:${threadTs}`, {
      filename: 'loss.png',
      contentType: 'image/png',
      data: png,
    });
    const flow = emulator.calls.slice(callsBefore).map((call) => call.method);
    expect(flow).toEqual(['files.getUploadURLExternal', 'upload', 'files.completeUploadExternal']);
    expect(emulator.callsTo('files.upload')).toHaveLength(0);
    const uploadUrlCall = emulator.callsTo('files.getUploadURLExternal').at(-1);
    expect(uploadUrlCall?.params).toMatchObject({ filename: 'loss.png', length: String(png.length) });
    const complete = emulator.callsTo('files.completeUploadExternal').at(-1);
    expect(complete?.params).toMatchObject({ channel_id: 'C4', thread_ts: threadTs });
    const stored = emulator.uploads.get(posted.messageId);
    expect(stored?.filename).toBe('loss.png');
    expect(stored?.bytes?.equals(png)).toBe(true);
    expect(stored?.completed).toMatchObject({ channel: 'C4', threadTs });
  });

  it('waits out a 429 Retry-After on chat.postMessage and still delivers the answer', async () => {
    replies.set('[RATE]', { text: 'Delivered despite the rate limit.' });
    emulator.fault('chat.postMessage', { status: 429, retryAfterSeconds: 2 });
    const event = messageEvent({
      type: 'app_mention',
      channel: 'C5',
      user: 'UALICE',
      text: '<@UBOT> hello [RATE]',
    });
    await deliver(event);
    const threadTs = String(event.ts);
    const limited = await emulator.waitForCall('chat.postMessage', (call) => call.status === 429, 10_000);
    expect(limited.params).toMatchObject({ channel: 'C5', thread_ts: threadTs });
    await until(() => findInThread('C5', threadTs, 'Delivered despite the rate limit'), 'the answer', 20_000);
    const firstSuccess = emulator
      .callsTo('chat.postMessage')
      .find((call) => call.status === 200 && call.params.channel === 'C5' && call.at >= limited.at);
    expect(firstSuccess).toBeDefined();
    expect((firstSuccess?.at ?? 0) - limited.at).toBeGreaterThanOrEqual(2000);
    expect(
      logLines.some((line) => line.msg === 'platform rate limit; waiting' && line.retryAfterMs === 2000),
    ).toBe(true);
  });

  it('a 429 pauses only its channel for Retry-After; other channels go on; order in the thread is kept', async () => {
    // Issue 26 §5: #C6 is over its limit for 2 s; #C7 is not.
    const limitedThread = 'slack:C6:1700008888.000001';
    const freeThread = 'slack:C7:1700008888.000002';
    emulator.limitChannel('C6', 2);
    const started = Date.now();
    const first = shepherd.app.notifier.post(limitedThread, 'order 1');
    const limited = await emulator.waitForCall(
      'chat.postMessage',
      (call) => call.status === 429 && call.params.channel === 'C6',
      10_000,
    );
    // Posted while the channel is paused: these wait without calling Slack, then go in order.
    const later = [2, 3, 4].map((index) => shepherd.app.notifier.post(limitedThread, `order ${index}`));
    await shepherd.app.notifier.post(freeThread, 'another channel');
    expect(Date.now() - started).toBeLessThan(1500);
    await Promise.all([first, ...later]);

    const toLimited = emulator.callsTo('chat.postMessage').filter((call) => call.params.channel === 'C6');
    // One 429, then nothing until Retry-After has passed: the channel was not hammered.
    expect(toLimited.filter((call) => call.status === 429)).toHaveLength(1);
    const delivered = toLimited.filter((call) => call.status === 200);
    expect(delivered.map((call) => call.params.text)).toEqual(['order 1', 'order 2', 'order 3', 'order 4']);
    expect((delivered[0]?.at ?? 0) - limited.at).toBeGreaterThanOrEqual(1900);
    const posted = inThread('C6', '1700008888.000001').map((message) => message.text);
    expect(posted).toEqual(['order 1', 'order 2', 'order 3', 'order 4']);
  });

  it('does not retry channel_not_found and logs it with the thread', async () => {
    const threadId = 'slack:CGONE:1700009999.000001';
    emulator.fault('chat.postMessage', { error: 'channel_not_found' });
    const outcome = await shepherd.app.notifier.post(threadId, 'into the void').then(
      () => 'delivered',
      (error: unknown) => String(error),
    );
    expect(outcome).toContain('channel_not_found');
    // Retries would come after 1 s and 2 s; give them the chance to (wrongly) happen.
    await sleep(3500);
    const attempts = emulator.callsTo('chat.postMessage').filter((call) => call.params.channel === 'CGONE');
    expect(attempts).toHaveLength(1);
    expect(attempts[0]?.response).toMatchObject({ ok: false, error: 'channel_not_found' });
    expect(
      logLines.some(
        (line) =>
          line.msg === 'notify job failed' &&
          line.final === true &&
          line.threadId === threadId &&
          line.code === 'channel_not_found',
      ),
    ).toBe(true);
  });

  it('approves a run by button: a non-approver gets an ephemeral refusal, an approver starts it', async () => {
    const mention = messageEvent({
      type: 'app_mention',
      channel: 'C6',
      user: 'UALICE',
      text: '<@UBOT> run test/fixtures/healthy_train.py --gpus 1 --name slack-run',
    });
    await deliver(mention);
    const threadTs = String(mention.ts);
    const card = await until(
      () =>
        inThread('C6', threadTs).find(
          (message) =>
            shown(message).includes('slack-run') &&
            blocksOf(message.blocks).some((block) => block.type === 'actions'),
        ),
      'the approval card',
    );
    const actionIds = blocksOf(card.blocks)
      .filter((block) => block.type === 'actions')
      .flatMap((block) => (block.elements ?? []).map((element) => element.action_id ?? ''));
    const approveId = actionIds.find((id) => id.startsWith('approve:')) ?? '';
    expect(approveId).toMatch(/^approve:ap_/);
    expect(actionIds.some((id) => /^reject:ap_/.test(id))).toBe(true);

    const click = (userId: string) =>
      emulator.sendEnvelope(
        'interactive',
        blockActionsPayload({ userId, channel: 'C6', messageTs: card.ts, threadTs, actionId: approveId }),
      );

    // Carol is neither an approver nor the requester.
    const refusedAck = await click('UCAROL');
    expect(refusedAck.latencyMs).toBeLessThan(3000);
    const ephemeral = await emulator.waitForCall(
      'chat.postEphemeral',
      (call) => call.params.user === 'UCAROL',
      10_000,
    );
    expect(ephemeral.params).toMatchObject({ channel: 'C6', thread_ts: threadTs });
    expect(String(ephemeral.params.text)).toMatch(/approver/i);
    expect((await shepherd.app.features.runs.find('slack-run')).status).toBe('pending_approval');
    expect(blocksOf(emulator.messages.get(card.ts)?.blocks).some((block) => block.type === 'actions')).toBe(
      true,
    );

    const approvedAck = await click('UBOB');
    expect(approvedAck.latencyMs).toBeLessThan(3000);
    const update = await emulator.waitForCall(
      'chat.update',
      (call) => call.params.ts === card.ts && JSON.stringify(call.params.blocks).includes('Approved by'),
      15_000,
    );
    expect(update.params.channel).toBe('C6');
    const updated = emulator.messages.get(card.ts);
    expect(blocksOf(updated?.blocks).some((block) => block.type === 'actions')).toBe(false);
    expect(updated === undefined ? '' : shown(updated)).toMatch(/Approved by Bob Builder at \d{2}:\d{2} UTC/);
    await until(() => findInThread('C6', threadTs, /slack-run.*running/), 'the running notice', 20_000);
    expect((await shepherd.app.features.runs.find('slack-run')).status).toBe('running');
  });
});

describe('Slack over signed HTTP (mounted on the playground server) → real core', () => {
  let emulator: SlackEmulator;
  let llm: ScriptedLlmServer;
  let shepherd: TestApp;
  let endpoint: string;

  beforeAll(async () => {
    emulator = await startSlackEmulator({ users: USERS });
    llm = await startScriptedOpenAi();
    scriptByToken(llm, new Map([['[HTTP1]', { text: 'Answered over HTTP.' }]]));
    shepherd = await startTestApp({
      environment: {
        SLACK_BOT_TOKEN: emulator.botToken,
        SLACK_SIGNING_SECRET: emulator.signingSecret,
        SLACK_API_URL: emulator.apiUrl,
        SHEPHERD_LLM_BASE_URL: llm.url,
      },
    });
    endpoint = `${shepherd.app.playground.address().url}/slack/events`;
  });

  afterAll(async () => {
    await shepherd?.stop();
    await llm?.close();
    await emulator?.close();
  });

  it('refuses a badly signed request with 401 and never reaches a session', async () => {
    const event = messageEvent({
      type: 'app_mention',
      channel: 'C7',
      user: 'UALICE',
      text: '<@UBOT> stop everything [FORGED]',
    });
    const forged = await emulator.postSigned(
      endpoint,
      { kind: 'event', body: eventCallback(event) },
      { secret: 'not-the-signing-secret' },
    );
    expect(forged.status).toBe(401);
    await sleep(1000);
    expect(llm.requests).toHaveLength(0);
    const counts = await shepherd.app.turnQueue.getJobCounts();
    expect(Object.values(counts).reduce((sum, count) => sum + count, 0)).toBe(0);
    expect(await shepherd.app.redis.keys(`${shepherd.prefix}*C7*`)).toEqual([]);
    expect(emulator.callsTo('chat.postMessage')).toHaveLength(0);
  });

  it('answers a signed app_mention in its thread', async () => {
    const event = messageEvent({
      type: 'app_mention',
      channel: 'C8',
      user: 'UALICE',
      text: '<@UBOT> are you there? [HTTP1]',
    });
    const response = await emulator.postSigned(endpoint, { kind: 'event', body: eventCallback(event) });
    expect(response.status).toBe(200);
    expect(response.latencyMs).toBeLessThan(3000);
    const threadTs = String(event.ts);
    await until(
      () =>
        [...emulator.messages.values()].find(
          (message) =>
            message.channel === 'C8' &&
            message.threadTs === threadTs &&
            shown(message).includes('Answered over HTTP'),
        ),
      'the HTTP-mode answer',
    );
    expect(requestsFor(llm, '[HTTP1]')).toHaveLength(1);
  });
});
