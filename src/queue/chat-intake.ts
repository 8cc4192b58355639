import type {
  ActionOutcome,
  CardForm,
  InboundAction,
  InboundHandlers,
  InboundMessage,
} from '../bot/chat-adapter.js';
import { decodeThreadId } from '../bot/chat-adapter.js';
import type { Logger } from '../logger.js';
import { SCRIPT_NEW_ID } from '../redis/script-step.js';
import { type AcceptResult, type InboxItem, parseAcceptResult, type TurnInbox } from './turn-inbox.js';

/** Handles a button click; resolves fast (one Redis round trip) and leaves slow work to a queue. */
export type ActionHandler = (action: InboundAction, argument: string) => Promise<ActionOutcome>;
/** The form a click opens for its clicker, or undefined to act on the click directly. */
export type ActionFormProvider = (action: InboundAction, argument: string) => Promise<CardForm | undefined>;

/**
 * Routes action ids of the form `verb:argument` (e.g. `approve:ap_1a2b`) to the handler registered for
 * the verb. Cards carry only such ids, never data.
 */
export function createActionRouter() {
  const handlers = new Map<string, ActionHandler>();
  const forms = new Map<string, ActionFormProvider>();
  const split = (actionId: string) => {
    const separator = actionId.indexOf(':');
    return separator < 0
      ? { verb: actionId, argument: '' }
      : { verb: actionId.slice(0, separator), argument: actionId.slice(separator + 1) };
  };
  return {
    register(verb: string, handler: ActionHandler, form?: ActionFormProvider) {
      handlers.set(verb, handler);
      if (form !== undefined) forms.set(verb, form);
    },
    async route(action: InboundAction): Promise<ActionOutcome> {
      const { verb, argument } = split(action.actionId);
      const handler = handlers.get(verb);
      if (handler === undefined) return { status: 'unknown', message: `unknown action ${action.actionId}` };
      return handler(action, argument);
    },
    /** No I/O for a verb without forms, so adapters may ask on every click. */
    async form(action: InboundAction): Promise<CardForm | undefined> {
      const { verb, argument } = split(action.actionId);
      return forms.get(verb)?.(action, argument);
    },
  };
}

export type ActionRouter = ReturnType<typeof createActionRouter>;

interface InboundOptions {
  inbox: TurnInbox;
  actions: ActionRouter;
  logger: Logger;
  /**
   * Told of every accepted message before its turn is requested; `cancel` uses it, since the command
   * itself waits in the inbox behind the turn it must stop.
   */
  onAccepted?: (message: InboundMessage) => Promise<void>;
}

/**
 * The core's side of every adapter: a message is de-duplicated and recorded in its thread's inbox, whose
 * script also queues the thread's wake-up request (turn-dispatcher.ts) — one Redis round trip, and
 * nothing waits on the LLM or on BullMQ. Messages in threads without a session are ignored unless they
 * address the bot.
 */
export function createInboundHandlers(options: InboundOptions): InboundHandlers {
  const { inbox, actions, logger } = options;
  const toItem = (message: InboundMessage): InboxItem => ({
    type: 'message',
    messageId: message.messageId,
    deliveryId: message.deliveryId,
    user: message.user,
    text: message.text,
    addressed: message.addressed,
    receivedAt: message.receivedAt,
  });
  const acceptOptions = (message: InboundMessage) => ({
    addressed: message.addressed,
    deliveryKey: `${decodeThreadId(message.threadId).platform}:${message.deliveryId}`,
  });

  async function afterAccept(message: InboundMessage, result: AcceptResult): Promise<boolean> {
    if (result !== 'accepted') {
      logger.debug(
        { threadId: message.threadId, deliveryId: message.deliveryId, result },
        'message not queued',
      );
      return false;
    }
    await options.onAccepted?.(message).catch((error: unknown) => {
      logger.warn({ threadId: message.threadId, err: error }, 'accepted-message hook failed');
    });
    return true;
  }

  return {
    async onMessage(message: InboundMessage): Promise<boolean> {
      const result = await inbox.accept(message.threadId, toItem(message), acceptOptions(message));
      return afterAccept(message, result);
    },
    async onMessageStored(draft, store): Promise<boolean> {
      const step = inbox.acceptStep(draft.threadId, toItem(draft), acceptOptions(draft));
      const { messageId, stepResult } = await store(step);
      const fill = (value: string) => value.replaceAll(SCRIPT_NEW_ID, messageId);
      const message: InboundMessage = {
        ...draft,
        threadId: fill(draft.threadId),
        messageId: fill(draft.messageId),
        deliveryId: fill(draft.deliveryId),
      };
      return afterAccept(message, parseAcceptResult(stepResult));
    },
    onAction: (action) => actions.route(action),
    formFor: (action) => actions.form(action),
  };
}

/**
 * Tells the agent of a thread something happened (an approval decision, an alert); the event's wake-up
 * request starts a turn.
 */
export async function pushSystemEvent(
  inbox: TurnInbox,
  threadId: string,
  eventId: string,
  text: string,
): Promise<void> {
  await inbox.pushEvent(threadId, { type: 'event', eventId, text, receivedAt: Date.now() });
}
