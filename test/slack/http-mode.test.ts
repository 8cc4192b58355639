/**
 * The Slack adapter in HTTP mode: signed Events API, interactivity and slash command requests to
 * `/slack/events`, verified with the signing secret. Web API calls go to the emulator.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createSlackAdapter, type SlackAdapter } from '../../src/bot/slack/slack-adapter.js';
import { createLogger } from '../../src/logger.js';
import {
  blockActionsPayload,
  eventCallback,
  messageEvent,
  type SlackEmulator,
  slashCommandPayload,
  startSlackEmulator,
} from './emulator/index.js';
import { createRecordingHandlers, type RecordingHandlers } from './recording-handlers.js';

let emulator: SlackEmulator;
let adapter: SlackAdapter;
let handlers: RecordingHandlers;
let endpoint: string;

beforeAll(async () => {
  emulator = await startSlackEmulator({ users: [{ id: 'UALICE', name: 'alice', displayName: 'Alice' }] });
  handlers = createRecordingHandlers();
  adapter = createSlackAdapter({
    botToken: emulator.botToken,
    signingSecret: emulator.signingSecret,
    apiUrl: emulator.apiUrl,
    allowBots: false,
    botName: 'shepherd',
    logger: createLogger('silent'),
    httpPort: 0,
  });
  await adapter.start(handlers);
  const address = adapter.httpAddress();
  if (address === undefined) throw new Error('adapter is not listening');
  endpoint = `http://127.0.0.1:${address.port}/slack/events`;
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
});

describe('slack adapter over signed HTTP', () => {
  it('refuses a request with a bad signature with 401 and never reaches a session', async () => {
    const body = eventCallback(
      messageEvent({ type: 'app_mention', channel: 'C1', user: 'UALICE', text: '<@UBOT> stop run 7' }),
    );
    const forged = await emulator.postSigned(endpoint, { kind: 'event', body }, { secret: 'not-the-secret' });
    expect(forged.status).toBe(401);
    const stale = await emulator.postSigned(
      endpoint,
      { kind: 'event', body },
      { timestampSeconds: Math.floor(Date.now() / 1000) - 600 },
    );
    expect(stale.status).toBe(401);
    const unsigned = await emulator.postSigned(endpoint, { kind: 'event', body }, { signature: '' });
    expect(unsigned.status).toBe(401);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(handlers.messages).toHaveLength(0);
  });

  it('accepts a signed mention, acks fast even with a slow core, and skips retried deliveries', async () => {
    handlers.delayMs = 1500;
    const event = messageEvent({ type: 'app_mention', channel: 'C1', user: 'UALICE', text: '<@UBOT> runs' });
    const body = eventCallback(event, { eventId: 'EvHttp1' });
    const first = await emulator.postSigned(endpoint, { kind: 'event', body });
    expect(first.status).toBe(200);
    expect(first.latencyMs).toBeLessThan(1000);
    const retry = await emulator.postSigned(endpoint, { kind: 'event', body }, { retryNum: 1 });
    expect(retry.status).toBe(200);
    expect(retry.latencyMs).toBeLessThan(1000);
    const [message] = await handlers.waitForMessages(1);
    expect(message).toMatchObject({
      threadId: `slack:C1:${event.ts}`,
      text: 'runs',
      addressed: true,
      deliveryId: 'EvHttp1',
      user: { name: 'Alice' },
    });
    await new Promise((resolve) => setTimeout(resolve, 1700));
    expect(handlers.messages).toHaveLength(1);
  });

  it('handles a signed button click and a signed slash command with fast acks', async () => {
    handlers.delayMs = 1200;
    const click = await emulator.postSigned(endpoint, {
      kind: 'interactive',
      payload: blockActionsPayload({
        userId: 'UALICE',
        channel: 'C1',
        messageTs: '1700000010.000001',
        threadTs: '1700000009.000001',
        actionId: 'approve:ap_9',
      }),
    });
    expect(click.status).toBe(200);
    expect(click.latencyMs).toBeLessThan(1000);
    const [action] = await handlers.waitForActions(1);
    expect(action).toEqual({
      threadId: 'slack:C1:1700000009.000001',
      messageId: '1700000010.000001',
      actionId: 'approve:ap_9',
      user: { id: 'UALICE', name: 'Alice' },
    });

    const command = await emulator.postSigned(endpoint, {
      kind: 'command',
      fields: slashCommandPayload({ userId: 'UALICE', channel: 'C2', text: 'status' }),
    });
    expect(command.status).toBe(200);
    expect(command.latencyMs).toBeLessThan(1000);
    const [message] = await handlers.waitForMessages(1);
    expect(message).toMatchObject({ text: 'status', addressed: true, startsThread: true });
    expect(message?.threadId.startsWith('slack:C2:')).toBe(true);
  });

  it('serves the same endpoint through requestListener mounted on another server', async () => {
    const server: Server = createServer((request, response) => {
      if (request.url?.startsWith('/slack/')) adapter.requestListener(request, response);
      else response.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const shared = `http://127.0.0.1:${(server.address() as AddressInfo).port}/slack/events`;
      const dm = messageEvent({ channel: 'D7', user: 'UALICE', text: 'hi', channelType: 'im' });
      const forged = await emulator.postSigned(
        shared,
        { kind: 'event', body: eventCallback(dm) },
        { secret: 'wrong' },
      );
      expect(forged.status).toBe(401);
      const good = await emulator.postSigned(shared, {
        kind: 'event',
        body: eventCallback(dm, { eventId: 'EvShared1' }),
      });
      expect(good.status).toBe(200);
      const [message] = await handlers.waitForMessages(1);
      expect(message).toMatchObject({ threadId: 'slack:D7:dm', deliveryId: 'EvShared1' });
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('answers 503 on requestListener before start', async () => {
    const idle = createSlackAdapter({
      botToken: emulator.botToken,
      signingSecret: emulator.signingSecret,
      apiUrl: emulator.apiUrl,
      allowBots: false,
      botName: 'shepherd',
      logger: createLogger('silent'),
    });
    const server = createServer(idle.requestListener);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const response = await fetch(
        `http://127.0.0.1:${(server.address() as AddressInfo).port}/slack/events`,
        { method: 'POST', body: '{}' },
      );
      expect(response.status).toBe(503);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
