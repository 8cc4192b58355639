import { once } from 'node:events';
import {
  type ButtonInteraction,
  type ChatInputCommandInteraction,
  Client,
  Events,
  GatewayIntentBits,
  MessageFlags,
  Partials,
  Status,
} from 'discord.js';
import { definedOnly } from '../../defined-only.js';
import { PlatformError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { Card, ChatAdapter, InboundHandlers, PostedMessage, Upload } from '../chat-adapter.js';
import type { RunsDirectory } from '../runs-directory.js';
import { isTurnStatusCard } from '../turn-status-card.js';
import { DISCORD_LIMITS, renderCard, safeFilename, truncate } from './cards.js';
import { registerCommands } from './discord-commands.js';
import { toPlatformError } from './discord-errors.js';
import { createDiscordInbound } from './discord-events.js';
import { createDiscordMessages } from './discord-messages.js';
import { targetChannelId } from './discord-threads.js';
import { createTypingIndicator } from './discord-typing.js';
import { extractLongBlocks, splitContent } from './split-message.js';

interface DiscordAdapterConfig {
  token: string;
  /** REST base in the form `https://discord.com/api` (no version suffix); the gateway URL comes from it. */
  apiUrl?: string | undefined;
  /** When non-empty, the only servers the bot answers in (and registers `/shepherd` in). */
  guildIds: readonly string[];
  /** The name people mention; mentions of the bot reach the core as `@<botName>`. */
  botName: string;
  logger: Logger;
  clock?: () => number;
  /** How long `start()` waits for the gateway to become ready. */
  readyTimeoutMs?: number;
  /** How often the typing indicator is renewed while a turn works (Discord shows it ~10 s). */
  typingIntervalMs?: number;
  /** The runs `/shepherd` offers as it autocompletes a run name; without it, no suggestions. */
  runs?: RunsDirectory | undefined;
}

export interface DiscordAdapter extends ChatAdapter {
  readonly platform: 'discord';
  /** The bot's user id, known after `start()`. */
  botUserId(): string | undefined;
}

/** More messages than this for one post and the text goes into a file instead of flooding the thread. */
const MAX_CHUNKS = 5;
/** Interaction tokens live 15 minutes; stop using them a little earlier. */
const INTERACTION_TOKEN_MS = 14 * 60_000;
/** Bot posts never ping anyone by accident (an LLM may write `@everyone`). */
const NO_PINGS = { parse: [] as string[] };

type DeferredInteraction = ButtonInteraction | ChatInputCommandInteraction;

/**
 * The Discord `ChatAdapter`. Posting methods use discord.js's REST client only, so they work in any process
 * holding the token; `start()` connects the gateway for mentions, thread replies, DMs and button clicks.
 */
export function createDiscordAdapter(config: DiscordAdapterConfig): DiscordAdapter {
  const logger = config.logger.child({ platform: 'discord' });
  const clock = config.clock ?? Date.now;
  const client = new Client({
    intents: [
      GatewayIntentBits.Guilds,
      GatewayIntentBits.GuildMessages,
      GatewayIntentBits.MessageContent,
      GatewayIntentBits.DirectMessages,
    ],
    // DM channels are not cached before their first message; without this, DMs would be dropped.
    partials: [Partials.Channel],
    rest: {
      ...definedOnly({ api: config.apiUrl }),
      // The notify queue retries 5xx and network errors with its own backoff; the REST client must not.
      retries: 0,
      // Short per-route waits are handled inside discord.js; long ones go back to the queue as Retry-After.
      rejectOnRateLimit: (limit) => limit.timeToReset > 10_000,
    },
  });
  client.rest.setToken(config.token);
  const recentInteractions = new Map<string, { interaction: DeferredInteraction; expiresAt: number }>();

  const typing = createTypingIndicator({
    client,
    logger,
    clock,
    intervalMs: config.typingIntervalMs ?? 8000,
  });
  const messages = createDiscordMessages(client, logger);
  const isTurnStatus = isTurnStatusCard;

  function rememberInteraction(threadId: string, userId: string, interaction: DeferredInteraction): void {
    const now = clock();
    for (const [key, entry] of recentInteractions) if (entry.expiresAt <= now) recentInteractions.delete(key);
    recentInteractions.set(`${threadId}\n${userId}`, { interaction, expiresAt: now + INTERACTION_TOKEN_MS });
  }

  async function postMessage(threadId: string, text: string): Promise<PostedMessage> {
    // A long answer is posted (not edited into the status line): the turn is done.
    typing.stop(threadId);
    targetChannelId(threadId);
    const extracted = extractLongBlocks(text);
    const files = [...extracted.files];
    let chunks = splitContent(extracted.text);
    if (chunks.length > MAX_CHUNKS) {
      const note = `-# cut: ${text.length.toLocaleString('en-US')} characters — full text in \`message.md\``;
      const head = splitContent(extracted.text, DISCORD_LIMITS.content - note.length - 1)[0] ?? '';
      chunks = [`${head}\n${note}`];
      files.push({
        name: 'message.md',
        data: new TextEncoder().encode(text),
        contentType: 'text/markdown; charset=utf-8',
      });
    }
    let first: string | undefined;
    for (const [index, chunk] of chunks.entries()) {
      const last = index === chunks.length - 1;
      const id = await messages.create(
        threadId,
        { content: chunk, allowed_mentions: NO_PINGS },
        last ? files : [],
        'post message',
      );
      first ??= id;
    }
    return { messageId: first ?? '' };
  }

  function renderOrThrow(card: Card) {
    try {
      const rendered = renderCard(card);
      if (rendered.droppedActions > 0) {
        logger.warn(
          { dropped: rendered.droppedActions },
          'card has more than 25 buttons; the rest are not shown',
        );
      }
      return rendered;
    } catch (error) {
      throw new PlatformError(
        'discord',
        'card_invalid',
        `card cannot be shown on Discord: ${String(error)}`,
        {
          retryable: false,
          cause: error,
        },
      );
    }
  }

  const adapter: DiscordAdapter = {
    platform: 'discord',

    botUserId: () => client.user?.id,

    async start(handlers: InboundHandlers): Promise<void> {
      const inbound = createDiscordInbound({
        client,
        handlers,
        runs: config.runs,
        guildIds: config.guildIds,
        botName: config.botName,
        logger,
        clock,
        rememberInteraction,
      });
      client.on(Events.MessageCreate, (message) => void inbound.handleMessage(message));
      client.on(Events.InteractionCreate, (interaction) => void inbound.handleInteraction(interaction));
      client.on(Events.Error, (error) => logger.error({ err: error }, 'discord client error'));
      client.on(Events.ShardError, (error) => logger.warn({ err: error }, 'gateway connection error'));
      client.on(Events.ShardReconnecting, () => logger.info('gateway connection lost; reconnecting'));
      client.on(Events.ShardResume, (_shard, replayed) =>
        logger.info({ replayed }, 'gateway session resumed'),
      );

      const ready = once(client, Events.ClientReady, {
        signal: AbortSignal.timeout(config.readyTimeoutMs ?? 60_000),
      });
      // If login itself fails, nobody awaits `ready`; its later timeout must not become an unhandled rejection.
      ready.catch(() => undefined);
      try {
        await client.login(config.token);
        await ready;
      } catch (error) {
        await client.destroy().catch(() => undefined);
        throw toPlatformError(error, 'login');
      }
      const readyClient = client as Client<true>;
      logger.info(
        { user: readyClient.user.tag, guilds: readyClient.guilds.cache.size },
        'connected to Discord',
      );
      await registerCommands(readyClient, config.guildIds, config.botName, logger);
    },

    isConnected: () => client.isReady() && client.ws.status === Status.Ready,

    async stop(): Promise<void> {
      recentInteractions.clear();
      typing.stopAll();
      await client.destroy();
    },

    postMessage,

    async editMessage(threadId: string, messageId: string, text: string): Promise<void> {
      typing.stop(threadId);
      // An edit cannot grow into several messages, so it is cut to one.
      const content = text.trim() === '' ? '\u200b' : truncate(text, DISCORD_LIMITS.content);
      // Plain text again: a status card's embed and Cancel button go.
      await messages.patch(
        threadId,
        messageId,
        { content, embeds: [], components: [], allowed_mentions: NO_PINGS },
        [],
        'edit message',
      );
    },

    async postCard(threadId: string, card: Card): Promise<PostedMessage> {
      const rendered = renderOrThrow(card);
      if (isTurnStatus(card)) typing.start(threadId);
      const body = {
        embeds: rendered.embeds,
        components: rendered.components,
        allowed_mentions: NO_PINGS,
        ...(rendered.attachments.length > 0 ? { attachments: rendered.attachments } : {}),
      };
      return { messageId: await messages.create(threadId, body, rendered.files, 'post card') };
    },

    async updateCard(threadId: string, messageId: string, card: Card): Promise<void> {
      const rendered = renderOrThrow(card);
      if (isTurnStatus(card)) typing.start(threadId);
      else typing.stop(threadId);
      // API v10 edits keep exactly the attachments listed, so the chart is re-sent with the new embed.
      const body = {
        embeds: rendered.embeds,
        components: rendered.components,
        allowed_mentions: NO_PINGS,
        attachments: rendered.attachments,
      };
      await messages.patch(threadId, messageId, body, rendered.files, 'update card');
    },

    async upload(threadId: string, upload: Upload): Promise<PostedMessage> {
      const name = safeFilename(upload.filename, 'file');
      const isImage = upload.contentType.startsWith('image/');
      const body: Record<string, unknown> = {
        allowed_mentions: NO_PINGS,
        attachments: [{ id: 0, filename: name, ...definedOnly({ description: upload.title }) }],
      };
      if (upload.comment !== undefined && upload.comment !== '') {
        body.content = truncate(upload.comment, DISCORD_LIMITS.content);
      }
      if (isImage && upload.title !== undefined) {
        body.embeds = [
          {
            title: truncate(upload.title, DISCORD_LIMITS.embedTitle),
            image: { url: `attachment://${name}` },
          },
        ];
      }
      const files = [{ name, data: upload.data, contentType: upload.contentType }];
      return { messageId: await messages.create(threadId, body, files, 'upload') };
    },

    /**
     * Discord has ephemeral messages only as interaction replies: while the user's last click or
     * `/shepherd` in this thread is fresh, answer privately through it; otherwise post normally, mentioning them.
     */
    async postEphemeral(threadId: string, userId: string, text: string): Promise<void> {
      const key = `${threadId}\n${userId}`;
      const recent = recentInteractions.get(key);
      if (recent !== undefined && recent.expiresAt > clock()) {
        try {
          await recent.interaction.followUp({
            content: truncate(text, DISCORD_LIMITS.content),
            allowedMentions: { parse: [] },
            flags: MessageFlags.Ephemeral,
          });
          return;
        } catch (error) {
          recentInteractions.delete(key);
          logger.debug({ err: error }, 'interaction token no longer usable; posting normally');
        }
      }
      const content = truncate(`<@${userId}> ${text}`, DISCORD_LIMITS.content);
      await messages.create(
        threadId,
        { content, allowed_mentions: { users: [userId] } },
        [],
        'post ephemeral',
      );
    },
  };
  return adapter;
}
