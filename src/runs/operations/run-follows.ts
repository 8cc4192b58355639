import path from 'node:path';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { Notifier } from '../../bot/notifier.js';
import type { Logger } from '../../logger.js';
import { readLastMetrics } from '../file-tail.js';
import { RUN_FILES } from '../records/run-files.js';
import type { RunStore } from '../records/run-store.js';
import type { RunMeta } from '../records/run-types.js';

/**
 * Follows: a thread asks to hear when a run finishes, fails, raises an alert or stalls. When it does,
 * the thread's session gets one note and one agent turn (through the turn inbox, so it is serialised
 * with people's messages). Each follow fires at most once per event and launch; runs nobody follows cost
 * one Redis GET per event and no LLM call; `maxTurns` per run stops a follow → relaunch → follow loop.
 */

export const FOLLOW_EVENTS = ['finished', 'failed', 'alert', 'stalled'] as const;
type FollowEvent = (typeof FOLLOW_EVENTS)[number];

const followSchema = z.object({
  runId: z.string(),
  runName: z.string(),
  threadId: z.string(),
  events: z.array(z.enum(FOLLOW_EVENTS)).min(1),
  note: z.string(),
  by: z.object({ id: z.string(), name: z.string() }),
  createdAt: z.number(),
});
type Follow = z.infer<typeof followSchema>;

const KEEP_SECONDS = 30 * 24 * 3600;

interface RunFollowsOptions {
  redis: Redis;
  prefix: string;
  store: RunStore;
  notifier: Notifier;
  /** Agent turns follows may start per run (`SHEPHERD_MAX_FOLLOW_TURNS`). */
  maxTurns: number;
  pushEvent(threadId: string, eventId: string, text: string): Promise<void>;
  logger: Logger;
}

export interface RunFollows {
  follow(input: Omit<Follow, 'createdAt'>): Promise<Follow>;
  /** Removes the run's follow; resolves the removed follow, if there was one. */
  unfollow(runId: string): Promise<Follow | undefined>;
  get(runId: string): Promise<Follow | undefined>;
  forThread(threadId: string): Promise<Follow[]>;
  /** Drops every follow of a thread (its session was reset). */
  clearThread(threadId: string): Promise<Follow[]>;
  /** How many follow turns a run has used. */
  turnsUsed(runId: string): Promise<number>;
  /** A run ended on its own: `completed` fires `finished`, `failed` fires `failed`. */
  onRunEnded(meta: RunMeta): Promise<void>;
  /** The monitor raised an incident (a stall fires `stalled`, other non-ending incidents `alert`). */
  onIncident(meta: RunMeta, incident: { kind: string; title: string; step?: number }): Promise<void>;
}

function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  return Math.abs(value) >= 100 ? value.toFixed(1) : Number(value.toPrecision(4)).toString();
}

export function createRunFollows(options: RunFollowsOptions): RunFollows {
  const { redis, prefix, logger } = options;
  const followKey = (runId: string) => `${prefix}:follow:${runId}`;
  const threadKey = (threadId: string) => `${prefix}:thread-follows:${threadId}`;
  const firedKey = (runId: string, event: FollowEvent, launch: number) =>
    `${prefix}:follow-fired:${runId}:${event}:${launch}`;
  const turnsKey = (runId: string) => `${prefix}:follow-turns:${runId}`;
  const cappedKey = (runId: string) => `${prefix}:follow-capped:${runId}`;

  async function get(runId: string): Promise<Follow | undefined> {
    const raw = await redis.get(followKey(runId));
    if (raw === null) return undefined;
    try {
      const parsed = followSchema.safeParse(JSON.parse(raw));
      return parsed.success ? parsed.data : undefined;
    } catch {
      return undefined;
    }
  }

  async function unfollow(runId: string): Promise<Follow | undefined> {
    const existing = await get(runId);
    const multi = redis.multi().del(followKey(runId));
    if (existing !== undefined) multi.srem(threadKey(existing.threadId), runId);
    await multi.exec();
    return existing;
  }

  /** "at step 40, loss 0.0250" from the run's last metric records. */
  async function progressOf(meta: RunMeta, step: number | undefined): Promise<string> {
    const records = await readLastMetrics(
      path.join(options.store.runDir(meta.id), RUN_FILES.metrics),
      20,
    ).catch(() => []);
    const lastStep = step ?? records.at(-1)?.step ?? meta.lastStep;
    const withLoss = [...records].reverse().find((record) => record.values.loss !== undefined);
    const parts: string[] = [];
    if (lastStep !== undefined) parts.push(`at step ${lastStep}`);
    if (withLoss?.values.loss !== undefined) parts.push(`loss ${formatNumber(withLoss.values.loss)}`);
    return parts.join(', ');
  }

  async function fire(meta: RunMeta, event: FollowEvent, describe: () => Promise<string>): Promise<void> {
    const follow = await get(meta.id);
    if (follow === undefined || !follow.events.includes(event)) return;
    const launch = meta.launchCount;
    const first = await redis.set(firedKey(meta.id, event, launch), '1', 'EX', KEEP_SECONDS, 'NX');
    if (first === null) return;
    const used = await redis.incr(turnsKey(meta.id));
    await redis.expire(turnsKey(meta.id), KEEP_SECONDS);
    const what = await describe();
    if (used > options.maxTurns) {
      logger.info({ runId: meta.id, event, used, max: options.maxTurns }, 'follow turn limit reached');
      if ((await redis.set(cappedKey(meta.id), '1', 'EX', KEEP_SECONDS, 'NX')) !== null) {
        await options.notifier.post(
          follow.threadId,
          `${meta.name} ${what}. I am not starting another follow-up turn: this run has used its ${options.maxTurns} (SHEPHERD_MAX_FOLLOW_TURNS). Ask me directly if you want me to act on it.`,
        );
      }
      return;
    }
    const text = `[follow] run ${meta.name} (${meta.id}) ${what}; you asked: ${follow.note}`;
    await options.pushEvent(follow.threadId, `follow-${meta.id}-${event}-${launch}`, text);
    logger.info({ runId: meta.id, event, launch, threadId: follow.threadId }, 'follow fired');
  }

  const guarded = (meta: RunMeta, event: FollowEvent, describe: () => Promise<string>) =>
    fire(meta, event, describe).catch((error: unknown) => {
      logger.warn({ runId: meta.id, event, err: error }, 'a follow could not fire');
    });

  async function forThread(threadId: string): Promise<Follow[]> {
    const runIds = await redis.smembers(threadKey(threadId));
    const follows: Follow[] = [];
    for (const runId of runIds.sort()) {
      const follow = await get(runId);
      if (follow?.threadId === threadId) follows.push(follow);
    }
    return follows;
  }

  return {
    async follow(input) {
      const follow: Follow = { ...input, createdAt: Date.now() };
      const previous = await get(input.runId);
      const multi = redis.multi();
      if (previous !== undefined && previous.threadId !== input.threadId) {
        multi.srem(threadKey(previous.threadId), input.runId);
      }
      await multi
        .set(followKey(input.runId), JSON.stringify(follow), 'EX', KEEP_SECONDS)
        .sadd(threadKey(input.threadId), input.runId)
        // No longer than its newest follow: a follow expires rather than being unfollowed.
        .expire(threadKey(input.threadId), KEEP_SECONDS)
        .exec();
      return follow;
    },
    unfollow,
    get,
    forThread,
    async clearThread(threadId) {
      const follows = await forThread(threadId);
      for (const follow of follows) await unfollow(follow.runId);
      await redis.del(threadKey(threadId));
      return follows;
    },
    async turnsUsed(runId) {
      return Number((await redis.get(turnsKey(runId))) ?? 0);
    },
    async onRunEnded(meta) {
      if (meta.status === 'completed') {
        await guarded(meta, 'finished', async () =>
          `finished ${await progressOf(meta, meta.lastStep)}`.trim(),
        );
      } else if (meta.status === 'failed') {
        await guarded(meta, 'failed', async () => {
          const where = await progressOf(meta, meta.lastStep);
          return `failed${where === '' ? '' : ` ${where}`} (${meta.statusReason ?? 'ended with an error'})`;
        });
      }
    },
    async onIncident(meta, incident) {
      // Crashes and the end of a run are `failed` / `finished`, told by the run's ending.
      if (incident.kind === 'crash' || incident.kind === 'finished') return;
      const event: FollowEvent = incident.kind === 'stall' ? 'stalled' : 'alert';
      await guarded(meta, event, async () => {
        const where = await progressOf(meta, incident.step);
        return `${event === 'stalled' ? 'stalled' : 'raised an alert'}${where === '' ? '' : ` ${where}`}: ${incident.title}`;
      });
    },
  };
}
