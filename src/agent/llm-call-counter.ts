import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';

/**
 * `llm_calls_total` by reason, in a Redis hash (`<prefix>:llm-calls`) so tests, benchmarks and other
 * processes can read it. Every LLM call goes through `increment` with its reason (`agent`, `triage:crash`…).
 */
export function createLlmCallCounter(options: { redis: Redis; prefix: string; logger?: Logger }) {
  const key = `${options.prefix}:llm-calls`;
  return {
    key,
    async increment(reason: string): Promise<number> {
      const total = await options.redis.hincrby(key, reason, 1);
      options.logger?.info({ metric: 'llm_calls_total', reason, total }, 'llm call');
      return total;
    },
    /** Calls for one reason, or the total over all reasons. */
    async get(reason?: string): Promise<number> {
      if (reason !== undefined) return Number((await options.redis.hget(key, reason)) ?? 0);
      const all = await this.all();
      return Object.values(all).reduce((sum, value) => sum + value, 0);
    },
    async all(): Promise<Record<string, number>> {
      const raw = await options.redis.hgetall(key);
      return Object.fromEntries(Object.entries(raw).map(([reason, value]) => [reason, Number(value)]));
    },
  };
}

export type LlmCallCounter = ReturnType<typeof createLlmCallCounter>;
