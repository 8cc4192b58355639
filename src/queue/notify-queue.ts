import { createHash } from 'node:crypto';
import { DelayedError, Job, Queue, QueueEvents, type Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Card, PostedMessage, Upload } from '../bot/chat-adapter.js';
import { type AdapterLookup, adapterForThread, type IdempotentNotifier } from '../bot/notifier.js';
import { definedOnly } from '../defined-only.js';
import { RateLimitedError } from '../errors.js';
import type { Logger } from '../logger.js';
import { logQueueErrors } from './job-payload.js';
import { createJobWorker } from './job-worker.js';
import {
  type CardPayload,
  enqueue,
  JOBS,
  NOTIFY_BACKOFF_MS,
  type NotifyJob,
  notifyJob,
  QUEUE_NAMES,
} from './jobs.js';
import { redactNotifyJob } from './redact-outbound.js';

/**
 * Outbound platform calls go through the notify queue: 4 attempts with 1 s, 2 s, 4 s between them, a
 * platform's Retry-After honoured without spending an attempt, and errors retrying cannot fix failing fast.
 */

export function cardToPayload(card: Card): CardPayload {
  const { image, ...rest } = card;
  return {
    ...rest,
    ...(image === undefined
      ? {}
      : {
          image: {
            pngBase64: Buffer.from(image.png).toString('base64'),
            filename: image.filename,
            alt: image.alt,
          },
        }),
  };
}

function payloadToCard(payload: CardPayload): Card {
  const { image, ...rest } = payload;
  const card: Card = {};
  if (rest.title !== undefined) card.title = rest.title;
  if (rest.text !== undefined) card.text = rest.text;
  if (rest.fields !== undefined) card.fields = rest.fields;
  if (rest.resolved !== undefined) card.resolved = rest.resolved;
  if (rest.attachment !== undefined) card.attachment = rest.attachment;
  if (rest.actions !== undefined) {
    card.actions = rest.actions.map((action) => ({
      actionId: action.actionId,
      label: action.label,
      ...definedOnly({ style: action.style }),
    }));
  }
  if (image !== undefined) {
    card.image = { png: Buffer.from(image.pngBase64, 'base64'), filename: image.filename, alt: image.alt };
  }
  return card;
}

let lastOrder = 0;
/**
 * Increasing within this process, and by time across processes: Date.now() in microsecond units, bumped by
 * one when two posts share a millisecond. Posts from two processes have no order of their own to keep.
 */
function nextOrder(): number {
  lastOrder = Math.max(Date.now() * 1000, lastOrder + 1);
  return lastOrder;
}

const onceJobId = (key: string) => `post-${createHash('sha256').update(key).digest('hex').slice(0, 32)}`;

interface QueueNotifierOptions {
  connection: Redis;
  prefix: string;
  /** How long a caller waits for a post to land (retries included) before giving up waiting. */
  waitTimeoutMs?: number;
  logger?: Logger;
}

export interface QueueNotifier extends IdempotentNotifier {
  /** Like the Notifier methods, but a deterministic `key` makes a repeated request (after a crash) a no-op. */
  postOnce(key: string, threadId: string, text: string): Promise<PostedMessage>;
  /** The message an earlier `postOnce` with this key posted (e.g. before a crash), if any. */
  postedOnce(key: string): Promise<PostedMessage | undefined>;
  /** `postCard` made idempotent by `key`, like `postOnce` (`postedOnce` finds it too). */
  postCardOnce(key: string, threadId: string, card: Card): Promise<PostedMessage>;
  close(): Promise<void>;
}

export function createQueueNotifier(options: QueueNotifierOptions): QueueNotifier {
  const queue = new Queue(QUEUE_NAMES.notify, { connection: options.connection, prefix: options.prefix });
  const eventsConnection = options.connection.duplicate();
  logQueueErrors(eventsConnection, options.logger, 'notify events connection');
  const events = new QueueEvents(QUEUE_NAMES.notify, {
    connection: eventsConnection,
    prefix: options.prefix,
  });
  logQueueErrors(queue, options.logger, 'notify queue');
  logQueueErrors(events, options.logger, 'notify queue events');
  const waitTimeoutMs = options.waitTimeoutMs ?? 60_000;
  const ready = events.waitUntilReady();

  async function send(raw: NotifyJob, jobId?: string): Promise<unknown> {
    // Stamped before any await: the order of the calls, which concurrent workers could not recover.
    const data = { ...redactNotifyJob(raw), order: nextOrder() };
    await ready;
    if (jobId !== undefined) {
      // A keyed post whose earlier job gave up is tried again as that same job, never as a second post.
      const earlier = await Job.fromId(queue, jobId);
      if (earlier !== undefined && (await earlier.isFailed())) await earlier.retry('failed');
    }
    const job = await enqueue(queue, JOBS.notify, data, definedOnly({ jobId }));
    return job.waitUntilFinished(events, waitTimeoutMs);
  }

  const messageResult = async (data: NotifyJob, jobId?: string): Promise<PostedMessage> => {
    const result = (await send(data, jobId)) as { messageId?: unknown } | undefined;
    return { messageId: typeof result?.messageId === 'string' ? result.messageId : '' };
  };

  return {
    post: (threadId, text) => messageResult({ v: 1, op: 'post', threadId, text }),
    postOnce: (key, threadId, text) => messageResult({ v: 1, op: 'post', threadId, text }, onceJobId(key)),
    async postedOnce(key) {
      const job = await Job.fromId(queue, onceJobId(key));
      const messageId = (job?.returnvalue as { messageId?: unknown } | undefined)?.messageId;
      return typeof messageId === 'string' ? { messageId } : undefined;
    },
    edit: async (threadId, messageId, text) => {
      await send({ v: 1, op: 'edit', threadId, messageId, text });
    },
    postCard: (threadId, card) => messageResult({ v: 1, op: 'card', threadId, card: cardToPayload(card) }),
    postCardOnce: (key, threadId, card) =>
      messageResult({ v: 1, op: 'card', threadId, card: cardToPayload(card) }, onceJobId(key)),
    updateCard: async (threadId, messageId, card) => {
      await send({ v: 1, op: 'update-card', threadId, messageId, card: cardToPayload(card) });
    },
    upload: (threadId, upload: Upload) =>
      messageResult({
        v: 1,
        op: 'upload',
        threadId,
        filename: upload.filename,
        contentType: upload.contentType,
        dataBase64: Buffer.from(upload.data).toString('base64'),
        ...definedOnly({ title: upload.title, comment: upload.comment }),
      }),
    ephemeral: async (threadId, userId, text) => {
      await send({ v: 1, op: 'ephemeral', threadId, userId, text });
    },
    async close() {
      await events.close();
      await queue.close();
    },
  };
}

/** Performs one notify job against its adapter. Exported for direct use in tests. */
export async function performNotify(lookup: AdapterLookup, job: NotifyJob): Promise<{ messageId?: string }> {
  // Queued jobs are redacted already; jobs from elsewhere (older versions, tests) are redacted here.
  const data = redactNotifyJob(job);
  const adapter = adapterForThread(lookup, data.threadId);
  switch (data.op) {
    case 'post':
      return adapter.postMessage(data.threadId, data.text);
    case 'edit':
      await adapter.editMessage(data.threadId, data.messageId, data.text);
      return {};
    case 'card':
      return adapter.postCard(data.threadId, payloadToCard(data.card));
    case 'update-card':
      await adapter.updateCard(data.threadId, data.messageId, payloadToCard(data.card));
      return {};
    case 'upload':
      return adapter.upload(data.threadId, {
        filename: data.filename,
        contentType: data.contentType,
        data: Buffer.from(data.dataBase64, 'base64'),
        ...definedOnly({ title: data.title, comment: data.comment }),
      });
    case 'ephemeral':
      if (adapter.postEphemeral) await adapter.postEphemeral(data.threadId, data.userId, data.text);
      else await adapter.postMessage(data.threadId, `<@${data.userId}> ${data.text}`);
      return {};
  }
}

interface NotifyWorkerOptions {
  connection: Redis;
  prefix: string;
  adapters: AdapterLookup;
  logger: Logger;
  concurrency?: number;
}

/**
 * KEYS pause, line; ARGV pause ms (0: none to start), job id, keep ms, order. Starts the pause when asked
 * (a new one empties the line), then puts the job in the line by its order: one step, so no post that sees
 * the pause can join the line before the post that met the 429.
 */
const HOLD_SCRIPT = `
local pause_ms = tonumber(ARGV[1])
if pause_ms > 0 and redis.call('SET', KEYS[1], '1', 'PX', pause_ms, 'NX') then
  redis.call('DEL', KEYS[2])
end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
`;

/** How often a held post looks whether the posts before it in the line have gone out. */
const RELEASE_POLL_MS = 25;

export function createNotifyWorker(options: NotifyWorkerOptions): Worker {
  const { logger, connection: redis } = options;
  // A 429 pauses the channel it came from (the platforms' limits are per channel), not the queue: other
  // channels go on. `<platform>:<channel>` of a thread id `platform:channel:thread`.
  const channelOf = (threadId: string) => threadId.split(':').slice(0, 2).join(':');
  const channelKey = (kind: string, threadId: string) =>
    `${options.prefix}:notify-${kind}:${channelOf(threadId)}`;
  const pauseKey = (threadId: string) => channelKey('pause', threadId);
  // Posts held by a pause wait in the channel's line (a sorted set scored by the order their senders made
  // them in) and go out strictly one after another, lowest order first, however busy the workers are.
  const lineKey = (threadId: string) => channelKey('line', threadId);
  // Jobs from before `order` existed fall back to their enqueue time.
  const orderOf = (data: NotifyJob, job: Job) => data.order ?? job.timestamp * 1000;

  /**
   * Hold the job until `atMs` in the channel's line. `pauseMs` (the post that met the 429) also starts the
   * pause, and a new pause a new line, in the same script.
   */
  async function hold(
    data: NotifyJob,
    job: Job,
    token: string | undefined,
    atMs: number,
    keepMs: number,
    pauseMs = 0,
  ): Promise<never> {
    await redis.eval(
      HOLD_SCRIPT,
      2,
      pauseKey(data.threadId),
      lineKey(data.threadId),
      String(pauseMs),
      job.id ?? '',
      String(keepMs),
      String(orderOf(data, job)),
    );
    await job.moveToDelayed(atMs, token);
    throw new DelayedError();
  }

  /**
   * While the channel is paused the job waits (no call, no attempt spent) until after the pause; then the
   * line goes out in order. Returns whether the job was in the line.
   */
  async function waitYourTurn(data: NotifyJob, job: Job, token: string | undefined): Promise<boolean> {
    const pausedMs = await redis.pttl(pauseKey(data.threadId));
    if (pausedMs > 0) await hold(data, job, token, Date.now() + pausedMs, pausedMs + 60_000);
    const [[, score] = [], [, first] = []] =
      (await redis
        .multi()
        .zscore(lineKey(data.threadId), job.id ?? '')
        .zrange(lineKey(data.threadId), 0, 0)
        .exec()) ?? [];
    const head = (first as string[] | undefined)?.[0];
    if (score === null || score === undefined) {
      // Posts held by a pause are still going out: a new one joins the line, not its front.
      if (head !== undefined) await hold(data, job, token, Date.now(), 60_000);
      return false;
    }
    if (head !== job.id) {
      await job.moveToDelayed(Date.now() + RELEASE_POLL_MS, token);
      throw new DelayedError();
    }
    return true;
  }

  /** The held post has had its turn (sent, or failed once): the next one in the line may go. */
  async function turnTaken(data: NotifyJob, job: Job, held: boolean): Promise<void> {
    if (held) await redis.zrem(lineKey(data.threadId), job.id ?? '');
  }

  return createJobWorker(
    QUEUE_NAMES.notify,
    notifyJob,
    async (data, job, token) => {
      const held = await waitYourTurn(data, job, token);
      try {
        const result = await performNotify(options.adapters, data);
        await turnTaken(data, job, held);
        return result;
      } catch (error) {
        if (error instanceof RateLimitedError) {
          // Waiting out Retry-After is not a failed attempt: move the job back without spending one, and
          // hold every other post to the same channel until then, so the platform is not hammered.
          logger.warn(
            { threadId: data.threadId, retryAfterMs: error.retryAfterMs },
            'platform rate limit; waiting',
          );
          const retryAfterMs = Math.max(1, Math.round(error.retryAfterMs));
          // A new pause starts a new line; posts meeting the same pause join it by their order.
          await hold(data, job, token, Date.now() + retryAfterMs, retryAfterMs + 60_000, retryAfterMs);
        }
        await turnTaken(data, job, held);
        // createJobWorker fails a final error at once and logs every failure; anything else is retried.
        throw error;
      }
    },
    {
      connection: options.connection,
      prefix: options.prefix,
      logger,
      concurrency: options.concurrency ?? 8,
      describe: (data) => ({ threadId: data.threadId, op: data.op }),
      workerOptions: {
        settings: {
          backoffStrategy: (attemptsMade: number) =>
            NOTIFY_BACKOFF_MS[Math.min(attemptsMade - 1, NOTIFY_BACKOFF_MS.length - 1)] ?? 4000,
        },
      },
    },
  );
}
