/**
 * Bolt listeners: every event, click and command is acknowledged first (Bolt acks events itself),
 * then routed through `inbound.ts` to the core's `InboundHandlers`.
 */

import type { App } from '@slack/bolt';
import { PlatformError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { redactSecrets } from '../../text/redact.js';
import {
  type CardForm,
  type ChatUser,
  encodeThreadId,
  type InboundAction,
  type InboundHandlers,
} from '../chat-adapter.js';
import { escapeMrkdwn } from './mrkdwn.js';
import type { RecentIds } from './recent-ids.js';
import {
  type BotIdentity,
  blockActionsSchema,
  classifyEventCallback,
  slashCommandSchema,
} from './slack-routing.js';
import { dmThreadId, isDirectMessageChannel } from './slack-threads.js';

interface ListenerDependencies {
  logger: Logger;
  recentDeliveries: RecentIds;
  chatUser(userId: string): Promise<ChatUser>;
  /** Slack-formatted text → the agent's plain text (mentions resolved to names). */
  plainText(rawText: string): Promise<string>;
  postEphemeral(threadId: string, userId: string, text: string): Promise<void>;
  /** Opens a card button's form as a modal (`views.open` with the click's trigger id). */
  openForm(triggerId: string, form: CardForm, action: InboundAction): Promise<void>;
  /** Post a top-level mrkdwn message; resolves with its ts. Throws `PlatformError`. */
  postRoot(channel: string, mrkdwn: string): Promise<string>;
  slashCommand: string;
  botName: string;
}

/**
 * The session a clicked card belongs to: its thread, or for a top-level card in a DM (no
 * `thread_ts`) the top-level DM session.
 */
export function actionThreadId(channel: string, messageTs: string, threadTs: string | undefined): string {
  if (threadTs === undefined && isDirectMessageChannel(channel)) return dmThreadId(channel);
  return encodeThreadId({ platform: 'slack', channel, thread: threadTs ?? messageTs });
}

/** Register Bolt listeners that route Slack deliveries to the core's handlers. */
export function registerListeners(
  target: App,
  handlers: InboundHandlers,
  identity: BotIdentity,
  dependencies: ListenerDependencies,
): void {
  const { logger, recentDeliveries, chatUser, plainText, postEphemeral, postRoot, slashCommand, botName } =
    dependencies;
  const onEvent = async ({
    body,
    context,
  }: {
    body: unknown;
    context: { retryNum?: number | undefined };
  }) => {
    const decision = classifyEventCallback(body, identity);
    if (decision.kind === 'ignore') {
      logger.debug({ reason: decision.reason }, 'slack event ignored');
      return;
    }
    // Checked before any await, so concurrent retries of one event cannot both pass.
    if (!recentDeliveries.add(decision.deliveryId)) {
      logger.info(
        { deliveryId: decision.deliveryId, retryNum: context.retryNum },
        'slack retry of a handled event skipped',
      );
      return;
    }
    try {
      const [user, text] = await Promise.all([chatUser(decision.userId), plainText(decision.rawText)]);
      await handlers.onMessage({
        threadId: decision.threadId,
        messageId: decision.messageId,
        user,
        text,
        addressed: decision.addressed,
        startsThread: decision.startsThread,
        deliveryId: decision.deliveryId,
        receivedAt: Date.now(),
      });
    } catch (error) {
      logger.error({ err: error, threadId: decision.threadId }, 'slack message handling failed');
    }
  };
  target.event('app_mention', onEvent);
  target.event('message', onEvent);

  // Every click except the App Home's own buttons (app-home.ts).
  target.action(/^(?!home:)/, async ({ ack, body }) => {
    await ack();
    const parsed = blockActionsSchema.safeParse(body);
    if (!parsed.success) {
      logger.debug('slack interaction ignored: not a block action');
      return;
    }
    const payload = parsed.data;
    const action = payload.actions[0];
    const channel = payload.channel?.id ?? payload.container?.channel_id;
    const messageTs = payload.container?.message_ts ?? payload.message?.ts;
    if (action === undefined || channel === undefined || messageTs === undefined) return;
    const threadId = actionThreadId(channel, messageTs, payload.message?.thread_ts);
    try {
      const click = { threadId, messageId: messageTs, actionId: action.action_id };
      const inbound = { ...click, user: await chatUser(payload.user.id) };
      // A button with a form (a reject reason) opens it; its submission is the action (slack-forms.ts).
      const form = payload.trigger_id === undefined ? undefined : await handlers.formFor?.(inbound);
      if (form !== undefined && payload.trigger_id !== undefined) {
        await dependencies.openForm(payload.trigger_id, form, inbound);
        return;
      }
      const outcome = await handlers.onAction(inbound);
      if (outcome.message !== undefined && outcome.message !== '') {
        // Refusals (and any accepted note) go only to the person who clicked.
        await postEphemeral(threadId, payload.user.id, outcome.message);
      }
    } catch (error) {
      logger.error({ err: error, threadId, actionId: action.action_id }, 'slack action handling failed');
    }
  });

  target.command(slashCommand, async ({ ack, body, respond }) => {
    await ack();
    const parsed = slashCommandSchema.safeParse(body);
    if (!parsed.success) return;
    const command = parsed.data;
    // A slash command has no thread; a visible root message gives the answer one to live in (in a
    // DM it is the visible echo), and failing to post it tells us the bot is not in this conversation.
    const invocation = `${command.command}${command.text === '' ? '' : ` ${command.text}`}`;
    let rootTs: string;
    try {
      rootTs = await postRoot(
        command.channel_id,
        `<@${command.user_id}> ran \`${escapeMrkdwn(redactSecrets(invocation))}\``,
      );
    } catch (error) {
      const code = error instanceof PlatformError ? error.code : 'error';
      await respond({
        response_type: 'ephemeral',
        text: `I can't post in this conversation (${code}). Invite ${botName} to the channel, or DM me.`,
      }).catch((respondError: unknown) => logger.warn({ err: respondError }, 'slack respond failed'));
      return;
    }
    // In a DM the command continues the ongoing top-level DM session instead of opening a thread.
    const inDirectMessage = isDirectMessageChannel(command.channel_id);
    try {
      await handlers.onMessage({
        threadId: inDirectMessage
          ? dmThreadId(command.channel_id)
          : encodeThreadId({ platform: 'slack', channel: command.channel_id, thread: rootTs }),
        messageId: rootTs,
        user: await chatUser(command.user_id),
        // A bare `/shepherd` asks what it can do.
        text: command.text.trim() === '' ? 'help' : command.text,
        addressed: true,
        startsThread: !inDirectMessage,
        deliveryId: `slash:${command.trigger_id}`,
        receivedAt: Date.now(),
      });
    } catch (error) {
      logger.error({ err: error, channel: command.channel_id }, 'slack slash command handling failed');
    }
  });

  target.error(async (error) => {
    logger.error({ err: error }, 'slack listener error');
  });
}
