/**
 * The platform-neutral chat port. Slack, Discord and the web playground implement it side by side;
 * everything above this file (queues, agent, runs, monitor) speaks only these types.
 */

import type { ScriptStep } from '../redis/script-step.js';

export type Platform = 'web' | 'slack' | 'discord';

/** A thread, named by platform, channel and thread: encoded as `platform:channel:thread`. */
interface ThreadRef {
  platform: Platform;
  channel: string;
  thread: string;
}

const PLATFORMS: ReadonlySet<string> = new Set(['web', 'slack', 'discord']);

/** Encode a thread reference as the `platform:channel:thread` string used as a session key. */
export function encodeThreadId(reference: ThreadRef): string {
  if (reference.channel.includes(':'))
    throw new Error(`channel id may not contain ":": ${reference.channel}`);
  return `${reference.platform}:${reference.channel}:${reference.thread}`;
}

/** Decode a `platform:channel:thread` string; the thread part may itself contain colons. */
export function decodeThreadId(threadId: string): ThreadRef {
  const first = threadId.indexOf(':');
  const second = first < 0 ? -1 : threadId.indexOf(':', first + 1);
  const platform = threadId.slice(0, first);
  if (first < 0 || second < 0 || !PLATFORMS.has(platform)) {
    throw new Error(`not a thread id: ${threadId}`);
  }
  return {
    platform: platform as Platform,
    channel: threadId.slice(first + 1, second),
    thread: threadId.slice(second + 1),
  };
}

export interface ChatUser {
  /** Platform user id (Slack `U…`, Discord snowflake, playground user name). */
  id: string;
  /** Human-readable name shown to the agent (`[alice] …`). */
  name: string;
}

interface CardField {
  label: string;
  value: string;
}

export interface CardAction {
  /** Carries only an id, e.g. `approve:ap_123`; never data. At most 100 characters (Discord). */
  actionId: string;
  label: string;
  style?: 'primary' | 'danger' | 'default';
}

interface CardImage {
  /** PNG bytes; the adapter uploads or attaches them. */
  png: Uint8Array;
  filename: string;
  alt: string;
}

/** A neutral card, rendered by each adapter (Block Kit, embed + buttons, HTML). */
export interface Card {
  title?: string;
  text?: string;
  fields?: CardField[];
  image?: CardImage;
  actions?: CardAction[];
  /** Set when the card is decided; adapters show it as an outcome line and drop the buttons. */
  resolved?: string;
  /**
   * A text file that belongs to the card (the whole script behind a long excerpt): Slack uploads it into
   * the thread, Discord attaches it to the message, the playground shows it in an expandable block.
   */
  attachment?: CardAttachment;
}

export interface CardAttachment {
  filename: string;
  text: string;
}

/** A file to put into a thread (a chart PNG, a long log or diff). */
export interface Upload {
  filename: string;
  data: Uint8Array;
  /** MIME type, e.g. `image/png` or `text/plain`. */
  contentType: string;
  title?: string;
  /** Optional text posted with the file. */
  comment?: string;
}

export interface PostedMessage {
  /** Platform message id (Slack `ts`, Discord snowflake, playground id). */
  messageId: string;
}

/** A message a person wrote, already resolved to its thread by the adapter. */
export interface InboundMessage {
  threadId: string;
  messageId: string;
  user: ChatUser;
  text: string;
  /** True when the message mentions the bot (or is a DM / slash command, which count as addressed). */
  addressed: boolean;
  /** True when this message opens a new thread (a top-level mention). */
  startsThread: boolean;
  /** Platform delivery id for de-duplicating retried deliveries (Slack `event_id`, Discord message id). */
  deliveryId: string;
  receivedAt: number;
}

/** One text field of a form a button opens (a reject reason, an edited GPU count or script). */
interface CardFormField {
  /** The key its value comes back under in `InboundAction.values`. */
  id: string;
  /** At most 45 characters (Discord). */
  label: string;
  /** What the field holds when the form opens. */
  initial?: string;
  multiline?: boolean;
  optional?: boolean;
  /** At most 4000 (Discord; Slack takes 3000 for an initial value, so longer ones open empty there). */
  maxLength: number;
}

/**
 * A form a card button opens before its action is sent (Slack modal, Discord modal, the playground's
 * inline form). The core hands it out on the click (`InboundHandlers.formFor`), so a card still carries
 * only ids; the submission comes back as the same action with `values`.
 */
export interface CardForm {
  /** At most 24 characters (Slack's modal title). */
  title: string;
  submitLabel: string;
  /** At most 5 (Discord). */
  fields: CardFormField[];
  /** A sentence above the fields (Slack, the playground; Discord modals have no room for it). */
  note?: string;
}

/** A button click, or the submission of the form it opened (`values`). */
export interface InboundAction {
  threadId: string;
  /** The message that carries the card. */
  messageId: string;
  actionId: string;
  user: ChatUser;
  /** The submitted form's values by field id; absent for a plain click. */
  values?: Readonly<Record<string, string>>;
}

export type ActionOutcome =
  | { status: 'accepted'; message?: string }
  | { status: 'forbidden'; message: string }
  | { status: 'resolved'; message: string }
  /** A form's values that cannot be used (an edit with GPUs -1): nothing was decided. */
  | { status: 'invalid'; message: string }
  | { status: 'unknown'; message: string };

export interface InboundHandlers {
  /** Must return quickly: it only records and enqueues. Resolves `false` when the message was ignored. */
  onMessage(message: InboundMessage): Promise<boolean>;
  /**
   * Optional: the same as storing a message and then calling `onMessage`, in one Redis round trip, for an
   * adapter whose own message store lives in the inbox's Redis (the playground). `draft` holds
   * `SCRIPT_NEW_ID` where the stored message's id goes (its ids; its thread, when it starts one);
   * `store(step)` must store the message and run `step` in the same script, and resolve to the new id
   * and the step's result.
   */
  onMessageStored?(
    draft: InboundMessage,
    store: (step: ScriptStep) => Promise<{ messageId: string; stepResult: unknown }>,
  ): Promise<boolean>;
  /** Decides synchronously-fast whether the click counts (a single Redis round trip), then enqueues the work. */
  onAction(action: InboundAction): Promise<ActionOutcome>;
  /**
   * Optional: the form this click opens for this person, if any (one Redis read, no side effect). An
   * adapter asks before it acknowledges the click, shows the form, and sends its submission to
   * `onAction` with `values`; with no form, the click goes to `onAction` as it is.
   */
  formFor?(action: InboundAction): Promise<CardForm | undefined>;
}

/**
 * The required core every platform implements, plus optional capabilities.
 * Methods throw `PlatformError` (or `RateLimitedError`) so the notify queue can decide to retry.
 */
export interface ChatAdapter {
  readonly platform: Platform;
  start(handlers: InboundHandlers): Promise<void>;
  stop(): Promise<void>;
  postMessage(threadId: string, text: string): Promise<PostedMessage>;
  editMessage(threadId: string, messageId: string, text: string): Promise<void>;
  postCard(threadId: string, card: Card): Promise<PostedMessage>;
  updateCard(threadId: string, messageId: string, card: Card): Promise<void>;
  upload(threadId: string, upload: Upload): Promise<PostedMessage>;
  /** A message only `userId` sees; adapters without it fall back to a normal post. */
  postEphemeral?(threadId: string, userId: string, text: string): Promise<void>;
  /** Whether the adapter can hear its platform right now (socket, gateway, listening server); for `/readyz`. */
  isConnected?(): boolean;
}
