import type { Job, JobsOptions, Queue, RepeatOptions } from 'bullmq';
import { z } from 'zod';
import { decodeThreadId } from '../bot/chat-adapter.js';

/**
 * Queue contracts in one place: every queue, job name, versioned payload schema and default options
 * (`JOBS`). Producers call `enqueue`/`enqueueBulk`/`schedule` with an entry of `JOBS`; every worker is a
 * `createJobWorker` (job-worker.ts) that parses `job.data` with its queue's schema.
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

/**
 * Every outbound post carries its place in the sender's order (`order`, see notify-queue): posts held by a
 * channel's rate-limit pause go out by it, not by which worker happened to pick them up first.
 */
const notifyBase = { v: z.literal(1), threadId, order: z.number().int().nonnegative().optional() };
export const notifyJob = z.discriminatedUnion('op', [
  z.object({ ...notifyBase, op: z.literal('post'), text: z.string() }),
  z.object({ ...notifyBase, op: z.literal('edit'), messageId: z.string(), text: z.string() }),
  z.object({ ...notifyBase, op: z.literal('card'), card: cardSchema }),
  z.object({
    ...notifyBase,
    op: z.literal('update-card'),
    messageId: z.string(),
    card: cardSchema,
  }),
  z.object({
    ...notifyBase,
    op: z.literal('upload'),
    filename: z.string(),
    contentType: z.string(),
    dataBase64: base64,
    title: z.string().optional(),
    comment: z.string().optional(),
  }),
  z.object({ ...notifyBase, op: z.literal('ephemeral'), userId: z.string(), text: z.string() }),
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
  /** An approved Push to Hub: the upload runs here, off the click. */
  z.object({
    v: z.literal(1),
    kind: z.literal('hub-push'),
    pushId: z.string(),
  }),
  /** Fork or Compare on a model-ready card (with its form's values): the work runs here, off the click. */
  z.object({
    v: z.literal(1),
    kind: z.literal('model-action'),
    verb: z.enum(['fork', 'compare']),
    runId: z.string(),
    user: z.object({ id: z.string(), name: z.string() }),
    threadId,
    values: z.record(z.string(), z.string()).optional(),
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
type MonitorTickJob = z.infer<typeof monitorTickJob>;

/** Retries of outbound posts: 4 attempts, waiting 1 s, 2 s, 4 s between them. */
const NOTIFY_ATTEMPTS = 4;
export const NOTIFY_BACKOFF_MS = [1000, 2000, 4000] as const;
/** Attempts of a turn job (retried 0.5 s, 1 s, 2 s, 4 s apart) before its batch is dropped. */
export const TURN_ATTEMPTS = 5;

/** One kind of job: where it goes, what it is called, what it carries and how it is retried and kept. */
interface JobContract<Data> {
  queue: QueueName;
  /** The BullMQ job name; notify jobs are named by their `op`. */
  name: string | ((data: Data) => string);
  schema: z.ZodType;
  defaultOpts: JobsOptions;
}

type ControlOf<Kind extends ControlJob['kind']> = Extract<ControlJob, { kind: Kind }>;

function contract<Data>(entry: JobContract<Data>): JobContract<Data> {
  return entry;
}

const DAY_S = 24 * 3600;

/** Every job Shepherd enqueues. */
export const JOBS = {
  agentTurn: contract<z.infer<typeof agentTurnJob>>({
    queue: QUEUE_NAMES.turns,
    name: 'agent-turn',
    schema: agentTurnJob,
    defaultOpts: {
      attempts: TURN_ATTEMPTS,
      backoff: { type: 'exponential', delay: 500 },
      removeOnComplete: { age: 3600, count: 10_000 },
      removeOnFail: { age: DAY_S },
    },
  }),
  notify: contract<NotifyJob>({
    queue: QUEUE_NAMES.notify,
    name: (data) => data.op,
    schema: notifyJob,
    defaultOpts: {
      attempts: NOTIFY_ATTEMPTS,
      // The notify worker's backoff strategy waits NOTIFY_BACKOFF_MS.
      backoff: { type: 'notify' },
      removeOnComplete: { age: 3600, count: 5000 },
      removeOnFail: { age: DAY_S },
    },
  }),
  approvalDecision: contract<ControlOf<'approval-decision'>>({
    queue: QUEUE_NAMES.control,
    name: 'approval-decision',
    schema: controlJob,
    defaultOpts: {
      attempts: 5,
      backoff: { type: 'exponential', delay: 1000 },
      removeOnComplete: { age: DAY_S },
      removeOnFail: { age: 7 * DAY_S },
    },
  }),
  alertAction: contract<ControlOf<'alert-action'>>({
    queue: QUEUE_NAMES.control,
    name: 'alert-action',
    schema: controlJob,
    defaultOpts: {
      attempts: 3,
      backoff: { type: 'exponential', delay: 1000 },
      removeOnComplete: { age: DAY_S },
      removeOnFail: { age: 7 * DAY_S },
    },
  }),
  runSchedule: contract<ControlOf<'run-schedule'>>({
    queue: QUEUE_NAMES.control,
    name: 'run-schedule',
    schema: controlJob,
    defaultOpts: { removeOnComplete: true, removeOnFail: 100 },
  }),
  hubPush: contract<ControlOf<'hub-push'>>({
    queue: QUEUE_NAMES.control,
    name: 'hub-push',
    schema: controlJob,
    // Once: a failed upload is reported in the thread, and a blind retry would make another commit.
    defaultOpts: { attempts: 1, removeOnComplete: { age: DAY_S }, removeOnFail: { age: 7 * DAY_S } },
  }),
  modelAction: contract<ControlOf<'model-action'>>({
    queue: QUEUE_NAMES.control,
    name: 'model-action',
    schema: controlJob,
    // Once: a fork makes a run and a card, and a blind retry would make another.
    defaultOpts: { attempts: 1, removeOnComplete: { age: DAY_S }, removeOnFail: { age: 7 * DAY_S } },
  }),
  digest: contract<ControlOf<'digest'>>({
    queue: QUEUE_NAMES.control,
    name: 'digest',
    schema: controlJob,
    defaultOpts: { removeOnComplete: 50, removeOnFail: 50 },
  }),
  monitorTick: contract<MonitorTickJob>({
    queue: QUEUE_NAMES.monitor,
    name: 'monitor-tick',
    schema: monitorTickJob,
    defaultOpts: { removeOnComplete: 100, removeOnFail: 100 },
  }),
} as const;

function jobName<Data>(job: JobContract<Data>, data: Data): string {
  return typeof job.name === 'string' ? job.name : job.name(data);
}

function checkQueue(queue: Queue, job: JobContract<never>): void {
  // A job added to the wrong queue would wait forever for a worker that never parses it.
  if (queue.name !== job.queue) throw new Error(`job for queue ${job.queue} added to queue ${queue.name}`);
}

/** Adds one job with its contract's options; `opts` (job id, delay) override them. */
export async function enqueue<Data>(
  queue: Queue,
  job: JobContract<Data>,
  data: Data,
  opts?: JobsOptions,
): Promise<Job> {
  checkQueue(queue, job);
  return queue.add(jobName(job, data), data, { ...job.defaultOpts, ...opts });
}

/** Adds several jobs of one kind in one write and one round trip. */
export async function enqueueBulk<Data>(
  queue: Queue,
  job: JobContract<Data>,
  items: ReadonlyArray<{ data: Data; opts?: JobsOptions }>,
): Promise<void> {
  checkQueue(queue, job);
  await queue.addBulk(
    items.map((item) => ({
      name: jobName(job, item.data),
      data: item.data,
      opts: { ...job.defaultOpts, ...item.opts },
    })),
  );
}

/** Creates or updates a job scheduler that adds `job` with `data` on `repeat`. */
export async function schedule<Data>(
  queue: Queue,
  schedulerId: string,
  repeat: Omit<RepeatOptions, 'key'>,
  job: JobContract<Data>,
  data: Data,
): Promise<void> {
  checkQueue(queue, job);
  await queue.upsertJobScheduler(schedulerId, repeat, {
    name: jobName(job, data),
    data,
    opts: job.defaultOpts,
  });
}
