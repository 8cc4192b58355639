import type { Redis } from 'ioredis';
import { THREAD_KEEP_S } from '../agent/session-store.js';
import { type LlmPrice, priceOf } from '../config/llm-budget.js';

/**
 * What the LLM cost, in Redis: per thread (tokens, dollars, its raised cap, which warnings were sent),
 * and per UTC day by person and by thread (for `spend --llm` and the per-person daily cap).
 *
 * Keys (all with a TTL, issue 26): `<prefix>:llm-spend:<threadId>` lives as long as the thread's history
 * (THREAD_KEEP_S, renewed on each call); `<prefix>:llm-spend-day:<YYYY-MM-DD>` lives DAY_KEEP_DAYS.
 */

/** How many days of per-person and per-thread totals `spend --llm` can look back over. */
export const DAY_KEEP_DAYS = 90;
const DAY_KEEP_S = (DAY_KEEP_DAYS + 1) * 86_400;
/** Warnings are posted when a thread's spend first reaches these shares of its cap. */
const WARN_PERCENTS = [50, 80, 100] as const;

export function llmSpendKeys(prefix: string) {
  return {
    thread: (threadId: string) => `${prefix}:llm-spend:${threadId}`,
    day: (day: string) => `${prefix}:llm-spend-day:${day}`,
  };
}

export interface ThreadLlmSpend {
  inputTokens: number;
  outputTokens: number;
  calls: number;
  usd: number;
  capUsd: number;
}

interface RecordedUsage {
  /** The thread's spend after this call. */
  spend: ThreadLlmSpend;
  /** Warning thresholds this call reached first (each is handed out once per cap). */
  crossed: number[];
}

export interface GroupTotal {
  key: string;
  label: string;
  inputTokens: number;
  outputTokens: number;
  usd: number;
}

const dayOf = (at: Date) => at.toISOString().slice(0, 10);

/** The dollar cost of one call (0 for a model without a price). */
export function costOf(price: LlmPrice | undefined, inputTokens: number, outputTokens: number): number {
  if (price === undefined) return 0;
  return (inputTokens * price.inputUsdPerMtok + outputTokens * price.outputUsdPerMtok) / 1_000_000;
}

// Adds `ARGV[1]` dollars to the cap (the default cap `ARGV[2]` when none was raised yet).
const RAISE_CAP = `
local current = redis.call('HGET', KEYS[1], 'cap')
if not current then current = ARGV[2] end
local raised = tonumber(current) + tonumber(ARGV[1])
redis.call('HSET', KEYS[1], 'cap', tostring(raised))
redis.call('EXPIRE', KEYS[1], ARGV[3])
return tostring(raised)`;

export function createLlmLedger(options: {
  redis: Redis;
  prefix: string;
  prices: Readonly<Record<string, LlmPrice>>;
  defaultCapUsd: number;
  now?: () => Date;
}) {
  const { redis } = options;
  const keys = llmSpendKeys(options.prefix);
  const now = options.now ?? (() => new Date());

  function parseThread(raw: Record<string, string>): ThreadLlmSpend {
    return {
      inputTokens: Number(raw.in ?? 0),
      outputTokens: Number(raw.out ?? 0),
      calls: Number(raw.calls ?? 0),
      usd: Number(raw.usd ?? 0),
      capUsd: raw.cap === undefined ? options.defaultCapUsd : Number(raw.cap),
    };
  }

  async function thread(threadId: string): Promise<ThreadLlmSpend> {
    return parseThread(await redis.hgetall(keys.thread(threadId)));
  }

  async function record(usage: {
    model: string;
    inputTokens: number;
    outputTokens: number;
    threadId: string;
    person?: { id: string; name: string };
  }): Promise<RecordedUsage> {
    const usd = costOf(priceOf(options.prices, usage.model), usage.inputTokens, usage.outputTokens);
    const threadKey = keys.thread(usage.threadId);
    const dayKey = keys.day(dayOf(now()));
    const multi = redis
      .multi()
      .hincrby(threadKey, 'in', usage.inputTokens)
      .hincrby(threadKey, 'out', usage.outputTokens)
      .hincrby(threadKey, 'calls', 1)
      .hincrbyfloat(threadKey, 'usd', usd)
      .expire(threadKey, THREAD_KEEP_S);
    const groups = [`thread:${usage.threadId}`];
    if (usage.person !== undefined) {
      groups.push(`person:${usage.person.id}`);
      multi.hset(dayKey, `name:${usage.person.id}`, usage.person.name);
    }
    for (const group of groups) {
      multi
        .hincrby(dayKey, `${group}:in`, usage.inputTokens)
        .hincrby(dayKey, `${group}:out`, usage.outputTokens)
        .hincrbyfloat(dayKey, `${group}:usd`, usd);
    }
    await multi.expire(dayKey, DAY_KEEP_S).exec();
    const spend = await thread(usage.threadId);
    const before = spend.usd - usd;
    const crossed: number[] = [];
    for (const percent of WARN_PERCENTS) {
      const line = (spend.capUsd * percent) / 100;
      if (before >= line || spend.usd < line) continue;
      // First to set the flag sends the warning: two workers never both warn.
      if ((await redis.hsetnx(threadKey, `warned:${spend.capUsd}:${percent}`, '1')) === 1)
        crossed.push(percent);
    }
    return { spend, crossed };
  }

  /** Dollars `personId` spent on the LLM today (UTC). */
  async function personToday(personId: string): Promise<number> {
    return Number((await redis.hget(keys.day(dayOf(now())), `person:${personId}:usd`)) ?? 0);
  }

  async function raiseCap(threadId: string, byUsd: number): Promise<number> {
    const raised = await redis.eval(
      RAISE_CAP,
      1,
      keys.thread(threadId),
      String(byUsd),
      String(options.defaultCapUsd),
      String(THREAD_KEEP_S),
    );
    return Number(raised);
  }

  /** Totals over the last `days` UTC days (today included), by person and by thread, largest first. */
  async function totals(days: number): Promise<{ people: GroupTotal[]; threads: GroupTotal[] }> {
    const today = now();
    const groups = new Map<string, GroupTotal>();
    const names = new Map<string, string>();
    for (let back = 0; back < Math.min(days, DAY_KEEP_DAYS); back += 1) {
      const day = dayOf(new Date(today.getTime() - back * 86_400_000));
      for (const [field, value] of Object.entries(await redis.hgetall(keys.day(day)))) {
        if (field.startsWith('name:')) {
          if (!names.has(field.slice(5))) names.set(field.slice(5), value);
          continue;
        }
        const cut = field.lastIndexOf(':');
        const key = field.slice(0, cut);
        const total = groups.get(key) ?? { key, label: key, inputTokens: 0, outputTokens: 0, usd: 0 };
        const metric = field.slice(cut + 1);
        if (metric === 'in') total.inputTokens += Number(value);
        else if (metric === 'out') total.outputTokens += Number(value);
        else if (metric === 'usd') total.usd += Number(value);
        groups.set(key, total);
      }
    }
    const sorted = (kind: string) =>
      [...groups.values()]
        .filter((group) => group.key.startsWith(`${kind}:`))
        .map((group) => {
          const id = group.key.slice(kind.length + 1);
          return { ...group, key: id, label: kind === 'person' ? (names.get(id) ?? id) : id };
        })
        .sort((left, right) => right.usd - left.usd || left.label.localeCompare(right.label));
    return { people: sorted('person'), threads: sorted('thread') };
  }

  return {
    thread,
    /** The key `thread` reads, for a caller that reads it in a round trip of its own (a turn's lock). */
    threadKey: keys.thread,
    /** A thread's spend from its key's fields, as `thread` returns it. */
    parseThread,
    record,
    personToday,
    raiseCap,
    totals,
  };
}

export type LlmLedger = ReturnType<typeof createLlmLedger>;
