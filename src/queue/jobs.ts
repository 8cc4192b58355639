import { z } from 'zod';
import { decodeThreadId } from '../bot/chat-adapter.js';

/**
 * Queue contracts in one place: every queue, job name and versioned payload schema. Producers use
 * `enqueue`-style helpers typed from these; every worker starts by parsing `job.data` with them.
 */

export const QUEUE_NAMES = {
  /** Agent turns, serialised per thread. */
  turns: 'turns',
  /** Outbound platform calls, retried at 1 s, 2 s, 4 s. */
  notify: 'notify',
  /** Approval decisions, alert buttons and other control actions. */
  control: 'control',
  /** Monitor ticks, one job scheduler per active run. */
  monitor: 'monitor',
} as const;

export type QueueName = (typeof QUEUE_NAMES)[keyof typeof QUEUE_NAMES];

/** A thread id that names a platform, channel and thread (`slack:C1:1700.1`); anything else is final. */
const threadId = z
  .string()
  .min(3)
  .refine((value) => {
    try {
      decodeThreadId(value);
      return true;
    } catch {
      return false;
    }
  }, 'not a thread id');
const base64 = z.string();

export const agentTurnJob = z.object({
  v: z.literal(1),
  threadId,
});

const cardSchema = z.object({
  title: z.string().optional(),
  text: z.string().optional(),
  fields: z.array(z.object({ label: z.string(), value: z.string() })).optional(),
  image: z.object({ pngBase64: base64, filename: z.string(), alt: z.string() }).optional(),
  actions: z
    .array(
      z.object({
        actionId: z.string().max(100),
        label: z.string(),
        style: z.enum(['primary', 'danger', 'default']).optional(),
      }),
    )
    .optional(),
  resolved: z.string().optional(),
  attachment: z.object({ filename: z.string(), text: z.string() }).optional(),
});
export type CardPayload = z.infer<typeof cardSchema>;

export const notifyJob = z.discriminatedUnion('op', [
  z.object({ v: z.literal(1), op: z.literal('post'), threadId, text: z.string() }),
  z.object({ v: z.literal(1), op: z.literal('edit'), threadId, messageId: z.string(), text: z.string() }),
  z.object({ v: z.literal(1), op: z.literal('card'), threadId, card: cardSchema }),
  z.object({
    v: z.literal(1),
    op: z.literal('update-card'),
    threadId,
    messageId: z.string(),
    card: cardSchema,
  }),
  z.object({
    v: z.literal(1),
    op: z.literal('upload'),
    threadId,
    filename: z.string(),
    contentType: z.string(),
    dataBase64: base64,
    title: z.string().optional(),
    comment: z.string().optional(),
  }),
  z.object({ v: z.literal(1), op: z.literal('ephemeral'), threadId, userId: z.string(), text: z.string() }),
]);
export type NotifyJob = z.infer<typeof notifyJob>;

export const controlJob = z.discriminatedUnion('kind', [
  z.object({
    v: z.literal(1),
    kind: z.literal('approval-decision'),
    approvalId: z.string(),
    decision: z.enum(['approved', 'rejected', 'expired']),
    user: z.object({ id: z.string(), name: z.string() }),
    threadId,
    messageId: z.string().optional(),
    auto: z.boolean().default(false),
  }),
  z.object({
    v: z.literal(1),
    kind: z.literal('alert-action'),
    alertId: z.string(),
    action: z.enum(['ack', 'stop', 'fix']),
    user: z.object({ id: z.string(), name: z.string() }),
    threadId,
    messageId: z.string(),
  }),
  z.object({
    v: z.literal(1),
    kind: z.literal('run-schedule'),
    reason: z.string(),
  }),
  /** The daily digest; `at` (ISO) replaces the clock, for tests and re-sends. */
  z.object({
    v: z.literal(1),
    kind: z.literal('digest'),
    at: z.string().optional(),
  }),
]);
export type ControlJob = z.infer<typeof controlJob>;

export const monitorTickJob = z.object({
  v: z.literal(1),
  runId: z.string(),
});
export type MonitorTickJob = z.infer<typeof monitorTickJob>;

/** Retries of outbound posts: 4 attempts, waiting 1 s, 2 s, 4 s between them. */
export const NOTIFY_ATTEMPTS = 4;
export const NOTIFY_BACKOFF_MS = [1000, 2000, 4000] as const;
