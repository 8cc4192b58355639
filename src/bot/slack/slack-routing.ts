/**
 * Slack payloads → routing decisions. Pure: validates the outside input with zod and decides which
 * thread a message belongs to, whether it addresses the bot, and whether it is ignored.
 */
import { z } from 'zod';
import { encodeThreadId } from '../chat-adapter.js';
import { unescapeMrkdwn } from './mrkdwn.js';
import { dmThreadId, isDirectMessageChannel } from './slack-threads.js';

const messageEventSchema = z.object({
  type: z.enum(['app_mention', 'message']),
  channel: z.string().min(1),
  ts: z.string().min(1),
  thread_ts: z.string().min(1).optional(),
  user: z.string().optional(),
  bot_id: z.string().optional(),
  subtype: z.string().optional(),
  text: z.string().optional(),
  channel_type: z.string().optional(),
});

const eventCallbackSchema = z.object({
  event_id: z.string().min(1),
  event: messageEventSchema,
});

export const blockActionsSchema = z.object({
  type: z.literal('block_actions'),
  trigger_id: z.string().min(1).optional(),
  user: z.object({ id: z.string().min(1), name: z.string().optional(), username: z.string().optional() }),
  container: z.object({ message_ts: z.string().optional(), channel_id: z.string().optional() }).optional(),
  channel: z.object({ id: z.string().min(1) }).optional(),
  message: z.object({ ts: z.string().min(1), thread_ts: z.string().optional() }).optional(),
  actions: z.array(z.object({ action_id: z.string().min(1), value: z.string().optional() })).min(1),
});

export const slashCommandSchema = z.object({
  command: z.string().min(1),
  text: z.string().default(''),
  user_id: z.string().min(1),
  user_name: z.string().optional(),
  channel_id: z.string().min(1),
  channel_name: z.string().optional(),
  trigger_id: z.string().min(1),
});

export interface BotIdentity {
  /** The bot's user id (`U…`), from `auth.test`. */
  botUserId: string;
  /** The bot's bot id (`B…`), from `auth.test`. */
  botId: string | undefined;
  /** Whether messages from other bots are handled. */
  allowBots: boolean;
}

type MessageDecision =
  | { kind: 'ignore'; reason: string }
  | {
      kind: 'deliver';
      threadId: string;
      messageId: string;
      /** Slack user id (or bot id for bot messages). */
      userId: string;
      /** Slack-formatted text with the bot mention removed; render it with `toPlainText`. */
      rawText: string;
      /** Other users mentioned in the text, to resolve to names. */
      mentionedUserIds: string[];
      addressed: boolean;
      startsThread: boolean;
      deliveryId: string;
    };

/** Message subtypes that are a person writing; edits, joins and deletions are not. */
const ALLOWED_SUBTYPES: ReadonlySet<string | undefined> = new Set([
  undefined,
  'file_share',
  'thread_broadcast',
  'bot_message',
]);

const USER_MENTION = /<@([UW][A-Z0-9]+)(?:\|[^>]*)?>/g;
const CHANNEL_MENTION = /<#([CG][A-Z0-9]+)(?:\|([^>]*))?>/g;
const SPECIAL_MENTION = /<!(here|channel|everyone)(?:\|[^>]*)?>/g;
const LINK = /<((?:https?|mailto):[^<>|]+)(?:\|([^<>]*))?>/g;

function stripBotMention(text: string, botUserId: string): string {
  return text
    .replaceAll(new RegExp(`<@${botUserId}(?:\\|[^>]*)?>`, 'g'), ' ')
    .replace(/[ \t]+/g, ' ')
    .trim();
}

/** The distinct user ids mentioned in Slack-formatted text. */
export function mentionedUsers(text: string): string[] {
  return [...new Set([...text.matchAll(USER_MENTION)].map((match) => match[1] ?? ''))].filter(
    (id) => id !== '',
  );
}

/**
 * Slack-formatted text → what the agent reads: `<@U1>` → `@name`, `<#C1|general>` → `#general`,
 * `<https://x|label>` → `label (https://x)`, entities decoded.
 */
export function toPlainText(text: string, names: ReadonlyMap<string, string>): string {
  const plain = text
    .replace(USER_MENTION, (_match, id: string) => `@${names.get(id) ?? id}`)
    .replace(CHANNEL_MENTION, (_match, id: string, name: string | undefined) => `#${name ?? id}`)
    .replace(SPECIAL_MENTION, (_match, name: string) => `@${name}`)
    .replace(LINK, (_match, url: string, label: string | undefined) =>
      label === undefined || label === url ? url : `${label} (${url})`,
    );
  return unescapeMrkdwn(plain);
}

/** Decide what to do with an `event_callback` body carrying an `app_mention` or `message` event. */
export function classifyEventCallback(body: unknown, identity: BotIdentity): MessageDecision {
  const parsed = eventCallbackSchema.safeParse(body);
  if (!parsed.success) return { kind: 'ignore', reason: 'unrecognised event payload' };
  const { event, event_id: deliveryId } = parsed.data;
  if (!ALLOWED_SUBTYPES.has(event.subtype)) return { kind: 'ignore', reason: `subtype ${event.subtype}` };
  if (event.user === identity.botUserId || (event.bot_id !== undefined && event.bot_id === identity.botId)) {
    return { kind: 'ignore', reason: 'own message' };
  }
  const fromBot = event.bot_id !== undefined || event.subtype === 'bot_message';
  if (fromBot && !identity.allowBots) return { kind: 'ignore', reason: 'other bot' };
  const userId = event.user ?? event.bot_id;
  if (userId === undefined) return { kind: 'ignore', reason: 'no author' };

  const rawText = event.text ?? '';
  const mentionsBot =
    rawText.includes(`<@${identity.botUserId}>`) || rawText.includes(`<@${identity.botUserId}|`);
  const base = {
    kind: 'deliver' as const,
    messageId: event.ts,
    userId,
    rawText: stripBotMention(rawText, identity.botUserId),
    mentionedUserIds: mentionedUsers(rawText).filter((id) => id !== identity.botUserId),
    deliveryId,
  };
  // Direct messages: Slack sends no app_mention there, so every DM addresses the bot. The top-level
  // DM is one ongoing session answered top-level; a thread inside the DM is its own session.
  if (event.channel_type === 'im' || isDirectMessageChannel(event.channel)) {
    const topLevel = event.thread_ts === undefined || event.thread_ts === event.ts;
    const threadId = topLevel
      ? dmThreadId(event.channel)
      : encodeThreadId({ platform: 'slack', channel: event.channel, thread: event.thread_ts ?? event.ts });
    return { ...base, threadId, addressed: true, startsThread: false };
  }
  // A top-level message opens its own thread (thread ts = its ts); a reply belongs to its thread.
  const threadTs = event.thread_ts ?? event.ts;
  const threadId = encodeThreadId({ platform: 'slack', channel: event.channel, thread: threadTs });
  const startsThread = event.thread_ts === undefined || event.thread_ts === event.ts;

  if (event.type === 'app_mention') return { ...base, threadId, addressed: true, startsThread };
  // The same mention also arrives as app_mention; handle it there only.
  if (mentionsBot) return { kind: 'ignore', reason: 'mention handled by app_mention' };
  if (event.thread_ts === undefined) return { kind: 'ignore', reason: 'top-level message without mention' };
  return { ...base, threadId, addressed: false, startsThread: false };
}
