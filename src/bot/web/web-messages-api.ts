import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { definedOnly } from '../../defined-only.js';
import { PlatformError } from '../../errors.js';
import { SCRIPT_NEW_ID } from '../../redis/script-step.js';
import {
  decodeThreadId,
  encodeThreadId,
  type InboundHandlers,
  type InboundMessage,
} from '../chat-adapter.js';
import { nameRefusal } from './reserved-names.js';
import { HttpProblem, readJson, sendJson } from './web-http-io.js';
import type { WebMessage, WebStore } from './web-store.js';

/*
 * The playground's message routes: posting a message (the ack path), clicking a card button and reading
 * a thread. Their shapes are a product interface; see docs/web.md.
 */

/** Message text above this many characters is refused with 413. */
const WEB_TEXT_MAX_CHARS = 40_000;

export const channelName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$/, 'letters, digits, "_", "." and "-", at most 80');
const userName = z
  .string()
  .trim()
  .min(1)
  .max(80)
  .regex(/^[^\p{Cc}:]+$/u, 'no control characters or ":"');

/**
 * Direct-message channels (`dm.<name>`, the playground's DM mode): like a Slack or Discord DM, every
 * message is addressed to the bot without a mention, and the conversation is one session: a message
 * without a thread continues the channel's thread instead of starting another.
 */
const WEB_DM_PREFIX = 'dm.';
const isDirectMessageChannel = (channel: string) => channel.startsWith(WEB_DM_PREFIX);

/** `nameRefusal`, remembered per name (it normalises Unicode, and the same people post again and again). */
function nameCheck(botName: string): (name: string) => string | undefined {
  const known = new Map<string, string | null>();
  return (name) => {
    let refusal = known.get(name);
    if (refusal === undefined) {
      refusal = nameRefusal(name, botName) ?? null;
      if (known.size >= 1000) known.clear();
      known.set(name, refusal);
    }
    return refusal ?? undefined;
  };
}

function requestSchemas(botName: string) {
  const refusal = nameCheck(botName);
  /**
   * A person posting as the bot (or a lookalike of it), or under a name with invisible or bidi characters,
   * would be indistinguishable from someone else in the thread.
   */
  const personName = userName.superRefine((name, context) => {
    const reason = refusal(name);
    if (reason !== undefined) context.addIssue({ code: 'custom', message: reason });
  });
  return {
    postMessage: z.object({
      channel: channelName,
      user: personName,
      text: z.string().min(1),
      threadId: z.string().min(1).optional(),
    }),
    postAction: z.object({
      threadId: z.string().min(1),
      messageId: z.string().min(1),
      actionId: z.string().min(1),
      user: personName,
      /** The values of the form the button opened (a reject reason, an edit). */
      values: z.record(z.string().max(100), z.string().max(100_000)).optional(),
      /** Ask first: when the button opens a form for this person, answer `{form}` and do nothing yet. */
      openForm: z.boolean().optional(),
    }),
  };
}

/** The thread-message shape served by `GET /api/threads/:threadId/messages`; absent fields are omitted. */
function toMessageView(message: WebMessage): Record<string, unknown> {
  const view: Record<string, unknown> = {
    id: message.id,
    user: message.user,
    text: message.text,
    ts: message.ts,
  };
  if (message.editedAt !== undefined) view.editedAt = message.editedAt;
  if (message.card !== undefined) {
    const { actions, ...rest } = message.card;
    view.card = message.card.resolved === undefined && actions !== undefined ? { ...rest, actions } : rest;
  }
  if (message.images !== undefined) view.images = message.images;
  if (message.files !== undefined) view.files = message.files;
  if (message.visibleTo !== undefined) view.visibleTo = message.visibleTo;
  return view;
}

/** A mention of the bot: `@name`, case-insensitive, not inside a longer word or e-mail address. */
function createMentionPattern(botName: string): RegExp {
  const escaped = botName.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(?<![\\w@.])@${escaped}(?![\\w-])`, 'i');
}

/** Accept a bare root id (`m17`) or the full `web:<channel>:<root>` form. */
function parseThreadParameter(value: string): { root: string; channel?: string } {
  if (value.startsWith('web:')) {
    try {
      const reference = decodeThreadId(value);
      return { root: reference.thread, channel: reference.channel };
    } catch {
      return { root: value };
    }
  }
  return { root: value };
}

interface MessagesApiOptions {
  store: WebStore;
  handlers: InboundHandlers;
  botName: string;
  now: () => number;
}

type PostedMessage = { channel: string; user: string; text: string; threadId?: string | undefined };

/** The thread a post goes to: its `threadId`, a DM channel's latest thread, or none (a new thread). */
async function threadRoot(store: WebStore, body: PostedMessage): Promise<string | undefined> {
  if (body.threadId !== undefined) {
    const target = parseThreadParameter(body.threadId);
    if (target.channel !== undefined && target.channel !== body.channel) {
      throw new HttpProblem(404, `threadId: no thread ${body.threadId} in channel ${body.channel}`);
    }
    return target.root;
  }
  return isDirectMessageChannel(body.channel) ? await store.latestThread(body.channel) : undefined;
}

export function createMessagesApi(options: MessagesApiOptions) {
  const { store, handlers, now } = options;
  const mention = createMentionPattern(options.botName);
  const schemas = requestSchemas(options.botName);

  /** Stores the message and hands it to the core (one Redis round trip when the core supports it). */
  async function storeAndAccept(body: PostedMessage, root: string | undefined): Promise<WebMessage> {
    const input = {
      channel: body.channel,
      user: body.user,
      text: body.text,
      ts: now(),
      ...definedOnly({ threadId: root }),
    };
    const addressed = isDirectMessageChannel(body.channel) || mention.test(body.text);
    const inbound = (id: string, threadRoot: string): InboundMessage => ({
      threadId: encodeThreadId({ platform: 'web', channel: body.channel, thread: threadRoot }),
      messageId: id,
      user: { id: body.user, name: body.user },
      text: body.text,
      addressed,
      startsThread: root === undefined,
      deliveryId: id,
      receivedAt: input.ts,
    });
    if (handlers.onMessageStored === undefined) {
      const stored = await store.createMessage(input);
      await handlers.onMessage(inbound(stored.id, stored.threadId));
      return stored;
    }
    let stored: WebMessage | undefined;
    // The ack's one round trip: the message and its inbox entry in one script.
    await handlers.onMessageStored(inbound(SCRIPT_NEW_ID, root ?? SCRIPT_NEW_ID), async (step) => {
      const created = await store.createMessageWithStep(input, step);
      stored = created.message;
      return { messageId: created.message.id, stepResult: created.stepResult };
    });
    if (stored === undefined) throw new Error('the playground store did not run');
    return stored;
  }

  return {
    async postMessage(request: IncomingMessage, response: ServerResponse): Promise<void> {
      const body = await readJson(request, schemas.postMessage);
      if (body.text.length > WEB_TEXT_MAX_CHARS) {
        throw new HttpProblem(413, `text: over ${WEB_TEXT_MAX_CHARS} characters`);
      }
      const root = await threadRoot(store, body);
      let stored: WebMessage;
      try {
        stored = await storeAndAccept(body, root);
      } catch (error) {
        if (error instanceof PlatformError && error.code === 'thread_unknown') {
          throw new HttpProblem(404, `threadId: no thread ${body.threadId ?? ''} in channel ${body.channel}`);
        }
        throw error;
      }
      sendJson(response, 202, { threadId: stored.threadId, messageId: stored.id });
    },

    async postAction(request: IncomingMessage, response: ServerResponse): Promise<void> {
      const body = await readJson(request, schemas.postAction);
      const target = parseThreadParameter(body.threadId);
      const message = await store.getMessage(body.messageId);
      if (
        message === undefined ||
        message.threadId !== target.root ||
        (target.channel !== undefined && target.channel !== message.channel)
      ) {
        throw new HttpProblem(404, `messageId: no message ${body.messageId} in thread ${body.threadId}`);
      }
      if (message.card?.resolved !== undefined) {
        throw new HttpProblem(409, `this card is already resolved: ${message.card.resolved}`);
      }
      if (!message.card?.actions?.some((action) => action.actionId === body.actionId)) {
        throw new HttpProblem(404, `actionId: ${body.actionId} is not a button on message ${body.messageId}`);
      }
      const action = {
        threadId: encodeThreadId({ platform: 'web', channel: message.channel, thread: message.threadId }),
        messageId: message.id,
        actionId: body.actionId,
        user: { id: body.user, name: body.user },
      };
      if (body.openForm === true && body.values === undefined) {
        const form = await handlers.formFor?.(action);
        if (form !== undefined) return sendJson(response, 200, { form });
      }
      const outcome = await handlers.onAction({ ...action, ...definedOnly({ values: body.values }) });
      switch (outcome.status) {
        case 'accepted':
          sendJson(
            response,
            200,
            outcome.message === undefined ? { ok: true } : { ok: true, message: outcome.message },
          );
          return;
        case 'forbidden':
          throw new HttpProblem(403, outcome.message);
        case 'resolved':
          throw new HttpProblem(409, outcome.message);
        case 'invalid':
          throw new HttpProblem(422, outcome.message);
        case 'unknown':
          throw new HttpProblem(404, outcome.message);
      }
    },

    async getThreadMessages(response: ServerResponse, parameter: string): Promise<void> {
      const target = parseThreadParameter(parameter);
      const messages = await store.getThread(target.root);
      if (
        messages === undefined ||
        (target.channel !== undefined && messages[0]?.channel !== target.channel)
      ) {
        throw new HttpProblem(404, `no thread ${parameter}`);
      }
      sendJson(response, 200, { messages: messages.map(toMessageView) });
    },
  };
}
