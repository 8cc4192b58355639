import { z } from 'zod';
import { PlatformError } from '../../errors.js';

/*
 * What the playground store keeps: its records, their Redis keys and how a stored hash reads back. The
 * store's operations are in web-store.ts (writes), web-store-reads.ts and web-store-files.ts.
 */

/** The name bot messages carry in the store and the playground API. */
export const WEB_BOT_USER = 'shepherd';

/** Uploaded files above this size are refused (they live in Redis). */
export const WEB_FILE_MAX_BYTES = 8 * 1024 * 1024;

const cardFieldSchema = z.object({ label: z.string(), value: z.string() });
const cardActionSchema = z.object({
  actionId: z.string(),
  label: z.string(),
  style: z.enum(['primary', 'danger', 'default']).optional(),
});

/** A card as the playground stores and serves it: the image is a file URL, a resolved card has no actions. */
const webCardSchema = z.object({
  title: z.string().optional(),
  text: z.string().optional(),
  fields: z.array(cardFieldSchema).optional(),
  imageUrl: z.string().optional(),
  actions: z.array(cardActionSchema).optional(),
  resolved: z.string().optional(),
  /** A text file shown as an expandable block (the whole script behind a cut excerpt). */
  attachment: z.object({ filename: z.string(), text: z.string() }).optional(),
});
export type WebCard = z.infer<typeof webCardSchema>;

const fileLinkSchema = z.object({ name: z.string(), url: z.string() });
export type WebFileLink = z.infer<typeof fileLinkSchema>;

const imagesSchema = z.array(z.string());
const filesSchema = z.array(fileLinkSchema);

export interface WebMessage {
  id: string;
  channel: string;
  /** The root message id of the thread (equal to `id` for a root). */
  threadId: string;
  user: string;
  text: string;
  /** Milliseconds since the epoch. */
  ts: number;
  editedAt?: number;
  card?: WebCard;
  images?: string[];
  files?: WebFileLink[];
  /** Set on ephemeral messages: the only user meant to see it. */
  visibleTo?: string;
}

export interface NewWebMessage {
  channel: string;
  /** Root id of an existing thread; omit to start a new thread. */
  threadId?: string;
  user: string;
  text: string;
  card?: WebCard;
  images?: string[];
  files?: WebFileLink[];
  visibleTo?: string;
  /** Milliseconds since the epoch; default now. */
  ts?: number;
}

interface WebThreadSummary {
  /** Root message id. */
  threadId: string;
  user: string;
  /** The root message's text, cut to a preview. */
  preview: string;
  ts: number;
  /** Time of the latest message in the thread. */
  lastActivity: number;
}

export interface WebChannelSummary {
  channel: string;
  /** Newest activity first. */
  threads: WebThreadSummary[];
}

export interface WebFile {
  id: string;
  name: string;
  contentType: string;
  data: Buffer;
}

/** A change published on the events channel for every new or edited message. */
export const webStoreEventSchema = z.object({
  kind: z.enum(['message-create', 'message-edit']),
  channel: z.string(),
  root: z.string(),
  messageId: z.string(),
});

/** The store's Redis keys, all under `<prefix>:web`. */
export function webStoreKeys(prefix: string) {
  const base = `${prefix}:web`;
  return {
    base,
    /** The pub/sub channel of events shaped by `webStoreEventSchema`. */
    events: `${base}:events`,
    counter: `${base}:seq`,
    message: (id: string) => `${base}:msg:${id}`,
    thread: (root: string) => `${base}:thread:${root}`,
    threads: (channel: string) => `${base}:threads:${channel}`,
    channels: `${base}:channels`,
    file: (id: string) => `${base}:file:${id}`,
  };
}
export type WebStoreKeys = ReturnType<typeof webStoreKeys>;

function parseStoredJson<T>(raw: string | undefined, schema: z.ZodType<T>): T | undefined {
  if (raw === undefined) return undefined;
  try {
    const result = schema.safeParse(JSON.parse(raw));
    return result.success ? result.data : undefined;
  } catch {
    return undefined;
  }
}

export function messageFromHash(id: string, hash: Record<string, string>): WebMessage | undefined {
  const { channel, root, user, text, ts } = hash;
  if (channel === undefined || root === undefined || user === undefined || text === undefined)
    return undefined;
  const message: WebMessage = { id, channel, threadId: root, user, text, ts: Number(ts) };
  if (hash.editedAt !== undefined) message.editedAt = Number(hash.editedAt);
  const card = parseStoredJson(hash.card, webCardSchema);
  if (card !== undefined) message.card = card;
  const images = parseStoredJson(hash.images, imagesSchema);
  if (images !== undefined) message.images = images;
  const files = parseStoredJson(hash.files, filesSchema);
  if (files !== undefined) message.files = files;
  if (hash.visibleTo !== undefined) message.visibleTo = hash.visibleTo;
  return message;
}

export function redisFailure(operation: string, error: unknown): PlatformError {
  return new PlatformError('web', 'store_unavailable', `playground store ${operation} failed`, {
    retryable: true,
    cause: error,
  });
}
