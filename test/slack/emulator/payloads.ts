/**
 * Builders for the payloads Slack delivers (events, block actions, slash commands) and the request
 * signing Slack applies to HTTP deliveries. Shapes follow real payload samples from the Slack docs.
 */
import { createHmac } from 'node:crypto';

let sequence = 0;
function nextId(prefix: string): string {
  sequence += 1;
  return `${prefix}${Date.now().toString(36).toUpperCase()}${sequence}`;
}

export interface MessageEventInput {
  type?: 'app_mention' | 'message';
  channel: string;
  user?: string;
  text: string;
  ts?: string;
  threadTs?: string;
  channelType?: 'channel' | 'group' | 'im' | 'mpim';
  botId?: string;
  subtype?: string;
}

/** A Slack message-ish event (`app_mention` or `message`). */
export function messageEvent(input: MessageEventInput): Record<string, unknown> {
  const ts = input.ts ?? `${Math.floor(Date.now() / 1000)}.${String(++sequence).padStart(6, '0')}`;
  return {
    type: input.type ?? 'message',
    channel: input.channel,
    ...(input.user === undefined ? {} : { user: input.user }),
    text: input.text,
    ts,
    event_ts: ts,
    ...(input.threadTs === undefined ? {} : { thread_ts: input.threadTs }),
    ...(input.channelType === undefined ? {} : { channel_type: input.channelType }),
    ...(input.botId === undefined ? {} : { bot_id: input.botId }),
    ...(input.subtype === undefined ? {} : { subtype: input.subtype }),
    team: 'T0EMULATOR',
    blocks: [],
  };
}

/** The `event_callback` body wrapping an event (Events API over HTTP and inside Socket Mode envelopes). */
export function eventCallback(
  event: Record<string, unknown>,
  options: { eventId?: string; teamId?: string; botUserId?: string } = {},
): Record<string, unknown> {
  return {
    token: 'verification-token-unused',
    team_id: options.teamId ?? 'T0EMULATOR',
    api_app_id: 'A0EMULATOR',
    event,
    type: 'event_callback',
    event_id: options.eventId ?? nextId('Ev'),
    event_time: Math.floor(Date.now() / 1000),
    authorizations: [
      {
        team_id: options.teamId ?? 'T0EMULATOR',
        user_id: options.botUserId ?? 'UBOT',
        is_bot: true,
        is_enterprise_install: false,
      },
    ],
    is_ext_shared_channel: false,
  };
}

export interface BlockActionInput {
  userId: string;
  userName?: string;
  channel: string;
  messageTs: string;
  threadTs?: string;
  actionId: string;
  value?: string;
}

/** A `block_actions` interaction payload (a button click). */
export function blockActionsPayload(input: BlockActionInput): Record<string, unknown> {
  return {
    type: 'block_actions',
    user: {
      id: input.userId,
      username: input.userName ?? input.userId,
      name: input.userName ?? input.userId,
      team_id: 'T0EMULATOR',
    },
    api_app_id: 'A0EMULATOR',
    token: 'verification-token-unused',
    container: {
      type: 'message',
      message_ts: input.messageTs,
      channel_id: input.channel,
      is_ephemeral: false,
    },
    trigger_id: nextId('trigger.'),
    team: { id: 'T0EMULATOR', domain: 'emulator' },
    channel: { id: input.channel, name: 'emulated' },
    message: {
      type: 'message',
      ts: input.messageTs,
      ...(input.threadTs === undefined ? {} : { thread_ts: input.threadTs }),
      text: 'card',
    },
    response_url: 'http://127.0.0.1:9/unused',
    actions: [
      {
        type: 'button',
        action_id: input.actionId,
        block_id: 'shepherd_card_actions',
        value: input.value ?? input.actionId,
        text: { type: 'plain_text', text: 'button' },
        action_ts: `${Date.now() / 1000}`,
      },
    ],
  };
}

/**
 * The `view_submission` payload Slack sends when a person submits a modal (docs.slack.dev
 * reference/interaction-payloads/view-interactions-payload; bolt-js `ViewSubmitAction`): the view as
 * opened, with each input's typed value under `state.values[block_id][action_id]`.
 */
export function viewSubmissionPayload(input: {
  userId: string;
  view: Record<string, unknown>;
  viewId: string;
  values: Record<string, string>;
}): Record<string, unknown> {
  const values: Record<string, Record<string, { type: string; value: string }>> = {};
  for (const block of (input.view.blocks ?? []) as Array<{
    block_id?: string;
    element?: { action_id?: string };
  }>) {
    const value = block.block_id === undefined ? undefined : input.values[block.block_id];
    if (block.block_id === undefined || block.element?.action_id === undefined || value === undefined)
      continue;
    values[block.block_id] = { [block.element.action_id]: { type: 'plain_text_input', value } };
  }
  return {
    type: 'view_submission',
    team: { id: 'T0EMULATOR', domain: 'emulator' },
    user: { id: input.userId, username: input.userId, name: input.userId, team_id: 'T0EMULATOR' },
    api_app_id: 'A0EMULATOR',
    token: 'verification-token-unused',
    trigger_id: nextId('trigger.'),
    view: {
      ...input.view,
      id: input.viewId,
      team_id: 'T0EMULATOR',
      app_id: 'A0EMULATOR',
      bot_id: 'B0EMULATOR',
      hash: nextId('hash.'),
      state: { values },
    },
    response_urls: [],
    is_enterprise_install: false,
    enterprise: null,
  };
}

/** The `app_home_opened` event Slack sends when a person opens the app's Home (or Messages) tab. */
export function appHomeOpenedEvent(
  userId: string,
  tab: 'home' | 'messages' = 'home',
): Record<string, unknown> {
  return {
    type: 'app_home_opened',
    user: userId,
    channel: `D${userId}`,
    tab,
    event_ts: `${Math.floor(Date.now() / 1000)}.${String(++sequence).padStart(6, '0')}`,
  };
}

/** A `block_actions` payload for a button on the App Home tab (a view, no channel or message). */
export function homeBlockActionsPayload(input: {
  userId: string;
  actionId: string;
}): Record<string, unknown> {
  return {
    type: 'block_actions',
    user: { id: input.userId, username: input.userId, name: input.userId, team_id: 'T0EMULATOR' },
    api_app_id: 'A0EMULATOR',
    token: 'verification-token-unused',
    container: { type: 'view', view_id: `V${input.userId}` },
    trigger_id: nextId('trigger.'),
    team: { id: 'T0EMULATOR', domain: 'emulator' },
    view: { id: `V${input.userId}`, type: 'home', team_id: 'T0EMULATOR', app_id: 'A0EMULATOR' },
    actions: [
      {
        type: 'button',
        action_id: input.actionId,
        block_id: 'run-actions',
        text: { type: 'plain_text', text: 'button' },
        action_ts: `${Date.now() / 1000}`,
      },
    ],
  };
}

export interface SlashCommandInput {
  userId: string;
  channel: string;
  text: string;
  command?: string;
  responseUrl?: string;
}

/** A slash command payload (form fields over HTTP, an object inside Socket Mode envelopes). */
export function slashCommandPayload(input: SlashCommandInput): Record<string, string> {
  return {
    token: 'verification-token-unused',
    team_id: 'T0EMULATOR',
    team_domain: 'emulator',
    channel_id: input.channel,
    channel_name: 'emulated',
    user_id: input.userId,
    user_name: input.userId.toLowerCase(),
    command: input.command ?? '/shepherd',
    text: input.text,
    api_app_id: 'A0EMULATOR',
    response_url: input.responseUrl ?? 'http://127.0.0.1:9/unused',
    trigger_id: nextId('trigger.'),
  };
}

/** Slack's v0 request signature: `v0=` + HMAC-SHA256(secret, `v0:<timestamp>:<raw body>`). */
export function signSlackRequest(secret: string, timestampSeconds: number, rawBody: string): string {
  return `v0=${createHmac('sha256', secret).update(`v0:${timestampSeconds}:${rawBody}`).digest('hex')}`;
}

/** A delivery to send to an HTTP-mode endpoint: how Slack encodes each kind. */
export type HttpDelivery =
  | { kind: 'event'; body: Record<string, unknown> }
  | { kind: 'interactive'; payload: Record<string, unknown> }
  | { kind: 'command'; fields: Record<string, string> };

export function encodeDelivery(delivery: HttpDelivery): { body: string; contentType: string } {
  switch (delivery.kind) {
    case 'event':
      return { body: JSON.stringify(delivery.body), contentType: 'application/json' };
    case 'interactive':
      return {
        body: new URLSearchParams({ payload: JSON.stringify(delivery.payload) }).toString(),
        contentType: 'application/x-www-form-urlencoded',
      };
    case 'command':
      return {
        body: new URLSearchParams(delivery.fields).toString(),
        contentType: 'application/x-www-form-urlencoded',
      };
  }
}
