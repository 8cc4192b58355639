import {
  type AutocompleteInteraction,
  type ButtonInteraction,
  type Channel,
  type ChatInputCommandInteraction,
  type Client,
  type GuildMember,
  type Interaction,
  type Message,
  MessageFlags,
  type ModalSubmitInteraction,
  Routes,
  type User,
} from 'discord.js';
import { z } from 'zod';
import { errorMessage } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { redactSecrets } from '../../text/redact.js';
import type { ChatUser, InboundHandlers } from '../chat-adapter.js';
import type { RunsDirectory } from '../runs-directory.js';
import { COMMAND_NAME, type CommandValues, commandText, OPTION } from './discord-commands.js';
import { toPlatformError } from './discord-errors.js';
import { modalOf, modalValues } from './discord-forms.js';
import { mentionsUser, readableMentions, threadNameFrom } from './discord-mentions.js';
import { dmSessionId, threadSessionId } from './discord-threads.js';

/*
 * Turns gateway events into `onMessage` / `onAction` calls. discord.js only delivers; every decision about
 * sessions lives in the core, except which Discord thread a message belongs to.
 */

interface InboundOptions {
  client: Client;
  handlers: InboundHandlers;
  /** The runs autocomplete suggests; without it, no suggestions. */
  runs: RunsDirectory | undefined;
  guildIds: readonly string[];
  botName: string;
  logger: Logger;
  clock: () => number;
  /** Remembers a deferred interaction so `postEphemeral` can answer privately while its token lives. */
  rememberInteraction(
    threadId: string,
    userId: string,
    interaction: ButtonInteraction | ChatInputCommandInteraction,
  ): void;
}

const threadResponse = z.object({ id: z.string() });

interface DiscordInbound {
  handleMessage(message: Message): Promise<void>;
  handleInteraction(interaction: Interaction): Promise<void>;
}

function chatUser(user: User, member: GuildMember | null): ChatUser {
  return { id: user.id, name: member?.displayName ?? user.globalName ?? user.username };
}

export function createDiscordInbound(options: InboundOptions): DiscordInbound {
  const { client, handlers, logger } = options;
  let warnedAboutContent = false;

  function allowedGuild(guildId: string | null): boolean {
    return guildId === null || options.guildIds.length === 0 || options.guildIds.includes(guildId);
  }

  /** The session id of the channel an interaction or message came from (threads need their parent). */
  async function sessionIdFor(channel: Channel | null, channelId: string): Promise<string> {
    const resolved = channel ?? (await client.channels.fetch(channelId));
    if (resolved === null) return threadSessionId(channelId, channelId);
    if (resolved.isDMBased()) return dmSessionId(resolved.id);
    if (resolved.isThread()) return threadSessionId(resolved.parentId ?? resolved.id, resolved.id);
    return threadSessionId(resolved.id, resolved.id);
  }

  /** Open a public thread on `message`; discord.js when the channel is cached, the raw route otherwise. */
  async function startThread(message: Message, name: string): Promise<string> {
    if (message.channel !== null && 'threads' in message.channel && !message.channel.isThread()) {
      const thread = await message.startThread({ name });
      return thread.id;
    }
    const data = await client.rest.post(Routes.threads(message.channelId, message.id), {
      body: { name, auto_archive_duration: 1440 },
    });
    return threadResponse.parse(data).id;
  }

  function warnIfContentHidden(message: Message, mentioned: boolean): void {
    if (warnedAboutContent || mentioned || !message.inGuild() || message.content !== '') return;
    if (message.attachments.size > 0 || message.embeds.length > 0 || message.stickers.size > 0) return;
    warnedAboutContent = true;
    logger.warn(
      { channelId: message.channelId },
      'Discord delivered a message with empty content: the Message Content intent is probably not enabled ' +
        '(Developer Portal → Bot → Privileged Gateway Intents). Without it, thread replies that do not ' +
        'mention the bot cannot be read.',
    );
  }

  function readableText(message: Message, botId: string): string {
    const names = new Map<string, string>();
    for (const user of message.mentions.users.values()) {
      names.set(user.id, message.mentions.members?.get(user.id)?.displayName ?? user.displayName);
    }
    names.set(botId, options.botName);
    return readableMentions(message.content, names).trim();
  }

  async function handleMessage(message: Message): Promise<void> {
    const botId = client.user?.id;
    if (botId === undefined || message.author.bot || message.author.id === botId || message.system) return;
    if (!allowedGuild(message.guildId)) return;
    const mentioned = mentionsUser(message.content, botId) || message.mentions.users.has(botId);
    warnIfContentHidden(message, mentioned);
    const text = readableText(message, botId);
    if (text === '') return;
    const user = chatUser(message.author, message.member);
    const base = { messageId: message.id, user, text, deliveryId: message.id, receivedAt: options.clock() };

    let threadId: string;
    let startsThread = false;
    if (!message.inGuild()) {
      threadId = dmSessionId(message.channelId);
    } else if (message.channel.isThread()) {
      threadId = threadSessionId(message.channel.parentId ?? message.channelId, message.channelId);
    } else {
      // Outside threads the bot only listens when called; the thread it opens becomes the session.
      if (!mentioned) return;
      try {
        const threadChannelId = await startThread(
          message,
          threadNameFrom(message.content, `${options.botName} session`),
        );
        threadId = threadSessionId(message.channelId, threadChannelId);
        startsThread = true;
      } catch (error) {
        const failure = toPlatformError(error, 'thread creation');
        logger.error(
          { channelId: message.channelId, code: failure.code, err: failure },
          'could not start a thread',
        );
        return;
      }
    }
    const addressed = !message.inGuild() || mentioned;
    try {
      await handlers.onMessage({ ...base, threadId, addressed, startsThread });
    } catch (error) {
      logger.error({ threadId, messageId: message.id, err: error }, 'onMessage failed');
    }
  }

  /**
   * A button click, or the submit of the modal a button opened. A button whose action has a form for
   * this person answers with that modal (before any other answer: Discord allows a modal only first);
   * everything else is acknowledged first (Discord shows "interaction failed" after 3 s) and handled.
   */
  async function handleComponent(interaction: ButtonInteraction | ModalSubmitInteraction): Promise<void> {
    const member = interaction.inCachedGuild() ? interaction.member : null;
    const user = chatUser(interaction.user, member);
    const messageId = interaction.message?.id;
    let threadId: string | undefined;
    try {
      threadId = await sessionIdFor(interaction.channel, interaction.channelId ?? '');
      if (interaction.isButton() && messageId !== undefined) {
        const click = { threadId, messageId, actionId: interaction.customId, user };
        const form = await handlers.formFor?.(click);
        if (form !== undefined) {
          await interaction.showModal(modalOf(form, interaction.customId));
          return;
        }
      }
    } catch (error) {
      logger.warn({ interactionId: interaction.id, err: error }, 'could not open a form; handling the click');
    }
    try {
      await interaction.deferUpdate();
    } catch (error) {
      logger.warn({ interactionId: interaction.id, err: error }, 'could not acknowledge a button click');
      return;
    }
    let reply: string | undefined;
    try {
      threadId ??= await sessionIdFor(interaction.channel, interaction.channelId ?? '');
      if (interaction.isButton()) options.rememberInteraction(threadId, user.id, interaction);
      const outcome = await handlers.onAction({
        threadId,
        messageId: messageId ?? '',
        actionId: interaction.customId,
        user,
        ...(interaction.isModalSubmit() ? { values: modalValues(interaction) } : {}),
      });
      if (outcome.status !== 'accepted') reply = outcome.message;
    } catch (error) {
      logger.error({ threadId, actionId: interaction.customId, err: error }, 'onAction failed');
      reply = 'That click could not be handled right now; please try again.';
    }
    if (reply === undefined) return;
    try {
      await interaction.followUp({
        content: reply.slice(0, 2000),
        allowedMentions: { parse: [] },
        flags: MessageFlags.Ephemeral,
      });
    } catch (error) {
      logger.warn(
        { interactionId: interaction.id, err: toPlatformError(error, 'ephemeral reply') },
        'reply failed',
      );
    }
  }

  /** The subcommand as chat text (`/shepherd pause run:x` → `pause x`); undefined for an unknown one. */
  function requestOf(interaction: ChatInputCommandInteraction): string | undefined {
    const values: CommandValues = {};
    for (const name of Object.values(OPTION)) {
      const value = interaction.options.getString(name, false);
      if (value !== null) values[name] = value;
    }
    return commandText(interaction.options.getSubcommand(false) ?? '', values);
  }

  /**
   * Run names matching what the person typed so far (at most 25, Discord's limit), newest first. Answered
   * at once, without deferring: autocomplete cannot be deferred, and a late answer is simply not shown.
   */
  async function handleAutocomplete(interaction: AutocompleteInteraction): Promise<void> {
    const typed = String(interaction.options.getFocused()).trim().toLowerCase();
    let choices: Array<{ name: string; value: string }> = [];
    try {
      const runs = (await options.runs?.list()) ?? [];
      choices = runs
        .filter((run) => typed === '' || run.name.toLowerCase().includes(typed) || run.id.startsWith(typed))
        // Names that start with the typed text come first.
        .sort(
          (a, b) =>
            Number(b.name.toLowerCase().startsWith(typed)) - Number(a.name.toLowerCase().startsWith(typed)),
        )
        .slice(0, 25)
        .map((run) => ({
          name: `${run.name} (${run.status.replace('_', ' ')})`.slice(0, 100),
          value: run.name,
        }));
    } catch (error) {
      logger.warn({ interactionId: interaction.id, err: error }, 'could not list runs for autocomplete');
    }
    await interaction.respond(choices).catch((error: unknown) => {
      logger.debug({ interactionId: interaction.id, err: error }, 'autocomplete answer failed');
    });
  }

  /**
   * `/shepherd <subcommand>` behaves like a mention with the command's text. The deferred reply is edited to echo the request, so the
   * channel shows who asked what; in a server channel a thread is opened on that reply and becomes the
   * session, inside a thread or DM the current conversation continues.
   */
  async function handleCommand(interaction: ChatInputCommandInteraction): Promise<void> {
    try {
      await interaction.deferReply();
    } catch (error) {
      logger.warn({ interactionId: interaction.id, err: error }, 'could not acknowledge /shepherd');
      return;
    }
    const member = interaction.inCachedGuild() ? interaction.member : null;
    const user = chatUser(interaction.user, member);
    const request = requestOf(interaction);
    if (request === undefined) {
      await interaction
        .editReply({ content: 'This subcommand is not known here; try `/shepherd help`.' })
        .catch(() => undefined);
      return;
    }
    try {
      const channel = interaction.channel ?? (await client.channels.fetch(interaction.channelId));
      const echo = await interaction.editReply({
        content: `**${user.name}**: ${redactSecrets(request)}`.slice(0, 2000),
        allowedMentions: { parse: [] },
      });
      let threadId: string;
      let startsThread = false;
      if (channel === null || channel.isDMBased() || channel.isThread()) {
        threadId = await sessionIdFor(channel, interaction.channelId);
      } else {
        const threadChannelId = await startThread(
          echo,
          threadNameFrom(request, `${options.botName} session`),
        );
        threadId = threadSessionId(interaction.channelId, threadChannelId);
        startsThread = true;
      }
      options.rememberInteraction(threadId, user.id, interaction);
      await handlers.onMessage({
        threadId,
        messageId: echo.id,
        user,
        text: `@${options.botName} ${request}`,
        addressed: true,
        startsThread,
        deliveryId: interaction.id,
        receivedAt: options.clock(),
      });
    } catch (error) {
      logger.error({ interactionId: interaction.id, err: error }, '/shepherd failed');
      await interaction
        .followUp({
          content: `Sorry, that did not work: ${errorMessage(error)}`.slice(0, 2000),
          allowedMentions: { parse: [] },
          flags: MessageFlags.Ephemeral,
        })
        .catch(() => undefined);
    }
  }

  async function handleInteraction(interaction: Interaction): Promise<void> {
    if (interaction.isAutocomplete()) {
      if (interaction.commandName !== COMMAND_NAME) return;
      if (allowedGuild(interaction.guildId)) await handleAutocomplete(interaction);
      else await interaction.respond([]).catch(() => undefined);
      return;
    }
    const component = interaction.isButton() || (interaction.isModalSubmit() && interaction.isFromMessage());
    if (!component && !interaction.isChatInputCommand()) return;
    if (interaction.isChatInputCommand() && interaction.commandName !== COMMAND_NAME) return;
    if (!allowedGuild(interaction.guildId)) {
      await interaction
        .reply({
          content: `${options.botName} is not enabled in this server.`,
          allowedMentions: { parse: [] },
          flags: MessageFlags.Ephemeral,
        })
        .catch(() => undefined);
      return;
    }
    if (interaction.isButton() || interaction.isModalSubmit()) await handleComponent(interaction);
    else if (interaction.isChatInputCommand()) await handleCommand(interaction);
  }

  return { handleMessage, handleInteraction };
}
