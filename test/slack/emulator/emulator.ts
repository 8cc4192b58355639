/**
 * A wire-level Slack emulator: the Web API over HTTP, the upload URL of files upload v2, Socket Mode
 * over a real WebSocket (hello, envelopes, acks with timing), `response_url`s, and signed HTTP
 * deliveries to an HTTP-mode endpoint. Every call is recorded; faults can be injected per method.
 * The real Bolt app / WebClient / SocketModeClient talk to it unchanged via `slackApiUrl`.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type WebSocket, WebSocketServer } from 'ws';
import { encodeDelivery, type HttpDelivery, signSlackRequest } from './payloads.js';

export interface EmulatedUser {
  id: string;
  name: string;
  displayName?: string;
  realName?: string;
}

export interface RecordedCall {
  method: string;
  params: Record<string, unknown>;
  /** The bearer token (or `token` field) the call carried. */
  token: string | undefined;
  at: number;
  status: number;
  response: unknown;
}

export interface Fault {
  /** HTTP status to answer with: 429 (with `Retry-After`), 5xx. Omit for a Slack `ok:false` error or a pure delay. */
  status?: number;
  retryAfterSeconds?: number;
  /** Slack error code answered with HTTP 200 `{ ok: false, error }`. */
  error?: string;
  /** Delay before answering (applies before the fault or the normal answer). */
  delayMs?: number;
  /** How many calls the fault affects; default 1. Use `Infinity` for all. */
  times?: number;
}

export interface AckRecord {
  envelopeId: string;
  type: string;
  sentAt: number;
  ackedAt: number;
  latencyMs: number;
  /** The `payload` the client sent with its ack (e.g. a slash command's response). */
  payload: unknown;
}

export interface StoredMessage {
  channel: string;
  ts: string;
  threadTs: string | undefined;
  text: string | undefined;
  blocks: unknown;
}

export interface StoredUpload {
  fileId: string;
  filename: string;
  length: number;
  bytes: Buffer | undefined;
  completed:
    | {
        channel: string | undefined;
        threadTs: string | undefined;
        title: string | undefined;
        comment: string | undefined;
      }
    | undefined;
}

export interface SignedResponse {
  status: number;
  body: string;
  latencyMs: number;
}

export interface SlackEmulatorOptions {
  botToken?: string;
  appToken?: string;
  signingSecret?: string;
  botUserId?: string;
  botId?: string;
  teamId?: string;
  users?: EmulatedUser[];
  /** Scopes reported in `x-oauth-scopes` on Web API answers to the bot token, as Slack does. */
  grantedScopes?: string[];
  /** `false` emulates a workspace that refuses `markdown` blocks (`invalid_blocks`). Default true. */
  markdownBlocks?: boolean;
}

export interface SlackEmulator {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** Pass as `SLACK_API_URL` / `slackApiUrl`: `http://127.0.0.1:<port>/api/`. */
  readonly apiUrl: string;
  readonly botToken: string;
  readonly appToken: string;
  readonly signingSecret: string;
  readonly botUserId: string;
  readonly botId: string;
  readonly teamId: string;
  /** Every Web API call, in arrival order. */
  readonly calls: RecordedCall[];
  /** Every Socket Mode ack, in arrival order. */
  readonly acks: AckRecord[];
  /** Messages posted (and updated) by the bot, by ts. */
  readonly messages: Map<string, StoredMessage>;
  readonly uploads: Map<string, StoredUpload>;
  /** Bodies POSTed to `response_url`s handed out by `responseUrl()`. */
  readonly responses: Array<{ id: string; body: unknown }>;
  /** The App Home view last published (`views.publish`) for each user, by user id. */
  readonly homeViews: Map<string, { blocks: unknown[]; publishedAt: number }>;
  /** Modals opened with `views.open`, in order: the trigger id used and the view as sent. */
  readonly openedViews: Array<{ id: string; triggerId: string; view: Record<string, unknown> }>;
  callsTo(method: string): RecordedCall[];
  waitForCall(
    method: string,
    predicate?: (call: RecordedCall) => boolean,
    timeoutMs?: number,
  ): Promise<RecordedCall>;
  addUser(user: EmulatedUser): void;
  /** Inject a fault into the next call(s) of `method` (e.g. `chat.postMessage`). */
  fault(method: string, fault: Fault): void;
  clearFaults(): void;
  /**
   * The channel is over its rate limit for `seconds`: every chat.* call to it answers 429 with the time
   * left as `Retry-After` (as Slack does), while other channels answer normally.
   */
  limitChannel(channel: string, seconds: number): void;
  /** A `response_url` served by the emulator (for slash command payloads). */
  responseUrl(): string;
  /** Resolves once a Socket Mode client has connected and received `hello`. */
  waitForSocket(timeoutMs?: number): Promise<void>;
  /** Send a Socket Mode envelope to the connected client; resolves with its ack. */
  sendEnvelope(
    type: 'events_api' | 'interactive' | 'slash_commands',
    payload: Record<string, unknown>,
    options?: { retryAttempt?: number; retryReason?: string; envelopeId?: string; ackTimeoutMs?: number },
  ): Promise<AckRecord>;
  /** Send a signed HTTP delivery to an HTTP-mode endpoint (`https://host/slack/events`). */
  postSigned(
    endpoint: string,
    delivery: HttpDelivery,
    options?: { secret?: string; timestampSeconds?: number; retryNum?: number; signature?: string },
  ): Promise<SignedResponse>;
  close(): Promise<void>;
}

const JSON_FIELDS = new Set(['blocks', 'attachments', 'files', 'metadata', 'view']);

function parseParams(raw: string, contentType: string | undefined): Record<string, unknown> {
  if (raw === '') return {};
  if (contentType?.includes('application/json')) {
    try {
      const parsed: unknown = JSON.parse(raw);
      return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
    } catch {
      return {};
    }
  }
  const params: Record<string, unknown> = {};
  for (const [key, value] of new URLSearchParams(raw)) {
    if (JSON_FIELDS.has(key)) {
      try {
        params[key] = JSON.parse(value);
        continue;
      } catch {
        // keep the raw string so the test can see what was sent
      }
    }
    params[key] = value;
  }
  return params;
}

async function readBody(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
  response.end(JSON.stringify(body));
}

/** Start an emulator on an ephemeral port. */
export async function startSlackEmulator(options: SlackEmulatorOptions = {}): Promise<SlackEmulator> {
  const botToken = options.botToken ?? 'xoxb-emulator-bot-token';
  const appToken = options.appToken ?? 'xapp-emulator-app-token';
  const signingSecret = options.signingSecret ?? 'emulator-signing-secret';
  const botUserId = options.botUserId ?? 'UBOT';
  const botId = options.botId ?? 'BBOT';
  const teamId = options.teamId ?? 'T0EMULATOR';
  const users = new Map<string, EmulatedUser>((options.users ?? []).map((user) => [user.id, user]));
  const calls: RecordedCall[] = [];
  const acks: AckRecord[] = [];
  const messages = new Map<string, StoredMessage>();
  const uploads = new Map<string, StoredUpload>();
  const responses: Array<{ id: string; body: unknown }> = [];
  const homeViews = new Map<string, { blocks: unknown[]; publishedAt: number }>();
  const openedViews: SlackEmulator['openedViews'] = [];
  const usedTriggers = new Set<string>();
  const faults = new Map<string, Fault[]>();
  /** Rate-limited channels: channel id → when the limit lifts (ms). */
  const limitedUntil = new Map<string, number>();
  const callWaiters = new Set<() => void>();
  const tickets = new Set<string>();
  const pendingAcks = new Map<string, (ack: AckRecord) => void>();
  const sentAt = new Map<string, { type: string; at: number }>();
  let socket: WebSocket | undefined;
  let socketReady: (() => void) | undefined;
  let socketReadyPromise = new Promise<void>((resolve) => {
    socketReady = resolve;
  });
  let tsCounter = 0;
  let fileCounter = 0;
  let url = '';

  const nextTs = (): string => {
    tsCounter += 1;
    return `${1_700_000_000 + tsCounter}.${String(tsCounter).padStart(6, '0')}`;
  };

  function record(call: RecordedCall): void {
    calls.push(call);
    for (const wake of [...callWaiters]) wake();
  }

  function takeFault(method: string): Fault | undefined {
    const queue = faults.get(method);
    const fault = queue?.[0];
    if (fault === undefined || queue === undefined) return undefined;
    const remaining = (fault.times ?? 1) - 1;
    if (remaining <= 0) queue.shift();
    else fault.times = remaining;
    return fault;
  }

  function bearer(request: IncomingMessage, params: Record<string, unknown>): string | undefined {
    const header = request.headers.authorization;
    if (typeof header === 'string' && header.startsWith('Bearer ')) return header.slice('Bearer '.length);
    return typeof params.token === 'string' ? params.token : undefined;
  }

  function string(params: Record<string, unknown>, key: string): string | undefined {
    const value = params[key];
    return typeof value === 'string' && value !== '' ? value : undefined;
  }

  function validateMessage(params: Record<string, unknown>): string | undefined {
    const text = string(params, 'text');
    const blocks = params.blocks;
    if (text === undefined && !Array.isArray(blocks)) return 'no_text';
    if (text !== undefined && text.length > 40_000) return 'msg_too_long';
    if (Array.isArray(blocks)) {
      if (blocks.length > 50) return 'invalid_blocks';
      // Slack's markdown block limit (12,000 characters) counts across the message.
      let markdownChars = 0;
      for (const block of blocks as Array<Record<string, unknown>>) {
        const blockText = (block.text as { text?: unknown } | undefined)?.text;
        if (block.type === 'section' && typeof blockText === 'string' && blockText.length > 3000)
          return 'invalid_blocks';
        if (block.type === 'section' && typeof blockText === 'string' && blockText.length === 0)
          return 'invalid_blocks';
        if (block.type === 'header' && typeof blockText === 'string' && blockText.length > 150)
          return 'invalid_blocks';
        if (block.type === 'image') {
          // Like Slack: an image block may refer to a file the bot uploaded (completed), by id.
          const fileId = (block.slack_file as { id?: unknown } | undefined)?.id;
          const upload = typeof fileId === 'string' ? uploads.get(fileId) : undefined;
          if (typeof block.image_url !== 'string' && upload?.completed === undefined) return 'invalid_blocks';
        }
        if (block.type === 'markdown') {
          if (options.markdownBlocks === false) return 'invalid_blocks';
          if (typeof block.text !== 'string' || block.text.length === 0) return 'invalid_blocks';
          markdownChars += block.text.length;
          if (markdownChars > 12_000) return 'invalid_blocks';
        }
      }
    }
    return undefined;
  }

  /** The Web API proper. Returns the JSON body for an `ok` or `ok:false` answer. */
  function answer(
    method: string,
    params: Record<string, unknown>,
    token: string | undefined,
  ): Record<string, unknown> {
    if (method === 'apps.connections.open') {
      if (token !== appToken) return { ok: false, error: 'invalid_auth' };
      const ticket = randomUUID();
      tickets.add(ticket);
      return { ok: true, url: `${url.replace('http://', 'ws://')}/socket?ticket=${ticket}` };
    }
    if (token !== botToken) return { ok: false, error: token === undefined ? 'not_authed' : 'invalid_auth' };
    switch (method) {
      case 'auth.test':
        return {
          ok: true,
          url: 'https://emulator.slack.com/',
          team: 'Emulator',
          user: 'shepherd',
          team_id: teamId,
          user_id: botUserId,
          bot_id: botId,
        };
      case 'chat.postMessage': {
        const channel = string(params, 'channel');
        if (channel === undefined) return { ok: false, error: 'channel_not_found' };
        const invalid = validateMessage(params);
        if (invalid !== undefined) return { ok: false, error: invalid };
        const ts = nextTs();
        const message: StoredMessage = {
          channel,
          ts,
          threadTs: string(params, 'thread_ts'),
          text: string(params, 'text'),
          blocks: params.blocks,
        };
        messages.set(ts, message);
        return {
          ok: true,
          channel,
          ts,
          message: {
            type: 'message',
            user: botUserId,
            bot_id: botId,
            text: message.text,
            ts,
            thread_ts: message.threadTs,
            blocks: message.blocks,
          },
        };
      }
      case 'chat.update': {
        const ts = string(params, 'ts');
        const existing = ts === undefined ? undefined : messages.get(ts);
        if (ts === undefined || existing === undefined || existing.channel !== string(params, 'channel'))
          return { ok: false, error: 'message_not_found' };
        const invalid = validateMessage(params);
        if (invalid !== undefined) return { ok: false, error: invalid };
        existing.text = string(params, 'text');
        existing.blocks = params.blocks;
        return { ok: true, channel: existing.channel, ts, text: existing.text };
      }
      case 'chat.postEphemeral': {
        if (string(params, 'channel') === undefined) return { ok: false, error: 'channel_not_found' };
        if (string(params, 'user') === undefined) return { ok: false, error: 'user_not_in_channel' };
        return { ok: true, message_ts: nextTs() };
      }
      case 'users.info': {
        const user = users.get(string(params, 'user') ?? '');
        if (user === undefined) return { ok: false, error: 'user_not_found' };
        return {
          ok: true,
          user: {
            id: user.id,
            team_id: teamId,
            name: user.name,
            real_name: user.realName ?? user.name,
            profile: { display_name: user.displayName ?? '', real_name: user.realName ?? user.name },
          },
        };
      }
      case 'files.getUploadURLExternal': {
        const filename = string(params, 'filename');
        const length = Number(params.length);
        if (filename === undefined || !Number.isFinite(length) || length <= 0)
          return { ok: false, error: 'invalid_arguments' };
        fileCounter += 1;
        const fileId = `F${String(fileCounter).padStart(8, '0')}`;
        uploads.set(fileId, { fileId, filename, length, bytes: undefined, completed: undefined });
        return { ok: true, upload_url: `${url}/upload/${fileId}`, file_id: fileId };
      }
      case 'files.completeUploadExternal': {
        const files = Array.isArray(params.files)
          ? (params.files as Array<{ id?: string; title?: string }>)
          : [];
        if (files.length === 0) return { ok: false, error: 'invalid_arguments' };
        const completed = [];
        for (const file of files) {
          const upload = uploads.get(file.id ?? '');
          if (upload === undefined || upload.bytes === undefined)
            return { ok: false, error: 'file_not_found' };
          upload.completed = {
            channel: string(params, 'channel_id'),
            threadTs: string(params, 'thread_ts'),
            title: file.title,
            comment: string(params, 'initial_comment'),
          };
          completed.push({
            id: upload.fileId,
            name: upload.filename,
            title: file.title ?? upload.filename,
            size: upload.bytes.length,
          });
        }
        return { ok: true, files: completed };
      }
      case 'views.publish': {
        // Like Slack: a known user, a `home` view, at most 100 blocks, buttons with action ids.
        const userId = string(params, 'user_id');
        if (userId === undefined || !users.has(userId)) return { ok: false, error: 'user_not_found' };
        const view = params.view as { type?: unknown; blocks?: unknown } | undefined;
        if (typeof view !== 'object' || view === null || view.type !== 'home')
          return { ok: false, error: 'invalid_arguments' };
        if (!Array.isArray(view.blocks) || view.blocks.length > 100)
          return { ok: false, error: 'invalid_blocks' };
        for (const block of view.blocks as Array<Record<string, unknown>>) {
          if (block.type === 'actions') {
            const elements = Array.isArray(block.elements)
              ? (block.elements as Array<Record<string, unknown>>)
              : [];
            if (elements.length === 0 || elements.length > 25) return { ok: false, error: 'invalid_blocks' };
            if (elements.some((element) => typeof element.action_id !== 'string'))
              return { ok: false, error: 'invalid_blocks' };
          }
        }
        homeViews.set(userId, { blocks: view.blocks, publishedAt: Date.now() });
        return { ok: true, view: { id: `V${userId}`, type: 'home', blocks: view.blocks } };
      }
      case 'views.open': {
        // Like Slack (docs.slack.dev reference/methods/views.open, reference/surfaces/views): a trigger id
        // is good once; a modal has a plain_text title, submit and close of at most 24 characters, at most
        // 100 blocks, and each input block a label and an element with an action id.
        const triggerId = string(params, 'trigger_id');
        if (triggerId === undefined || usedTriggers.has(triggerId))
          return { ok: false, error: 'invalid_trigger_id' };
        const view = (typeof params.view === 'string' ? JSON.parse(params.view) : params.view) as
          | Record<string, unknown>
          | undefined;
        if (view?.type !== 'modal') return { ok: false, error: 'invalid_arguments' };
        const plain = (value: unknown) =>
          typeof value === 'object' &&
          value !== null &&
          (value as { type?: unknown }).type === 'plain_text' &&
          typeof (value as { text?: unknown }).text === 'string' &&
          (value as { text: string }).text.length <= 24;
        if (!plain(view.title) || (view.submit !== undefined && !plain(view.submit)))
          return { ok: false, error: 'invalid_arguments' };
        if (typeof view.private_metadata === 'string' && view.private_metadata.length > 3000)
          return { ok: false, error: 'invalid_arguments' };
        const blocks = Array.isArray(view.blocks) ? (view.blocks as Array<Record<string, unknown>>) : [];
        if (blocks.length === 0 || blocks.length > 100) return { ok: false, error: 'invalid_blocks' };
        for (const block of blocks.filter((entry) => entry.type === 'input')) {
          const element = block.element as { action_id?: unknown; initial_value?: unknown } | undefined;
          if (typeof block.label !== 'object' || typeof element?.action_id !== 'string')
            return { ok: false, error: 'invalid_blocks' };
          if (typeof element.initial_value === 'string' && element.initial_value.length > 3000)
            return { ok: false, error: 'invalid_blocks' };
        }
        usedTriggers.add(triggerId);
        const id = `V${openedViews.length + 1}MODAL`;
        openedViews.push({ id, triggerId, view });
        return { ok: true, view: { ...view, id, state: { values: {} } } };
      }
      case 'files.upload':
        // Retired by Slack; answering with an error proves the adapter never uses it.
        return { ok: false, error: 'method_deprecated' };
      default:
        return { ok: false, error: 'unknown_method' };
    }
  }

  async function handleUpload(
    request: IncomingMessage,
    response: ServerResponse,
    fileId: string,
  ): Promise<void> {
    const raw = await readBody(request);
    const upload = uploads.get(fileId);
    if (upload === undefined) {
      response.writeHead(404).end();
      return;
    }
    const contentType = request.headers['content-type'] ?? '';
    if (contentType.startsWith('multipart/form-data')) {
      const form = await new Response(raw, { headers: { 'content-type': contentType } }).formData();
      const file = [...form.values()].find((value): value is File => typeof value !== 'string');
      upload.bytes = file === undefined ? Buffer.alloc(0) : Buffer.from(await file.arrayBuffer());
    } else {
      upload.bytes = raw;
    }
    record({
      method: 'upload',
      params: { fileId, bytes: upload.bytes.length },
      token: undefined,
      at: Date.now(),
      status: 200,
      response: 'OK',
    });
    response.writeHead(200, { 'content-type': 'text/plain' });
    response.end(`OK - ${upload.bytes.length}`);
  }

  const server = createServer((request, response) => {
    void (async () => {
      const path = new URL(request.url ?? '/', 'http://emulator').pathname;
      if (request.method === 'POST' && path.startsWith('/upload/')) {
        await handleUpload(request, response, path.slice('/upload/'.length));
        return;
      }
      if (request.method === 'POST' && path.startsWith('/response/')) {
        const raw = (await readBody(request)).toString('utf8');
        responses.push({
          id: path.slice('/response/'.length),
          body: parseParams(raw, request.headers['content-type']),
        });
        sendJson(response, 200, { ok: true });
        return;
      }
      if (!path.startsWith('/api/')) {
        response.writeHead(404).end();
        return;
      }
      const method = path.slice('/api/'.length);
      const raw = (await readBody(request)).toString('utf8');
      const params = parseParams(raw, request.headers['content-type']);
      const token = bearer(request, params);
      const limitEnds = limitedUntil.get(String(params.channel ?? params.channel_id ?? '')) ?? 0;
      const fault: Fault | undefined =
        method.startsWith('chat.') && limitEnds > Date.now()
          ? { status: 429, retryAfterSeconds: Math.ceil((limitEnds - Date.now()) / 1000) }
          : takeFault(method);
      if (fault?.delayMs !== undefined) await new Promise((resolve) => setTimeout(resolve, fault.delayMs));
      if (fault?.status !== undefined) {
        const body = { ok: false, error: fault.status === 429 ? 'ratelimited' : 'service_unavailable' };
        record({ method, params, token, at: Date.now(), status: fault.status, response: body });
        sendJson(
          response,
          fault.status,
          body,
          fault.status === 429 ? { 'retry-after': String(fault.retryAfterSeconds ?? 1) } : {},
        );
        return;
      }
      const body =
        fault?.error !== undefined ? { ok: false, error: fault.error } : answer(method, params, token);
      record({ method, params, token, at: Date.now(), status: 200, response: body });
      const scopes =
        options.grantedScopes !== undefined && token === botToken
          ? { 'x-oauth-scopes': options.grantedScopes.join(',') }
          : {};
      sendJson(response, 200, body, scopes);
    })().catch((error: unknown) => {
      response.writeHead(500).end(String(error));
    });
  });

  const webSockets = new WebSocketServer({ noServer: true });
  server.on('upgrade', (request, duplex, head) => {
    const requestUrl = new URL(request.url ?? '/', 'http://emulator');
    const ticket = requestUrl.searchParams.get('ticket') ?? '';
    if (requestUrl.pathname !== '/socket' || !tickets.delete(ticket)) {
      duplex.end('HTTP/1.1 401 Unauthorized\r\n\r\n');
      return;
    }
    webSockets.handleUpgrade(request, duplex, head, (client) => {
      socket = client;
      client.on('message', (data) => {
        let message: { envelope_id?: unknown; payload?: unknown };
        try {
          message = JSON.parse(String(data)) as { envelope_id?: unknown; payload?: unknown };
        } catch {
          return;
        }
        if (typeof message.envelope_id !== 'string') return;
        const sent = sentAt.get(message.envelope_id);
        const ackedAt = Date.now();
        const ack: AckRecord = {
          envelopeId: message.envelope_id,
          type: sent?.type ?? 'unknown',
          sentAt: sent?.at ?? ackedAt,
          ackedAt,
          latencyMs: ackedAt - (sent?.at ?? ackedAt),
          payload: message.payload,
        };
        acks.push(ack);
        pendingAcks.get(message.envelope_id)?.(ack);
        pendingAcks.delete(message.envelope_id);
      });
      client.on('close', () => {
        if (socket === client) {
          socket = undefined;
          socketReadyPromise = new Promise<void>((resolve) => {
            socketReady = resolve;
          });
        }
      });
      client.send(
        JSON.stringify({
          type: 'hello',
          num_connections: 1,
          debug_info: { host: 'emulator' },
          connection_info: { app_id: 'A0EMULATOR' },
        }),
      );
      socketReady?.();
    });
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    apiUrl: `${url}/api/`,
    botToken,
    appToken,
    signingSecret,
    botUserId,
    botId,
    teamId,
    calls,
    acks,
    messages,
    uploads,
    responses,
    homeViews,
    openedViews,
    callsTo: (method) => calls.filter((call) => call.method === method),
    waitForCall(method, predicate = () => true, timeoutMs = 5000) {
      const find = (): RecordedCall | undefined =>
        calls.find((call) => call.method === method && predicate(call));
      const found = find();
      if (found !== undefined) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          callWaiters.delete(wake);
          reject(new Error(`emulator: no ${method} call within ${timeoutMs} ms`));
        }, timeoutMs);
        const wake = (): void => {
          const match = find();
          if (match === undefined) return;
          clearTimeout(timer);
          callWaiters.delete(wake);
          resolve(match);
        };
        callWaiters.add(wake);
      });
    },
    addUser: (user) => {
      users.set(user.id, user);
    },
    fault: (method, fault) => {
      const queue = faults.get(method) ?? [];
      queue.push({ ...fault });
      faults.set(method, queue);
    },
    clearFaults: () => faults.clear(),
    limitChannel: (channel, seconds) => {
      limitedUntil.set(channel, Date.now() + seconds * 1000);
    },
    responseUrl: () => `${url}/response/${randomUUID()}`,
    async waitForSocket(timeoutMs = 5000) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        socketReadyPromise,
        new Promise<never>((_resolve, reject) => {
          timer = setTimeout(() => reject(new Error('emulator: no Socket Mode connection')), timeoutMs);
        }),
      ]).finally(() => clearTimeout(timer));
    },
    sendEnvelope(type, payload, envelopeOptions = {}) {
      const client = socket;
      if (client === undefined) return Promise.reject(new Error('emulator: no Socket Mode client connected'));
      const envelopeId = envelopeOptions.envelopeId ?? randomUUID();
      const envelope: Record<string, unknown> = {
        envelope_id: envelopeId,
        type,
        payload,
        accepts_response_payload: type !== 'events_api',
      };
      if (type === 'events_api') {
        envelope.retry_attempt = envelopeOptions.retryAttempt ?? 0;
        envelope.retry_reason = envelopeOptions.retryReason ?? '';
      }
      return new Promise<AckRecord>((resolve, reject) => {
        const timer = setTimeout(() => {
          pendingAcks.delete(envelopeId);
          reject(new Error(`emulator: envelope ${envelopeId} (${type}) not acked`));
        }, envelopeOptions.ackTimeoutMs ?? 3000);
        pendingAcks.set(envelopeId, (ack) => {
          clearTimeout(timer);
          resolve(ack);
        });
        sentAt.set(envelopeId, { type, at: Date.now() });
        client.send(JSON.stringify(envelope));
      });
    },
    async postSigned(endpoint, delivery, signedOptions = {}) {
      const { body, contentType } = encodeDelivery(delivery);
      const timestamp = signedOptions.timestampSeconds ?? Math.floor(Date.now() / 1000);
      const headers: Record<string, string> = {
        'content-type': contentType,
        'x-slack-request-timestamp': String(timestamp),
        'x-slack-signature':
          signedOptions.signature ?? signSlackRequest(signedOptions.secret ?? signingSecret, timestamp, body),
      };
      if (signedOptions.retryNum !== undefined) {
        headers['x-slack-retry-num'] = String(signedOptions.retryNum);
        headers['x-slack-retry-reason'] = 'http_timeout';
      }
      const started = Date.now();
      const response = await fetch(endpoint, { method: 'POST', headers, body });
      const text = await response.text();
      return { status: response.status, body: text, latencyMs: Date.now() - started };
    },
    async close() {
      for (const client of webSockets.clients) client.terminate();
      webSockets.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
