import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGateway, type EmulatorGateway } from './gateway.js';
import {
  dmChannelJson,
  type EmulatorUser,
  guildJson,
  type Json,
  makeUser,
  memberJson,
  messageJson,
  snowflake,
  textChannelJson,
  threadChannelJson,
  userJson,
} from './payloads.js';

/*
 * A wire-level Discord: REST under /api/v10 and a gateway WebSocket, enough for the real discord.js client.
 * Every REST call is recorded (method, path, JSON body or multipart payload_json + file bytes); faults can be
 * injected per route; people are simulated with `userSends`, `clickButton` and `runSlashCommand`.
 */

export interface RecordedFile {
  field: string;
  name: string;
  contentType: string;
  data: Buffer;
}

export interface RecordedCall {
  method: string;
  /** Path without the `/api/v10` prefix, e.g. `/channels/123/messages`. */
  path: string;
  query: URLSearchParams;
  body: unknown;
  files: RecordedFile[];
  status: number;
  at: number;
  /** True when the response came from `failNext`. */
  injected: boolean;
}

export interface FaultRule {
  method?: string;
  path: RegExp;
  status: number;
  /** Discord JSON error code, e.g. 50013 Missing Permissions. */
  code?: number;
  message?: string;
  /** How many matching calls fail (default 1). */
  times?: number;
}

export interface InteractionRecord {
  id: string;
  token: string;
  type: number;
  channelId: string;
  createdAt: number;
  callbacks: { type: number; data: unknown; at: number }[];
  originalMessageId?: string;
  /** The message a component interaction came from (a button, or a modal opened by one). */
  message?: Json;
}

export interface DiscordEmulatorOptions {
  token?: string;
  heartbeatIntervalMs?: number;
  /** Simulates the portal toggle: when false, guild messages not mentioning the bot arrive with empty content. */
  messageContentIntent?: boolean;
}

export interface DiscordEmulator {
  /** REST base for discord.js's `rest.api` (`http://127.0.0.1:<port>/api`). */
  readonly apiUrl: string;
  readonly token: string;
  readonly applicationId: string;
  readonly bot: EmulatorUser;
  readonly users: { alice: EmulatorUser; bob: EmulatorUser; otherBot: EmulatorUser };
  readonly guildId: string;
  /** The guild's text channel (`#ml-runs`). */
  readonly channelId: string;
  readonly calls: RecordedCall[];
  readonly gateway: EmulatorGateway;
  /** Commands registered per guild, by guild id; global ones (`PUT /applications/:id/commands`) under `GLOBAL`. */
  readonly commands: Map<string, unknown[]>;
  readonly interactions: Map<string, InteractionRecord>;
  /** Messages stored in a channel, oldest first (ephemeral interaction replies included, flagged 64). */
  messagesIn(channelId: string): Json[];
  message(messageId: string): Json | undefined;
  channel(channelId: string): Json | undefined;
  /** A person writes in a channel/thread/DM; `mentionBot` prefixes `<@bot>` and lists the mention. */
  userSends(options: {
    channelId: string;
    author: EmulatorUser;
    content: string;
    mentionBot?: boolean;
  }): Json;
  /** The thread auto-archives (a quiet day): edits in it fail with 50083 until it is unarchived. */
  archiveThread(channelId: string): void;
  /** Opens (or returns) the DM channel between the bot and `user`. */
  openDm(user: EmulatorUser): string;
  clickButton(options: { messageId: string; customId: string; user: EmulatorUser }): InteractionRecord;
  /**
   * The person submits the modal the bot opened in answer to `interaction` (callback type 9): a
   * MODAL_SUBMIT interaction (type 5) with each text input's value by its custom id.
   */
  submitModal(options: {
    interaction: InteractionRecord;
    user: EmulatorUser;
    values: Record<string, string>;
  }): InteractionRecord;
  /** `/shepherd <subcommand> [option:value …]`, as registered (the guild's copy, else the global one). */
  runSlashCommand(options: {
    channelId: string;
    subcommand: string;
    options?: Record<string, string>;
    user: EmulatorUser;
  }): InteractionRecord;
  /** The person is typing `focused` into option `option` of a subcommand: an autocomplete interaction (type 4). */
  autocomplete(options: {
    channelId: string;
    subcommand: string;
    option: string;
    typed: string;
    user: EmulatorUser;
  }): InteractionRecord;
  failNext(rule: FaultRule): void;
  /** Polls until `predicate` holds (default 5 s). */
  waitFor<T>(predicate: () => T | undefined | false, timeoutMs?: number): Promise<T>;
  close(): Promise<void>;
}

/** The `commands` key of the global (all guilds and DMs) command list. */
export const GLOBAL = 'global';

class HttpFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

const unknownChannel = () => new HttpFailure(404, 10003, 'Unknown Channel');
const unknownMessage = () => new HttpFailure(404, 10008, 'Unknown Message');

async function readBody(request: IncomingMessage): Promise<{ body: unknown; files: RecordedFile[] }> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  const type = request.headers['content-type'] ?? '';
  if (raw.length === 0) return { body: undefined, files: [] };
  if (type.startsWith('multipart/form-data')) {
    const form = await new Response(raw, { headers: { 'content-type': type } }).formData();
    const files: RecordedFile[] = [];
    let body: unknown;
    for (const [field, value] of form.entries()) {
      if (typeof value === 'string') {
        if (field === 'payload_json') body = JSON.parse(value);
      } else {
        files.push({
          field,
          name: value.name,
          contentType: value.type,
          data: Buffer.from(await value.arrayBuffer()),
        });
      }
    }
    return { body, files };
  }
  if (type.includes('application/json')) return { body: JSON.parse(raw.toString('utf8')), files: [] };
  return { body: raw.toString('utf8'), files: [] };
}

function asObject(value: unknown): Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : {};
}

/** Start an emulator on an ephemeral port. */
export async function startDiscordEmulator(options: DiscordEmulatorOptions = {}): Promise<DiscordEmulator> {
  const token = options.token ?? `emulator-${randomBytes(8).toString('hex')}`;
  const bot = makeUser('shepherd-bot', { bot: true });
  const applicationId = bot.id;
  const users = {
    alice: makeUser('alice', { globalName: 'Alice Liddell' }),
    bob: makeUser('bob', { globalName: 'Bob', nick: 'bob (ops)' }),
    otherBot: makeUser('ci-bot', { bot: true }),
  };
  const guildId = snowflake();
  const channelId = snowflake();
  const channels = new Map<string, Json>([[channelId, textChannelJson(channelId, guildId, 'ml-runs')]]);
  const messages = new Map<string, Json>();
  const calls: RecordedCall[] = [];
  const faults: (FaultRule & { remaining: number })[] = [];
  const commands = new Map<string, unknown[]>();
  const interactions = new Map<string, InteractionRecord>();
  const interactionsByToken = new Map<string, InteractionRecord>();
  const dmChannels = new Map<string, string>();
  const messageContentIntent = options.messageContentIntent ?? true;

  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const base = `http://127.0.0.1:${port}`;

  const gateway = createGateway({
    token,
    heartbeatIntervalMs: options.heartbeatIntervalMs ?? 1_000,
    resumeUrl: () => `ws://127.0.0.1:${port}/gateway-resume`,
    readyPayload: (sessionId) => ({
      v: 10,
      user: { ...userJson(bot), verified: true, mfa_enabled: false },
      guilds: [{ id: guildId, unavailable: true }],
      session_id: sessionId,
      session_type: 'normal',
      resume_gateway_url: `ws://127.0.0.1:${port}/gateway-resume`,
      shard: [0, 1],
      application: { id: applicationId, flags: 0 },
      private_channels: [],
      relationships: [],
      presences: [],
      guild_join_requests: [],
      geo_ordered_rtc_regions: [],
      user_settings: {},
    }),
    onIdentify: () => {
      gateway.dispatch(
        'GUILD_CREATE',
        guildJson({
          id: guildId,
          name: 'ML team',
          ownerId: users.alice.id,
          channels: [...channels.values()].filter(
            (channel) => channel.guild_id === guildId && channel.type === 0,
          ),
          members: [bot, users.alice, users.bob, users.otherBot],
        }),
      );
    },
  });

  function guildOf(channel: Json): string | undefined {
    return typeof channel.guild_id === 'string' ? channel.guild_id : undefined;
  }

  function requireChannel(id: string): Json {
    const channel = channels.get(id);
    if (channel === undefined) throw unknownChannel();
    return channel;
  }

  /** Discord's form checks on the command fields Shepherd sets: a permission bit set is a string of digits. */
  function checkCommands(body: unknown): void {
    for (const command of Array.isArray(body) ? body : []) {
      const { default_member_permissions: permissions, dm_permission: dm } = asObject(command);
      if (
        permissions !== undefined &&
        permissions !== null &&
        !(typeof permissions === 'string' && /^\d+$/.test(permissions))
      )
        throw new HttpFailure(400, 50035, 'Invalid Form Body: default_member_permissions');
      if (dm !== undefined && dm !== null && typeof dm !== 'boolean')
        throw new HttpFailure(400, 50035, 'Invalid Form Body: dm_permission');
    }
  }

  function threadMetadata(channel: Json): Json | undefined {
    return channel.type === 11 &&
      typeof channel.thread_metadata === 'object' &&
      channel.thread_metadata !== null
      ? (channel.thread_metadata as Json)
      : undefined;
  }

  /** `PATCH /channels/:id`: only a thread's `archived` flag (what Shepherd sends) is modelled. */
  function modifyChannel(channel: Json, body: Json): Json {
    const metadata = threadMetadata(channel);
    if (metadata === undefined || typeof body.archived !== 'boolean')
      throw new HttpFailure(400, 50035, 'Invalid Form Body');
    if (metadata.locked === true && body.archived === false)
      throw new HttpFailure(403, 50013, 'Missing Permissions');
    metadata.archived = body.archived;
    metadata.archive_timestamp = new Date().toISOString();
    gateway.dispatch('THREAD_UPDATE', channel);
    return channel;
  }

  function requireMessage(channel: string, id: string): Json {
    const message = messages.get(id);
    if (message === undefined || message.channel_id !== channel) throw unknownMessage();
    return message;
  }

  function attachmentsFor(files: RecordedFile[]): Json[] {
    return files.map((file) => {
      const id = snowflake();
      return {
        id,
        filename: file.name,
        size: file.data.length,
        content_type: file.contentType,
        url: `${base}/attachments/${id}/${file.name}`,
        proxy_url: `${base}/attachments/${id}/${file.name}`,
      };
    });
  }

  /** Discord turns `attachment://name` into the uploaded file's URL; the raw form is kept in the call log. */
  function resolveEmbeds(embeds: unknown, attachments: Json[]): unknown[] {
    if (!Array.isArray(embeds)) return [];
    return embeds.map((embed) => {
      const object = asObject(embed);
      const image = asObject(object.image);
      const url = typeof image.url === 'string' ? image.url : undefined;
      if (url?.startsWith('attachment://') !== true) return object;
      const file = attachments.find(
        (attachment) => attachment.filename === url.slice('attachment://'.length),
      );
      return { ...object, image: { ...image, url: file?.url ?? url, proxy_url: file?.proxy_url ?? url } };
    });
  }

  function storeMessage(message: Json, dispatchToBot: boolean): Json {
    messages.set(String(message.id), message);
    const channel = channels.get(String(message.channel_id));
    if (channel !== undefined) channel.last_message_id = message.id;
    if (dispatchToBot) {
      const author = asObject(message.author);
      const member = typeof message.guild_id === 'string' ? { member: memberForId(String(author.id)) } : {};
      gateway.dispatch('MESSAGE_CREATE', { ...message, ...member, channel_type: channel?.type });
    }
    return message;
  }

  function memberForId(id: string): Json {
    const user = [bot, users.alice, users.bob, users.otherBot].find((candidate) => candidate.id === id);
    return user === undefined ? {} : memberJson(user, false);
  }

  function botMessage(
    channelId: string,
    body: Json,
    files: RecordedFile[],
    extra: Partial<Parameters<typeof messageJson>[0]> = {},
  ) {
    const channel = requireChannel(channelId);
    const content = typeof body.content === 'string' ? body.content : '';
    const embeds = Array.isArray(body.embeds) ? body.embeds : [];
    if (content === '' && embeds.length === 0 && files.length === 0 && !Array.isArray(body.components)) {
      throw new HttpFailure(400, 50006, 'Cannot send an empty message');
    }
    if (content.length > 2000)
      throw new HttpFailure(400, 50035, 'Invalid Form Body: content must be 2000 or fewer in length.');
    const attachments = attachmentsFor(files);
    return messageJson({
      channelId,
      guildId: guildOf(channel),
      author: bot,
      content,
      embeds: resolveEmbeds(embeds, attachments),
      components: Array.isArray(body.components) ? body.components : [],
      attachments,
      ...(typeof body.flags === 'number' ? { flags: body.flags } : {}),
      ...extra,
    });
  }

  function editMessage(message: Json, body: Json, files: RecordedFile[]): Json {
    if (typeof body.content === 'string') {
      if (body.content.length > 2000)
        throw new HttpFailure(400, 50035, 'Invalid Form Body: content too long');
      message.content = body.content;
    }
    const added = attachmentsFor(files);
    if (Array.isArray(body.attachments)) {
      // v10: the list names every attachment kept; entries with a numeric id refer to the new files.
      const keepIds = new Set(body.attachments.map((entry) => String(asObject(entry).id)));
      const kept = (message.attachments as Json[]).filter((attachment) => keepIds.has(String(attachment.id)));
      message.attachments = [...kept, ...added];
    } else if (added.length > 0) {
      message.attachments = [...(message.attachments as Json[]), ...added];
    }
    if (Array.isArray(body.embeds))
      message.embeds = resolveEmbeds(body.embeds, message.attachments as Json[]);
    if (Array.isArray(body.components)) message.components = body.components;
    message.edited_timestamp = new Date().toISOString();
    gateway.dispatch('MESSAGE_UPDATE', message);
    return message;
  }

  function interactionChannelJson(channel: Json): Json {
    return { ...channel };
  }

  function createInteraction(
    type: number,
    channelIdValue: string,
    user: EmulatorUser,
    extra: Json,
  ): InteractionRecord {
    const channel = requireChannel(channelIdValue);
    const record: InteractionRecord = {
      id: snowflake(),
      token: randomBytes(24).toString('base64url'),
      type,
      channelId: channelIdValue,
      createdAt: Date.now(),
      callbacks: [],
    };
    interactions.set(record.id, record);
    interactionsByToken.set(record.token, record);
    const guildId = guildOf(channel);
    gateway.dispatch('INTERACTION_CREATE', {
      id: record.id,
      application_id: applicationId,
      type,
      token: record.token,
      version: 1,
      channel_id: channelIdValue,
      channel: interactionChannelJson(channel),
      ...(guildId === undefined
        ? { user: userJson(user), context: 1 }
        : {
            guild_id: guildId,
            guild_locale: 'en-US',
            member: { ...memberJson(user), permissions: '1071698660929' },
            context: 0,
          }),
      app_permissions: '1071698660929',
      locale: 'en-US',
      entitlements: [],
      authorizing_integration_owners: { '0': guildId ?? '0' },
      ...extra,
    });
    return record;
  }

  function checkModal(data: Json): void {
    const invalid = (what: string) => new HttpFailure(400, 50035, `Invalid Form Body: ${what}`);
    if (typeof data.custom_id !== 'string' || data.custom_id.length > 100) throw invalid('custom_id');
    if (typeof data.title !== 'string' || data.title.length === 0 || data.title.length > 45)
      throw invalid('title');
    const rows = data.components;
    if (!Array.isArray(rows) || rows.length === 0 || rows.length > 5) throw invalid('components');
    for (const row of rows as Json[]) {
      const inputs = row.components;
      if (row.type !== 1 || !Array.isArray(inputs) || inputs.length !== 1) throw invalid('components.row');
      const input = inputs[0] as Json;
      if (input.type !== 4 || typeof input.custom_id !== 'string') throw invalid('components.text_input');
      if (typeof input.label !== 'string' || input.label.length === 0 || input.label.length > 45)
        throw invalid('components.label');
      if (input.style !== 1 && input.style !== 2) throw invalid('components.style');
      const max = typeof input.max_length === 'number' ? input.max_length : 4000;
      if (max < 1 || max > 4000) throw invalid('components.max_length');
      if (typeof input.value === 'string' && input.value.length > max) throw invalid('components.value');
    }
  }

  /** The registered `/shepherd` a person would see in this channel: the guild's copy first, else the global. */
  function registeredCommand(channelIdValue: string): Json | undefined {
    const guildId = guildOf(requireChannel(channelIdValue));
    const find = (list: unknown[] | undefined) =>
      (list ?? []).map(asObject).find((entry) => entry.name === 'shepherd');
    return (guildId === undefined ? undefined : find(commands.get(guildId))) ?? find(commands.get(GLOBAL));
  }

  /** `data` of a command interaction; like Discord, refuses a subcommand or option not registered. */
  function commandData(
    channelIdValue: string,
    subcommand: string,
    values: Record<string, string>,
    focused: string | undefined,
  ): Json {
    const command = registeredCommand(channelIdValue);
    if (command === undefined) throw new Error('/shepherd is not registered for this channel');
    const sub = (Array.isArray(command.options) ? command.options : [])
      .map(asObject)
      .find((entry) => entry.type === 1 && entry.name === subcommand);
    if (sub === undefined) throw new Error(`/shepherd has no subcommand ${subcommand}`);
    const known = (Array.isArray(sub.options) ? sub.options : []).map(asObject);
    const options = Object.entries(values).map(([name, value]) => {
      const definition = known.find((entry) => entry.name === name);
      if (definition === undefined) throw new Error(`/shepherd ${subcommand} has no option ${name}`);
      if (name === focused && definition.autocomplete !== true)
        throw new Error(`option ${name} does not autocomplete`);
      return { name, type: 3, value, ...(name === focused ? { focused: true } : {}) };
    });
    const guildId = guildOf(requireChannel(channelIdValue));
    return {
      id: String(command.id),
      name: 'shepherd',
      type: 1,
      ...(guildId === undefined || command.guild_id === undefined ? {} : { guild_id: guildId }),
      options: [{ name: subcommand, type: 1, options }],
    };
  }

  async function route(
    method: string,
    path: string,
    query: URLSearchParams,
    body: unknown,
    files: RecordedFile[],
  ) {
    const parts = path
      .split('/')
      .filter((part) => part !== '')
      .map((part) => decodeURIComponent(part));
    const object = asObject(body);
    const at = (index: number) => parts[index] ?? '';

    if (method === 'GET' && path === '/gateway/bot') {
      return {
        url: `ws://127.0.0.1:${port}/gateway`,
        shards: 1,
        session_start_limit: { total: 1000, remaining: 999, reset_after: 14_400_000, max_concurrency: 1 },
      };
    }
    if (method === 'GET' && path === '/gateway') return { url: `ws://127.0.0.1:${port}/gateway` };
    if (method === 'GET' && path === '/users/@me') return userJson(bot);
    if (method === 'GET' && path === '/applications/@me')
      return { id: applicationId, name: bot.username, bot: userJson(bot), flags: 0 };

    if (at(0) === 'channels') {
      const channel = requireChannel(at(1));
      if (parts.length === 2 && method === 'GET') return channel;
      if (parts.length === 2 && method === 'PATCH') return modifyChannel(channel, object);
      // The typing indicator: 204, nothing stored (the call is in `calls`).
      if (parts.length === 3 && at(2) === 'typing' && method === 'POST') return null;
      if (parts.length === 3 && at(2) === 'messages' && method === 'POST') {
        return storeMessage(botMessage(at(1), object, files), true);
      }
      if (parts.length === 4 && at(2) === 'messages') {
        const message = requireMessage(at(1), at(3));
        if (method === 'GET') return message;
        if (method === 'PATCH') {
          // Like Discord: a new message reopens an archived thread, an edit does not.
          if (threadMetadata(channel)?.archived === true)
            throw new HttpFailure(400, 50083, 'Thread is archived');
          return editMessage(message, object, files);
        }
      }
      if (parts.length === 5 && at(2) === 'messages' && at(4) === 'threads' && method === 'POST') {
        const message = requireMessage(at(1), at(3));
        if (channel.type !== 0 && channel.type !== 5)
          throw new HttpFailure(400, 50024, 'Cannot execute action on this channel type');
        if (channels.has(String(message.id)))
          throw new HttpFailure(400, 160004, 'A thread has already been created for this message');
        const name = typeof object.name === 'string' ? object.name : '';
        if (name.length === 0 || name.length > 100)
          throw new HttpFailure(400, 50035, 'Invalid Form Body: name');
        // Like Discord, a thread started from a message shares the message's id.
        const thread = threadChannelJson(String(message.id), String(channel.guild_id), at(1), name, bot.id);
        channels.set(thread.id, thread);
        message.thread = thread;
        gateway.dispatch('THREAD_CREATE', { ...thread, newly_created: true });
        return thread;
      }
    }

    if (at(0) === 'interactions' && at(3) === 'callback' && method === 'POST') {
      const record = interactions.get(at(1));
      if (record === undefined || record.token !== at(2))
        throw new HttpFailure(404, 10062, 'Unknown interaction');
      if (record.callbacks.length > 0)
        throw new HttpFailure(400, 40060, 'Interaction has already been acknowledged.');
      const type = Number(object.type);
      // Autocomplete (4) is answered only with choices (8), and choices only answer autocomplete.
      if ((record.type === 4) !== (type === 8))
        throw new HttpFailure(400, 40004, 'Interaction callback type does not match the interaction');
      // MODAL (9): only in answer to a command or a component, never to a modal submit (Discord's
      // interaction response docs); title ≤ 45, 1–5 rows of one text input (type 4) each, label ≤ 45,
      // style 1 (short) or 2 (paragraph), max_length ≤ 4000, a prefilled value within it.
      if (type === 9) {
        if (record.type !== 2 && record.type !== 3)
          throw new HttpFailure(400, 40004, 'Interaction callback type does not match the interaction');
        checkModal(asObject(object.data));
      }
      if (type === 8) {
        const choices = asObject(object.data).choices;
        if (!Array.isArray(choices) || choices.length > 25)
          throw new HttpFailure(400, 50035, 'Invalid Form Body: choices (at most 25)');
      }
      record.callbacks.push({ type, data: object.data, at: Date.now() });
      if (type === 4 || type === 5) {
        const data = asObject(object.data);
        const message = botMessage(
          record.channelId,
          type === 5 ? { content: '', components: [] } : data,
          files,
          {
            interactionId: record.id,
            applicationId,
            webhookId: applicationId,
            type: 20,
            flags: (typeof data.flags === 'number' ? data.flags : 0) | (type === 5 ? 128 : 0),
          },
        );
        record.originalMessageId = String(message.id);
        storeMessage(message, false);
      }
      return null;
    }

    if (at(0) === 'webhooks' && at(1) === applicationId) {
      const record = interactionsByToken.get(at(2));
      if (record === undefined) throw new HttpFailure(404, 10015, 'Unknown Webhook');
      if (parts.length === 3 && method === 'POST') {
        const flags = typeof object.flags === 'number' ? object.flags : 0;
        const message = botMessage(record.channelId, object, files, {
          webhookId: applicationId,
          applicationId,
          flags,
        });
        // Ephemeral follow-ups are only shown to the clicker, never dispatched.
        return storeMessage(message, false);
      }
      if (parts.length === 5 && at(3) === 'messages' && method === 'PATCH') {
        const id = at(4) === '@original' ? record.originalMessageId : at(4);
        if (id === undefined) throw unknownMessage();
        const message = requireMessage(record.channelId, id);
        message.flags = Number(message.flags ?? 0) & ~128;
        return editMessage(message, object, files);
      }
    }

    if (at(0) === 'applications' && at(2) === 'commands' && parts.length === 3) {
      if (at(1) !== applicationId) throw new HttpFailure(403, 50001, 'Missing Access');
      if (method === 'PUT') {
        checkCommands(body);
        const list = (Array.isArray(body) ? body : []).map((command) => ({
          ...asObject(command),
          id: snowflake(),
          application_id: applicationId,
          version: snowflake(),
        }));
        commands.set(GLOBAL, list);
        return list;
      }
      if (method === 'GET') return commands.get(GLOBAL) ?? [];
    }
    if (at(0) === 'applications' && at(2) === 'guilds' && at(4) === 'commands') {
      if (at(1) !== applicationId) throw new HttpFailure(403, 50001, 'Missing Access');
      if (method === 'PUT') {
        checkCommands(body);
        const list = (Array.isArray(body) ? body : []).map((command) => ({
          ...asObject(command),
          id: snowflake(),
          application_id: applicationId,
          guild_id: at(3),
          version: snowflake(),
        }));
        commands.set(at(3), list);
        return list;
      }
      if (method === 'GET') return commands.get(at(3)) ?? [];
    }
    void query;
    throw new HttpFailure(404, 0, '404: Not Found');
  }

  function respond(response: ServerResponse, status: number, payload: unknown): void {
    if (status === 204) {
      response.writeHead(204).end();
      return;
    }
    response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(payload));
  }

  server.on('request', (request, response) => {
    void (async () => {
      const url = new URL(request.url ?? '/', base);
      const method = request.method ?? 'GET';
      const path = url.pathname.replace(/^\/api\/v10/, '');
      const { body, files } = await readBody(request);
      const record: RecordedCall = {
        method,
        path,
        query: url.searchParams,
        body,
        files,
        status: 200,
        at: Date.now(),
        injected: false,
      };
      calls.push(record);

      const fault = faults.find(
        (rule) => rule.remaining > 0 && rule.path.test(path) && (rule.method ?? method) === method,
      );
      if (fault !== undefined) {
        fault.remaining -= 1;
        record.status = fault.status;
        record.injected = true;
        respond(response, fault.status, {
          message: fault.message ?? 'Injected failure',
          code: fault.code ?? 0,
        });
        return;
      }
      const open = path.startsWith('/interactions/') || path.startsWith('/webhooks/');
      if (!open && request.headers.authorization !== `Bot ${token}`) {
        record.status = 401;
        respond(response, 401, { message: '401: Unauthorized', code: 0 });
        return;
      }
      try {
        const result = await route(method, path, url.searchParams, body, files);
        record.status = result === null ? 204 : method === 'POST' && path.endsWith('/threads') ? 201 : 200;
        respond(response, record.status, result);
      } catch (error) {
        if (error instanceof HttpFailure) {
          record.status = error.status;
          respond(response, error.status, { message: error.message, code: error.code });
        } else {
          record.status = 500;
          respond(response, 500, { message: String(error), code: 0 });
        }
      }
    })();
  });

  server.on('upgrade', (request, socket, head) => {
    const path = new URL(request.url ?? '/', base).pathname;
    if (path === '/gateway' || path === '/gateway-resume') gateway.handleUpgrade(request, socket, head);
    else socket.destroy();
  });

  const emulator: DiscordEmulator = {
    apiUrl: `${base}/api`,
    token,
    applicationId,
    bot,
    users,
    guildId,
    channelId,
    calls,
    gateway,
    commands,
    interactions,
    messagesIn: (id) => [...messages.values()].filter((message) => message.channel_id === id),
    message: (id) => messages.get(id),
    channel: (id) => channels.get(id),

    userSends({ channelId: target, author, content, mentionBot = false }) {
      const channel = requireChannel(target);
      const guildId = guildOf(channel);
      const fullContent = mentionBot ? `<@${bot.id}> ${content}` : content;
      const message = messageJson({
        channelId: target,
        guildId,
        author,
        content: fullContent,
        mentions: mentionBot ? [bot] : [],
      });
      storeMessage(message, false);
      // Without the privileged intent, Discord blanks guild messages that do not mention the bot.
      const hidden = !messageContentIntent && guildId !== undefined && !mentionBot;
      const member = guildId === undefined ? {} : { member: memberForId(author.id) };
      const extra = { channel_type: channel.type, ...(hidden ? { content: '' } : {}) };
      gateway.dispatch('MESSAGE_CREATE', { ...message, ...member, ...extra });
      return message;
    },

    archiveThread(channelId) {
      const metadata = threadMetadata(requireChannel(channelId));
      if (metadata === undefined) throw new Error(`${channelId} is not a thread`);
      metadata.archived = true;
    },

    openDm(user) {
      const existing = dmChannels.get(user.id);
      if (existing !== undefined) return existing;
      const id = snowflake();
      channels.set(id, dmChannelJson(id, user));
      dmChannels.set(user.id, id);
      return id;
    },

    clickButton({ messageId, customId, user }) {
      const message = messages.get(messageId);
      if (message === undefined) throw new Error(`no message ${messageId}`);
      const record = createInteraction(3, String(message.channel_id), user, {
        message,
        data: { custom_id: customId, component_type: 2 },
      });
      record.message = message;
      return record;
    },

    submitModal({ interaction, user, values }) {
      const modal = interaction.callbacks.find((callback) => callback.type === 9);
      if (modal === undefined) throw new Error(`interaction ${interaction.id} opened no modal`);
      const data = asObject(modal.data);
      const rows = (data.components as Json[]).map((row) => {
        const input = ((row as { components: Json[] }).components[0] ?? {}) as { custom_id: string };
        return {
          type: 1,
          components: [{ type: 4, custom_id: input.custom_id, value: values[input.custom_id] ?? '' }],
        };
      });
      const message = interaction.message;
      const record = createInteraction(5, interaction.channelId, user, {
        ...(message === undefined ? {} : { message }),
        data: { custom_id: data.custom_id, components: rows },
      });
      if (message !== undefined) record.message = message;
      return record;
    },

    runSlashCommand({ channelId: target, subcommand, options = {}, user }) {
      return createInteraction(2, target, user, {
        data: commandData(target, subcommand, options, undefined),
      });
    },

    autocomplete({ channelId: target, subcommand, option, typed, user }) {
      return createInteraction(4, target, user, {
        data: commandData(target, subcommand, { [option]: typed }, option),
      });
    },

    failNext(rule) {
      faults.push({ ...rule, remaining: rule.times ?? 1 });
    },

    async waitFor(predicate, timeoutMs = 5_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const value = predicate();
        if (value !== undefined && value !== false) return value;
        if (Date.now() > deadline) throw new Error('emulator.waitFor timed out');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },

    async close() {
      gateway.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return emulator;
}
